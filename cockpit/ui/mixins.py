"""What each of the app's handler mixins needs of the app it is mixed into, said as a Protocol (the
app, CockpitApp, provides all of them; a mixin reads nothing else of it)."""

from __future__ import annotations

from typing import Any, Protocol

from cockpit.ui.serving_state import ServingApp

__all__ = ["HostsApp", "RunbookApp", "ServingApp", "ViewsApp"]


class _TextualApp(Protocol):
    """The Textual App methods the mixins call."""

    read_only: bool

    def notify(self, message: str, *, title: str = "", severity: str = "information", timeout: float | None = None) -> None: ...
    def query(self, selector: Any) -> Any: ...
    def query_one(self, selector: Any, expect_type: Any = None) -> Any: ...
    def post_message(self, message: Any) -> bool: ...
    def run_worker(self, work: Any, **kwargs: Any) -> Any: ...
    def push_screen(self, screen: Any, callback: Any = None, wait_for_dismiss: bool = False) -> Any: ...
    def show_keys(self) -> None: ...


class ViewsApp(_TextualApp, Protocol):
    """ViewActions: the layout (which view shows, compact or not) and the panes it arranges."""

    config: Any
    context: Any
    runbook: Any
    demo: bool
    layout_state: Any  # ui/layout.py Layout
    hosts_view: Any
    panes: dict[str, Any]
    zoomed: str | None
    _keys_shown: tuple[bool, ...] | None


class HostsApp(_TextualApp, Protocol):
    """HostActions: the telemetry hub, the host panes, and the samples waiting for the next paint."""

    hub: Any
    hosts_view: Any
    panes: dict[str, Any]
    updates_handled: int
    _pending: dict[str, Any]


class RunbookApp(_TextualApp, Protocol):
    """RunbookActions: the runbook, and the views to reveal the checklist."""

    runbook: Any

    def press_view(self, view: str) -> None: ...
