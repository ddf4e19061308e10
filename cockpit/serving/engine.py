"""The seam between the serving core and an engine (SGLang, vLLM, the next one).

The core (this package: launch and readiness steps, the `--help` reader, lint's argparse emulation, depth, log
reports, live figures, the server target and watch, the sweep's server side) never names an engine.  It asks the
registry (`serving/engines.py`) for the `Engine` a launch step, a log or a command line is, and asks that engine
what only it knows: its command line, its flags and rules, its crash texts and start-up milestones, how its log
lines and `/metrics` read in the core's terms, and what it can do (`Capabilities`).

An engine is one package (`cockpit/sglang/`, `cockpit/vllm/`) with an `engine.py` whose `ENGINE` implements this
protocol; the engine packages never import each other (tests/test_layers.py), and the conformance suite
(tests/test_engines.py) runs over every engine the registry has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cockpit.diagnosis import Diagnosis
    from cockpit.runbook.model import Param
    from cockpit.serving.depth import DepthConfig
    from cockpit.serving.groupmodel import GroupLauncher
    from cockpit.serving.request import LaunchRequest
    from cockpit.serving.helpschema import FlagSchema
    from cockpit.serving.lint import LintReport


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do, asked by the core, the UI, the sweep and the CLI instead of its name."""

    multi_node: bool  # one server over several nodes, launched as a group by the launch step
    server_info: bool  # /server_info answers through the scheduler, with the lifetime acceptance
    bench_api: str  # the benchmark API a sweep uses by default: "sglang" (/generate) or "openai" (/v1/chat/completions)
    acceptance_source: str  # where a sweep reads a run's acceptance: "responses" (each response's meta) or "metrics"
    metrics_prefix: str  # the prefix of its Prometheus series ("sglang:")
    watchdog_s: float | None  # its own watchdog kills a stuck scheduler after this long (None: it has none)
    served_models: bool  # /v1/models says the model name clients must use (asked once it is ready)
    tree_drafts: bool  # a topk > 1 draft tree (else only a chain: depth N)


@dataclass(frozen=True)
class LiveLine:
    """One line of a serving engine's log in the core's terms (serving/live.py folds them into figures).

    kind: "decode" (a window of decode iterations: its figures), "prefill" (a prefill batch ran), "acceptance"
    (the acceptance of the window just read, logged on a line of its own), "start" (a server starts: the figures
    before it are another server's), "ready" (it says it is up), "stop" (its own words of a graceful shutdown)."""

    kind: str
    ts: float | None = None  # the log's own timestamp (None: the line has none; when it was read counts)
    throughput: float | None = None
    running: int | None = None
    queued: int | None = None
    token_usage: float | None = None
    accept_len: float | None = None
    detail: dict | None = None  # the engine's own figures of the line (vLLM's acceptance per draft position)


@dataclass
class LogReading:
    """What an engine read in the last run of its log: line numbers are the log's own."""

    diagnoses: list["Diagnosis"] = field(default_factory=list)
    ready: bool = False
    milestones: list[tuple[str, int]] = field(default_factory=list)
    run_start_line: int | None = None
    stopped_at: int | None = None  # a graceful stop's line (the server's own shutdown words after it came up)


def counter_deltas(before: dict[str, float] | None, after: dict[str, float] | None, keys: tuple[str, ...]) -> tuple[float, ...] | None:
    """How much each counter of `keys` moved between two reads of an engine's series (None: a read or a counter missing)."""
    if not before or not after or any(k not in before or k not in after for k in keys):
        return None
    return tuple(after[k] - before[k] for k in keys)


@dataclass(frozen=True)
class DraftLoading:
    """What an engine's loader does with an EAGLE-3 draft, by release (the drafter's checks ask it, never name it): the
    ranges of releases where its loading changed, the range a version falls in, and which of the draft checks' findings
    that depend on the loader (their codes: drafter/inspect.py LOADER_FINDINGS) break which of its ranges; one it does not
    list breaks none.  What no loader takes (a missing weight, no config.json) breaks every range of every engine."""

    label: str
    ranges: tuple[str, ...]
    range_of: Callable[[str], str]
    breaks: Mapping[str, tuple[str, ...]]
    hint: str = ""  # what of a draft to look at first for it, in a few words (said beside a drafter check's verdict)


@runtime_checkable
class Engine(Protocol):
    # what it is and says of itself (read-only: an engine's class attributes, each a subtype of these)
    @property
    def name(self) -> str: ...  # the config's word for it: engine = "sglang"

    @property
    def label(self) -> str: ...  # how people write it: SGLang

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def milestones(self) -> tuple[tuple[str, re.Pattern], ...]: ...  # its start-up, under names shared where they mean the same

    @property
    def start_steps(self) -> tuple[str, ...]: ...  # the milestones the server pane shows as the start-up's steps, in order

    @property
    def process_words(self) -> tuple[str, ...]: ...  # words of its processes' names as nvidia-smi and ps show them

    @property
    def keep_words(self) -> re.Pattern: ...  # lines a whole-log read keeps for its diagnosis (besides errors and tracebacks)

    @property
    def bulk_words(self) -> tuple[bytes, ...]: ...  # the bulk of its serving log (decode lines): a whole-log read keeps the last

    @property
    def version_key(self) -> str: ...  # the launch step's parameter for its version, for the rules its lint applies

    @property
    def draft_not_used_causes(self) -> str: ...  # what to look at when its acceptance stays at 1 under load

    # lines of a running server that end or doom it: (kind "crashed" | "oom" | "hung", pattern, what to do), first match wins
    @property
    def crash_lines(self) -> tuple[tuple[str, re.Pattern, str], ...]: ...

    @property
    def group(self) -> "GroupLauncher | None": ...  # its launch over several nodes, driven by the core (serving/group.py); None: one node only

    @property
    def draft_loading(self) -> DraftLoading: ...  # what its loader does with a draft, by release (drafter/inspect.py asks)

    # the launch step's parameters it adds to the core's (serving/request.py CORE_PARAMS): its version, its group's forms
    @property
    def params(self) -> "Mapping[str, Param]": ...

    # --- its command line --------------------------------------------------------------------------
    def server_argv(self, request: "LaunchRequest", python: str) -> list[str]: ...

    def with_depth(self, argv: list[str], depth: "DepthConfig") -> list[str]: ...

    def with_draft(self, argv: list[str], draft_path: str) -> list[str]:
        """The command line serving `draft_path` as its draft, everything else kept (a checkpoint measured through a
        launch step whose command line a fix rewrote)."""
        ...

    def depth_of_argv(self, argv: list[str]) -> "DepthConfig | None": ...

    def is_command(self, argv: list[str]) -> bool: ...

    def command_args(self, argv: list[str]) -> list[str]: ...  # its own arguments, its launcher dropped

    def validate_launch(self, params: dict[str, Any], nodes: int) -> str | None: ...

    def foreign_line(self, words: list[str]) -> dict | None: ...  # a line for another engine carrying its flags, translated

    def version_problem(self, text: str) -> str | None: ...

    # --- its flags and rules -----------------------------------------------------------------------
    async def host_schema(self, transport: Any, python: str, launcher: list[str] | None = None) -> "FlagSchema": ...

    def lint(self, argv: list[str], version: str | None, schema: "FlagSchema | None") -> "LintReport": ...

    async def lint_line(self, words: list[str], version: str | None = None, help_text: str | None = None, transport: Any = None,
                        python: str = "python3", deep: bool = False) -> Any: ...  # lint-flags: .ok, .to_json(), .render()

    def apply_fix(self, argv: list[str], diagnosis: "Diagnosis") -> list[str]: ...

    # --- its log -----------------------------------------------------------------------------------
    def owns_line(self, line: str) -> bool: ...  # its own unmistakable words (whose log is it)

    def run_start(self, line: str) -> bool: ...

    def read_log(self, lines: list[str], numbers: list[int], schema: "FlagSchema | None") -> LogReading: ...

    def live_line(self, line: str) -> LiveLine | None: ...

    # --- its /metrics ------------------------------------------------------------------------------
    def series_of_samples(self, samples: list[tuple[str, dict, float]]) -> dict[str, float] | None: ...  # its series, None: none

    def figures_of_series(self, series: dict[str, float], before: tuple[dict[str, float], float] | None,
                          now: float) -> dict[str, float]: ...

    def acceptance_between(self, before: dict[str, float] | None, after: dict[str, float] | None) -> float | None: ...


# every member an engine must have (its attributes and its methods), as the registry checks an installed engine
PROTOCOL_MEMBERS: tuple[str, ...] = tuple(sorted({name for name in Engine.__annotations__ if not name.startswith("_")}
                                                 | {name for name in vars(Engine) if not name.startswith("_")}))
