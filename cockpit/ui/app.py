"""The cockpit TUI: one pane per host, the checklist, the server log, benchmarks, a command log;
keyboard first.  A thin shell over the Context (cockpit/context.py): the core publishes on its topics,
subscriptions post messages (ui/messages.py), workers never touch widgets, and every key, the help
and the palette come from one action table (ui/actions.py).
"""

from __future__ import annotations

import os

from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

from cockpit import __version__
from cockpit.config import Config
from cockpit.context import Context
from cockpit.runbook.engine import GateClosed, Runbook
from cockpit.runbook.model import StepState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot
from cockpit.ui import actions
from cockpit.ui.messages import (CommandLogged, GateInvalidated, HostUpdated, RunbookChanged, ServerPolled, StepRefused,
                                 SweepProgress)
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.hosts_view import HostsView
from cockpit.ui.widgets.server_log import ServerLogPane

class CockpitApp(App[int]):
    TITLE = "cockpit"
    CSS = """
    #main { height: 1fr; }
    #hosts { height: 1fr; width: 1fr; }
    #checklist { width: 56; }
    #main.-narrow { layout: vertical; }
    #main.-narrow #checklist { width: 1fr; height: 45%; }
    #empty { padding: 1 2; }
    .hidden { display: none; }
    """
    BINDINGS = actions.bindings("app")

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
        self.panes: dict[str, HostPane] = self.hosts_view.panes
        self.updates_handled = 0
        self._pending: dict[str, HostSnapshot] = {}
        self._watching: tuple | None = None  # (step, host, pid, finished) of the server whose log is followed
        self._unsubscribe: list = []

    # --- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            yield self.hosts_view
            if self.runbook is not None:
                yield ChecklistPane(ascii_only=self.ascii_only, id="checklist")
        if self.runbook is not None and any(s.kind == "sglang_launch" for s in self.runbook.spec.steps):
            yield ServerLogPane(id="server-log", classes="hidden")
        yield BenchPane(id="bench", classes="hidden")
        yield CommandLogPane(id="command-log", classes="hidden")
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
            self.stylesheet.add_source("* { border: ascii $primary-darken-2; } *:focus { border: ascii $accent; }", read_from=("ascii", ""))
        if self.config.ui.keymap:
            self.set_keymap(dict(self.config.ui.keymap))

    def get_system_commands(self, screen):
        """ctrl+p: every action of the cockpit, by name (actions that change things are left out in read-only mode)."""
        yield from super().get_system_commands(screen)
        for action in actions.palette(self.read_only):
            yield SystemCommand(action.palette, action.palette_help, lambda a=action: self.run_action(a.action))
        if not self.read_only and self.runbook is not None:
            for spec in self.runbook.spec.steps:
                yield SystemCommand(f"Run step: {spec.name}", f"{spec.kind} on {spec.host}", lambda n=spec.name: self.action_run_step(n))

    def on_mount(self) -> None:
        self._apply_look()
        where = str(self.config.path) if self.config.path else "this machine (no config)"
        self.sub_title = f"v{__version__} - {where}" + (" - READ-ONLY" if self.read_only else "")
        self._unsubscribe += [self.hub.snapshots.subscribe(lambda snap: self.post_message(HostUpdated(snap))),
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
            self.sub_title = "DEMO: replayed H200 telemetry and SGLang, nothing real is deployed"
            self.notify("Press n to run each step of the deployment; the story's crash comes at 'launch' (then s, f). "
                        "? shows the keys.", title="cockpit DEMO", timeout=20)
        if self._own_hub:
            self.hub.start()
        # One timer paints everything: pending samples and the ages in the titles, in one frame.
        self.set_interval(max(0.25, min(1.0, self.config.telemetry.interval_ms / 1000.0)), self._paint_pending)
        if self.panes:
            next(iter(self.panes.values())).focus()

    async def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self._own_hub:
            await self.context.close()

    def on_resize(self) -> None:
        self.query_one("#main").set_class(self.size.width < 130, "-narrow")

    # --- messages from the core and from workers ----------------------------------------------------

    def on_host_updated(self, message: HostUpdated) -> None:  # (handlers query panes: none while shutting down)
        # Coalesced: hosts sample at staggered moments; painting each as it comes would cost a
        # frame per host per second.  Pending snapshots are painted together by _paint_pending.
        if message.snapshot.name in self.panes:
            self.updates_handled += 1
            self._pending[message.snapshot.name] = message.snapshot

    def _paint_pending(self) -> None:
        pending, self._pending = self._pending, {}
        with self.batch_update():
            for name, snapshot in pending.items():
                self.panes[name].show(snapshot, self.hub.history.get(name))
            for name, pane in self.panes.items():
                if name not in pending:
                    pane.tick()

    def on_runbook_changed(self, message: RunbookChanged) -> None:
        for pane in self.query(ChecklistPane):
            pane.show(self.runbook.views())
            self._follow_latest_server()

    def on_gate_invalidated(self, message: GateInvalidated) -> None:
        result = self.runbook.result(message.step) if self.runbook else None
        self.notify(result.message if result else message.step, title=f"gate closed: {message.step}", severity="warning", timeout=10)

    def on_step_refused(self, message: StepRefused) -> None:
        self.notify("; ".join(message.reasons), title=f"{message.step}: blocked", severity="error", timeout=8)

    def on_command_logged(self, message: CommandLogged) -> None:
        for pane in self.query(CommandLogPane):
            pane.add(message.record)

    def on_sweep_progress(self, message: SweepProgress) -> None:
        for pane in self.query(BenchPane):
            pane.remove_class("hidden")
            pane.progress(message.state)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker's failure is shown (Harlequin's discipline): none dies silently."""
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            self.notify(f"{type(error).__name__}: {error}", title=f"{event.worker.name or event.worker.group} failed",
                        severity="error", timeout=15)

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
        pane = panes.first()
        pane.follow(f"{spec.name} @{spec.host}")
        pane.remove_class("hidden")
        if server is None or server.port is None or result.state is StepState.FAILED:
            pane.show_failed_launch(result, started=server is not None)
            self.notify(result.message, title=f"{spec.name} failed", severity="error", timeout=10)
            return
        watcher = ServerWatcher(self.hub.pool.get(spec.host), server.pid, server.port, server.log)
        self.run_worker(watch_server(watcher, lambda status: self.post_message(ServerPolled(str(key), status))),
                        name="server watch", group="server-watch", exclusive=True, exit_on_error=False)

    def on_server_polled(self, message: ServerPolled) -> None:
        if self.query(ServerLogPane) and message.target == str(self._watching):
            pane = self.query(ServerLogPane).first()
            was_alive = pane.status.alive if pane.status else True
            pane.show(message.status)
            result = self.runbook.latest_launch("sglang_launch")[1]  # a stop that was asked for (a sweep) is no crash
            if was_alive and not message.status.alive and result is not None and result.state is StepState.PASSED:
                errors = [d for d in message.status.report.diagnoses if d.severity == "error"]
                self.notify(errors[0].message if errors else "no diagnosis in its log", title="the server died",
                            severity="error", timeout=15)

    def action_toggle_server_log(self) -> None:
        panes = self.query(ServerLogPane)
        if not panes:
            self.notify("No sglang_launch step in the runbook", severity="warning")
            return
        panes.first().set_class(not panes.first().has_class("hidden"), "hidden")

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
        if pane.has_class("hidden") and not pane.runs:
            pane.show_runs(sweep_runs())
        pane.set_class(not pane.has_class("hidden"), "hidden")

    def action_chart(self, step: int) -> None:
        pane = self.query_one(BenchPane)
        if not pane.has_class("hidden"):
            pane.cycle(step)

    def action_toggle_log(self) -> None:
        log = self.query_one(CommandLogPane)
        log.set_class(not log.has_class("hidden"), "hidden")

    # --- hosts --------------------------------------------------------------------------------------

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
        self._say(self.hosts_view.toggle_zoom(self._focused_host()))

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

    # --- the checklist ------------------------------------------------------------------------------

    def action_focus_checklist(self) -> None:
        if self.runbook is not None:
            self.query_one(ChecklistPane).focus()

    def action_run_next(self) -> None:
        if self.runbook is None:
            self.notify("No runbook in the config", severity="warning")
            return
        step = self.runbook.next_step()
        if step is None:
            self.notify("Every step has passed")
            return
        self.action_run_step(step.name)

    def on_checklist_pane_run_requested(self, message: ChecklistPane.RunRequested) -> None:
        self.action_run_step(message.step)

    def action_run_step(self, name: str) -> None:
        if self.read_only:
            self.notify("Read-only mode: steps cannot run", severity="warning")
            return
        if self.runbook is None:
            return
        blockers = self.runbook.prerequisites(name)
        if blockers:
            self.post_message(StepRefused(name, blockers))
            return
        if any(worker.group == "runbook" and worker.is_running for worker in self.workers):
            self.post_message(StepRefused(name, ["another step is still running"]))
            return
        self.run_worker(self._run_step(name), name=f"step {name}", group="runbook", exit_on_error=False)

    async def _run_step(self, name: str) -> None:
        """Runs in a worker: it talks to the engine and posts messages; widgets are the app's."""
        try:
            await self.runbook.run_step(name, self._confirm)
        except GateClosed as exc:
            self.post_message(StepRefused(name, exc.reasons))

    async def _confirm(self, plan: str) -> bool:
        return bool(await self.push_screen_wait(ConfirmScreen("This step changes things on a host:", plan)))

    def action_help(self) -> None:
        self.push_screen(HelpScreen.for_widget(self.focused))
