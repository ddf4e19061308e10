"""One training run watched: its log (followed by offset), its TensorBoard events, its checkpoints,
over the host's own transport.  `poll()` reads what is new and returns the run's status; what
changed since the last poll comes back as events (for alerts and the runbook)."""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field

from cockpit.drafter.acceptance import estimate
from cockpit.hosts.transport import Transport, TransportError
from cockpit.runs.checkpoints import Checkpoint, latest, scan
from cockpit.hosts.follow import LogFollower
from cockpit.runs.parse import Flag, TrainingLog
from cockpit.runs.spec import RunSpec
from cockpit.runs.tfevents import EventReader

STATES = ("running", "finished", "crashed", "stalled", "unknown")


@dataclass
class RunEvent:
    kind: str  # finished, crashed, stalled, checkpoint
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

    def to_json(self) -> dict:
        return {
            "name": self.name, "host": self.host, "state": self.state, "phase": self.phase, "step": self.step, "total": self.total,
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1), "loss": self.loss, "acc": self.acc, "eval_loss": self.eval_loss,
            "per_position_acc": [round(a, 4) for a in self.per_position_acc], "per_position_source": self.per_position_source,
            "estimated_accept_length": self.estimate, "latest_checkpoint": self.latest_checkpoint,
            "checkpoints": [c["path"] for c in self.checkpoints], "flags": [f.to_json() for f in self.flags],
            "notes": self.notes, "finished": self.finished, "read_error": self.read_error,
        }

    @property
    def flagged(self) -> bool:
        return bool(self.flags) or self.state in ("crashed", "stalled")


class RunWatcher:
    def __init__(self, spec: RunSpec, transport: Transport, clock=time.time):
        self.spec = spec
        self.transport = transport
        self.clock = clock
        self.log = TrainingLog(clock=clock, stall_after_s=spec.stall_after_s, total_hint=spec.total_steps)
        self.follower = LogFollower(transport, spec.log) if spec.log else None
        self._events_file: str | None = None
        self._events = EventReader()
        self._known: dict[str, Checkpoint] = {}
        self._checkpoints: list[Checkpoint] = []
        self._seen_checkpoints: set[str] | None = None
        self._last_state: str | None = None
        self._missing_note: str | None = None
        self.status = RunStatus(spec.name, spec.host)

    async def poll(self, catch_up: bool = False) -> tuple[RunStatus, list[RunEvent]]:
        """Read what is new (all of it when `catch_up`: a one-shot command) and say what it means."""
        now = self.clock()
        error = None
        try:
            if self.follower is not None:
                await self._poll_log(now, catch_up)
            if self.spec.output_dir:
                await self._poll_events()
                self._checkpoints = await scan(self.transport, self.spec.output_dir, self._known)
        except TransportError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"{self.spec.host}: {exc}"
        status = self._status(now, error)
        events = self._events_since(status)
        self.status = status
        return status, events

    async def _poll_log(self, now: float, catch_up: bool) -> None:
        while True:
            update = await self.follower.poll()
            if update.event in ("truncated", "rotated"):
                self.log.reset()
                self.log.notes.append(f"the log was {update.event} at {time.strftime('%H:%M:%S', time.localtime(now))}: read from its start")
            if update.event == "missing":
                self._missing_note = f"{self.spec.log} is not there" + (" (any more)" if self.log.lines_seen else "")
                return
            self._missing_note = None
            first = update.event == "appeared"
            self.log.feed(update.lines, now)
            self.log.peek(update.partial, now)
            if first and self.log.last_progress_at is not None and update.mtime:
                # what an old log says happened when it was written, not when we read it
                self.log.last_progress_at = min(self.log.last_progress_at, update.mtime)
            if self.follower.skipped and first:
                self.log.notes.append(f"the log is large: read from its last {self.follower.tail_bytes >> 20} MiB")
            if not catch_up or update.size is None or self.follower.offset >= update.size:
                return

    async def _poll_events(self) -> None:
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

    def _status(self, now: float, error: str | None) -> RunStatus:
        log = self.log
        status = RunStatus(self.spec.name, self.spec.host, updated_at=now, read_error=error,
                           watches_checkpoints=bool(self.spec.output_dir))
        status.state = log.state(now)
        if status.state == "unknown" and self._checkpoints and not self.follower:
            status.state = "running"  # only checkpoints to go by: it writes them
        status.phase, status.step, status.total, status.eta_s = log.phase, log.step, log.total, log.eta_s
        if status.step is None and log.tb_step is not None:
            status.step = log.tb_step
        if status.state in ("finished", "crashed"):
            status.eta_s = None
        status.loss, status.acc, status.eval_loss = log.loss, log.acc, log.eval_loss
        positions, source = log.positions()
        status.per_position_acc, status.per_position_source = list(positions), source
        status.per_position_when = log.per_position_step.get(source) if source else None
        found = estimate(positions, self.spec.depth)
        if found is not None:
            status.estimate = {"with_bonus": round(found.with_bonus, 4), "without_bonus": round(found.without_bonus, 4),
                               "depth": found.depth, "source": source}
        status.flags = log.current_flags(now)
        status.notes = list(log.notes)
        if self._missing_note:
            status.notes.insert(0, self._missing_note)
            if not log.lines_seen and not self.spec.output_dir:
                status.read_error = status.read_error or self._missing_note
        status.history = [(p.step, p.loss, p.acc) for p in log.history]
        status.finished = log.finished
        status.checkpoints = [c.to_json() for c in self._checkpoints]
        newest = latest(self._checkpoints)
        if newest is not None:
            status.latest_checkpoint = {**newest.to_json(), "verdict": newest.verdict(self.spec.sglang)}
        elif self._checkpoints:
            last = self._checkpoints[-1]
            status.latest_checkpoint = {**last.to_json(), "verdict": last.verdict(self.spec.sglang)}
        status.log_size = self.follower.offset if self.follower else None
        return status

    def _events_since(self, status: RunStatus) -> list[RunEvent]:
        events = []
        name = self.spec.name
        # what the first read finds is the run's state, not news: only changes seen while watching alert
        if self._last_state is not None and status.state != self._last_state:
            if status.state == "finished":
                events.append(RunEvent("finished", name, f"training run {name} finished: {status.finished}"))
            elif status.state == "crashed":
                crash = next((f for f in status.flags if f.kind != "stalled"), None)
                events.append(RunEvent("crashed", name, f"training run {name} crashed: {crash.message if crash else 'see its log'}"))
            elif status.state == "stalled":
                stall = next((f for f in status.flags if f.kind == "stalled"), None)
                events.append(RunEvent("stalled", name, f"training run {name}: {stall.message if stall else 'stalled'}"))
        self._last_state = status.state
        complete = {c["path"] for c in status.checkpoints if c["complete"]}
        if self._seen_checkpoints is not None:
            for path in sorted(complete - self._seen_checkpoints):
                checkpoint = next(c for c in status.checkpoints if c["path"] == path)
                layout = checkpoint["key_layout"] or ("training state: export first" if checkpoint["needs_export"] else "?")
                events.append(RunEvent("checkpoint", name, f"training run {name}: new checkpoint {path} ({layout})"))
        self._seen_checkpoints = complete
        return events


async def watch_runs(specs, get_transport, publish) -> None:
    """Poll every run (each over its host's own connection) for ever, at the shortest poll_s among
    them, publishing (statuses, new events) after each round."""
    import asyncio

    watchers = [RunWatcher(spec, get_transport(spec.host)) for spec in specs]
    interval = min(spec.poll_s for spec in specs)
    while True:
        statuses, events = [], []
        for watcher in watchers:
            status, new = await watcher.poll()
            statuses.append(status)
            events += new
        publish(statuses, events)
        await asyncio.sleep(interval)


def flag_lines(flags: list[Flag]) -> list[str]:
    return [f"{f.kind}: {f.message}" + (f"  <- {f.line[:160]}" if f.line else "") for f in flags]


def run_alert(event: RunEvent):
    """The alert a run's event sends ([alerts]): deduplicated per run and kind (a checkpoint: per path)."""
    from cockpit.alerts import Alert

    level = {"crashed": "error", "stalled": "warning"}.get(event.kind, "info")
    kind = {"finished": "run_finished", "crashed": "run_crashed", "stalled": "run_stalled", "checkpoint": "checkpoint"}[event.kind]
    key = f"{kind}:{event.run}" + (f":{event.text}" if event.kind == "checkpoint" else "")
    title = {"finished": "training finished", "crashed": "training crashed", "stalled": "training stalled",
             "checkpoint": "checkpoint ready"}[event.kind]
    return Alert(kind, key, f"{event.run}: {title}", event.text, level)
