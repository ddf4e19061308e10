"""One training run watched: its log (followed by offset), its TensorBoard events, its checkpoints,
over the host's own transport.  `poll()` reads what is new and returns the run's status; what
changed since the last poll comes back as events (for alerts and the runbook)."""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from cockpit import lifecycle
from cockpit.drafter.acceptance import estimate
from cockpit.format import clock as _clock, duration
from cockpit.hosts.follow import LogFollower
from cockpit.hosts.liveness import Liveness, probe
from cockpit.hosts.oom import MemoryGroup, kernel_oom, memory_group
from cockpit.hosts.transport import Transport, TransportError
from cockpit.runs.checkpoints import Checkpoint, latest, scan
from cockpit.runs.parse import CRASH_KINDS, Flag, TrainingLog
from cockpit.runs.spec import RunSpec
from cockpit.runs.tfevents import EventReader
from cockpit.runs.totals import Totals, from_command, from_yaml, merged
from cockpit.where.adapters import adapter_for
from cockpit.where.follow import StreamFollower
from cockpit.where.state import ManagerState

# a run's states: the core's lifecycle (cockpit/lifecycle.py), less what only a server is (idle, hung)
STATES = tuple(s.name for s in lifecycle.STATES if s.name not in ("idle", "hung", "finishing"))  # finishing: running's phase
ENDED_STATES = lifecycle.TERMINAL
DEFAULT_CADENCE_S = 10.0  # how long a log may be silent while its run moves, when neither the log nor watching says
CONFIRM_AFTER_S = 0.25  # a look that found the trainer gone is followed this soon by the look that confirms it
ESTIMATE_MARGIN = 0.02  # an earlier checkpoint "better" only when its predicted acceptance is over 2 % above the newest's
MEASURED_MARGIN = 0.05  # or its measured acceptance 5 % above (a few hundred verify steps each: their noise is a few %)
MEMCG_EVERY_S = 10.0  # how often a living process's memory cgroup counter is read again (a kill it survived is no later OOM's)
ONE_SHOT_WAIT_S = 3.0  # the one-shot command's second look waits at most this long
ENDED_POLL_S = 10.0  # a run that ended is read this often, not every poll_s: its restart (its log growing again) is seen then


@dataclass
class RunEvent:
    kind: str  # finished, crashed, stalled, died, ended, resolved (a stall that cleared), checkpoint
    run: str
    text: str


@dataclass
class RunStatus:
    name: str
    host: str
    state: str = "unknown"
    phase: str = ""
    step: int | None = None
    total: int | None = None
    eta_s: float | None = None
    loss: float | None = None
    acc: float | None = None
    eval_loss: float | None = None
    per_position_acc: list = field(default_factory=list)
    per_position_source: str | None = None
    per_position_when: str | None = None
    estimate: dict | None = None
    per_checkpoint: dict | None = None  # which checkpoint to ship, by the acceptance each one's epoch predicts
    latest_checkpoint: dict | None = None
    checkpoints: list = field(default_factory=list)
    flags: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    history: list = field(default_factory=list)  # (step, loss, acc)
    finished: str | None = None
    read_error: str | None = None  # the host or file could not be read (exit 2)
    log_size: int | None = None
    updated_at: float = 0.0
    watches_checkpoints: bool = False  # an output_dir is configured
    evidence: str = ""  # what the state rests on, read in this poll
    process: dict | None = None  # liveness.Liveness.to_json(): the processes seen (or why none could be)
    eta_range: tuple | None = None
    eta_scope: str = "run"
    rate_source: str = ""
    totals: dict | None = None  # what the run's own command line / config file state
    where: dict | None = None  # where it runs (a Slurm job, a container, a pod) and what its manager said
    ended_between: tuple | None = None  # (its last sign of life, the first look that found it gone): when it ended
    looks: int = 1  # the looks a terminal state rests on (two, at least its cadence apart where no writer was seen)
    cadence_s: float | None = None  # how often its log is written while it moves (seen, or from its own words)

    def to_json(self) -> dict:
        return {
            "name": self.name, "host": self.host, "state": self.state, "phase": self.phase, "step": self.step, "total": self.total,
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
            "eta_range_s": None if self.eta_range is None else [round(x, 1) for x in self.eta_range], "eta_scope": self.eta_scope,
            "evidence": self.evidence, "process": self.process, "where": self.where, "totals": self.totals, "loss": self.loss, "acc": self.acc, "eval_loss": self.eval_loss,
            "per_position_acc": [round(a, 4) for a in self.per_position_acc], "per_position_source": self.per_position_source,
            "estimated_accept_length": self.estimate, "per_checkpoint": self.per_checkpoint, "latest_checkpoint": self.latest_checkpoint,
            "checkpoints": [{"path": c["path"], "complete": c["complete"], "why": c.get("why") or None} for c in self.checkpoints],
            "flags": [f.to_json() for f in self.flags],
            "notes": self.notes, "finished": self.finished, "read_error": self.read_error,
            "ended_between": None if self.ended_between is None else [_iso(t) for t in self.ended_between],
            "looks": self.looks, "cadence_s": None if self.cadence_s is None else round(self.cadence_s, 1),
        }

    @property
    def flagged(self) -> bool:
        return bool(self.flags) or self.state in lifecycle.ALARMS


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 10)}"


class RunWatcher:
    def __init__(self, spec: RunSpec, transport: Transport, clock=time.time, own_kills=None):
        self.spec = spec
        self.own_kills = own_kills  # (host) -> the cockpit's own kills there (the audit log's): its stop is "stopped by you"
        self._seen_pids: set[int] = set()  # every pid seen as this run's (writers, the pid file's, the pattern's)
        self._pid_file_pid: int | None = None  # the pid its pid file named when its process was found gone
        self.transport = transport
        self.clock = clock
        self.log = TrainingLog(clock=clock, stall_after_s=spec.stall_after_s, total_hint=spec.total_steps)
        self.follower = LogFollower(transport, spec.log) if spec.log else None
        self.manager = adapter_for(spec.placement) if spec.placement else None
        self.manager_state: ManagerState | None = None
        self.stream: StreamFollower | None = None  # the manager's log stream (a container's, a pod's) when no file is named
        self._known_pids: tuple[int, ...] = ()  # pids seen writing the log: looked up again when they no longer show
        self._writer_seen = False
        self._grew = False  # the log grew in this poll
        self._grew_at: float | None = None  # when it last grew while watched
        self._gpus_said = ""  # the host's GPU compute processes, looked at when nothing else can tell
        self._events_file: str | None = None
        self._events = EventReader()
        self._known: dict[str, Checkpoint] = {}
        self._checkpoints: list[Checkpoint] = []
        self._seen_checkpoints: set[str] | None = None
        self._last_state: str | None = None
        self._missing_note: str | None = None
        self._live: Liveness | None = None
        self._log_mtime: float | None = None
        self._seen_alive_at: float | None = None  # the last poll that saw the run's process
        self._cpu: tuple[float, float] | None = None  # (when, CPU seconds) of the last poll that saw it
        self._cpu_rising: bool | None = None
        self._totals: Totals | None = None
        self._gone_looks = 0  # looks in a row that found it gone (and its log not grown)
        self._memcg: MemoryGroup | None = None  # its process's memory cgroup and OOM kills, as last seen alive
        self._memcg_at = 0.0
        self._oom_said: str | None = None  # the kernel's word that it killed the run's process for memory
        self._first_gone_look: float | None = None  # the first of them
        self._growths: deque[float] = deque(maxlen=12)  # when its log was seen growing (the cadence, watched)
        self._confirming = False  # the last look found it gone once: the next one decides
        self.status = RunStatus(spec.name, spec.host)
        self.polled_at = float("-inf")  # when watch_runs last polled it (time.monotonic)

    @property
    def checks_process(self) -> bool:
        return bool(self.spec.log or self.spec.pid_file or self.spec.process)

    async def _poll_manager(self, now: float, catch_up: bool) -> None:
        """Its manager's word, and the log the manager gives when no file is named (Slurm's StdOut file, a
        container's or a pod's log stream)."""
        assert self.manager is not None
        state = await self.manager.look(self.transport)
        self.manager_state = state
        if state.phase == "running":
            self._seen_alive_at = now  # its manager saw it run: a sign of life as good as its pid (an end after it is seen)
        if self.spec.log is None and state.log and self.follower is None:
            self.follower = LogFollower(self.transport, state.log)  # Slurm's StdOut: a file, followed as one
        if self.spec.log is None and self.follower is None and state.phase != "unknown" and self.manager.log_argv(None) is not None:
            if self.stream is None:
                self.stream = StreamFollower(self.transport, self.manager.log_argv)
            lines = await self.stream.poll(restart=state.phase in ("running", "pending") or self.stream.started == 0)
            if catch_up or state.terminal or state.phase == "gone":
                # a one-shot command, or a workload that ended: its log is read before its end is said (the stream of
                # an exited container ends by itself; a running one's gives what it has); a few seconds at most
                for _ in range(50):
                    if not self.stream.running or (lines and not state.terminal):
                        break
                    await asyncio.sleep(0.1)
                    lines += await self.stream.poll(restart=False)
            if lines:
                self._grew, self._grew_at = True, now
                self.log.feed(lines, now)

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.close()

    async def poll(self, catch_up: bool = False) -> tuple[RunStatus, list[RunEvent]]:
        """Read what is new (all of it when `catch_up`: a one-shot command) and say what it means."""
        now = self.clock()
        error = None
        self._grew = False
        try:
            if self.manager is not None:
                await self._poll_manager(now, catch_up)
            if self.follower is not None:
                await self._poll_log(now, catch_up)
            if self.spec.output_dir:
                await self._poll_events()
                self._checkpoints = await scan(self.transport, self.spec.output_dir, self._known)
        except TransportError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"{self.spec.host}: {exc}"
        if self.checks_process:
            # the same poll that read the log looks for its process: a state is what the host shows now
            self._live = await probe(self.transport, self.spec.log, self.spec.pid_file, self.spec.process, clock=self.clock,
                                     known_pids=self._known_pids)
            self._saw(self._live, now)
            if self._live.state == "alive" and self._live.procs and self.manager is None:
                first = self._live.procs[0].pid
                if self._memcg is None or self._memcg.pid != first or now - self._memcg_at >= MEMCG_EVERY_S:
                    self._memcg, self._memcg_at = await memory_group(self.transport, first), now
            if self._totals is None and self._live.procs:
                await self._read_totals()
            uncertain = (self._live.state == "unknown" or (self._live.state == "gone" and not self._live.complete)) and not self._grew
            self._gpus_said = await self._gpu_processes() if uncertain and not (self.manager_state and
                                                                                self.manager_state.phase == "running") else ""
        if self._grew:
            self._growths.append(now)
        mgr = self.manager_state
        gone_now = (mgr is not None and mgr.phase == "gone") or (
            mgr is None and self._live is not None and self._live.state == "gone" and self._live.complete)
        if gone_now and self.spec.pid_file and self._pid_file_pid is None:
            with contextlib.suppress(TransportError, OSError, ValueError):
                self._pid_file_pid = int((await self.transport.read_range(self.spec.pid_file, 0, 64)).decode("ascii", "replace").strip())
        if gone_now and not self._grew and self._gone_looks < 2 and self._oom_said is None:
            await self._read_kernel(now)
        if gone_now and not self._grew:
            self._gone_looks += 1
            self._first_gone_look = self._first_gone_look or now
        else:
            self._gone_looks, self._first_gone_look = 0, None
        status = self._status(now, error)
        events = self._events_since(status)
        self.status = status
        return status, events

    async def _read_kernel(self, now: float) -> None:
        """A look that found the run's process gone asks the kernel whether it killed it for memory (its log names the
        pid; the memory cgroup it was seen in counted a kill since): SIGKILL by the OOM killer is an OOM, a SIGKILL alone
        is not."""
        if self.manager is not None:
            return  # its manager says OOM where it was one (OOMKilled, OUT_OF_MEMORY)
        pids = set(self._seen_pids) | ({self._pid_file_pid} if self._pid_file_pid else set())
        if not pids and self._memcg is None:
            return
        last = self._seen_alive_at or self._log_mtime or (now - 600.0)
        self._oom_said = await kernel_oom(self.transport, frozenset(pids), self._memcg, within_s=max(10.0, now - last + 5.0))

    async def _poll_log(self, now: float, catch_up: bool) -> None:
        assert self.follower is not None
        before = self.follower.offset
        while True:
            update = await self.follower.poll()
            if update.event not in ("appeared", "missing") and (update.lines or update.partial or self.follower.offset != before):
                self._grew, self._grew_at = True, now  # (the first read is what was there, not growth seen)
            if update.event in ("truncated", "rotated"):
                self.log.reset()
                self.log.notes.append(f"the log was {update.event} at {time.strftime('%H:%M:%S', time.localtime(now))}: read from its start")
            if update.event == "missing":
                mgr = self.manager_state
                if mgr is not None and mgr.phase == "pending" and not self.log.lines_seen:
                    self._missing_note = None  # a job waiting in the queue has written nothing yet: that is no read error
                    return
                self._missing_note = f"{self.follower.path} is not there" + (" (any more)" if self.log.lines_seen else "")
                return
            self._missing_note = None
            if update.mtime:
                self._log_mtime = update.mtime
            first = update.event == "appeared"
            self.log.feed(update.lines, now)
            self.log.peek(update.partial, now)
            if first and self.log.last_progress_at is not None and update.mtime:
                # what an old log says happened when it was written, not when we read it
                self.log.last_progress_at = min(self.log.last_progress_at, update.mtime)
            if self.follower.skipped and first:
                self.log.notes.append(f"the log is large: read from its last {self.follower.tail_bytes >> 20} MiB")
            if not catch_up or update.size is None or (self.follower.offset or 0) >= update.size:
                return

    async def _poll_events(self) -> None:
        if not self.spec.output_dir:
            return
        candidates = []
        for runs_dir in (posixpath.join(self.spec.output_dir, "runs"),):
            for entry in await self.transport.list_dir(runs_dir) or []:
                if entry.name.startswith("events.out.tfevents.") and not entry.is_dir:
                    candidates.append((entry.mtime, entry.name, posixpath.join(runs_dir, entry.name), entry.size))
        if not candidates:
            return
        _, _, path, size = max(candidates)
        if path != self._events_file or size < self._events.offset:
            self._events_file, self._events = path, EventReader()
        while size > self._events.read_to:
            start = self._events.read_to
            data = await self.transport.read_range(path, start, min(size - start, 4 << 20))
            if not data:
                break
            scalars = self._events.feed(data)
            self.log.feed_scalars(scalars)

    def _saw(self, live: Liveness, now: float) -> None:
        if live.state == "alive":
            self._seen_alive_at, self._pid_file_pid, self._oom_said = now, None, None
            if len(self._seen_pids) < 256:
                self._seen_pids.update(live.pids)
            if live.how.startswith("processes writing") and live.pids:
                self._known_pids, self._writer_seen = tuple(dict.fromkeys((*live.pids, *self._known_pids)))[:16], True
            cpu = live.cpu_s
            if cpu is not None:
                if self._cpu is not None and now > self._cpu[0]:
                    self._cpu_rising = cpu > self._cpu[1]
                self._cpu = (now, cpu)
        elif live.state == "gone" and self._seen_alive_at is not None:
            self._cpu, self._cpu_rising = None, None

    async def _read_totals(self) -> None:
        """Once, from the run's first process seen: its command line, and the config file it names."""
        cwd = posixpath.dirname(self.spec.log) if self.spec.log else None
        if self._live is None or not self._live.procs:
            return
        trainer = next((p for p in self._live.procs if "train" in p.args), self._live.procs[0])
        totals = from_command(trainer.args, cwd)
        if totals.config:
            with contextlib.suppress(TransportError, OSError):
                text = (await self.transport.read_range(totals.config, 0, 256 * 1024)).decode("utf-8", "replace")
                totals = merged(totals, from_yaml(text), f"{totals.config}")
        self._totals = totals
        self.log.learn_totals(totals.num_epochs, totals.total_steps)

    def complete_checkpoints(self) -> list[Checkpoint]:
        """The complete checkpoints the last look found, oldest first."""
        return sorted((c for c in self._checkpoints if c.complete), key=lambda c: c.order)

    def _final_checkpoint(self) -> Checkpoint | None:
        """The checkpoint that shows the run finished: complete, and of its last epoch (SpecForge's epoch_N with
        N + 1 epochs), or of its last step (E4's RUN-stepN), or written after its last progress."""
        newest = latest(self._checkpoints)
        if newest is None:
            return None
        log = self.log
        epoch, step = newest.order
        if (log.num_epochs and newest.name.startswith("epoch_") and epoch >= log.num_epochs - 1
                and (step == 0 or (log.step is not None and step >= log.step))):
            return newest  # epoch_N (E1/E2), or epoch_N_step_M at the step its last bar reached (E3)
        if log.num_epochs and newest.name.startswith("epoch_") and epoch < log.num_epochs - 1:
            return None  # an earlier epoch's save, however recent its files
        if log.step is not None and newest.name.rsplit("-step", 1)[-1].isdigit() and step >= log.step:
            return newest
        if log.last_progress_at is not None and newest.mtime and newest.mtime >= log.last_progress_at - 1:
            return newest
        return None

    def _completion(self, done: str | None = None) -> str | None:
        """The run's own evidence that it completed: the log's completion line (the last epoch saved, `Training
        completed`), or its final checkpoint complete.  None when there is none (a weak last word, `lr 0.0`, is none)."""
        log = self.log
        said = log.finished or ""
        if said.startswith("the last epoch") or "Training completed" in said:
            return f"the log: {log.finished}"
        final = self._final_checkpoint()
        if final is not None:
            log.finished = f"{done or 'the log: ' + said} and its final checkpoint {final.name} is complete"
            return log.finished
        return None

    def _ended(self, now: float, done: str) -> tuple[str, str]:
        """The trainer has exited after what looks like its end (`done`): finished with evidence of completion
        (the log's own completion line, or the final checkpoint complete), else ended: whether it finished or
        died cannot be told."""
        completion = self._completion(done)
        if completion is not None:
            return "finished", f"{completion}; the trainer has exited ({self._between_words()})"
        where = ("" if self.spec.output_dir else " (set output_dir to see its checkpoints)")
        return "ended", (f"{done} and the trainer exited ({self._between_words()}), but no complete final checkpoint "
                         f"confirms it finished{where}: ended, finished or not cannot be told")

    def _manager_words(self) -> str:
        return f"; {self.manager_state.describe()}" if self.manager_state is not None else ""

    def _decide(self, now: float, error: str | None) -> tuple[str, str]:
        """(state, the evidence it rests on): the manager's word, the log, and the processes seen, together.
        Died only where the cockpit could see everything (or the manager says so); finished only with evidence
        of completion; where it cannot know, unknown or ended, and why."""
        log, live, mgr = self.log, self._live, self.manager_state
        self._confirming = False  # set again below only by a look that found it gone and awaits the look that decides
        word = log.state(now)  # what the log alone says: crashed, finished, stalled, running, unknown
        said = f"; its last line: {log.last_line[:200]}" if log.last_line else ""
        if word == "crashed":
            crash = next((f for f in log.flags if f.kind in CRASH_KINDS), None)
            tail = f"; its processes still run ({live.describe()})" if live and live.state == "alive" else ""
            return "crashed", (f"the log: {crash.line[:200]}" if crash else "the log shows a crash") + tail + self._manager_words()
        alive_by = None  # what shows it alive, when something does
        if mgr is not None:
            if mgr.phase in ("failed", "finished", "gone") and (stop := self._stopped_by_cockpit()) is not None:
                return "stopped", stop + f"; {mgr.describe()}"  # the cockpit's own kill, whatever the exit it left
            if mgr.phase == "failed" and mgr.oom:
                return "oom", mgr.describe() + said  # out of memory as the manager says it (a SIGKILL alone is not)
            if mgr.phase == "failed" and mgr.state.upper() == "CANCELLED":
                return "cancelled", mgr.describe() + said
            if mgr.phase == "failed":
                return "died", mgr.describe() + said
            if mgr.phase == "finished":
                return "finished", mgr.describe() + (f"; the log: {log.finished}" if log.finished else "")
            if mgr.phase == "pending":
                return "pending", mgr.describe()
            if mgr.phase == "running":
                alive_by = mgr.describe()
        if error and word not in ("finished",) and alive_by is None:
            return "unknown", f"cannot read {self.spec.host}: {error}"
        if alive_by is None and live is not None and live.state == "alive":
            alive_by = live.describe()
        if alive_by is None and self._grew:
            alive_by = "the log grew since the last look (its writer lives, whoever it is)"
        hidden = live is not None and (live.state == "unknown" or (live.state == "gone" and not live.complete))
        cadence = self.cadence_s()
        silence = self._silence(now)
        if alive_by is None and hidden and silence is not None and 0 <= silence <= cadence:
            # its processes cannot all be seen, but its log was written within its cadence: someone writes it
            alive_by = f"the log was written {silence:.0f} s ago (its writer lives, whoever it is: {live.why if live else ''})"
        if alive_by is not None:
            if word == "finished":
                return "running", f"the log says it is done ({log.finished}) but {alive_by}: finishing (final eval or save?)"
            if log.last_progress_at is None:
                return "starting", f"{alive_by}; no progress line yet"
            if word == "stalled":
                cpu = {True: "its CPU time still rises (busy in a step, a save or a collective?)",
                       False: "its CPU time is flat (waiting on a hung rank, a collective or I/O?)"}.get(self._cpu_rising, "") if self._cpu_rising is not None else ""
                return "stalled", f"{alive_by} is alive, but the log has not moved for {self._ago(now)[:-4]}" + (f"; {cpu}" if cpu else "")
            return "running", f"{alive_by}; last progress {self._ago(now)}"
        gone_by = None  # what shows it gone, all of it seen
        if mgr is not None and mgr.phase == "gone":
            gone_by = mgr.why or mgr.describe()
        elif live is not None and live.state == "gone" and live.complete:
            gone_by = f"{live.how} found nothing" + (f": {live.why}" if live.why else "")
        if gone_by is None:
            # nothing shows it alive, and nothing could see all of what would: it cannot be told
            if word == "finished" and log.finished:
                done = self._completion()
                if done is not None:
                    return "finished", done + (f" (its process could not be checked: {live.why})" if live else "")
            reasons = [r for r in (mgr.describe() if mgr is not None and mgr.phase == "unknown" else "",
                                   live.describe() if live is not None else "") if r]
            if live is None and mgr is None:
                if word in ("running", "stalled"):
                    return "unknown", ("whether the trainer still runs cannot be checked: no log, pid_file or process is "
                                       f"configured for {self.spec.name} (its last progress {self._ago(now)})")
                return "unknown", ("nothing to watch the trainer by: set log, pid_file or process in [runs." + self.spec.name + "]"
                                   if not self._checkpoints else "checkpoints only: set log, pid_file or process to see the trainer")
            hint = ("; set pid_file or process (command lines are world-readable), or say where it runs (slurm_job, container, "
                    "pod)") if mgr is None else ""
            quiet = "" if silence is None else (
                f"no word for {silence:.0f} s (its cadence {cadence:.0f} s), and the process is not visible to {self._viewer()}: "
                if silence >= 0 else f"its log's last write is stamped {-silence:.0f} s ahead of this machine's clock (the "
                f"host's clock runs ahead?), and the process is not visible to {self._viewer()}: ")
            return "unknown", (quiet + "whether the trainer still runs cannot be seen: " + "; ".join(reasons) +
                               f"; the log's last progress {self._ago(now)}" + self._gpu_note() + hint)
        silent = silence is None or silence > cadence
        if (self._grew_at is not None and not self._writer_seen and live is not None and live.how.startswith("processes writing")
                and mgr is None and not silent):
            # it grew while watched and nobody ever held it: a trainer that opens its log for each line
            return "unknown", (f"the log grew {duration(now - self._grew_at)} ago with no process holding it open (a trainer that "
                               "opens its log for each record?): whether it still runs cannot be told from its descriptors; "
                               "set pid_file or process")
        # gone, and the cockpit saw all it needed to: a terminal state once two looks say so, the second at least the
        # log's cadence after its last write where no process of it was ever seen (a log written a moment ago by a
        # trainer that opens it for each record has no holder either)
        seen = self._seen_alive_at is not None
        if self._gone_looks < 2 or (not seen and not silent):
            self._confirming = True
            first = _clock(self._first_gone_look or now)
            if not seen and not silent:
                return "unknown", (f"no process holds the log ({gone_by}), but it was written {silence:.1f} s ago, within its "
                                   f"cadence ({cadence:.0f} s): a trainer that opens its log for each record, or one that has just "
                                   "ended; a look after its cadence decides")
            return "unknown", f"its process was not found at {first} ({gone_by}): one look; the next decides"
        stop = self._stopped_by_cockpit()
        if stop is not None and word != "finished" and not log.bar_complete:
            return "stopped", stop
        if self._oom_said is not None:
            return "oom", f"{self._oom_said}; {self._between_words()}" + said
        if word == "finished":
            return self._ended(now, f"the log: {log.finished}")
        if log.bar_complete:
            return self._ended(now, f"the training bar reached its last step ({log.step}/{log.total})")
        if not log.lines_seen and mgr is None:
            return "unknown", f"not running: {gone_by}, and the log says nothing yet"
        mid = log.mid_run
        if mid is not None and mgr is not None and mgr.phase == "gone" and self.stream is not None:
            # its log was its manager's (`docker logs`), and went with it: what it wrote after the last look (a last
            # word, a completion line) cannot be read, so an end mid-run is not known to be abnormal
            return "ended", (f"the trainer is gone with its log ({gone_by}; {self._between_words()}): its last lines "
                             f"after the last look went with it, so how it ended cannot be told; {mid}" + said)
        if mid is None:
            return "ended", (f"the trainer exited ({gone_by}; {self._between_words()}) and its log cannot place where it stopped "
                             "against the run's end (no total in its args, command line or config, no final bar): ended, "
                             "finished or not cannot be told; set total_steps or output_dir" + said)
        return "died", self._died_words(now, gone_by) + f"; {mid}" + said

    def _stopped_by_cockpit(self) -> str | None:
        """The cockpit's own kill of this run's process since it was last seen (its audit log): the words of "stopped by
        you", else None.  A kill is this run's when it hit a pid seen as this run's, the pid its pid file names, a
        process that held its log open or whose command line names its log, one its command pattern matches, or one in
        the cgroup of its container, Slurm job or pod."""
        if self.own_kills is None:
            return None
        since = (self._seen_alive_at or self._log_mtime or 0.0) - 600.0
        pattern = re.compile(self.spec.process) if self.spec.process else None
        mark = self.manager_state.cgroup_mark if self.manager_state is not None else ""  # its container's, job's, pod's
        for record in reversed(self.own_kills(self.spec.host)):
            if float(record.get("time") or 0) < since:
                continue
            pids = [p for p in record.get("pids") or [] if isinstance(p, int)]
            files = record.get("files") if isinstance(record.get("files"), dict) else {}
            commands = record.get("commands") if isinstance(record.get("commands"), dict) else {}
            cgroups = record.get("cgroups") if isinstance(record.get("cgroups"), dict) else {}
            ours = [p for p in pids if p in self._seen_pids or p == self._pid_file_pid
                    or (self.spec.log and (self.spec.log in (files.get(str(p)) or []) or self.spec.log in str(commands.get(str(p), ""))))
                    or (pattern is not None and pattern.search(str(commands.get(str(p), ""))))
                    or (mark and (mark in str(cgroups.get(str(p), "")) or mark.replace("-", "_") in str(cgroups.get(str(p), ""))))]
            if not ours:
                continue
            by = {"stop": "plan stop", "sweep": "the sweep's relaunch", "relaunch": "a relaunch"}.get(
                str(record.get("why")), f"step '{record.get('step')}'" if record.get("step") else "the cockpit")
            if str(record.get("step", "")).startswith("kill-"):
                by = "the process table's kill"
            return (f"stopped by you at {_clock(float(record.get('time') or 0))} ({by}: SIG{record.get('signal') or 'TERM'} "
                    f"pid {', '.join(map(str, ours))})")
        return None

    def cadence_s(self) -> float:
        """How long the log may be silent while the run moves: the longest gap between its growths seen while watched
        (the last few), else what its own words say (a training bar's rate), else DEFAULT_CADENCE_S; within [1 s, the
        stall threshold]."""
        times = list(self._growths)
        gaps = [b - a for a, b in zip(times, times[1:])]
        own = self.log.cadence_s()
        found = max(gaps) if len(gaps) >= 2 else (own + 1.0 if own is not None else DEFAULT_CADENCE_S)
        return min(max(found, 1.0), max(self.spec.stall_after_s, DEFAULT_CADENCE_S))

    @property
    def confirming(self) -> bool:
        """The last look found the trainer gone, and the look that decides is still to come."""
        return self._confirming

    def wait_hint_s(self) -> float:
        """How soon a look could decide what the last one could not."""
        if self._log_mtime is None or self._seen_alive_at is not None:
            return CONFIRM_AFTER_S
        return max(CONFIRM_AFTER_S, self.cadence_s() - (self.clock() - self._log_mtime) + 0.1)

    def _viewer(self) -> str:
        return getattr(self.transport, "_acting_user", None) or "this user"  # asked by the probe, once per connection

    def _last_sign(self) -> tuple[float, str] | None:
        """Its last sign of life: the last look that saw its process, or its log's last write, whichever came later."""
        signs = [(t, what) for t, what in ((self._seen_alive_at, "the last look that saw it running"),
                                           (self._log_mtime, "its log's last write")) if t is not None]
        return max(signs) if signs else None

    def _between_words(self) -> str:
        """When it ended: after its last sign of life, before the first look that found it gone (never the time of this look)."""
        last = self._last_sign()
        first = self._first_gone_look
        if first is None:
            return "when it ended is not known"
        if last is None:
            return f"ended before {_clock(first)} (the first look that found it gone)"
        return f"ended between {_clock(last[0])} ({last[1]}) and {_clock(first)} (the first look that found it gone)"

    def _died_words(self, now: float, gone_by: str) -> str:
        unseen = ("; whether the kernel's OOM killer ended it cannot be asked: its pid was never seen (set pid_file)"
                  if not self._seen_pids and not self._pid_file_pid and self.manager is None else "")
        return f"the trainer ended with no last word: {self._between_words()} ({gone_by}){unseen}"

    def _gpu_note(self) -> str:
        return self._gpus_said

    async def _gpu_processes(self) -> str:
        """What the host's GPUs show when /proc cannot tell (a container's trainer, another user's): their compute
        processes, which any user may list.  Evidence that something still computes there, not that it is this run."""
        argv = [self.transport.host.nvidia_smi, "--query-compute-apps=pid,used_memory,process_name", "--format=csv,noheader,nounits"]
        try:
            result = await self.transport.run(argv, timeout=30)
        except (TransportError, OSError):
            return ""
        if result.exit_status != 0:
            return ""
        rows = [[c.strip() for c in line.split(",", 2)] for line in result.stdout.splitlines() if line.strip()]
        if not rows:
            return f"; no compute process on the GPUs of {self.spec.host}"
        shown = ", ".join(f"pid {r[0]} ({r[1]} MiB{', ' + r[2] if len(r) > 2 and r[2] else ''})" for r in rows[:4])
        return f"; the GPUs of {self.spec.host} hold compute processes ({shown}{' ...' if len(rows) > 4 else ''}): maybe this run's"

    def _ago(self, now: float) -> str:
        if self.log.last_progress_at is None:
            return "never"
        return f"{duration(max(0.0, now - self.log.last_progress_at))} ago"

    def _silence(self, now: float) -> float | None:
        """Seconds since the log's last write, as of this look.  `now` is when the look began; a trainer that writes
        while the log is being read (through SSH, on a loaded host) stamps it after that: a write during the look, 0 s
        ago (it read "no word for -0 s" and left the run unknown while its log grew).  A stamp later still than the look's
        end (plus 1 s of the file system's timestamp grain) is another clock's and stays what it says."""
        if self._log_mtime is None:
            return None
        silence = now - self._log_mtime
        if silence < 0 and -silence <= (self.clock() - now) + 1.0:
            return 0.0
        return silence

    def _status(self, now: float, error: str | None) -> RunStatus:
        log = self.log
        status = RunStatus(self.spec.name, self.spec.host, updated_at=now, read_error=error,
                           watches_checkpoints=bool(self.spec.output_dir))
        status.state, status.evidence = self._decide(now, error)
        status.cadence_s = self.cadence_s()
        if status.state in ("died", "ended", "finished", "stopped") and self._first_gone_look is not None:
            sign = self._last_sign()
            status.ended_between = (sign[0] if sign else None, self._first_gone_look)
            status.looks = self._gone_looks
        status.process = self._live.to_json() if self._live is not None else None
        if self.spec.placement is not None:
            status.where = {**self.spec.placement.to_json(),
                            "manager": self.manager_state.to_json() if self.manager_state is not None else None}
        status.totals = self._totals.to_json() if self._totals is not None else None
        status.phase, status.step, status.total = log.phase, log.step, log.total
        if status.state == "running" and log.finished:
            status.phase = "finishing"  # the log's last word is written, the trainer still up (final eval or save)
        if status.step is None and log.tb_step is not None:
            status.step = log.tb_step
        if status.state == "running" and status.phase != "finishing":
            status.eta_s, status.eta_range, status.eta_scope, status.rate_source = log.eta_s, log.eta_range, log.eta_scope, log.rate_source
        if status.state in ("running", "starting") and status.total is None and status.step is not None and not self.spec.total_steps:
            hint = ""
            if self._totals and self._totals.num_epochs:
                hint = f" (its {self._totals.source} says {self._totals.num_epochs} epochs; steps per epoch are not in its log)"
            log_note = f"total steps unknown{hint}: set total_steps in [runs.{self.spec.name}] for an ETA"
            if log_note not in log.notes:
                log.notes.append(log_note)
        status.loss, status.acc, status.eval_loss = log.loss, log.acc, log.eval_loss
        positions, source = log.positions()
        status.per_position_acc, status.per_position_source = list(positions), source
        status.per_position_when = log.per_position_step.get(source) if source else None
        found = estimate(positions, self.spec.depth)
        if found is not None:
            status.estimate = {"with_bonus": round(found.with_bonus, 4), "without_bonus": round(found.without_bonus, 4),
                               "depth": found.depth, "source": source}
        status.flags = [f for f in log.current_flags(now) if f.kind != "stalled"]
        if status.state == "stalled":
            status.flags.append(Flag("stalled", "", status.evidence))
        elif status.state == "died":
            status.flags.append(Flag("died", log.last_line[:500], status.evidence))
        status.notes = [n for n in log.notes if status.state in ("running", "starting") or not n.startswith("total steps unknown")]
        if log.optimizer_steps and log.total and log.total != log.optimizer_steps:
            # the bar counts batches (step 240/240) where the trainer's total counts optimizer steps (30)
            status.notes = [f"{n}; the progress counts batches ({log.total}): {log.total / log.optimizer_steps:g} to an optimizer "
                            "step (gradient accumulation)" if n.startswith(f"{log.optimizer_steps} optimizer steps") else n
                            for n in status.notes]
        if self._missing_note:
            status.notes.insert(0, self._missing_note)
            if not log.lines_seen and not self.spec.output_dir:
                status.read_error = status.read_error or self._missing_note
                status.notes.remove(self._missing_note)  # said once, as what could not be read
        status.history = [(p.step, p.loss, p.acc) for p in log.history]
        status.finished = log.finished
        status.checkpoints = [c.to_json() for c in self._checkpoints]
        status.per_checkpoint = self._per_checkpoint()
        newest = latest(self._checkpoints)
        if newest is not None:
            status.latest_checkpoint = {**newest.to_json(), "verdict": newest.verdict(*self.spec.judge())}
        elif self._checkpoints:
            last = self._checkpoints[-1]
            status.latest_checkpoint = {**last.to_json(), "verdict": last.verdict(*self.spec.judge())}
        status.log_size = self.follower.offset if self.follower else None
        return status

    def _per_checkpoint(self) -> dict | None:
        """Which checkpoint to ship (issue 51 item 4): each complete checkpoint with the acceptance the engine measured
        serving it (`cockpit bench checkpoints`, in the benchmark store) and the estimate its epoch's accuracies give at
        the serving depth; the best, by what was measured where anything was (else by the estimate), and whether an
        earlier one beats the newest (by more than the margin of its basis: the accuracies of a late epoch, or what it
        serves at, can fall while the loss still does).  A measurement of a checkpoint written again since is not its."""
        from cockpit.bench.store import checkpoint_runs

        by_epoch = self.log.epoch_accuracies()
        measured = checkpoint_runs(self.spec.name)
        rows: list[dict[str, Any]] = []
        for checkpoint in self.complete_checkpoints():
            row: dict[str, Any] = {"checkpoint": checkpoint.name, "path": checkpoint.path, "estimate": None, "source": None,
                                   "measured": None}
            epoch = checkpoint.order[0]  # SpecForge saves epoch_K after the epoch it prints as [K+1/N]
            accs = None
            if checkpoint.name.startswith("epoch_") and epoch + 1 in by_epoch:
                source, accs = by_epoch[epoch + 1]
                found = estimate(accs, self.spec.depth)
                if found is not None:
                    row.update(epoch=epoch, estimate=round(found.with_bonus, 4), source=source)
            run = measured.get(checkpoint.path)
            if run is not None and run.get("accept_length") is not None:
                if abs(float(run.get("checkpoint_mtime") or 0.0) - checkpoint.mtime) > 1.0:
                    row["measured_stale"] = "written again since it was measured: measure it again"
                else:
                    row.update(measured=round(float(run["accept_length"]), 4), measured_at=run.get("time"),
                               measured_by=f"{run.get('engine') or 'the engine'}, {run.get('requests')} requests each", file=run.get("file"))
                    steps = (run.get("depth") or {}).get("steps") if isinstance(run.get("depth"), dict) else None
                    at = estimate(accs, steps) if accs is not None and isinstance(steps, int) else None
                    if at is not None:  # the estimate beside what was measured is at the depth it was served with (as far
                        # as accuracies are known: the positions it covers)
                        row.update(measured_depth=steps, estimate_depth=at.depth, estimate_at_measured=round(at.with_bonus, 4))
            if row["estimate"] is not None or row["measured"] is not None:
                rows.append(row)
        if not rows:
            return None
        basis = "measured" if any(r["measured"] is not None for r in rows) else "estimate"
        scored = [r for r in rows if r[basis] is not None]
        best, newest = max(reversed(scored), key=lambda r: r[basis]), scored[-1]  # a tie: the newer
        margin = MEASURED_MARGIN if basis == "measured" else ESTIMATE_MARGIN
        earlier = best is not newest and best[basis] > newest[basis] * (1 + margin)
        how = f"measured by serving: {newest.get('measured_by')}" if basis == "measured" else "estimated from accuracy"
        verb = "measures" if basis == "measured" else "predicts"
        words = (f"{best['checkpoint']} {verb} {best[basis]:.2f}, the newest {newest['checkpoint']} {newest[basis]:.2f}: "
                 f"ship {best['checkpoint']}" if earlier else
                 f"ship {newest['checkpoint']} ({verb} {newest[basis]:.2f}" + (f"; the best of {len(scored)} checkpoints)" if len(scored) > 1 else ")"))
        return {"rows": rows, "basis": basis, "ship": best["checkpoint"] if earlier else newest["checkpoint"], "earlier_better": earlier,
                "words": f"{words}; {how}" if basis == "measured" else f"{words} ({how})"}

    def _events_since(self, status: RunStatus) -> list[RunEvent]:
        events = []
        name = self.spec.name
        # what the first read finds is the run's state, not news: only changes seen while watching alert
        if self._last_state is not None and status.state != self._last_state and not self._confirming:
            if status.state == "finished":
                events.append(RunEvent("finished", name, f"training run {name} finished: {status.finished}"))
            elif status.state == "crashed":
                crash = next((f for f in status.flags if f.kind != "stalled"), None)
                events.append(RunEvent("crashed", name, f"training run {name} crashed: {crash.message if crash else 'see its log'}"))
            elif status.state == "stalled":
                events.append(RunEvent("stalled", name, f"training run {name} stalled: {status.evidence}"))
            elif status.state == "died":
                events.append(RunEvent("died", name, f"training run {name} died: {status.evidence}"))
            elif status.state == "oom":
                events.append(RunEvent("oom", name, f"training run {name} ran out of memory: {status.evidence}"))
            elif status.state == "cancelled":
                events.append(RunEvent("cancelled", name, f"training run {name} was cancelled: {status.evidence}"))
            elif status.state == "ended":
                events.append(RunEvent("ended", name, f"training run {name} ended: {status.evidence}"))
            if self._last_state == "stalled" and status.state in ("running", "starting"):
                events.append(RunEvent("resolved", name, f"training run {name} moves again: {status.evidence}"))
        if not self._confirming:  # a look that awaits its confirmation is no change yet: the state before it stands
            self._last_state = status.state
        complete = {c["path"] for c in status.checkpoints if c["complete"]}
        if self._seen_checkpoints is not None:
            for path in sorted(complete - self._seen_checkpoints):
                checkpoint = next(c for c in status.checkpoints if c["path"] == path)
                layout = checkpoint["key_layout"] or ("training state: export first" if checkpoint["needs_export"] else "?")
                events.append(RunEvent("checkpoint", name, f"training run {name}: new checkpoint {path} ({layout})"))
        self._seen_checkpoints = complete
        return events


async def look_once(watcher: RunWatcher, no_wait: bool = False, max_wait: float = ONE_SHOT_WAIT_S) -> RunStatus:
    """A one-shot look at a run (the CLI's), with the second look an ending needs taken here: a terminal state rests
    on two looks, the second at most `max_wait` later; `no_wait` takes one and says so."""
    try:
        status, _ = await watcher.poll(catch_up=True)
        waited = 0.0
        while watcher.confirming and not no_wait and waited < max_wait:
            pause = min(watcher.wait_hint_s(), max_wait - waited)
            await asyncio.sleep(pause)
            waited += pause
            status, _ = await watcher.poll(catch_up=True)
        if watcher.confirming:
            status.notes.append("from one look (--no-wait): the look that would confirm an ending was not taken" if no_wait else
                                f"undecided after a second look {waited:.1f} s later: look again")
        return status
    finally:
        await watcher.close()


async def watch_runs(specs, get_transport, publish, own_kills=None) -> None:
    """Poll every run (each over its host's own connection) for ever, at the shortest poll_s among
    them, publishing (statuses, new events) after each round."""
    watchers = [RunWatcher(spec, get_transport(spec.host), own_kills=own_kills) for spec in specs]
    interval = min(spec.poll_s for spec in specs)
    try:
        await _watch(watchers, publish, interval)
    finally:
        for watcher in watchers:
            await watcher.close()  # a manager's log stream stops with the watching


LOOKS_AT_ONCE = 4  # runs of one host looked at together: a round takes the slowest look, not their sum (sshd's MaxSessions is 10)


async def _watch(watchers, publish, interval: float) -> None:
    from cockpit.runtime import record_internal_error

    gates: dict[str, asyncio.Semaphore] = {}

    async def look(watcher: RunWatcher) -> tuple[RunStatus, list[RunEvent]]:
        async with gates.setdefault(watcher.spec.host, asyncio.Semaphore(LOOKS_AT_ONCE)):
            try:
                return await watcher.poll()
            except Exception as exc:  # noqa: BLE001 - one run's log must not stop the watching of every run
                record_internal_error(f"watching run {watcher.spec.name}", exc)
                return RunStatus(watcher.spec.name, watcher.spec.host, state="unknown", updated_at=time.time(),
                                 evidence=f"the cockpit failed reading this run ({type(exc).__name__}: {exc}); "
                                          "see errors.log in its state folder"), []

    while True:
        now = time.monotonic()
        due = []
        for watcher in watchers:
            every = (min(interval, watcher.wait_hint_s()) if watcher.confirming
                     else ENDED_POLL_S if watcher.status.state in ENDED_STATES else interval)
            if now - watcher.polled_at >= every - 0.05:  # an ended run is looked at every ENDED_POLL_S (a restart shows then)
                watcher.polled_at = now
                due.append(watcher)
        looked = dict(zip(map(id, due), await asyncio.gather(*(look(w) for w in due))))
        statuses = [looked[id(w)][0] if id(w) in looked else w.status for w in watchers]
        events = [event for w in due for event in looked[id(w)][1]]
        publish(statuses, events)
        # a look that found a trainer gone is confirmed soon after, not a whole interval later
        confirming = [w.wait_hint_s() for w in watchers if w.confirming]
        await asyncio.sleep(min([interval, *confirming]))


def flag_lines(flags: list[Flag]) -> list[str]:
    return [f"{f.kind}: {f.message}" + (f"  <- {f.line[:160]}" if f.line else "") for f in flags]


def run_alert(event: RunEvent):
    """The alert a run's event sends ([alerts]): deduplicated per run and kind (a checkpoint: per path)."""
    from cockpit.alerts import Alert

    if event.kind == "resolved":
        return Alert("run_stalled", f"run_stalled:{event.run}", f"{event.run}: training moves again", event.text, "info",
                     resolves=True)
    level = {"crashed": "error", "oom": "error", "died": "error", "stalled": "warning", "ended": "warning",
             "cancelled": "warning"}.get(event.kind, "info")
    kind = {"finished": "run_finished", "crashed": "run_crashed", "oom": "run_oom", "stalled": "run_stalled", "died": "run_died",
            "cancelled": "run_cancelled", "ended": "run_ended", "checkpoint": "checkpoint"}[event.kind]
    key = f"{kind}:{event.run}" + (f":{event.text}" if event.kind == "checkpoint" else "")
    title = {"finished": "training finished", "crashed": "training crashed", "oom": "training ran out of memory",
             "stalled": "training stalled", "died": "the trainer died", "cancelled": "training cancelled",
             "ended": "the trainer exited (finished or not cannot be told)", "checkpoint": "checkpoint ready"}[event.kind]
    return Alert(kind, key, f"{event.run}: {title}", event.text, level)
