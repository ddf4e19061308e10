"""The step-kind protocol.  A kind is one class: it declares its parameters (checked when the config
loads), says in one line what it checks and why, may describe a plan that needs confirmation
(destructive kinds), and runs.  The runbook knows kinds only through this protocol: the packages that
implement them (runbook/builtin.py, sglang/, drafter/, bench/) are registered by the composition
root (cockpit/context.py), never imported here.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from cockpit.hosts.transport import Transport
from cockpit.runbook.model import Param, StepResult, StepSpec  # noqa: F401 - Param: the step kinds' word for it
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot
from cockpit.format import plural

if TYPE_CHECKING:
    from cockpit.runbook.engine import Runbook

Confirm = Callable[[str], Awaitable[bool]]


@dataclass
class RunContext:
    """What a step gets to do its work: the telemetry hub (its transports, collectors and command
    log), the question to ask before a destructive action, the audit log, and the runbook."""

    hub: TelemetryHub
    confirm: Confirm
    audit: Callable[..., None]
    runbook: "Runbook"
    variant: Mapping[str, Any] = field(default_factory=dict)  # the parameters this run overrides (a sweep's depth)

    step: str = ""  # the step running

    def transport(self, host: str) -> Transport:
        return self.hub.pool.get(host)

    def progress(self, state: dict[str, Any]) -> None:
        """Tell whoever watches (the TUI's panes, a CLI's stderr) how a long step is going."""
        self.runbook.progress.publish(StepProgress(self.step, state))


@dataclass(frozen=True)
class StepProgress:
    step: str
    state: dict[str, Any]




class StepKind:
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()  # older names of the kind: runbooks written with them load unchanged
    destructive: ClassVar[bool] = False
    launch: ClassVar[bool] = False  # gated: re-verifies the gate steps of its host(s) first
    gate: ClassVar[bool] = False  # a verification launches rely on: re-run before each launch, invalidated by telemetry
    params: ClassVar[Mapping[str, Param]] = {}

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"{self.name} on {spec.host}"

    def why(self, spec: StepSpec) -> str:
        return ""

    def validate(self, spec: StepSpec) -> str | None:
        """Cross-parameter checks; returns an error message or None."""
        return None

    def check_references(self, spec: StepSpec, before: tuple[StepSpec, ...], config: Any) -> tuple[str | None, str] | None:
        """What the step names elsewhere (a step before it, a table of the config) checked when the
        config is: (the key, why it is wrong) or None."""
        return None

    def hosts(self, spec: StepSpec) -> tuple[str, ...]:
        """Every host the step acts on (a group: `hosts`, rank 0 first; else its one host)."""
        return tuple(spec.params.get("hosts") or (spec.host,))

    async def plan(self, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
        """What the step will do, for a confirmation (None: nothing to confirm), and data for run."""
        return None, None

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        raise NotImplementedError

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        """The step's evidence as short sentences a person reads (the checklist shows them; the raw
        JSON is one key away).  Kinds say what their evidence means; this default lists its fields."""
        return explain_fields(result.evidence)

    def rests_on(self, runbook: Any, spec: StepSpec) -> tuple[str, ...]:
        """The steps whose result this step's evidence rests on: when the cockpit undoes one (stops the server a
        launch started), this step's pass turns stale."""
        return ()

    def contradicted_by(self, spec: StepSpec, snapshot: HostSnapshot) -> list[str]:
        """For a gate: why a later telemetry sample says its pass no longer holds (empty: it holds)."""
        return []


def explain_fields(evidence: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, value in evidence.items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            lines.append(f"{key.replace('_', ' ')}: {value}")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{key.replace('_', ' ')}: {plural(len(value), 'item')}")
        elif isinstance(value, dict):
            lines.append(f"{key.replace('_', ' ')}: {', '.join(map(str, list(value)[:6]))}")
    return lines


def command_line(argv) -> str:
    from cockpit.hosts.transport import quote_argv

    return quote_argv(argv) if argv else "-"


Kinds = Mapping[str, StepKind]


def registry(kinds: Iterable[type[StepKind] | StepKind]) -> dict[str, StepKind]:
    """Kinds by name, from their classes (or instances); a name given twice is a programming error."""
    out: dict[str, StepKind] = {}
    for kind in kinds:
        instance = kind() if isinstance(kind, type) else kind
        for name in (instance.name, *instance.aliases):  # an old name keeps old runbooks loading
            if name in out:
                raise ValueError(f"two step kinds are named '{name}'")
            out[name] = instance
    return out


def now() -> float:
    return time.time()
