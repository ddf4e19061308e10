"""What runs around the checklist, in the TUI: training runs watched, the launched server's log and
figures followed, its crash and flags and a finished sweep sent out as alerts, the fix applied, the
benchmarks.  The watching itself is the core's (runs/watch.py, serving/target.py, serving/server.py):
workers post what it found; the handlers here show it."""

from __future__ import annotations

from textual.notifications import SeverityLevel

from cockpit.runbook.model import StepState
from cockpit.ui.messages import RunsPolled, ServerPolled
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.runs_pane import RunsPane
from cockpit.ui.widgets.server_log import ServerLogPane
from cockpit.format import shell_words
from cockpit.ui.mixins import ServingApp


class ServingActions(ServingApp):
    """Mixed into CockpitApp; what it needs of the app is ServingApp (ui/mixins.py), and its state
    is the app's `serving` (the followed server) and `sweeps` objects."""

    async def _watch_runs(self) -> None:
        """The core polls every [runs] run; the worker posts what it found, never touching a widget."""
        from cockpit.runs.watch import watch_runs

        await watch_runs(list(self.context.runs.values()), self.hub.pool.get,
                         lambda statuses, events: self.post_message(RunsPolled(statuses, events)),
                         own_kills=self.context.own_kills)  # the cockpit's own kills are evidence

    def on_runs_polled(self, message: RunsPolled) -> None:
        from cockpit.runs.watch import run_alert

        for pane in self.query(RunsPane):
            pane.show(message.statuses)
        for event in message.events:
            alert = run_alert(event)
            # a new checkpoint is in the pane (and goes out as an alert): no toast over the work
            self.raise_alert(alert, toast=event.kind != "checkpoint")
            if event.kind in ("crashed", "stalled"):
                self.reveal("runs")

    def action_toggle_runs(self, _terminal: str = "") -> None:
        if not self.query(RunsPane):
            self.notify("No [runs.NAME] in the config: add one (host, log and/or output_dir) to watch a training run",
                        severity="warning")
            return
        self.press_view("runs")

    def _terminal_write(self, sequence: str) -> None:
        """An alert for a person not looking: the bell and the desktop-notification escape, written
        to the terminal the TUI owns (between its frames: they draw nothing)."""
        from cockpit.ui.textual_internals import terminal_driver

        driver = terminal_driver(self)
        if driver is None:
            raise OSError("no terminal")
        driver.write(sequence)
        driver.flush()

    def send_alert(self, alert) -> None:
        self.run_worker(self.alerter.send(alert), name="alert", group="alerts", exit_on_error=False)

    def raise_alert(self, alert, toast: bool = True) -> None:
        """An alert out through its channels and, unless told not to, as a toast of its level."""
        if toast:
            severity: SeverityLevel = "error" if alert.level == "error" else "warning" if alert.level == "warning" else "information"
            self.notify(alert.text, title=alert.title, severity=severity, timeout=15 if alert.level == "error" else 8)
        self.send_alert(alert)

    def _alert_sweeps(self) -> None:
        """A sweep that ended since this cockpit started: its decision (or failure) goes out as an alert."""
        from cockpit.bench.sweep import finished_sweep_alerts

        for alert in finished_sweep_alerts(self.runbook, self.sweeps.started_at, self.sweeps.seen):
            self.send_alert(alert)

    def _follow_latest_server(self) -> None:
        from cockpit.serving.server import watch_server
        from cockpit.serving.target import launched_server, server_watcher

        panes, runbook = self.query(ServerLogPane), self.runbook
        if not panes or runbook is None:
            return
        spec, result = runbook.latest_launch("serve_launch")
        if spec is None or result is None or result.state is StepState.RUNNING:
            return
        server = runbook.launched(spec.name)
        key = (spec.name, spec.host, server.pid if server else None, result.finished_at)
        if not self.serving.follow(key):
            return
        pane = panes.first()
        box = (result.evidence or {}).get("container") if result is not None else None
        where = f" in {box.get('engine')} container {box.get('name')}" if isinstance(box, dict) and box.get("name") else ""
        pane.follow(f"{spec.name} @{spec.host}{where}")
        self.reveal("server")
        if server is None or server.port is None or result.state is StepState.FAILED:
            pane.show_failed_launch(result, started=server is not None)
            self.show_keys()
            self.notify(result.message, title=f"{spec.name} failed", severity="error", timeout=10)
            return
        watcher = server_watcher(launched_server(runbook, spec.name), self.hub.pool.get, self.config)
        self.run_worker(watch_server(watcher, lambda status: self.post_message(ServerPolled(str(key), status)),
                                     self.config.telemetry.server_poll_s),
                        name="server watch", group="server-watch", exclusive=True, exit_on_error=False)

    def on_server_polled(self, message: ServerPolled) -> None:
        panes = self.query(ServerLogPane)
        if panes and self.serving.is_followed(message.target):
            from cockpit.serving.server import death_alert

            from cockpit.bench.steps import live_verdict

            pane = panes.first()
            was_alive = pane.status.alive if pane.status else True
            spec, result = self.runbook.latest_launch("serve_launch") if self.runbook is not None else (None, None)
            verdict = live_verdict(self.runbook, spec.name if spec is not None else None, message.status.figures)
            pane.show(message.status, verdict)  # the verdict judged once a poll: drawn here, alerted below
            running = message.status.figures.get("running")
            self.serving.running = running if isinstance(running, int) and running > 0 else self.serving.running
            self.show_keys()
            if spec is None:
                return
            alert = death_alert(spec.name, result, was_alive, message.status)
            if alert is not None:
                self.raise_alert(alert)
            self._alert_server_flags(spec.name, message.status.figures.get("flags") or [])
            turned = self.serving.turns.see(verdict)
            if turned is not None:
                from cockpit.serving.paying import verdict_alert

                self.raise_alert(verdict_alert(spec.name, turned))

    def _alert_server_flags(self, step: str, flags: list[dict]) -> None:
        from cockpit.serving.live import flag_alert

        from cockpit.serving.live import flag_resolved

        raised, cleared = self.serving.flag_changes({f["kind"] for f in flags})
        for flag in flags:
            if flag["kind"] in raised:
                self.raise_alert(flag_alert(step, flag))
        for kind in sorted(cleared):
            self.raise_alert(flag_resolved(step, kind), toast=False)  # one "resolved" notice, in the alert log

    def action_toggle_server_log(self, _terminal: str = "") -> None:
        if not self.query(ServerLogPane):
            self.notify("No serve_launch step in the runbook: there is no server log to show", severity="warning")
            return
        self.press_view("server")

    def action_apply_fix(self, _shown: str = "") -> None:
        from cockpit.errors import CockpitError
        from cockpit.serving.steps import apply_diagnosis_fix, fix_note, write_fix_to_config

        if self.read_only:
            self.notify("Read-only mode: nothing can be changed", severity="warning")
            return
        panes = self.query(ServerLogPane)
        spec, _ = self.runbook.latest_launch("serve_launch") if self.runbook else (None, None)
        fix = panes.first().top_fix if panes else None
        if fix is None or spec is None:
            self.notify("No fix to apply", severity="warning")
            return
        try:
            fixed = apply_diagnosis_fix(self.runbook, spec.name, fix)
        except CockpitError as exc:
            self.notify(str(exc), severity="warning")
            return
        written = write_fix_to_config(self.runbook, spec.name, fixed, self.config.path, fix_note(fix))  # the file says what runs
        self.notify(f"{spec.name} will run: {shell_words(fixed[-8:])}; {written}", title="fix applied")
        self.action_run_step(spec.name)

    def action_toggle_bench(self, _terminal: str = "") -> None:
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
