"""What each of the app's handler mixins needs of the app it is mixed into (the app, CockpitApp, provides all
of it; a mixin reads nothing else of it).

Each mixin derives from its class here.  While mypy checks, these derive from Textual's App, so a mixin's
calls of Textual (query_one, notify, screen_stack ...) are checked against Textual's own signatures; at run
time they derive from `object` and hold annotations only (CockpitApp brings the App, and nothing here can
shadow a mixin's method).  What a mixin reads of the app beyond Textual is said as annotations: the app's
state, and the methods it calls of another mixin (as Callable attributes, so that they are not defined here
at run time either).  tests/test_ui.py checks that the app has every name said here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from textual.app import App

    from cockpit.alerts import Alert, Alerter
    from cockpit.config import Config
    from cockpit.context import Context
    from cockpit.runbook.engine import Runbook
    from cockpit.telemetry.hub import TelemetryHub
    from cockpit.telemetry.model import HostSnapshot
    from cockpit.ui.layout import Layout
    from cockpit.ui.serving_state import ServerFollow, SweepAlerts
    from cockpit.ui.widgets.host_pane import HostPane
    from cockpit.ui.widgets.hosts_view import HostsView

    _App = App[int]
else:
    _App = object

__all__ = ["HostsApp", "RunbookApp", "ServingApp", "ViewsApp"]


class ViewsApp(_App):
    """ViewActions: the layout (which view shows, compact or not) and the panes it arranges."""

    read_only: bool
    config: Config
    context: Context
    runbook: Runbook | None
    demo: bool
    layout_state: Layout
    hosts_view: HostsView
    panes: dict[str, HostPane]
    zoomed: str | None
    _keys_shown: tuple[bool, ...] | None
    _laid_out: bool
    _focused_host: Callable[[], HostPane | None]
    mouse_on: bool


class HostsApp(_App):
    """HostActions: the telemetry hub, the host panes, and the samples waiting for the next paint."""

    read_only: bool
    config: Config
    hub: TelemetryHub
    hosts_view: HostsView
    panes: dict[str, HostPane]
    updates_handled: int
    _pending: dict[str, HostSnapshot]
    _focused_view: Callable[[], str]
    show_keys: Callable[[], None]


class RunbookApp(_App):
    """RunbookActions: the runbook, and the views to reveal the checklist."""

    read_only: bool
    context: Context
    runbook: Runbook | None
    serving: ServerFollow
    press_view: Callable[[str], None]


class ServingApp(_App):
    """ServingActions: the servers and sweeps it follows and alerts on, and the views it reveals."""

    read_only: bool
    config: Config
    context: Context
    runbook: Runbook | None
    hub: TelemetryHub
    alerter: Alerter
    serving: ServerFollow
    sweeps: SweepAlerts
    reveal: Callable[[str], None]
    press_view: Callable[[str], None]
    show_keys: Callable[[], None]
    action_run_step: Callable[..., None]
    raise_alert: Callable[[Alert, bool], None]
