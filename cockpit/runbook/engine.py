"""The checklist engine: runs steps in order, keeps the gates, records evidence and every action.

Gates: a step runs only when every step before it passed (or the user forced it, with a reason
that is recorded).  A launch-type step first re-runs every gpu_clean step of its own host and
refuses unless all pass, with evidence younger than the freshness limit.  A passed gpu_clean
turns stale when later telemetry shows its host dirty.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import replace

from cockpit.errors import CockpitError
from cockpit.events import Topic
from cockpit.format import clock
from cockpit.hosts.procs import LaunchedProcess, process_alive, stop_process
from cockpit.hosts.transport import TransportError
from cockpit.runbook.kind import Confirm, RunContext, StepKind, StepProgress
from cockpit.runbook.model import StepResult, StepSpec, StepState, StepView
from cockpit.runbook.spec import RunbookSpec
from cockpit.runbook.store import StateStore, merge, process_start, runner_alive
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot


class GateClosed(CockpitError):
    """The step may not run: the message says which step or check holds it back."""

    exit_code = 1

    def __init__(self, step: str, reasons: list[str]):
        self.step = step
        self.reasons = reasons
        super().__init__(f"step '{step}' is blocked: " + "; ".join(reasons))


async def deny(_: str) -> bool:
    return False


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Runbook:
    """The checklist of one config.  It watches the hub itself: a passed gate that later telemetry
    contradicts turns stale whether or not a TUI is open."""

    def __init__(self, spec: RunbookSpec, hub: TelemetryHub, store: StateStore | None = None, clock: Callable[[], float] = time.time):
        self.spec = spec
        self.hub = hub
        self.store = store or StateStore(spec.id)
        self.clock = clock
        self.results: dict[str, StepResult] = self.store.load()
        self.overrides: dict[str, list[str]] = self.store.load_overrides()
        # what the state file held when this process last read or wrote it: a save writes only
        # the steps this process changed since, over what is on disk now (another cockpit's steps stay)
        self._synced: dict[str, StepResult] = dict(self.results)
        self._synced_overrides: dict[str, list[str]] = dict(self.overrides)
        self._disk_signature = self.store.signature()
        self._lock = asyncio.Lock()
        self._lock_owner: asyncio.Task | None = None
        self.changes: Topic[None] = Topic()  # any step's state changed
        self.invalidations: Topic[tuple[str, list[str]]] = Topic()  # (gate step, why) when telemetry contradicts a pass
        self.progress: Topic[StepProgress] = Topic()  # how a long step (a sweep) is going
        # launch steps whose server a sweep stopped to relaunch it: the memory still seen is that
        # server's, freeing; the relaunch re-verifies the gates itself, so telemetry does not invalidate them
        self._relaunching: set[str] = set()
        self._recover_interrupted()
        self._unwatch = hub.snapshots.subscribe(self.observe)

    def close(self) -> None:
        self._unwatch()

    # --- state ----------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        return self.changes.subscribe(lambda _: listener())

    def kind(self, spec: StepSpec) -> StepKind:
        return self.spec.kind(spec)

    def _save(self) -> None:
        with self.store.locked():
            self._catch_up()  # when the file is unreadable, this process's view replaces it
            self.store.save(self.results, self.overrides)
            self._disk_signature = self.store.signature()

    def _catch_up(self) -> bool:
        """Take what is on disk (another cockpit may have written it), with this process's own
        changes since it last synced on top.  False when the file cannot be read."""
        try:
            disk, disk_overrides = self.store.load(), self.store.load_overrides()
        except CockpitError:
            return False
        self.results = merge(disk, self._synced, self.results)
        self.overrides = merge(disk_overrides, self._synced_overrides, self.overrides)
        self._synced, self._synced_overrides = dict(self.results), dict(self.overrides)
        return True

    def _notify(self) -> None:
        self.changes.publish(None)

    def _changed(self) -> None:
        self._save()
        self._notify()

    def _recover_interrupted(self) -> bool:
        changed = False
        for name, result in list(self.results.items()):
            if (result.state is StepState.RUNNING and result.runner_pid != os.getpid()
                    and not runner_alive(result.runner_pid, result.runner_started)):
                self.store.audit("interrupted", step=name, runner_pid=result.runner_pid)
                self.results[name] = replace(result, state=StepState.FAILED, finished_at=self.clock(),
                                             message=f"interrupted: the cockpit (pid {result.runner_pid}) stopped during this step; run it again")
                changed = True
        if changed:
            self._save()
        return changed

    def refresh(self) -> bool:
        """Catch up with other cockpit processes on the same runbook (a `plan run` in another
        terminal, a TUI killed mid-step): adopt the state file when another process rewrote it,
        keeping the steps this process is running, and mark steps whose runner died as
        interrupted.  Returns True (and tells the listeners) when anything changed."""
        changed = False
        signature = self.store.signature()
        if signature != self._disk_signature:
            self._disk_signature = signature
            before = (dict(self.results), dict(self.overrides))
            self._catch_up()  # unreadable now (being replaced by hand?): keep what we have
            changed = before != (self.results, self.overrides)
        changed = self._recover_interrupted() or changed
        if changed:
            self._notify()
        return changed

    def result(self, name: str) -> StepResult | None:
        return self.results.get(name)

    def _index(self, name: str) -> int:
        for index, step in enumerate(self.spec.steps):
            if step.name == name:
                return index
        self.spec.step(name)  # raises with a suggestion
        raise AssertionError

    def _passed(self, name: str) -> bool:
        result = self.results.get(name)
        return result is not None and result.state is StepState.PASSED

    def prerequisites(self, name: str) -> list[str]:
        """Why `name` may not run yet (empty: its gate is open)."""
        reasons = []
        for step in self.spec.steps[: self._index(name)]:
            result = self.results.get(step.name)
            if result is None:
                reasons.append(f"'{step.name}' has not run")
            elif result.state is not StepState.PASSED:
                reasons.append(f"'{step.name}' is {result.state.value}" + (f" ({result.message})" if result.message else ""))
        return reasons

    def gates(self) -> list[StepSpec]:
        return [s for s in self.spec.steps if self.kind(s).gate]

    def consumed(self, gate: StepSpec, host: str | None = None) -> bool:
        """Has a launch on the gate's host (`host`: that one of its hosts) started since the gate passed
        (and still runs)?  Then the GPU memory telemetry shows is that server's: the gate did its
        job, and is not invalidated by it."""
        passed = self.results.get(gate.name)
        if passed is None or passed.finished_at is None:
            return False
        hosts = {host} if host else set(self.kind(gate).hosts(gate))
        for spec in self.spec.steps:
            result = self.results.get(spec.name)
            running = result is not None and (result.state in (StepState.PASSED, StepState.RUNNING) or spec.name in self._relaunching)
            if (self.kind(spec).launch and hosts & set(self.kind(spec).hosts(spec)) and running
                    and result is not None and (result.started_at or 0) >= passed.finished_at):
                return True
        return False

    def launch_warnings(self, spec: StepSpec) -> list[str]:
        warnings = []
        launch_hosts = self.kind(spec).hosts(spec)
        for step in self.gates():
            outside = [h for h in self.kind(step).hosts(step) if h not in launch_hosts]
            if outside:
                warnings.append(f"verified {', '.join(outside)}, launching on {', '.join(launch_hosts)}")
        for host in launch_hosts:
            if not any(host in self.kind(step).hosts(step) for step in self.gates()):
                warnings.append(f"no gpu_clean step checks {host}, the launch host")
        return warnings

    def views(self) -> list[StepView]:
        views = []
        for spec in self.spec.steps:
            kind = self.kind(spec)
            result = self.results.get(spec.name)
            blocked = bool(self.prerequisites(spec.name))
            state: StepState
            if result is not None and result.state in (StepState.RUNNING, StepState.PASSED, StepState.FAILED, StepState.STALE):
                state = result.state
            else:
                state = StepState.BLOCKED if blocked else StepState.PENDING
            warnings = tuple(self.launch_warnings(spec)) if kind.launch else ()
            details: tuple[str, ...] = ()
            if result is not None and result.evidence:
                try:
                    details = tuple(kind.explain(spec, result))
                except Exception:  # noqa: BLE001 - a hand-edited state file: the raw evidence still shows
                    details = ()
            explain = (lambda kind=kind, spec=spec, result=result: kind.explain(spec, result)) if details else None
            views.append(StepView(spec, result, state, kind.title(spec), kind.why(spec), locked=kind.launch and blocked,
                                  warnings=warnings, destructive=kind.destructive, details=details, explain=explain,
                                  freshness_s=self.spec.freshness_s if kind.gate else None))
        return views

    def next_step(self) -> StepSpec | None:
        for spec in self.spec.steps:
            if not self._passed(spec.name):
                return spec
        return None

    # --- running --------------------------------------------------------------------------------

    def _context(self, confirm: Confirm, variant: dict | None = None, step: str = "") -> RunContext:
        return RunContext(hub=self.hub, confirm=confirm, audit=self.store.audit, runbook=self, variant=variant or {}, step=step)

    async def _launch_gate(self, spec: StepSpec, confirm: Confirm) -> list[str]:
        """Re-run every gate step of the launch host(s) now; reasons to refuse (empty: go)."""
        hosts = self.kind(spec).hosts(spec)
        checks = [s for s in self.gates() if set(self.kind(s).hosts(s)) & set(hosts)]
        reasons = [f"no gpu_clean step verifies {host}, " + ("a node of the launch group" if len(hosts) > 1 else "the launch host")
                   + f"; add one before '{spec.name}'" for host in hosts if not any(host in self.kind(c).hosts(c) for c in checks)]
        if reasons:
            return reasons
        for check in checks:
            result = await self._execute(check, confirm, note="re-verified before launch")
            age = self.clock() - (result.finished_at or 0)
            if result.state is not StepState.PASSED:
                where = ", ".join(self.kind(check).hosts(check))
                reasons.append(f"'{check.name}' failed on {where}: {result.message}")
            elif age > self.spec.freshness_s:
                reasons.append(f"'{check.name}' evidence is {age:.0f} s old (limit {self.spec.freshness_s:g} s)")
        return reasons

    def _crashed(self, spec: StepSpec, exc: BaseException, during: str, started: float | None = None) -> StepResult:
        """An exception nobody expected in a kind: the step fails with one line for the user, and
        the traceback goes to the audit log (never a step stuck in RUNNING)."""
        self.store.audit("error", step=spec.name, kind=spec.kind, host=spec.host, during=during, error=one_line(exc),
                         traceback="".join(traceback.format_exception(exc)))
        where = f"{spec.kind} {during}"
        return StepResult(StepState.FAILED, started or self.clock(), self.clock(),
                          f"internal error in {where}: {one_line(exc)} (the traceback is in {self.store.audit_path})")

    async def _execute(self, spec: StepSpec, confirm: Confirm, forced_reason: str | None = None, note: str | None = None,
                       variant: dict | None = None) -> StepResult:
        kind = self.kind(spec)
        context = self._context(confirm, variant, spec.name)
        try:
            text, planned = await kind.plan(context, spec)
        except (TransportError, CockpitError) as exc:
            return self._record(spec, StepResult(StepState.FAILED, self.clock(), self.clock(), f"could not plan: {exc}"))
        except Exception as exc:  # noqa: BLE001 - a bug in a kind must end the step, not the cockpit
            return self._record(spec, self._crashed(spec, exc, "planning"))
        if text is not None:
            if not await confirm(text):
                self.store.audit("declined", step=spec.name, host=spec.host, plan=text)
                return StepResult(StepState.FAILED, self.clock(), self.clock(), "not confirmed: nothing was done")
            self.store.audit("confirmed", step=spec.name, host=spec.host, plan=text)
        self.store.audit("run", step=spec.name, kind=spec.kind, host=spec.host, note=note, forced_reason=forced_reason)
        started = self.clock()
        self.results[spec.name] = StepResult(StepState.RUNNING, started_at=started, runner_pid=os.getpid(),
                                             runner_started=process_start(os.getpid()), forced_reason=forced_reason)
        self._changed()
        try:
            result = await kind.run(context, spec, planned)
        except (TransportError, CockpitError) as exc:
            result = StepResult(StepState.FAILED, started, self.clock(), f"{spec.host}: {exc}")
        except asyncio.CancelledError:
            self.results[spec.name] = StepResult(StepState.FAILED, started, self.clock(), "cancelled")
            self._changed()
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in a kind must end the step, not the cockpit
            result = self._crashed(spec, exc, "run", started)
        return self._record(spec, replace(result, forced_reason=forced_reason, runner_pid=None, runner_started=None))

    def _record(self, spec: StepSpec, result: StepResult) -> StepResult:
        # The audit record goes first (write-ahead): a crash between the two leaves a record whose
        # change the state does not show, never a change without its record.
        self.store.audit("result", step=spec.name, state=result.state.value, message=result.message, evidence=result.evidence)
        self.results[spec.name] = result
        self._changed()
        return result

    async def run_step(self, name: str, confirm: Confirm = deny, force_reason: str | None = None,
                       variant: dict | None = None) -> StepResult:
        """Run one step behind its gates.  `variant` overrides some of its parameters for this run
        (a depth sweep relaunches the same launch step with other depth flags)."""
        spec = self.spec.step(name)
        if variant:
            spec = replace(spec, params={**spec.params, **variant})
        kind = self.kind(spec)
        if self._lock_owner is asyncio.current_task():
            # a step running other steps (the sweep relaunches the launch step): it holds the lock already
            return await self._run_step_locked(name, spec, kind, confirm, force_reason, variant)
        async with self._lock:
            self._lock_owner = asyncio.current_task()
            try:
                return await self._run_step_locked(name, spec, kind, confirm, force_reason, variant)
            finally:
                self._lock_owner = None

    async def _run_step_locked(self, name, spec, kind, confirm, force_reason, variant=None) -> StepResult:
        blockers = self.prerequisites(name)
        if blockers:
            if not force_reason:
                raise GateClosed(name, blockers)
            self.store.audit("override", step=name, reason=force_reason, skipped=blockers)
        if kind.launch:
            reasons = await self._launch_gate(spec, confirm)
            if reasons:
                if not force_reason:
                    self.store.audit("refused", step=name, reasons=reasons)
                    raise GateClosed(name, reasons)
                self.store.audit("override", step=name, reason=force_reason, skipped=reasons)
        self._relaunching.discard(name)  # its gates were verified just now: its own run from here on
        return await self._execute(spec, confirm, forced_reason=force_reason, variant=variant)

    async def run_all(self, confirm: Confirm = deny, force: dict[str, str] | None = None) -> list[tuple[str, StepResult]]:
        """Run from the first step not yet passed, in order, until one fails or is refused."""
        force = force or {}
        done = []
        for spec in self.spec.steps:
            if self._passed(spec.name) and spec.name not in force:
                continue
            result = await self.run_step(spec.name, confirm, force.get(spec.name))
            done.append((spec.name, result))
            if result.state is not StepState.PASSED:
                break
        return done

    def latest_launch(self, kind: str | None = None) -> tuple[StepSpec | None, StepResult | None]:
        """The last launch step (of this kind) that has a result: the server the cockpit follows."""
        for spec in reversed(self.spec.steps):
            if self.kind(spec).launch and (kind is None or self.kind(spec).name == kind) and self.results.get(spec.name) is not None:
                return spec, self.results[spec.name]
        return None, None

    def launched(self, name: str) -> LaunchedProcess | None:
        """The process a launch step started, as its evidence records it (None: it started none)."""
        spec = self.spec.step(name)
        result = self.results.get(name)
        return LaunchedProcess.from_evidence(result.evidence, spec.host) if result is not None else None

    async def stop_server(self, name: str, confirm: Confirm = deny, planned: bool = False) -> str:
        """Stop the process a launch step started (every rank of a group; asks first).  The step
        turns stale before the processes are signalled, so whoever watches the server knows its end
        was asked for (a sweep's relaunch is `planned`: said so in the step's message).  Returns
        what happened."""
        from cockpit.hosts.procs import group_of

        spec = self.spec.step(name)
        if not self.kind(spec).launch:
            raise CockpitError(f"'{name}' is a {spec.kind} step: it starts no server")
        result = self.results.get(name)
        members = group_of(result.evidence if result is not None else None)
        if not members:
            return f"'{name}' has started no server"
        alive = [m for m in members if await process_alive(self.hub.pool.get(m.host or spec.host), m.pid)]
        if not alive:
            return ", ".join(f"pid {m.pid} on {m.host or spec.host}" for m in members) + (" is" if len(members) == 1 else " are") + " not running"
        what = "; ".join(f"pid {m.pid} on {m.host or spec.host}" for m in alive)
        if not await confirm(f"Stop the server of step '{name}': SIGTERM {what}, then SIGKILL after 10 s"):
            self.store.audit("declined", step=name, host=spec.host, plan=f"stop {what}")
            return "not confirmed: nothing was done"
        if planned:
            self._relaunching.add(name)
        self._record_stop(name, [(m.host or spec.host, m.pid) for m in alive], "the sweep's relaunch" if planned else "plan stop")
        done = []
        for member in alive:
            host = member.host or spec.host
            gone = await stop_process(self.hub.pool.get(host), member.pid)
            self.store.audit("kill", step=name, host=host, pids=[member.pid], why="sweep" if planned else "stop", gone=gone)
            done.append(f"stopped pid {member.pid} on {host}" if gone else f"pid {member.pid} on {host} is still running after SIGKILL")
        return "; ".join(done)

    def stop_record(self, name: str) -> dict | None:
        """What the cockpit recorded when it stopped the server `name` started (when, by whom, which pids), read now:
        None when it did not (or the step ran again since)."""
        result = self.results.get(name)
        record = result.evidence.get("stopped") if result is not None else None
        return dict(record) if isinstance(record, dict) else None

    def _invalidate_dependents(self, name: str, why: str) -> None:
        """The passed steps whose evidence rests on step `name` (a readiness check on its server) turn stale, saying why."""
        for spec in self.spec.steps:
            result = self.results.get(spec.name)
            if spec.name == name or result is None or result.state is not StepState.PASSED:
                continue
            try:
                rests = self.kind(spec).rests_on(self, spec)
            except CockpitError:
                continue
            if name in rests:
                self.store.audit("stale", step=spec.name, why=why)
                self.results[spec.name] = replace(result, state=StepState.STALE, message=f"stale: {why}; run it again once "
                                                                                        f"'{name}' has started its server again")

    def _record_stop(self, name: str, stopped_pids: list[tuple[str, int]], action: str) -> None:
        """The cockpit's own action is evidence: recorded in the step before the processes are signalled, so whoever
        watches the server (this process, a TUI, a later `cockpit server`) reads its end as stopped by you, never a
        crash; the step turns stale (it passed, and no longer holds), and the steps that rested on its server too."""
        planned = action == "the sweep's relaunch"
        what = "; ".join(f"pid {pid} on {host}" for host, pid in stopped_pids)
        when = self.clock()
        stopped = {"at": when, "by": "the sweep" if planned else "you", "pids": [pid for _, pid in stopped_pids],
                   "hosts": [host for host, _ in stopped_pids], "action": action}
        why = "relaunched by the sweep" if planned else f"stopped ({action})"
        self.results[name] = replace(self.results[name], state=StepState.STALE,
                                     message=f"server {why}: {what}; run the step to start it again",
                                     evidence={**self.results[name].evidence, "stopped": stopped})
        self._invalidate_dependents(name, f"its server ('{name}') was stopped by {stopped['by']} at {clock(when)}")
        self._changed()

    def _servers_among(self, host: str, pids: list[int]) -> list[tuple[str, list[tuple[str, int]]]]:
        """The launch steps whose running server has a process among `pids` on `host`: (step, those processes)."""
        from cockpit.hosts.procs import group_of

        found = []
        for spec in self.spec.steps:
            result = self.results.get(spec.name)
            if result is None or result.state is not StepState.PASSED or not self.kind(spec).launch:
                continue
            hit = [(m.host or spec.host, m.pid) for m in group_of(result.evidence) if (m.host or spec.host) == host and m.pid in pids]
            if hit:
                found.append((spec.name, hit))
        return found

    async def run_adhoc(self, spec: StepSpec, confirm: Confirm = deny) -> StepResult:
        """A step that is not the runbook's (the process table's kill): planned, shown and confirmed as the runbook's
        own are, audited alike, and kept out of the runbook's state."""
        kind = self.kind(spec)
        problem = kind.validate(spec)
        if problem:
            raise CockpitError(f"{spec.kind}: {problem}")
        context = self._context(confirm, None, spec.name)
        text, planned = await kind.plan(context, spec)
        if text is not None:
            if not await confirm(text):
                self.store.audit("declined", step=spec.name, host=spec.host, plan=text)
                return StepResult(StepState.FAILED, self.clock(), self.clock(), "not confirmed: nothing was done")
            self.store.audit("confirmed", step=spec.name, host=spec.host, plan=text)
        self.store.audit("run", step=spec.name, kind=spec.kind, host=spec.host, note="ad hoc")
        result = await kind.run(context, spec, planned)
        self.store.audit("result", step=spec.name, state=result.state.value, message=result.message, evidence=result.evidence)
        return result

    async def kill_processes(self, host: str, pids: list[int], confirm: Confirm = deny) -> StepResult:
        """Kill exactly these processes on a host, through kill_stale's plan: the user's own only, unless the host's
        `kill_any_user = true` allows others' (each shown as such before the question)."""
        config = self.hub.config.host(host)
        spec = StepSpec(f"kill-{host}-{'-'.join(map(str, pids))}", "kill_stale", host,
                        {"pids": list(pids), "any_user": bool(config.kill_any_user), "grace_s": 10.0})

        async def confirmed(text: str) -> bool:
            if not await confirm(text):
                return False
            self.refresh()  # what another cockpit launched since is in view
            for name, hit in self._servers_among(host, list(pids)):  # a launched server among them: stopped by you
                self._record_stop(name, hit, "the process table's kill")
            return True

        return await self.run_adhoc(spec, confirmed)

    def set_override(self, name: str, argv: list[str], why: str) -> None:
        """Replace a launch step's command line (a fix applied from a diagnosis); kept until reset."""
        self.spec.step(name)
        self.overrides[name] = list(argv)
        self.store.audit("override_argv", step=name, argv=argv, why=why)
        self._changed()

    def reset(self, name: str | None = None) -> None:
        self.refresh()  # what another cockpit recorded is in view, so the reset removes it too
        if name is None:
            self.results.clear()
            self.overrides.clear()
        else:
            self.spec.step(name)
            self.results.pop(name, None)
            self.overrides.pop(name, None)
        self.store.audit("reset", step=name)
        self._changed()

    # --- telemetry ------------------------------------------------------------------------------

    def observe(self, snapshot: HostSnapshot) -> list[str]:
        """The gates of this host that a sample newer than their pass contradicts: a pass turns stale
        (recorded, told to subscribers once); a gate this sample already invalidated is named again.
        Called for every snapshot the hub publishes (the runbook subscribes itself)."""
        contradicted: list[str] = []
        invalidated: list[str] = []
        if snapshot.sampled_at is None or not snapshot.state.reached:
            return contradicted
        for spec in self.gates():
            if snapshot.name not in self.kind(spec).hosts(spec) or self.consumed(spec, snapshot.name):
                continue
            result = self.results.get(spec.name)
            if result is None or result.state not in (StepState.PASSED, StepState.STALE) or snapshot.sampled_at <= (result.finished_at or 0):
                continue
            if result.state is StepState.STALE and not result.message.startswith("invalidated by telemetry"):
                continue
            reasons = self.kind(spec).contradicted_by(spec, snapshot)
            if not reasons:
                continue
            contradicted.append(spec.name)
            if result.state is StepState.PASSED:
                self.results[spec.name] = replace(result, state=StepState.STALE, message="invalidated by telemetry: " + "; ".join(reasons))
                self.store.audit("invalidated", step=spec.name, host=spec.host, reasons=reasons)
                invalidated.append(spec.name)
                self.invalidations.publish((spec.name, reasons))
        if invalidated:
            self._changed()
        return contradicted

    async def recheck_gates(self, timeout: float | None = None) -> list[str]:
        """One fresh sample of every host with a passed gate (what `plan show` and `plan run` do
        first, when no collector streams): a pass that no longer holds turns stale.  A host that
        cannot be sampled leaves its gates as they are (the launch re-verifies anyway)."""
        hosts = {s.host for s in self.gates() if self._passed(s.name)}

        async def sample(host: str) -> None:
            with contextlib.suppress(TransportError, CockpitError, OSError, asyncio.TimeoutError):
                snapshot = await self.hub.monitor_for(self.hub.config.host(host)).sample_once(timeout)
                self.hub.publish(snapshot)  # observed through the subscription

        await asyncio.gather(*(sample(h) for h in sorted(hosts)))
        return [s.name for s in self.gates() if self.results.get(s.name) and self.results[s.name].state is StepState.STALE]
