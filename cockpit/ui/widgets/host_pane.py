"""A host's pane: its state in the border, one line per GPU, its compute processes."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from cockpit.config import HostConfig
from cockpit.hosts.state import HostState
from cockpit.telemetry.history import HostHistory
from cockpit.telemetry.model import HostSnapshot
from cockpit.ui.render import host_body, host_title


class HostPane(Static, can_focus=True):
    """Renders one host.  Fed by the app (`show`); it never reads collectors itself."""

    DEFAULT_CSS = """
    HostPane {
        border: round $primary-darken-2;
        height: auto;
        padding: 0 1;
        margin: 0 0 0 0;
    }
    HostPane:focus {
        border: round $accent;
    }
    HostPane.-down {
        border: round $error;
    }
    HostPane.-stale {
        border: round $warning;
    }
    """

    def __init__(self, host: HostConfig, ascii_only: bool = False):
        super().__init__("", id=f"host-{host.name}", classes="host-pane")
        self.host = host
        self.ascii_only = ascii_only
        self.snapshot = HostSnapshot(name=host.name, state=HostState.CONNECTING, roles=host.roles)
        self.history: HostHistory | None = None
        self._rendered_body: str | None = None
        self._rendered_width = 0
        self.renders = 0
        if host.accent:
            self.styles.border = ("heavy", host.accent)

    def on_mount(self) -> None:
        self._refresh_title()
        self._refresh_body(force=True)

    def on_resize(self) -> None:
        self._refresh_body(force=True)

    def show(self, snapshot: HostSnapshot, history: HostHistory | None) -> None:
        self.snapshot = snapshot
        self.history = history
        self.set_class(snapshot.state in (HostState.UNREACHABLE, HostState.AUTH_FAILED, HostState.HOST_KEY_UNKNOWN,
                                          HostState.HOST_KEY_CHANGED, HostState.DRIVER_ERROR), "-down")
        self.set_class(snapshot.state is HostState.STALE, "-stale")
        self._refresh_title()
        self._refresh_body()

    def tick(self) -> None:
        """Once a second: the age in the title moves even when no sample arrives."""
        self._refresh_title()

    def _refresh_title(self) -> None:
        self.border_title = host_title(self.snapshot, self.host.label, time.time(), self.ascii_only)

    def _refresh_body(self, force: bool = False) -> None:
        width = max(40, self.content_region.width or self.size.width or 80)
        body: Text = host_body(self.snapshot, self.history.gpus if self.history else {}, width, self.ascii_only)
        plain = body.plain
        spans = tuple((s.start, s.end, str(s.style)) for s in body.spans)
        signature = (plain, spans)
        if not force and signature == self._rendered_body and width == self._rendered_width:
            return  # nothing changed on screen: no repaint
        self._rendered_body = signature
        self._rendered_width = width
        self.renders += 1
        self.update(body)
