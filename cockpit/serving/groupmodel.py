"""The types of a launch over several nodes, apart from the flow that drives them (serving/group.py): a node's and the
group's state, an engine's reading of its nodes (GroupModel), its plan of the nodes (NodePlan) and what it brings to the
core (GroupLauncher, GroupEmit).  Types only: the seam (serving/engine.py) names them without importing the flow."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cockpit.hosts.procs import LaunchedProcess
from cockpit.runbook.model import StepResult, StepSpec
from cockpit.serving.lint import LintReport

if TYPE_CHECKING:
    from cockpit.runbook.kind import RunContext  # types only: reading a log never loads the runbook's machinery


@dataclass
class NodeState:
    rank: int
    host: str
    state: str = "starting"
    alive: bool = True
    failure: str | None = None  # the failure kind
    line: str = ""  # the log line that shows the state (or the failure)
    lines_seen: int = 0
    role: str = ""  # what the process is, where a node runs more than the engine (a Ray head beside the server)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def name(self) -> str:
        """How a sentence names it: `rank R (host)`, or its role on its host."""
        return f"{self.role} on {self.host}" if self.role else f"rank {self.rank} ({self.host})"

    def to_json(self) -> dict:
        found = {"rank": self.rank, "host": self.host, "state": "failed" if self.failed else self.state, "alive": self.alive,
                 "failure": self.failure, "line": self.line}
        if self.role:
            found["role"] = self.role
        return found


@dataclass
class GroupState:
    state: str  # the group's: the least advanced node's, "ready" when all are, "failed" when one is
    nodes: list[NodeState] = field(default_factory=list)
    cause: str = ""  # the first node that failed and why, in a sentence

    def to_json(self) -> dict:
        return {"state": self.state, "cause": self.cause, "nodes": [n.to_json() for n in self.nodes]}


class GroupModel(Protocol):
    """An engine's reading of its group's nodes."""

    states: tuple[str, ...]  # a node's states in the order it passes them, "ready" last

    def node_state(self, rank: int, process: LaunchedProcess, lines: list[str], alive: bool) -> NodeState: ...

    def group_state(self, nodes: list[NodeState]) -> GroupState: ...


@dataclass
class NodePlan:
    """An engine's plan of its group, which the core runs (run_group): every node's command line, rank 0 first, the lint
    and version they were judged by, the group this step started before, and what the engine asks of the start."""

    hosts: list[str]
    argvs: list[list[str]]
    lint: LintReport
    version: str | None
    old: list[LaunchedProcess]
    evidence: dict = field(default_factory=dict)  # the engine's own facts to record with the launch (vLLM: ranks per node)
    gate_each_node: bool = False  # verify each node's GPUs right before its own start (an engine with no gate of its own)
    # once every node started: the engine's activation (SGLang's gated launch), (why it failed, group state) or None
    activate: Callable[[RunContext, StepSpec, list[LaunchedProcess], dict], Awaitable[tuple[str, dict] | None]] | None = None


class GroupEmit(Protocol):
    """An engine's hand-off of a group to a workload manager (`plan emit`): a Slurm batch script, a LeaderWorkerSet."""

    def slurm(self, kind: Any, spec: StepSpec, python: str = "python3", gpus_per_node: int | None = None) -> str: ...

    def lws(self, kind: Any, spec: StepSpec, python: str = "python3", image: str = ..., gpus_per_node: int | None = None) -> str: ...


class GroupLauncher(Protocol):
    """What an engine brings to a launch over several nodes; the core drives the flow (run_group, wait_group_ready,
    watcher): plan, start per node, node states, readiness, stop.  The engine builds its command lines and reads its
    nodes' lines (`model`); it builds no runbook result, except a form that is not a NodePlan (run_form)."""

    @property
    def version_key(self) -> str: ...  # how the launch's evidence names its version (the engine's name)

    @property
    def model(self) -> GroupModel: ...

    @property
    def health_path(self) -> str: ...  # rank 0's readiness

    @property
    def default_port(self) -> int: ...

    @property
    def emit(self) -> GroupEmit: ...

    async def plan_group(self, kind: Any, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]: ...  # (text, NodePlan or a refusal)

    async def run_form(self, kind: Any, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult: ...  # a plan not a NodePlan
