"""The cockpit TUI: one pane per host, the checklist, the server log, benchmarks, a command log;
keyboard first.  A thin shell over the Context (cockpit/context.py): the core publishes on its topics,
subscriptions post messages (ui/messages.py), workers never touch widgets, and every key, the help
and the palette come from one action table (ui/actions.py).  What the app does is in one mixin per
concern: view_actions (layout, focus, footer), host_actions (samples, fleet, zoom), serving_actions
(runs, the server, alerts, benchmarks), runbook_actions (the checklist's steps).
"""

from __future__ import annotations

import os

from textual import constants
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.widgets import Header
from textual.worker import Worker, WorkerState

from cockpit.config import Config
from cockpit.context import Context
from cockpit.runbook.engine import Runbook
from cockpit.runtime import settle_heap
from cockpit.serving.steps import is_launch
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot
from cockpit.ui import actions
from cockpit.ui.ascii import AsciiOnly
from cockpit.ui.textual_internals import plain
from cockpit.ui.driver import quiet_driver_class
from cockpit.ui.layout import TabLine, Layout, MessageBar, ViewBar
from cockpit.ui.host_actions import HostActions
from cockpit.ui.messages import CommandLogged, CopyRequested, GateInvalidated, KillRequested, RunbookChanged, StepRefused, SweepProgress
from cockpit.ui.runbook_actions import RunbookActions
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.screens.main import MainScreen
from cockpit.ui.serving_state import ServerFollow, SweepAlerts
from cockpit.ui.serving_actions import ServingActions
from cockpit.ui.view_actions import ViewActions
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.footer import CockpitFooter
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.hosts_view import HostsView
from cockpit.ui.widgets.proc_pane import ProcessPane
from cockpit.ui.widgets.runs_pane import RunsPane
from cockpit.ui.widgets.server_log import ServerLogPane


TEXTUAL_COMMANDS_LEFT_OUT = frozenset({"Keys", "Maximize", "Minimize"})


class CockpitApp(ViewActions, HostActions, ServingActions, RunbookActions, App[int]):
    TITLE = "cockpit"
    CSS = """
    #main { height: 1fr; }
    #hosts { height: 1fr; width: 1fr; }
    #checklist { width: 56; }
    #main.-narrow { layout: vertical; }
    #main.-narrow #checklist { width: 1fr; height: 45%; }
    .-compact #main #checklist { width: 1fr; height: 1fr; }
    .-compact ServerLogPane, .-compact BenchPane, .-compact CommandLogPane { height: 1fr; }
    .-compact RunsPane, .-compact ProcessPane { height: 1fr; max-height: 100%; }
    Toast { display: none; }  /* messages go to the bar above the footer (ui/layout.py MessageBar) */
    #empty { padding: 1 2; }
    .hidden { display: none; }
    """
    BINDINGS = actions.bindings("app") + actions.fallbacks("checklist")

    def get_driver_class(self):
        """Textual's driver, but with an input thread that sleeps while no key comes (ui/driver.py);
        a driver named in TEXTUAL_DRIVER still wins."""
        if constants.DRIVER is None and not plain("driver"):
            quiet = quiet_driver_class()
            if quiet is not None:
                return quiet
        return super().get_driver_class()

    def __init__(self, context: Context | Config, hub: TelemetryHub | None = None, ascii_only: bool | None = None,
                 runbook: Runbook | None = None, read_only: bool = False, theme: str | None = None, demo: bool = False,
                 mouse: bool | None = None):
        super().__init__()
        self._own_hub = hub is None
        self.context = context if isinstance(context, Context) else Context.of(context, hub, runbook)
        self.config, self.hub, self.runbook = self.context.config, self.context.hub, self.context.runbook
        self.demo, self.read_only = demo, read_only
        self.copied: tuple[str, str] | None = None  # the last copy's text and what it was (Y shows it to select)
        self._theme_name = theme or self.config.ui.theme
        self.ascii_only = ascii_only if ascii_only is not None else (self.config.ui.ascii or os.environ.get("COCKPIT_ASCII") == "1")
        self._ascii_filter = AsciiOnly() if self.ascii_only else None
        self.mouse_on = self.config.ui.mouse if mouse is None else mouse  # app.run(mouse=...); m switches it while running
        self.hosts_view = HostsView(self.config.hosts, self.ascii_only, id="hosts")
        self.layout_state = Layout()
        self.panes: dict[str, HostPane] = self.hosts_view.panes
        self.updates_handled = 0
        self._pending: dict[str, HostSnapshot] = {}
        self.serving = ServerFollow()  # the server whose log the server pane follows, its flags raised
        self.sweeps = SweepAlerts()  # the sweeps already alerted
        self._unsubscribe: list = []
        self._keys_shown: tuple[bool, ...] | None = None  # the footer's conditional keys as last shown (show_keys)
        self._laid_out = False  # on_mount has applied the first layout (resizes before it follow no focus)
        self._step_states: dict | None = None  # each step's (state, finished at, message, number) as last shown
        from cockpit.alerts import Alerter

        self.alerter = Alerter(self.context.alerts, terminal=self._terminal_write)

    # --- the process table (its keys are the pane's own: ui/widgets/proc_pane.py) -------------------------

    def action_toggle_procs(self) -> None:
        pane = self.query_one(ProcessPane)
        focused = self._focused_host()
        host = focused.host.name if focused is not None else (pane.host or self.config.hosts[0].name)
        pane.follow(host)
        self.press_view("procs")

    # --- : jumps anywhere (ui/jump.py) --------------------------------------------------------------------

    def action_jump(self) -> None:
        from textual.command import CommandPalette

        from cockpit.ui.jump import JumpProvider

        self.push_screen(CommandPalette(providers=[JumpProvider], placeholder="jump to a host, a step, a run or a pane…"))

    def jump_to_host(self, name: str) -> None:
        if not self.layout_state.shown("hosts"):
            self.press_view("hosts")
        pane = self.panes.get(name)
        if pane is None:
            return
        if self.zoomed is not None and self.zoomed != name:
            self.hosts_view.toggle_zoom(None)  # back to every host
        if not pane.display:
            self.hosts_view.toggle_zoom(pane)  # a fleet too big to show each host: this one, zoomed
        pane.focus()
        pane.scroll_visible()

    def jump_to_step(self, name: str) -> None:
        if not self.layout_state.shown("checklist"):
            self.press_view("checklist")
        checklist = self.query(ChecklistPane)
        if checklist:
            checklist.first().select(name)
            checklist.first().focus()

    def on_kill_requested(self, message: KillRequested) -> None:
        """The selected process, killed through kill_stale's plan: exactly what is shown first, then asked."""
        if self.read_only:
            self.notify("Read-only mode: no process can be killed", severity="warning")
            return

        async def kill() -> None:
            result = await self.context.actions.kill_processes(message.host, [message.pid], self._confirm)
            self.notify(result.message, title=f"kill pid {message.pid} on {message.host}",
                        severity="information" if result.state.value == "passed" else "warning", timeout=8)
        self.run_worker(kill(), name=f"kill {message.pid}", group="procs-kill", exit_on_error=False)

    def on_copy_requested(self, message: CopyRequested) -> None:
        self.copy(message.text, message.what)

    def copy(self, text: str, what: str) -> None:
        """Copy through OSC 52 (Textual's copy_to_clipboard: over ssh too, and in tmux with set-clipboard on); the
        message says what was copied and shows it, for a terminal that ignores OSC 52."""
        self.copy_to_clipboard(text)
        self.copied = (text, what)
        shown = text if len(text) <= 120 else text[:117] + "..."
        self.notify(f"copied {what} (OSC 52): {shown}\nY shows it to select, if your terminal ignores OSC 52", title="copied", timeout=8)

    def action_show_copied(self) -> None:
        from cockpit.ui.screens.copied import CopiedScreen

        if self.copied is None:
            self.notify("nothing copied yet: y copies what is selected", severity="warning")
            return
        self.push_screen(CopiedScreen(*self.copied))

    def get_default_screen(self) -> MainScreen:
        return MainScreen(self, id="_default")

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield ViewBar(id="views")
        with Horizontal(id="main"):
            yield self.hosts_view
            if self.runbook is not None:
                yield ChecklistPane(ascii_only=self.ascii_only, id="checklist")
        yield TabLine(id="tabs")
        yield ProcessPane(id="procs", classes="hidden")
        if self.context.runs:
            yield RunsPane(list(self.context.runs), id="runs", classes="hidden")
        if self.runbook is not None and any(is_launch(s.kind) for s in self.runbook.spec.steps):
            yield ServerLogPane(id="server-log", classes="hidden")
        yield BenchPane(id="bench", classes="hidden")
        yield CommandLogPane(id="command-log", classes="hidden")
        yield MessageBar(id="messages")
        yield CockpitFooter()

    def _apply_look(self) -> None:
        """Theme files, the chosen theme, and the user's keymap (ASCII mode is a line filter: get_line_filters)."""
        from cockpit.errors import ConfigError
        from cockpit.ui.themes import DEFAULT_THEME, available_themes, check_ui_settings

        check_ui_settings(self.config)
        for theme in available_themes().values():
            self.register_theme(theme)
        wanted = self._theme_name or DEFAULT_THEME
        if wanted not in self.available_themes:
            raise ConfigError("--theme", f"no theme named '{wanted}'; themes: {', '.join(sorted(self.available_themes))}", key="theme")
        self.theme = wanted
        if self.config.ui.keymap:
            self.set_keymap(dict(self.config.ui.keymap))

    def get_line_filters(self):
        """Textual's filters, and in ASCII mode the one that makes every glyph ASCII (ui/ascii.py)."""
        filters = super().get_line_filters()
        return [*filters, self._ascii_filter] if self._ascii_filter is not None else filters

    def get_key_display(self, binding) -> str:
        """Textual's key names; in ASCII mode the words for the keys it draws as symbols (enter, not ⏎)."""
        shown = super().get_key_display(binding)
        if self.ascii_only and not shown.isascii():
            from cockpit.ui.ascii import key_words

            return key_words(shown)
        return shown

    def get_system_commands(self, screen):
        """ctrl+p: every action of the cockpit, by name (actions that change things are left out in read-only mode).
        Textual's own Keys panel and Maximize are left out: the cockpit's help (?) lists every key, and its layout
        and zoom (z) decide what fills the screen."""
        yield from (c for c in super().get_system_commands(screen) if c.title not in TEXTUAL_COMMANDS_LEFT_OUT)
        for action in actions.palette(self.read_only):
            if action.when == "fix" and not self.check_action(action.action, ()):
                continue  # no fix offered: the palette does not offer one either
            yield SystemCommand(action.palette or action.description, action.palette_help, lambda a=action: self.run_action(a.action))
        yield from self.runbook_commands()

    def on_mount(self) -> None:
        self._apply_look()
        self.layout_state.compact = Layout.is_compact(self.size.width, self.size.height)
        self._unsubscribe += [self.hub.snapshots.subscribe(self._queue_snapshot),
                              self.hub.log.events.subscribe(lambda rec: self.post_message(CommandLogged(rec)))]
        for name, snapshot in self.hub.latest.items():
            if name in self.panes:
                self.panes[name].show(snapshot, self.hub.history.get(name))
        runbook = self.runbook
        if runbook is not None:
            self._unsubscribe += [
                runbook.changes.subscribe(lambda _: self.post_message(RunbookChanged())),
                runbook.invalidations.subscribe(lambda item: self.post_message(GateInvalidated(*item))),
                runbook.progress.subscribe(lambda p: self.post_message(SweepProgress(p.state))
                                           if runbook.spec.step(p.step).kind == "bench_sweep" else None)]
            self.query_one(ChecklistPane).show(runbook.views())
            # a server launched before this cockpit started (by `plan run`, another cockpit, an earlier session of
            # this one) is followed from the start, not from the runbook's next change
            self.call_after_refresh(self._follow_latest_server)
            # another cockpit (a `plan run` elsewhere, one killed mid-step) may change the runbook
            self.set_interval(2.0, runbook.refresh)
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
        if not self.is_headless:  # a process of its own (tests run many apps in one)
            self.call_after_refresh(settle_heap)  # start-up's objects out of the collector's walks (runtime.py)

    async def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        if self._own_hub:
            await self.context.close()

    # --- messages from the core and from workers ----------------------------------------------------

    def on_runbook_changed(self, message: RunbookChanged) -> None:
        if self.runbook is None:
            return
        views = self.runbook.views()  # once per change: the checklist and the message line read the same views
        self._say_ended_steps(views)
        for pane in self.query(ChecklistPane):
            pane.show(views)
            self._show_views()
            self._follow_latest_server()
            self._alert_sweeps()
        self._revise_blocked_messages()

    def _say_ended_steps(self, views: list) -> None:
        """A step that has just passed or failed is said in the message line where the checklist is not on screen (a
        small terminal showing another pane): `n` never passes a step silently (issue 50 item 3)."""
        from cockpit.runbook.model import StepState

        now = {v.spec.name: (v.state, v.result.finished_at if v.result else None, v.result.message if v.result else "", n)
               for n, v in enumerate(views, start=1)}
        before, self._step_states = self._step_states, now
        if before is None or self.layout_state.shown("checklist"):
            return
        for name, (state, finished, said, number) in now.items():
            if state in (StepState.PASSED, StepState.FAILED) and before.get(name, (None, None))[:2] != (state, finished):
                self.notify(f"step {number} '{name}' {state.value}: {said[:160]}", title="checklist",
                            severity="information" if state is StepState.PASSED else "error", timeout=6)

    def _revise_blocked_messages(self) -> None:
        """A step's 'blocked' message names steps that had not passed: each that has passed since is dropped from it,
        and a message with nothing left goes (`sweep: blocked: 'ready' has not run` must not outlive 'ready' passing)."""
        import re
        import time

        from cockpit.runbook.model import StepState

        runbook = self.runbook
        if runbook is None:
            return

        def revised(title: str, text: str) -> str | None:
            if not title.endswith(": blocked"):
                return text
            left = []
            for reason in text.split("; "):
                named = re.match(r"^'([^']+)' (?:has not run|is \w+)", reason)
                result = runbook.result(named.group(1)) if named else None
                if not (result is not None and result.state is StepState.PASSED):
                    left.append(reason)
            return "; ".join(left) or None

        for bar in self.query(MessageBar):
            if bar.revise(revised, time.time()) and self._laid_out:
                self.apply_layout()

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

    def action_help_quit(self) -> None:
        """Ctrl+C (Textual binds it to this): how to quit, in plain words (Textual's own message carries markup that the
        cockpit's notifications show as it is)."""
        keys = sorted(key for key, active in self.active_bindings.items() if active.binding.action in ("quit", "app.quit"))
        self.notify(f"Ctrl+C does not quit the cockpit: press {' or '.join(keys) or 'ctrl+q'} to quit", title="Quit?")

    def action_help(self) -> None:
        self.push_screen(HelpScreen.for_widget(self.focused))
