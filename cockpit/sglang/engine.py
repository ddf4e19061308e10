"""SGLang behind the serving core's seam (serving/engine.py): its command line, flags and rules, log reading,
live lines and series, and what it can do."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cockpit.diagnosis import Diagnosis
from cockpit.serving.depth import DepthConfig, with_depth, with_value
from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT, SCHEDULER_DIED
from cockpit.runbook.model import Param
from cockpit.serving.engine import Capabilities, Engine, LiveLine, LogReading, counter_deltas
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport, apply_fix
from cockpit.serving.request import LaunchRequest
from cockpit.sglang import draftload
from cockpit.sglang import diagnose, launch, lint, loglines

if TYPE_CHECKING:
    from cockpit.serving.groupmodel import GroupLauncher  # types only: the group's flow loads when a group is launched


OWN_WORDS = re.compile(r"server_args=ServerArgs\(|^usage: (?:sglang|launch_server)|Decode batch|Prefill batch|"
                       r"The server is fired up and ready to roll")


class SGLang:
    name = "sglang"
    label = "SGLang"
    capabilities = Capabilities(multi_node=True, server_info=True, bench_api="sglang", acceptance_source="responses",
                                metrics_prefix="sglang:", watchdog_s=300.0, served_models=False, tree_drafts=True)
    milestones = diagnose.MILESTONES
    start_steps = tuple(name for name, _ in diagnose.MILESTONES if name not in ("HTTP server up", "draft CUDA graphs"))
    process_words = ("sglang::", "sglang.launch_server", "sglang serve")
    keep_words = re.compile("|".join([re.escape(diagnose.READY_LINE), diagnose.SIGQUIT.pattern, diagnose.ANY_SIGNATURE.pattern,
                                      diagnose.ANY_MILESTONE.pattern]))
    bulk_words = (b"Decode batch",)
    version_key = "sglang_version"
    draft_loading = draftload.LOADING  # what its loader does with a draft, by release
    # the launch step's parameters SGLang adds to the core's (serving/request.py)
    params: Mapping[str, Param] = MappingProxyType({
        "sglang_version": Param(str, None, help="with engine sglang: its version, for the flags and rules the lint applies "
                                "(default: the host's own)"),
        "dist_timeout": Param(int, 300, help="seconds a node waits for its peers before failing (SGLang's --dist-timeout)"),
        "gated": Param(bool, True, help="SGLang 0.5.23+: every node joins, the GPUs are verified again, then the group is activated"),
        "gated_port": Param(int, None, help="the gated launch's port on rank 0 (default: dist_init_port + 1000)"),
    })
    draft_not_used_causes = "layers.0.* keys skipped by SGLang 0.4.9-0.5.11? wrong aux layers? a draft for another target?"
    crash_lines = (
        ("crashed", re.compile(r"[Ww]atchdog timeout \(|SIGQUIT received\.|Subprocess \S+ \(pid=\d+\) crashed with exit code|"
                               + SCHEDULER_DIED + "|" + NCCL_TIMEOUT),
         "the server crashed (its scheduler died or the watchdog fired): see the line, then the log before it"),
        ("oom", re.compile(CUDA_OOM + r"|(?:Prefill|Decode) out of memory\. Try to lower|^Out of memory\. Try to lower|"
                           r"alloc_req_slots runs out of memory|Out of memory even after retracting"),
         "out of memory: lower --mem-fraction-static, --max-running-requests or --cuda-graph-max-bs"),
        ("hung", re.compile(r"Health check failed\. Server couldn't get a response"),
         "SGLang's health check got no answer from the detokenizer: the scheduler is stuck"),
    )

    @property
    def group(self) -> GroupLauncher:
        """One server over several nodes (sglang/grouplaunch.py): planned, run, waited for and watched as a group."""
        from cockpit.sglang import grouplaunch

        return grouplaunch

    # --- its command line --------------------------------------------------------------------------
    def server_argv(self, request: LaunchRequest, python: str) -> list[str]:
        return launch.server_argv(python, request.model_path, request.draft_path, request.depth, request.algorithm, request.tp,
                                  request.port, request.bind, list(request.extra_args))

    def with_depth(self, argv: list[str], depth: DepthConfig) -> list[str]:
        return with_depth(argv, depth)

    def with_draft(self, argv: list[str], draft_path: str) -> list[str]:
        return with_value(argv, "--speculative-draft-model-path", draft_path)

    def depth_of_argv(self, argv: list[str]) -> DepthConfig | None:
        return DepthConfig.from_argv(argv)

    def is_command(self, argv: list[str]) -> bool:
        return lint.is_sglang_command(argv)

    def command_args(self, argv: list[str]) -> list[str]:
        return lint.strip_launcher(argv)

    def validate_launch(self, params: dict[str, Any], nodes: int) -> str | None:
        from cockpit.sglang.group import validate

        return validate(params, nodes)

    def foreign_line(self, words: list[str]) -> dict | None:
        return None

    # --- its flags and rules -----------------------------------------------------------------------
    async def host_schema(self, transport: Any, python: str, launcher: list[str] | None = None) -> FlagSchema:
        from cockpit.sglang.hostschema import host_schema

        return await host_schema(transport, python, launcher=launcher)

    def lint(self, argv: list[str], version: str | None, schema: FlagSchema | None) -> LintReport:
        if schema is None:
            from cockpit.sglang.flags import reference_schema
            from cockpit.sglang.versions import shipped_schema

            schema = shipped_schema(version) or reference_schema()  # the release's recorded flags
        return lint.lint(argv, schema, version)

    def apply_fix(self, argv: list[str], diagnosis: Diagnosis) -> list[str]:
        return apply_fix(argv, diagnosis)

    def version_problem(self, text: str) -> str | None:
        from cockpit.config import version_problem

        return version_problem(text)

    async def lint_line(self, words: list[str], version: str | None = None, help_text: str | None = None, transport: Any = None,
                        python: str = "python3", deep: bool = False) -> Any:
        """`lint-flags`: the line against the host's own engine, a --help file, or what the cockpit ships."""
        from cockpit.sglang.hostschema import lint_line

        return await lint_line(words, version, help_text, transport, python, deep)

    # --- its log -----------------------------------------------------------------------------------
    def owns_line(self, line: str) -> bool:
        return OWN_WORDS.search(line) is not None

    def run_start(self, line: str) -> bool:
        return diagnose.RUN_START.match(line) is not None

    def read_log(self, lines: list[str], numbers: list[int], schema: FlagSchema | None) -> LogReading:
        return diagnose.read_log(lines, numbers, schema)

    def live_line(self, line: str) -> LiveLine | None:
        return loglines.live_line(line)

    # --- its /metrics ------------------------------------------------------------------------------
    def series_of_samples(self, samples: list[tuple[str, dict, float]]) -> dict[str, float] | None:
        return loglines.series_of_samples(samples)

    def figures_of_series(self, series: dict[str, float], before: tuple[dict[str, float], float] | None,
                          now: float) -> dict[str, float]:
        return series  # the core's names are SGLang's

    def acceptance_between(self, before: dict[str, float] | None, after: dict[str, float] | None) -> float | None:
        moved = counter_deltas(before, after, ("generation_tokens_total", "spec_verify_calls_total"))
        if moved is None:
            return None
        tokens, verifies = moved
        return tokens / verifies if verifies > 0 and tokens >= 0 else None


ENGINE: Engine = SGLang()
