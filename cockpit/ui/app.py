"""The cockpit TUI: one pane per host, a command log, keyboard first.

Collectors run as asyncio tasks in the TelemetryHub; they publish snapshots that become messages
to the app, and only the app's handlers change widgets.
"""

from __future__ import annotations

import os

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Header, Static

from cockpit import __version__
from cockpit.config import Config
from cockpit.hosts.commandlog import CommandRecord
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot
from cockpit.runbook.engine import GateClosed, Runbook
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.server_log import ServerLogPane


class HostUpdated(Message):
    def __init__(self, snapshot: HostSnapshot):
        super().__init__()
        self.snapshot = snapshot


class RunbookChanged(Message):
    pass


class StepRefused(Message):
    def __init__(self, step: str, reasons: list[str]):
        super().__init__()
        self.step = step
        self.reasons = reasons


class ServerPolled(Message):
    def __init__(self, target: str, status):
        super().__init__()
        self.target = target
        self.status = status


class SweepProgress(Message):
    def __init__(self, state: dict):
        super().__init__()
        self.state = state


class CommandLogged(Message):
    def __init__(self, record: CommandRecord):
        super().__init__()
        self.record = record


PANE_HELP = {
    "host": "A host pane: one line per GPU (memory bar, used/total MiB, power draw/limit, utilisation, "
    "temperature, power history), then the host's compute processes. The border shows the host state "
    "and the age of its last sample.",
    "log": "The command log: every command the cockpit ran on a host, with its exit status.",
    "checklist": "The checklist: the runbook's steps in order. A step is blocked until every step before it "
    "passed; the launch step stays locked until its gate opens and re-verifies the GPUs of its host right "
    "before it starts. j/k select, enter runs the selected step, n runs the next one.",
}


class CockpitApp(App[int]):
    TITLE = "cockpit"
    CSS = """
    #main {
        height: 1fr;
    }
    #hosts {
        height: 1fr;
        width: 1fr;
    }
    #checklist {
        width: 56;
    }
    #main.-narrow {
        layout: vertical;
    }
    #main.-narrow #checklist {
        width: 1fr;
        height: 45%;
    }
    #empty {
        padding: 1 2;
    }
    .hidden {
        display: none;
    }
    """
    BINDINGS = [
        Binding("q", "quit", "quit", id="app.quit"),
        Binding("question_mark,f1", "help", "help", key_display="?", id="app.help"),
        Binding("l", "toggle_log", "command log", id="app.toggle_log"),
        Binding("z", "zoom", "zoom host", id="host.zoom"),
        Binding("R", "reconnect", "reconnect now", show=False, id="host.reconnect"),
        Binding("n", "run_next", "run next step", id="checklist.next"),
        Binding("c", "focus_checklist", "checklist", id="checklist.focus"),
        Binding("s", "toggle_server_log", "server log", id="server.toggle"),
        Binding("f", "apply_fix", "apply fix", show=False, id="server.apply_fix"),
        Binding("b", "toggle_bench", "benchmarks", id="bench.toggle"),
        Binding("right_square_bracket", "chart(1)", "next chart", show=False, key_display="]", id="bench.next_chart"),
        Binding("left_square_bracket", "chart(-1)", "previous chart", show=False, key_display="[", id="bench.previous_chart"),
        *[Binding(str(n), f"zoom_gpu({n})", f"zoom GPU {n} (in a zoomed host)", show=False, id=f"host.zoom_gpu_{n}") for n in range(10)],
        Binding("j,down", "focus_next_host", "next host", show=False, id="host.next"),
        Binding("k,up", "focus_previous_host", "previous host", show=False, id="host.previous"),
    ]

    def __init__(self, config: Config, hub: TelemetryHub | None = None, ascii_only: bool | None = None,
                 runbook: Runbook | None = None, read_only: bool = False, theme: str | None = None, demo: bool = False):
        super().__init__()
        self.demo = demo
        self.config = config
        self._theme_name = theme or config.ui.theme
        self.hub = hub or TelemetryHub(config)
        self.read_only = read_only
        if runbook is None:
            from cockpit.runbook.spec import parse_runbook

            spec = parse_runbook(config)
            runbook = Runbook(spec, self.hub) if spec.steps else None
        self.runbook = runbook
        self._own_hub = hub is None
        self.ascii_only = ascii_only if ascii_only is not None else (config.ui.ascii or os.environ.get("COCKPIT_ASCII") == "1")
        self.panes: dict[str, HostPane] = {}
        self.zoomed: str | None = None
        self.updates_handled = 0
        self._pending: dict[str, HostSnapshot] = {}
        self._watching: tuple | None = None  # (step, host, pid) of the server whose log is followed
        self._unsubscribe: list = []

    # --- layout -----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            with VerticalScroll(id="hosts"):
                if not self.config.hosts:
                    yield Static("No hosts configured. Add [hosts.NAME] tables to the config "
                                 "(`cockpit init --example` prints an annotated one).", id="empty")
                for host in self.config.hosts:
                    pane = HostPane(host, ascii_only=self.ascii_only)
                    self.panes[host.name] = pane
                    yield pane
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
        from cockpit.ui.themes import DEFAULT_THEME, available_themes

        for theme in available_themes().values():
            self.register_theme(theme)
        wanted = self._theme_name or DEFAULT_THEME
        if wanted not in self.available_themes:
            where = str(self.config.path or "--theme")
            raise ConfigError(where, f"no theme named '{wanted}'; themes: {', '.join(sorted(self.available_themes))}", key="theme")
        self.theme = wanted
        if self.ascii_only:
            self.stylesheet.add_source("* { border: ascii $primary-darken-2; } *:focus { border: ascii $accent; }", read_from=("ascii", ""))
        known = {b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id} | {b.id for b in ChecklistPane.BINDINGS if b.id}
        for binding_id, _keys in self.config.ui.keymap:
            if binding_id not in known:
                raise ConfigError(str(self.config.path or "the config"), f"no binding with id '{binding_id}'; ids: {', '.join(sorted(known))}",
                                  key=binding_id)
        if self.config.ui.keymap:
            self.set_keymap(dict(self.config.ui.keymap))

    def get_system_commands(self, screen):
        """ctrl+p: every action of the cockpit, by name (run actions are left out in read-only mode)."""
        from textual.app import SystemCommand

        yield from super().get_system_commands(screen)
        commands = [
            ("Help", "the keys of the focused pane", self.action_help),
            ("Toggle command log", "every command run on a host, with its exit status", self.action_toggle_log),
            ("Toggle server log", "the launched server's log, health and diagnoses", self.action_toggle_server_log),
            ("Toggle benchmark charts", "throughput, acceptance and latency per depth config", self.action_toggle_bench),
            ("Zoom the focused host", "show only this host (again to show all)", self.action_zoom),
            ("Reconnect now", "the focused host (or every host waiting to retry) without waiting for its backoff",
             self.action_reconnect),
            ("Focus the checklist", "the runbook's steps", self.action_focus_checklist),
        ]
        if not self.read_only:
            commands += [("Run the next step", "the first step of the runbook not yet passed", self.action_run_next),
                         ("Apply the suggested fix", "to the launch step, and relaunch (asks first)", self.action_apply_fix)]
            if self.runbook is not None:
                for spec in self.runbook.spec.steps:
                    commands.append((f"Run step: {spec.name}", f"{spec.kind} on {spec.host}", lambda name=spec.name: self.action_run_step(name)))
        for title, help_text, callback in commands:
            yield SystemCommand(title, help_text, callback)

    def on_mount(self) -> None:
        self._apply_look()
        where = str(self.config.path) if self.config.path else "this machine (no config)"
        self.sub_title = f"v{__version__} - {where}"
        self._unsubscribe.append(self.hub.subscribe(lambda snap: self.post_message(HostUpdated(snap))))
        self._unsubscribe.append(self.hub.log.subscribe(lambda rec: self.post_message(CommandLogged(rec))))
        for name, snapshot in self.hub.latest.items():
            if name in self.panes:
                self.panes[name].show(snapshot, self.hub.history.get(name))
        from cockpit.bench import sweep as sweep_module

        listener = lambda state: self.post_message(SweepProgress(state))  # noqa: E731
        sweep_module.LISTENERS.append(listener)
        self._unsubscribe.append(lambda: sweep_module.LISTENERS.remove(listener) if listener in sweep_module.LISTENERS else None)
        if self.runbook is not None:
            self._unsubscribe.append(self.runbook.subscribe(lambda: self.post_message(RunbookChanged())))
            self.query_one(ChecklistPane).show(self.runbook.views())
            # another cockpit (a `plan run` elsewhere, one killed mid-step) may change the runbook
            self.set_interval(2.0, self.runbook.refresh)
        if self.read_only:
            self.sub_title += " - READ-ONLY"
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
            await self.hub.stop()

    # --- data flow: messages from collectors --------------------------------------------------------

    def on_host_updated(self, message: HostUpdated) -> None:
        # Coalesced: hosts sample at staggered moments; painting each as it comes would cost a
        # frame per host per second.  Pending snapshots are painted together by _paint_pending.
        if message.snapshot.name in self.panes:
            self.updates_handled += 1
            self._pending[message.snapshot.name] = message.snapshot

    def on_resize(self) -> None:
        main = self.query_one("#main")
        main.set_class(self.size.width < 130, "-narrow")

    def on_runbook_changed(self, message: RunbookChanged) -> None:
        if self.runbook is not None:
            self.query_one(ChecklistPane).show(self.runbook.views())
            self._follow_latest_server()

    # --- the launched server ------------------------------------------------------------------------

    def _latest_launch(self):
        if self.runbook is None:
            return None, None
        for spec in reversed(self.runbook.spec.steps):
            if spec.kind == "sglang_launch" and self.runbook.result(spec.name) is not None:
                return spec, self.runbook.result(spec.name)
        return None, None

    def _follow_latest_server(self) -> None:
        from cockpit.runbook.model import StepState
        from cockpit.sglang.diagnose import Diagnosis, LogReport
        from cockpit.sglang.server import ServerStatus

        panes = self.query(ServerLogPane)
        if not panes:
            return
        pane = panes.first()
        spec, result = self._latest_launch()
        if spec is None or result.state is StepState.RUNNING:
            return
        evidence = result.evidence or {}
        key = (spec.name, spec.host, evidence.get("pid"), result.finished_at)
        if key == self._watching:
            return
        self._watching = key
        pane.follow(f"{spec.name} @{spec.host}")
        pane.remove_class("hidden")
        diagnoses = [Diagnosis(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})
                     for d in evidence.get("diagnoses", [])]
        if not evidence.get("pid") or result.state is StepState.FAILED:
            pane.show(ServerStatus("not started" if not evidence.get("pid") else "down", False,
                                   LogReport(diagnoses=diagnoses), result.output.splitlines() if result.output else []))
            self.notify(result.message, title=f"{spec.name} failed", severity="error", timeout=10)
            return
        self.run_worker(self._watch_server(spec.host, int(evidence["pid"]), int(evidence["port"]), evidence["log"], key),
                        group="server-watch", exclusive=True, exit_on_error=False)

    async def _watch_server(self, host: str, pid: int, port: int, log: str, key: tuple) -> None:
        """A worker: polls the server and posts what it sees; the pane is changed by the app."""
        import asyncio

        from cockpit.sglang.server import ServerWatcher

        watcher = ServerWatcher(self.hub.pool.get(host), pid, port, log)
        while True:
            try:
                status = await watcher.poll()
            except Exception as exc:  # noqa: BLE001 - a poll that failed is shown, and tried again
                from cockpit.sglang.diagnose import LogReport
                from cockpit.sglang.server import ServerStatus

                status = ServerStatus(f"error: {exc}", True, LogReport(), [])
            self.post_message(ServerPolled(str(key), status))
            if not status.alive:
                return
            await asyncio.sleep(1.0)

    def on_server_polled(self, message: ServerPolled) -> None:
        panes = self.query(ServerLogPane)
        if panes and message.target == str(self._watching):
            pane = panes.first()
            was_alive = pane.status.alive if pane.status else True
            pane.show(message.status)
            if was_alive and not message.status.alive:
                errors = [d for d in message.status.report.diagnoses if d.severity == "error"]
                top = errors[0].message if errors else "no diagnosis in its log"
                self.notify(top, title="the server died", severity="error", timeout=15)

    def on_sweep_progress(self, message: SweepProgress) -> None:
        pane = self.query_one(BenchPane)
        pane.remove_class("hidden")
        pane.progress(message.state)

    def action_toggle_bench(self) -> None:
        pane = self.query_one(BenchPane)
        if pane.has_class("hidden") and not pane.runs:
            from cockpit.bench.store import list_runs, load_run

            runs = []
            for path in list_runs()[-40:]:
                try:
                    runs.append(load_run(path))
                except Exception:  # noqa: BLE001 - a bad stored run is skipped, not fatal
                    continue
            pane.show_runs([r for r in runs if r.get("config")])
        pane.set_class(not pane.has_class("hidden"), "hidden")

    def action_chart(self, step: int) -> None:
        pane = self.query_one(BenchPane)
        if not pane.has_class("hidden"):
            pane.cycle(step)

    def action_toggle_server_log(self) -> None:
        panes = self.query(ServerLogPane)
        if not panes:
            self.notify("No sglang_launch step in the runbook", severity="warning")
            return
        pane = panes.first()
        pane.set_class(not pane.has_class("hidden"), "hidden")

    def action_apply_fix(self) -> None:
        from cockpit.sglang.lint import apply_fix

        if self.read_only:
            self.notify("Read-only mode: nothing can be changed", severity="warning")
            return
        panes = self.query(ServerLogPane)
        spec, result = self._latest_launch()
        fix = panes.first().top_fix if panes else None
        if fix is None or spec is None:
            self.notify("No fix to apply", severity="warning")
            return
        argv = (result.evidence or {}).get("argv")
        if not argv:
            self.notify("The launch step recorded no command line", severity="warning")
            return
        fixed = apply_fix(argv, fix)
        self.runbook.set_override(spec.name, fixed, f"applied fix for {fix.kind} {fix.flag}: {' '.join(fix.replacement or ())}")
        self.notify(f"{spec.name} will run: {' '.join(fixed[-8:])}", title="fix applied")
        self.action_run_step(spec.name)

    def on_checklist_pane_run_requested(self, message: ChecklistPane.RunRequested) -> None:
        self.action_run_step(message.step)

    def on_step_refused(self, message: StepRefused) -> None:
        self.notify("; ".join(message.reasons), title=f"{message.step}: blocked", severity="error", timeout=8)

    def _paint_pending(self) -> None:
        pending, self._pending = self._pending, {}
        if self.runbook is not None:
            for snapshot in pending.values():
                for step in self.runbook.observe(snapshot):
                    result = self.runbook.result(step)
                    self.notify(result.message if result else step, title=f"gate closed: {step}", severity="warning", timeout=10)
        with self.batch_update():
            for name, snapshot in pending.items():
                self.panes[name].show(snapshot, self.hub.history.get(name))
            for name, pane in self.panes.items():
                if name not in pending:
                    pane.tick()

    def on_command_logged(self, message: CommandLogged) -> None:
        self.query_one(CommandLogPane).add(message.record)

    # --- actions ------------------------------------------------------------------------------------

    def action_toggle_log(self) -> None:
        log = self.query_one(CommandLogPane)
        log.set_class(not log.has_class("hidden"), "hidden")

    def _focused_host(self) -> HostPane | None:
        focused = self.focused
        return focused if isinstance(focused, HostPane) else None

    def action_zoom_gpu(self, index: int) -> None:
        """Digits while a host is zoomed: that GPU in detail (the same digit again: all GPUs)."""
        if self.zoomed is None:
            self.notify("Zoom a host first (z), then press a GPU's number", severity="warning")
            return
        pane = self.panes[self.zoomed]
        pane.zoom_gpu(None if pane.zoomed_gpu == index else index)

    def action_reconnect(self) -> None:
        pane = self._focused_host()
        woken = self.hub.retry_now([pane.host.name] if pane is not None else None)
        if woken:
            self.notify(f"reconnecting {', '.join(woken)} now", timeout=4)
        else:
            self.notify("no host is waiting to reconnect" if pane is None else f"{pane.host.name} is not waiting to reconnect",
                        severity="warning", timeout=4)

    def action_zoom(self) -> None:
        pane = self._focused_host()
        if self.zoomed is not None:
            self.panes[self.zoomed].zoom_gpu(None)
            self.zoomed = None
            for other in self.panes.values():
                other.display = True
            if pane:
                pane.scroll_visible()
            return
        if pane is None:
            self.notify("Focus a host pane first (j/k or tab)", severity="warning")
            return
        self.zoomed = pane.host.name
        for other in self.panes.values():
            other.display = other is pane

    def _move_focus(self, step: int) -> None:
        panes = [p for p in self.panes.values() if p.display]
        if not panes:
            return
        current = self._focused_host()
        index = panes.index(current) if current in panes else -1
        target = panes[(index + step) % len(panes)]
        target.focus()
        target.scroll_visible()

    def action_focus_next_host(self) -> None:
        self._move_focus(1)

    def action_focus_previous_host(self) -> None:
        self._move_focus(-1)

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
        self.run_worker(self._run_step(name), group="runbook", exit_on_error=False)

    async def _run_step(self, name: str) -> None:
        """Runs in a worker: it talks to the engine and posts messages; widgets are the app's."""
        try:
            await self.runbook.run_step(name, self._confirm)
        except GateClosed as exc:
            self.post_message(StepRefused(name, exc.reasons))

    async def _confirm(self, plan: str) -> bool:
        return bool(await self.push_screen_wait(ConfirmScreen("This step changes things on a host:", plan)))

    def action_help(self) -> None:
        rows = []
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            rows.append((binding.key_display or binding.key.replace("question_mark", "?"), binding.description, binding.id or ""))
        rows.append(("tab / shift+tab", "move focus between panes", ""))
        focused = self.focused
        if isinstance(focused, CommandLogPane):
            context = PANE_HELP["log"]
        elif isinstance(focused, ChecklistPane):
            context = PANE_HELP["checklist"]
            rows += [(b.key.replace(",", " / "), b.description, b.id or "") for b in ChecklistPane.BINDINGS]
        else:
            context = PANE_HELP["host"]
        self.push_screen(HelpScreen(rows, context))
