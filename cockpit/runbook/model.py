"""What a runbook is made of: step specs from the config, and the results the engine records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from collections.abc import Callable
from typing import Any


@dataclass(frozen=True)
class Param:
    """One parameter a step kind (or an engine, for the launch step) takes: its type, default, and help.  Here, with the
    runbook's plain data, so that an engine's declaration of its parameters imports nothing of the runbook's machinery."""

    kind: type | tuple[type, ...]
    default: Any = None
    required: bool = False
    help: str = ""


class StepState(str, Enum):
    PENDING = "pending"  # may run: everything before it passed
    RUNNING = "running"
    PASSED = "passed"
    FAILED = "failed"
    BLOCKED = "blocked"  # a step before it has not passed
    STALE = "stale"  # passed once, but later telemetry or time says it no longer holds

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StepSpec:
    name: str
    kind: str
    host: str
    params: dict[str, Any] = field(default_factory=dict)
    title: str | None = None  # one line shown in the checklist; the kind supplies a default


@dataclass(frozen=True)
class StepResult:
    state: StepState
    started_at: float | None = None
    finished_at: float | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    forced_reason: str | None = None  # the gate was skipped on purpose, and why
    runner_pid: int | None = None  # the cockpit process running it (to spot an interrupted run)
    runner_started: int | None = None  # that process's start time (Linux: clock ticks), so a reused pid is not it

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "message": self.message,
            "evidence": self.evidence,
            "output": self.output,
            "forced_reason": self.forced_reason,
            "runner_pid": self.runner_pid,
            "runner_started": self.runner_started,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StepResult":
        """Raises ValueError/TypeError for a record of the wrong shape (a hand-edited state file)."""
        def typed(key, kinds):
            value = data.get(key)
            if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
                raise TypeError(f"'{key}' is {type(value).__name__}")
            return value

        evidence = data.get("evidence") or {}
        if not isinstance(evidence, dict):
            raise TypeError("'evidence' is not a table")
        reason = typed("forced_reason", str)
        return cls(
            state=StepState(data["state"]),
            started_at=typed("started_at", (int, float)),
            finished_at=typed("finished_at", (int, float)),
            message=str(data.get("message", "")),
            evidence=evidence,
            output=str(data.get("output", "")),
            forced_reason=reason,
            runner_pid=typed("runner_pid", int),
            runner_started=typed("runner_started", int),
        )

    def with_state(self, state: StepState, message: str | None = None) -> "StepResult":
        return replace(self, state=state, message=self.message if message is None else message)


@dataclass(frozen=True)
class StepView:
    """A step as the checklist shows it: its spec, its own result, and its effective state."""

    spec: StepSpec
    result: StepResult | None
    state: StepState
    title: str
    why: str  # one line: what it checks and why
    locked: bool  # a launch-type step whose gate is closed
    warnings: tuple[str, ...] = ()
    destructive: bool = False
    details: tuple[str, ...] = ()  # the evidence as sentences (the kind's explain), as of when the view was made
    explain: Callable[[], list[str]] | None = field(default=None, compare=False, repr=False)  # the same, now (ages tick)
    freshness_s: float | None = None  # a gate step: how long its pass counts as fresh evidence for a launch

    def details_now(self) -> tuple[str, ...]:
        """The evidence sentences with their ages as of now (a view shown for minutes must not freeze them)."""
        if self.explain is None:
            return self.details
        try:
            return tuple(self.explain())
        except Exception:  # noqa: BLE001 - a hand-edited state file: the raw evidence still shows
            return self.details

    def freshness(self, now: float) -> str | None:
        """A passed gate's evidence counting down to stale: 'fresh for 22 s more' / 'older than 30 s: ...'."""
        if self.freshness_s is None or self.result is None or self.state is not StepState.PASSED or not self.result.finished_at:
            return None
        left = self.result.finished_at + self.freshness_s - now
        if left > 0:
            return f"fresh for {left:.0f} s more"
        return f"older than {self.freshness_s:g} s: a launch checks again first"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.spec.name,
            "kind": self.spec.kind,
            "host": self.spec.host,
            "state": self.state.value,
            "title": self.title,
            "why": self.why,
            "locked": self.locked,
            "destructive": self.destructive,
            "warnings": list(self.warnings),
            "result": self.result.to_json() if self.result else None,
        }
