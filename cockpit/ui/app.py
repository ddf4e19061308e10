"""The cockpit TUI: one pane per host, the checklist, the server log, benchmarks, a command log;
keyboard first.  A thin shell over the Context (cockpit/context.py): the core publishes on its topics,
subscriptions post messages (ui/messages.py), workers never touch widgets, and every key, the help
and the palette come from one action table (ui/actions.py).
"""

from __future__ import annotations

import dataclasses
import os
import time

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

from cockpit import __version__
from cockpit.config import Config
from cockpit.context import Context
from cockpit.runbook.engine import Runbook
from cockpit.runbook.model import StepState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot
from cockpit.ui import actions
from cockpit.ui.layout import Layout, MessageBar, ViewBar
from cockpit.ui.messages import (CommandLogged, GateInvalidated, RunbookChanged, RunsPolled, ServerPolled,
                                 StepRefused, SweepProgress)
from cockpit.ui.runbook_actions import RunbookActions
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.hosts_view import HostsView
from cockpit.ui.widgets.runs_pane import RunsPane
from cockpit.ui.widgets.server_log import ServerLogPane


class CockpitApp(RunbookActions, App[int]):
    TITLE = "cockpit"
    CSS = """
    #main { height: 1fr; }
    #hosts { height: 1fr; width: 1fr; }
    #checklist { width: 56; }
    #main.-narrow { layout: vertical; }
    #main.-narrow #checklist { width: 1fr; height: 45%; }
    .-compact #main #checklist { width: 1fr; height: 1fr; }
    .-compact ServerLogPane, .-compact BenchPane, .-compact CommandLogPane { height: 1fr; }
    .-compact RunsPane { height: 1fr; max-height: 100%; }
    .-compact Toast { display: none; }
    #empty { padding: 1 2; }
    .hidden { display: none; }
    """
    BINDINGS = actions.bindings("app") + actions.fallbacks("checklist")

    def __init__(self, context: Context | Config, hub: TelemetryHub | None = None, ascii_only: bool | None = None,
                 runbook: Runbook | None = None, read_only: bool = False, theme: str | None = None, demo: bool = False):
        super().__init__()
        self._own_hub = hub is None
        self.context = context if isinstance(context, Context) else Context.of(context, hub, runbook)
        self.config, self.hub, self.runbook = self.context.config, self.context.hub, self.context.runbook
        self.demo, self.read_only = demo, read_only
        self._theme_name = theme or self.config.ui.theme
        self.ascii_only = ascii_only if ascii_only is not None else (self.config.ui.ascii or os.environ.get("COCKPIT_ASCII") == "1")
        self.hosts_view = HostsView(self.config.hosts, self.ascii_only, id="hosts")
        self.layout_state = Layout()
        self.panes: dict[str, HostPane] = self.hosts_view.panes
        self.updates_handled = 0
        self._pending: dict[str, HostSnapshot] = {}
        self._watching: tuple | None = None  # (step, host, pid, finished) of the server whose log is followed
        self._unsubscribe: list = []
        self._laid_out = False  # on_mount has applied the first layout (resizes before it follow no focus)
        from cockpit.alerts import Alerter

        self.alerter = Alerter(self.context.alerts, terminal=self._terminal_write)
        self._server_flags: set[str] = set()  # the flag kinds of the followed server already alerted
        self._sweeps_seen: dict[str, float] = {}  # sweep step -> finished_at already alerted
        self._started_at = time.time()

    # --- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield ViewBar(id="views")
        with Horizontal(id="main"):
            yield self.hosts_view
            if self.runbook is not None:
                yield ChecklistPane(ascii_only=self.ascii_only, id="checklist")
        if self.context.runs:
            yield RunsPane(list(self.context.runs), id="runs", classes="hidden")
        if self.runbook is not None and any(s.kind == "sglang_launch" for s in self.runbook.spec.steps):
            yield ServerLogPane(id="server-log", classes="hidden")
        yield BenchPane(id="bench", classes="hidden")
        yield CommandLogPane(id="command-log", classes="hidden")
        yield MessageBar(id="messages")
        yield Footer()

    def _apply_look(self) -> None:
        """Theme files, the chosen theme, ASCII borders, and the user's keymap."""
        from cockpit.errors import ConfigError
        from cockpit.ui.themes import DEFAULT_THEME, available_themes, check_ui_settings

        check_ui_settings(self.config)
        for theme in available_themes().values():
            self.register_theme(theme)
        wanted = self._theme_name or DEFAULT_THEME
        if wanted not in self.available_themes:
            raise ConfigError("--theme", f"no theme named '{wanted}'; themes: {', '.join(sorted(self.available_themes))}", key="theme")
        self.theme = wanted
        if self.ascii_only:
            self.stylesheet.add_source("* { border: ascii $primary-darken-2; } *:focus { border: ascii $accent; border-title-style: reverse; }", read_from=("ascii", ""))
        if self.config.ui.keymap:
            self.set_keymap(dict(self.config.ui.keymap))

    def get_system_commands(self, screen):
        """ctrl+p: every action of the cockpit, by name (actions that change things are left out in read-only mode)."""
        yield from super().get_system_commands(screen)
        for action in actions.palette(self.read_only):
            yield SystemCommand(action.palette, action.palette_help, lambda a=action: self.run_action(a.action))
        yield from self.runbook_commands()

    def on_mount(self) -> None:
        self._apply_look()
        self.layout_state.compact = Layout.is_compact(self.size.width, self.size.height)
        self._unsubscribe += [self.hub.snapshots.subscribe(self._queue_snapshot),
                              self.hub.log.events.subscribe(lambda rec: self.post_message(CommandLogged(rec)))]
        for name, snapshot in self.hub.latest.items():
            if name in self.panes:
                self.panes[name].show(snapshot, self.hub.history.get(name))
        if self.runbook is not None:
            self._unsubscribe += [
                self.runbook.changes.subscribe(lambda _: self.post_message(RunbookChanged())),
                self.runbook.invalidations.subscribe(lambda item: self.post_message(GateInvalidated(*item))),
                self.runbook.progress.subscribe(lambda p: self.post_message(SweepProgress(p.state))
                                                if self.runbook.spec.step(p.step).kind == "bench_sweep" else None)]
            self.query_one(ChecklistPane).show(self.runbook.views())
            # another cockpit (a `plan run` elsewhere, one killed mid-step) may change the runbook
            self.set_interval(2.0, self.runbook.refresh)
        if self.config.implicit and not self.demo:
            self.notify("No config: watching this machine only. `cockpit init` writes a config for your hosts; "
                        "`cockpit demo` shows the whole deployment flow.", title="welcome", timeout=20)
        if self.demo:
            self.title = "cockpit DEMO"
            self.notify("n runs each step; the story's crash comes at 'launch' (then f); ? shows the keys.",
                        title="cockpit DEMO", timeout=12)
        self.apply_layout()
        self._laid_out = True
        self.watch(self.screen, "focused", lambda _: self.show_keys(), init=False)  # the footer follows the focus
        if self._own_hub:
            self.hub.start()
        if self.context.runs:
            self.layout_state.reveal("runs") if not self.layout_state.compact else None
            self.apply_layout()
            self.run_worker(self._watch_runs(), name="training runs", group="runs", exclusive=True, exit_on_error=False)
        # One timer paints everything: pending samples and the ages in the titles, in one frame.
        self.set_interval(max(0.25, min(1.0, self.config.telemetry.interval_ms / 1000.0)), self._paint_pending)
        if self.hosts_view.fleet is not None:
            for name, snapshot in self.hub.latest.items():
                self.hosts_view.fleet.update(snapshot)
            self.hosts_view.fleet.tick()  # its title's totals
            self.hosts_view.fleet.focus()
        elif self.panes:
            next(iter(self.panes.values())).focus()

    async def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self._own_hub:
            await self.context.close()

    def on_resize(self, event) -> None:  # (runs before App's own handler: self.size is still the old size)
        compact = Layout.is_compact(event.size.width, event.size.height)
        if compact and not self.layout_state.compact and self._laid_out:
            self.layout_state.view = self._view_of_focus() or "hosts"  # the pane in use stays in view
        self.layout_state.compact = compact
        self.query_one("#main").set_class(event.size.width < 130, "-narrow")
        self.apply_layout()

    def _panes(self) -> dict[str, object]:
        found = {"hosts": self.hosts_view}
        for view, kind in (("checklist", ChecklistPane), ("runs", RunsPane), ("server", ServerLogPane), ("bench", BenchPane),
                           ("log", CommandLogPane)):
            panes = self.query(kind)
            if panes:
                found[view] = panes.first()
        return found

    def apply_layout(self) -> None:
        """Show the panes the layout says (small terminal: one; large: side by side, bottom panes opened)."""
        state, panes = self.layout_state, self._panes()
        self.set_class(state.compact, "-compact")
        for view, pane in panes.items():
            if view in ("hosts", "checklist"):
                pane.display = state.shown(view)
            else:
                pane.set_class(not state.shown(view), "hidden")
        self.query_one("#main").display = state.shown("hosts") or state.shown("checklist")
        self.query_one(ViewBar).display = state.compact
        bar = self.query_one(MessageBar)
        bar.display = state.compact and bool(bar.messages)
        self._show_views(panes)
        self.sub_title = self._subtitle()
        footer = self.query(Footer)
        if footer:
            footer.first().compact = state.compact
        self.show_keys()

    def _show_views(self, panes: dict | None = None) -> None:
        """The view bar: the views, and how the checklist stands (seen from every view)."""
        progress = ""
        if self.runbook is not None:
            views = self.runbook.views()
            progress = f"{sum(v.state is StepState.PASSED for v in views)}/{len(views)} passed"
        self.query_one(ViewBar).show_state(self.layout_state, set(panes or self._panes()), progress)

    def show_keys(self) -> None:
        """The footer holds the keys that work now: f only while a fix is offered; the view keys in a
        large terminal only (a small one has them in its view bar)."""
        panes = self.query(ServerLogPane)
        wanted = {"server.apply_fix": bool(panes and panes.first().top_fix is not None and not self.read_only),
                  "host.zoom": isinstance(self.screen_stack[0].focused, HostPane) or self.zoomed is not None,
                  "checklist.next": self.runbook is not None and not self.read_only}
        for view_key in ("checklist.focus", "server.toggle", "bench.toggle", "app.toggle_log"):
            wanted[view_key] = not self.layout_state.compact
        wanted["runs.toggle"] = not self.layout_state.compact and bool(self.context.runs)
        changed = False
        for bindings in self._bindings.key_to_bindings.values():
            for position, binding in enumerate(bindings):
                if binding.id in wanted and binding.show != wanted[binding.id]:
                    bindings[position] = dataclasses.replace(binding, show=wanted[binding.id])
                    changed = True
        if changed:
            self.refresh_bindings()

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None, **kwargs) -> None:
        """A toast in a large terminal; in a small one the message bar (a toast would cover the one pane)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, **kwargs)
        bars = self.query(MessageBar)
        if bars and self.layout_state.compact:
            import time

            bar = bars.first()
            bar.add(message, title, severity, timeout or self.NOTIFICATION_TIMEOUT, time.time())
            self.set_timer((timeout or self.NOTIFICATION_TIMEOUT) + 0.05,
                           lambda: bar.show_now(time.time()) if self.layout_state.compact else None)

    def _subtitle(self) -> str:
        if self.demo:
            return "DEMO: nothing real is deployed" if self.layout_state.compact else \
                "DEMO: replayed H200 telemetry and SGLang, nothing real is deployed"
        where = str(self.config.path) if self.config.path else "this machine (no config)"
        return (where if self.layout_state.compact else f"v{__version__} - {where}") + (" - READ-ONLY" if self.read_only else "")

    def press_view(self, view: str) -> None:
        target = self.layout_state.press(view)
        self.apply_layout()
        if self.layout_state.shown(target):
            self._focus_view(target)

    def _focus_view(self, view: str) -> None:
        pane = self._panes().get(view)
        if view == "hosts":
            pane = self._focused_host() or next((p for p in self.panes.values() if p.display), None)
            fleet = self.hosts_view.fleet
            if pane is None and fleet is not None and fleet.display:
                pane = fleet
        elif pane is not None and not pane.can_focus:  # the server log: its log is what takes the focus
            pane = next((w for w in pane.query("*") if w.can_focus), None)
        if pane is not None:
            pane.focus()

    def reveal(self, view: str) -> None:
        """Something happened in that pane: show it (a small terminal: instead of the others, focused)."""
        if not self.layout_state.shown(view):
            self.layout_state.reveal(view)
            self.apply_layout()
            if self.layout_state.compact and self.screen is self.screen_stack[0]:
                self._focus_view(view)

    # --- messages from the core and from workers ----------------------------------------------------

    def _queue_snapshot(self, snapshot) -> None:
        """A host's new sample, from the hub (on this event loop): kept until the paint timer draws
        it.  Hosts sample at staggered moments; painting each as it comes would cost a frame per
        host per second, and a message per sample costs a dispatch for a dict write.  No widget
        is touched here."""
        if snapshot.name in self.panes or self.hosts_view.fleet is not None:
            self.updates_handled += 1
            self._pending[snapshot.name] = snapshot

    def _paint_pending(self) -> None:
        pending, self._pending = self._pending, {}
        fleet = self.hosts_view.fleet
        with self.batch_update():
            for name, snapshot in pending.items():
                if name in self.panes:
                    self.panes[name].show(snapshot, self.hub.history.get(name))
                if fleet is not None:
                    fleet.update(snapshot)
            for name, pane in self.panes.items():
                if name not in pending and pane.display:
                    pane.tick()
            if fleet is not None and fleet.display:
                fleet.tick()

    def on_runbook_changed(self, message: RunbookChanged) -> None:
        for pane in self.query(ChecklistPane):
            pane.show(self.runbook.views())
            self._show_views()
            self._follow_latest_server()
            self._alert_sweeps()

    def on_gate_invalidated(self, message: GateInvalidated) -> None:
        result = self.runbook.result(message.step) if self.runbook else None
        self.notify(result.message if result else message.step, title=f"gate closed: {message.step}", severity="warning", timeout=10)

    def on_step_refused(self, message: StepRefused) -> None:
        for pane in self.query(ChecklistPane):
            pane.select(message.step)  # the checklist follows what happened
        self.notify("; ".join(message.reasons), title=f"{message.step}: blocked", severity="error", timeout=8)

    def on_command_logged(self, message: CommandLogged) -> None:
        for pane in self.query(CommandLogPane):
            pane.add(message.record)

    def on_sweep_progress(self, message: SweepProgress) -> None:
        for pane in self.query(BenchPane):
            self.reveal("bench")
            pane.progress(message.state)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker's failure is shown (Harlequin's discipline): none dies silently."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title=f"{event.worker.name or event.worker.group} failed",
                        severity="error", timeout=15)

    # --- training runs and alerts -------------------------------------------------------------------

    async def _watch_runs(self) -> None:
        """Poll every [runs] run (each over its host's own connection) and post what it found: the
        worker never touches a widget."""
        import asyncio

        from cockpit.runs.watch import RunWatcher

        watchers = [RunWatcher(spec, self.hub.pool.get(spec.host)) for spec in self.context.runs.values()]
        interval = min(spec.poll_s for spec in self.context.runs.values())
        while True:
            statuses, events = [], []
            for watcher in watchers:
                status, new = await watcher.poll()
                statuses.append(status)
                events += new
            self.post_message(RunsPolled(statuses, events))
            await asyncio.sleep(interval)

    def on_runs_polled(self, message: RunsPolled) -> None:
        from cockpit.runs.watch import run_alert

        for pane in self.query(RunsPane):
            pane.show(message.statuses)
        for event in message.events:
            alert = run_alert(event)
            if event.kind != "checkpoint":  # a new checkpoint is in the pane (and goes out as an alert): no toast over the work
                self.notify(alert.text, title=alert.title, severity="error" if alert.level == "error" else
                            "warning" if alert.level == "warning" else "information", timeout=15 if alert.level == "error" else 8)
            self.send_alert(alert)
            if event.kind in ("crashed", "stalled"):
                self.reveal("runs")

    def action_toggle_runs(self) -> None:
        if not self.query(RunsPane):
            self.notify("No [runs.NAME] in the config: add one (host, log and/or output_dir) to watch a training run",
                        severity="warning")
            return
        self.press_view("runs")

    def _terminal_write(self, sequence: str) -> None:
        """An alert for a person not looking: the bell and the desktop-notification escape, written
        to the terminal the TUI owns (between its frames: they draw nothing)."""
        driver = getattr(self, "_driver", None)
        if driver is None:
            raise OSError("no terminal")
        driver.write(sequence)
        driver.flush()

    def send_alert(self, alert) -> None:
        self.run_worker(self.alerter.send(alert), name="alert", group="alerts", exit_on_error=False)

    def _alert_sweeps(self) -> None:
        """A sweep that ended since this cockpit started: its decision (or failure) goes out as an alert."""
        from cockpit.alerts import Alert

        for spec in self.runbook.spec.steps:
            result = self.runbook.result(spec.name)
            if (spec.kind != "bench_sweep" or result is None or result.finished_at is None
                    or result.state not in (StepState.PASSED, StepState.FAILED)):
                continue
            if result.finished_at <= self._started_at or self._sweeps_seen.get(spec.name) == result.finished_at:
                continue
            self._sweeps_seen[spec.name] = result.finished_at
            passed = result.state is StepState.PASSED
            self.send_alert(Alert("sweep_done", f"sweep:{spec.name}:{result.finished_at}", f"sweep {spec.name} {'done' if passed else 'failed'}",
                                  result.message, "info" if passed else "error"))

    # --- the launched server ------------------------------------------------------------------------

    def _follow_latest_server(self) -> None:
        from cockpit.sglang.server import ServerWatcher, watch_server

        panes = self.query(ServerLogPane)
        spec, result = self.runbook.latest_launch("sglang_launch")
        if not panes or spec is None or result.state is StepState.RUNNING:
            return
        server = self.runbook.launched(spec.name)
        key = (spec.name, spec.host, server.pid if server else None, result.finished_at)
        if key == self._watching:
            return
        self._watching = key
        self._server_flags = set()
        pane = panes.first()
        pane.follow(f"{spec.name} @{spec.host}")
        self.reveal("server")
        if server is None or server.port is None or result.state is StepState.FAILED:
            pane.show_failed_launch(result, started=server is not None)
            self.show_keys()
            self.notify(result.message, title=f"{spec.name} failed", severity="error", timeout=10)
            return
        from cockpit.hosts.procs import group_of

        members = group_of(result.evidence)
        group = None
        if len(members) > 1:
            from cockpit.sglang.grouplaunch import GroupWatcher

            group = GroupWatcher(self.hub.pool.get, members)
        settings = self.config.prometheus
        prometheus = (settings, settings.sglang_selector) if settings is not None and settings.sglang_selector else None
        watcher = ServerWatcher(self.hub.pool.get(spec.host), server.pid, server.port, server.log, group=group, prometheus=prometheus)
        self.run_worker(watch_server(watcher, lambda status: self.post_message(ServerPolled(str(key), status))),
                        name="server watch", group="server-watch", exclusive=True, exit_on_error=False)

    def on_server_polled(self, message: ServerPolled) -> None:
        if self.query(ServerLogPane) and message.target == str(self._watching):
            pane = self.query(ServerLogPane).first()
            was_alive = pane.status.alive if pane.status else True
            pane.show(message.status)
            self.show_keys()
            result = self.runbook.latest_launch("sglang_launch")[1]  # a stop that was asked for (a sweep) is no crash
            spec_name = self.runbook.latest_launch("sglang_launch")[0].name
            if was_alive and not message.status.alive and result is not None and result.state is StepState.PASSED:
                from cockpit.alerts import Alert

                errors = [d for d in message.status.report.diagnoses if d.severity == "error"]
                text = errors[0].message if errors else "no diagnosis in its log"
                self.notify(text, title="the server died", severity="error", timeout=15)
                self.send_alert(Alert("server_crashed", f"server_crashed:{spec_name}", f"{spec_name}: the server died", text, "error"))
            self._alert_server_flags(spec_name, message.status.figures.get("flags") or [])

    def _alert_server_flags(self, step: str, flags: list[dict]) -> None:
        from cockpit.sglang.live import flag_alert

        kinds = {f["kind"] for f in flags}
        for flag in flags:
            if flag["kind"] not in self._server_flags:
                alert = flag_alert(step, flag)
                self.notify(alert.text, title=alert.title, severity="error", timeout=15)
                self.send_alert(alert)
        self._server_flags = kinds  # a flag that cleared and comes back is news again

    def action_toggle_server_log(self) -> None:
        if not self.query(ServerLogPane):
            self.notify("No sglang_launch step in the runbook: there is no server log to show", severity="warning")
            return
        self.press_view("server")

    def action_apply_fix(self) -> None:
        from cockpit.errors import CockpitError
        from cockpit.sglang.steps import apply_diagnosis_fix

        if self.read_only:
            self.notify("Read-only mode: nothing can be changed", severity="warning")
            return
        panes = self.query(ServerLogPane)
        spec, _ = self.runbook.latest_launch("sglang_launch") if self.runbook else (None, None)
        fix = panes.first().top_fix if panes else None
        if fix is None or spec is None:
            self.notify("No fix to apply", severity="warning")
            return
        try:
            fixed = apply_diagnosis_fix(self.runbook, spec.name, fix)
        except CockpitError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"{spec.name} will run: {' '.join(fixed[-8:])}", title="fix applied")
        self.action_run_step(spec.name)

    # --- benchmarks, the command log ----------------------------------------------------------------

    def action_toggle_bench(self) -> None:
        from cockpit.bench.store import sweep_runs

        pane = self.query_one(BenchPane)
        if not pane.runs:
            pane.show_runs(sweep_runs())
        self.press_view("bench")

    def action_chart(self, step: int) -> None:
        pane = self.query_one(BenchPane)
        if pane.has_class("hidden"):
            self.notify("[ and ] change the benchmark view: open it with b", severity="warning")
        else:
            pane.cycle(step)

    def action_toggle_log(self) -> None:
        self.press_view("log")

    def action_focus_hosts(self) -> None:
        self.press_view("hosts")

    # --- hosts --------------------------------------------------------------------------------------

    def on_fleet_table_open(self, message) -> None:
        pane = self.hosts_view.open_host(message.host)
        snapshot = self.hub.latest.get(message.host)
        if snapshot is not None:
            pane.show(snapshot, self.hub.history.get(message.host))
        pane.focus()
        self.show_keys()

    def on_fleet_table_filter(self, message) -> None:
        self.hosts_view.show_filter()

    def on_input_changed(self, event) -> None:
        if event.input.id == "fleet-filter" and self.hosts_view.fleet is not None:
            self.hosts_view.fleet.set_filter(event.value)

    def on_input_submitted(self, event) -> None:
        if event.input.id == "fleet-filter" and self.hosts_view.fleet is not None:
            event.input.display = False
            self.hosts_view.fleet.focus()

    def on_key(self, event) -> None:
        focused = self.screen_stack[0].focused if self.screen_stack else None
        if event.key == "escape" and getattr(focused, "id", None) == "fleet-filter" and self.hosts_view.fleet is not None:
            focused.display = False
            self.hosts_view.fleet.set_filter("")
            self.hosts_view.fleet.focus()
            event.stop()

    def _focused_host(self) -> HostPane | None:
        return self.focused if isinstance(self.focused, HostPane) else None

    @property
    def zoomed(self) -> str | None:
        return self.hosts_view.zoomed

    def _say(self, problem: str | None) -> None:
        if problem:
            self.notify(problem, severity="warning")

    def action_zoom_gpu(self, index: int) -> None:
        self._say(self.hosts_view.zoom_gpu(index))

    def action_zoom(self) -> None:
        if self._focused_host() is None and self.zoomed is None:
            self._say(f"z zooms a host, and {self._focused_view()} has the focus: h (or tab) moves to the hosts")
            return
        self._say(self.hosts_view.toggle_zoom(self._focused_host()))

    def _view_of_focus(self) -> str | None:
        focused = self.screen_stack[0].focused
        for view, pane in self._panes().items():
            if focused is not None and (focused is pane or pane in focused.ancestors):
                return view
        return None

    def _focused_view(self) -> str:
        view = self._view_of_focus()
        return {"log": "the command log", "server": "the server log", "bench": "the benchmarks",
                None: "no pane"}.get(view, f"the {view}")

    def action_elsewhere(self, action_id: str) -> None:
        """A checklist key pressed in another pane: say where it works."""
        action = actions.by_id(action_id)
        self.notify(f"{action.shown_keys}: {action.help or action.description}, in the checklist (c focuses it)",
                    severity="warning", timeout=5)

    def action_focus_next_host(self) -> None:
        self.hosts_view.move_focus(self._focused_host(), 1)

    def action_focus_previous_host(self) -> None:
        self.hosts_view.move_focus(self._focused_host(), -1)

    def action_reconnect(self) -> None:
        pane = self._focused_host()
        woken = self.hub.retry_now([pane.host.name] if pane is not None else None)
        if woken:
            self.notify(f"reconnecting {', '.join(woken)} now", timeout=4)
        else:
            self.notify("no host is waiting to reconnect" if pane is None else f"{pane.host.name} is not waiting to reconnect",
                        severity="warning", timeout=4)

    def action_help(self) -> None:
        self.push_screen(HelpScreen.for_widget(self.focused))
