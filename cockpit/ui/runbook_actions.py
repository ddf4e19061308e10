"""The runbook's actions in the TUI: run the next or a chosen step, force one past its gate with a
reason, reset results, stop a launched server.  The same engine calls as `cockpit plan run|reset|stop`,
confirmed the same way (the plan shown, y to go on); none of them in read-only mode.  Workers talk
to the engine and post messages; they never touch widgets."""

from __future__ import annotations

from textual.app import SystemCommand

from cockpit.runbook.engine import GateClosed, Runbook
from cockpit.ui.messages import MeasureRequested, StepRefused
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.reason import ReasonScreen
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.mixins import RunbookApp


class RunbookActions(RunbookApp):
    """Mixed into CockpitApp; what it needs of the app is RunbookApp (ui/mixins.py): its runbook, read_only, notify, run_worker, push_screen."""

    def runbook_commands(self):
        """The palette's entries for the runbook: one per step and action that can do something."""
        if self.read_only or self.runbook is None:
            return
        for spec in self.runbook.spec.steps:
            where = f"{spec.kind} on {spec.host}"
            yield SystemCommand(f"Run step: {spec.name}", where, lambda n=spec.name: self.action_run_step(n))
            if self.runbook.kind(spec).launch:
                yield SystemCommand(f"Force step past its gate: {spec.name}", f"{where}; asks why (recorded in the audit log)",
                                    lambda n=spec.name: self.action_force_step(n))
                if self.runbook.launched(spec.name) is not None:
                    yield SystemCommand(f"Stop the server of: {spec.name}", f"SIGTERM the server this step started on {spec.host} (asks first)",
                                        lambda n=spec.name: self.action_stop_server(n))
            if self.runbook.result(spec.name) is not None:
                yield SystemCommand(f"Reset step: {spec.name}", "forget its recorded result (asks first)",
                                    lambda n=spec.name: self.action_reset_step(n))
        yield SystemCommand("Reset every step", "forget every recorded result and applied fix (asks first)",
                            lambda: self.action_reset_step(None))
        if any(self.runbook.kind(s).launch for s in self.runbook.spec.steps):
            load = self.serving.running or 8
            yield SystemCommand(f"Measure a baseline without speculation at c={load}", "relaunch the launch step's server "
                                "without its draft, measure, relaunch it (asks first): what 'is it paying' compares against",
                                lambda c=load: self.action_measure_baseline(c))
        for run in self.context.runs:
            yield SystemCommand(f"Measure the checkpoints of: {run}", "serve each complete checkpoint through the launch step and "
                                "measure its acceptance: which to ship (asks first)", lambda n=run: self.post_message(MeasureRequested(n)))

    def _writable(self, what: str) -> Runbook | None:
        """The runbook, where steps may change things; None where they may not (read-only, or no runbook), said."""
        if self.read_only:
            self.notify(f"Read-only mode: {what}", severity="warning")
            return None
        if self.runbook is None:
            self.notify("No runbook in the config: there is no checklist", severity="warning")
        return self.runbook

    def action_focus_checklist(self, _terminal: str = "") -> None:
        if self.runbook is None:
            self.notify("No runbook in the config: there is no checklist", severity="warning")
        else:
            self.press_view("checklist")

    def action_run_next(self, _shown: str = "") -> None:
        runbook = self._writable("steps cannot run")
        if runbook is None:
            return
        step = runbook.next_step()
        if step is None:
            self.notify("Every step has passed (reset a step from the palette, ctrl+p, to run it again)")
            return
        self.action_run_step(step.name)

    def on_checklist_pane_run_requested(self, message: ChecklistPane.RunRequested) -> None:
        self.action_run_step(message.step)

    def _busy(self) -> bool:
        return any(worker.group == "runbook" and worker.is_running for worker in self.workers)

    def quit_words(self) -> str | None:
        """What quitting now would leave behind, when a step is running (a launch, a sweep, a kill): the words of the
        question `q` asks; None when nothing runs (q quits at once)."""
        running = [w.name.removeprefix("step ").removeprefix("stop ") for w in self.workers if w.group == "runbook" and w.is_running]
        if not running:
            return None
        lines = [f"running now: {', '.join(repr(n) for n in running)}; quitting stops it where it is (its result is not "
                 "recorded)."]
        runbook = self.runbook
        if runbook is not None:
            for view in runbook.views():
                launched = runbook.launched(view.spec.name)
                if launched is not None and launched.pid:
                    lines.append(f"keeps running on {launched.host}: the server '{view.spec.name}' started (pid {launched.pid}); "
                                 f"stop it with: cockpit plan stop {view.spec.name}")
        lines.append("The hosts are not touched by quitting: what a step started keeps running there.")
        return "\n".join(lines)

    async def action_quit(self) -> None:
        """q: quit at once, unless a step is running: then ask first, saying what keeps running on the hosts."""
        words = self.quit_words()
        if words is None:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.exit()
            else:
                self.notify("Still here: the step goes on")

        self.push_screen(ConfirmScreen("Quit while a step runs?", words), answered)

    def action_run_step(self, name: str, force_reason: str | None = None) -> None:
        runbook = self._writable("steps cannot run")
        if runbook is None:
            return
        blockers = [] if force_reason else runbook.prerequisites(name)
        if self._busy():
            blockers = ["another step is still running"]
        if blockers:
            self.post_message(StepRefused(name, blockers))
            return
        self.run_worker(self._run_step(runbook, name, force_reason), name=f"step {name}", group="runbook", exit_on_error=False)

    async def _run_step(self, runbook: Runbook, name: str, force_reason: str | None = None) -> None:
        try:
            await runbook.run_step(name, self._confirm, force_reason)
        except GateClosed as exc:
            self.post_message(StepRefused(name, exc.reasons))

    def on_measure_requested(self, message: MeasureRequested) -> None:
        """A run's checkpoints, each served through the launch step and measured (asks first; bench/checkpoints.py, as
        `cockpit bench checkpoints`); what it finds reaches the runs pane through the store, at its next poll."""
        from cockpit.bench.checkpoints import measure_checkpoints
        from cockpit.errors import CockpitError

        if self.read_only or self.runbook is None:
            self.notify("Read-only mode, or no runbook: no launch step can serve a checkpoint", severity="warning")
            return
        runbook = self.runbook

        def progress(text: str) -> None:
            self.notify(text, title=f"measuring {message.run}", timeout=4)

        async def measure() -> None:
            try:
                launch = self.context.launch_step_for(None)
                result = await measure_checkpoints(runbook, launch, message.run,
                                                   lambda: self.context.checkpoint_candidates(message.run, launch), self._confirm, progress)
            except CockpitError as exc:
                self.notify(str(exc), title=f"measuring {message.run}", severity="warning", timeout=10)
                return
            figures = ", ".join(f"{r.checkpoint} {r.accept_length:.2f}" for r in result.rows if r.accept_length is not None)
            self.notify(f"{figures or 'nothing measured'}; {result.serving}" + "".join(f"\n! {f}" for f in result.failures),
                        title=f"checkpoints of {message.run}", severity="warning" if result.failures else "information", timeout=12)

        self.run_worker(measure(), name=f"measure {message.run}", group="measure", exclusive=True, exit_on_error=False)

    def action_measure_baseline(self, concurrency: int) -> None:
        """A short baseline without speculation at `concurrency` (bench/baseline.py, as `cockpit bench baseline`)."""
        from cockpit.bench.baseline import measure_baseline
        from cockpit.errors import CockpitError

        runbook = self._writable("no server can be relaunched for a baseline")
        if runbook is None:
            return

        async def measure() -> None:
            try:
                launch = self.context.launch_step_for(None)
                result = await measure_baseline(runbook, launch, concurrency, self._confirm,
                                                lambda text: self.notify(text, title="baseline", timeout=4))
            except CockpitError as exc:
                self.notify(str(exc), title="baseline", severity="warning", timeout=10)
                return
            figure = f"{result.output_throughput_tok_s:.0f} tok/s at c={concurrency}" if result.output_throughput_tok_s else "not measured"
            self.notify(f"{figure}; {result.serving}" + (f"\n! {result.failure}" if result.failure else ""), title="baseline without speculation",
                        severity="warning" if result.failure else "information", timeout=12)

        self.run_worker(measure(), name="baseline", group="measure", exclusive=True, exit_on_error=False)

    async def _confirm(self, plan: str) -> bool:
        answer = await self.push_screen_wait(ConfirmScreen("This changes things on a host:", plan))
        return bool(answer)

    def action_force_step(self, name: str) -> None:
        """`plan run --force STEP --reason TEXT`: the reason is asked, then the step's own confirmation."""
        runbook = self._writable("steps cannot run")
        if runbook is None:
            return
        blockers = runbook.prerequisites(name)
        explanation = (f"'{name}' will run without waiting for its gate"
                       + (f" (now: {'; '.join(blockers)})" if blockers else "")
                       + ". The launch gate's checks still run and are shown; failing ones are skipped and the reason is recorded.")
        def answered(reason: str | None) -> None:
            if reason:
                self.action_run_step(name, force_reason=reason)
        self.push_screen(ReasonScreen(f"Force '{name}' past its gate", explanation), answered)

    def action_reset_step(self, name: str | None) -> None:
        """`plan reset [STEP]`: forgets recorded results (nothing on a host changes); asks first."""
        runbook = self._writable("nothing can be reset")
        if runbook is None:
            return
        what = f"the recorded result of step '{name}' and any fix applied to it" if name else \
            f"every recorded result of runbook '{runbook.spec.name}' and every applied fix"
        plan = f"Forget {what}.\nNothing on a host changes; the audit log keeps the history.\nState file: {runbook.store.path}"

        def answered(yes: bool | None) -> None:
            if yes:
                runbook.reset(name)
                self.notify(f"reset {'step ' + name if name else 'every step'}", timeout=4)
        self.push_screen(ConfirmScreen("Reset the checklist:", plan), answered)

    def action_stop_server(self, name: str) -> None:
        """`plan stop STEP`: the engine shows exactly what it will signal and asks first."""
        runbook = self._writable("nothing can be stopped")
        if runbook is None:
            return

        async def stop() -> None:
            said = await runbook.stop_server(name, self._confirm)
            self.notify(said, title=f"stop {name}", timeout=6)
        self.run_worker(stop(), name=f"stop {name}", group="runbook", exit_on_error=False)
