"""vLLM behind the serving core's seam (serving/engine.py): its command line (`vllm serve`, one
`--speculative-config`), each version's flags and rules, its log reading, its throughput and SpecDecoding lines,
its `vllm:` series, and what it can do (no /server_info, the OpenAI API for benchmarks, acceptance from its
counters, one node so far)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cockpit.diagnosis import Diagnosis
from cockpit.serving.depth import DepthConfig
from cockpit.runbook.model import Param
from cockpit.serving.engine import Capabilities, Engine, LiveLine, LogReading
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport
from cockpit.serving.request import LaunchRequest
from cockpit.vllm import draftload
from cockpit.vllm import argv as vllm_argv_words
from cockpit.vllm import diagnose, launch, logs, metrics

if TYPE_CHECKING:
    from cockpit.serving.groupmodel import GroupLauncher  # types only: the group's flow loads when a group is launched


class VLLM:
    name = "vllm"
    label = "vLLM"
    capabilities = Capabilities(multi_node=True, server_info=False, bench_api="openai", acceptance_source="metrics",
                                metrics_prefix="vllm:", watchdog_s=None, served_models=True, tree_drafts=False)
    milestones = diagnose.MILESTONES
    start_steps = diagnose.STEPS
    process_words = ("VLLM::", "vllm serve", "vllm.entrypoints")
    keep_words = re.compile("|".join([diagnose.LOOKS_LIKE_VLLM.pattern, diagnose.READY.pattern, diagnose.RUN_START.pattern,
                                      *(p.pattern for _, p in diagnose.MILESTONES), *(p for _, p, _, _ in diagnose.FIXED)]))
    bulk_words = (b"Avg prompt throughput",)
    version_key = "vllm_version"
    draft_loading = draftload.LOADING  # what its loader does with a draft, by release
    # the launch step's parameters vLLM adds to the core's (serving/request.py)
    params: Mapping[str, Param] = MappingProxyType({
        "vllm_version": Param(str, None, help="with engine vllm: its version, for the rules the lint applies (default: the host's own)"),
        "parallel": Param(str, None, help="vLLM over several nodes: 'data' (default: data parallel, node 0 serves, the others run "
                          "--headless engines) or 'model' (one model over the nodes: tensor/pipeline parallel with --nnodes, vLLM 0.11 on; "
                          "--pipeline-parallel-size in extra_args) or 'ray' (one model over a Ray cluster the cockpit starts, "
                          "--distributed-executor-backend ray: older vLLMs' way)"),
        "ray_args": Param(list, None, help="with parallel = 'ray': more `ray start` arguments on every node, as a list of words"),
    })
    draft_not_used_causes = "wrong aux layers? a draft for another target? method eagle for an EAGLE-3 draft?"
    crash_lines = diagnose.CRASH_LINES
    @property
    def group(self) -> GroupLauncher:
        """Several nodes: data parallel over them (vllm/group.py), launched by the cockpit over SSH, gated per node
        (vllm/grouplaunch.py), or handed to Slurm or a LeaderWorkerSet (`plan emit`)."""
        from cockpit.vllm import grouplaunch

        return grouplaunch

    # --- its command line --------------------------------------------------------------------------
    def server_argv(self, request: LaunchRequest, python: str) -> list[str]:
        return launch.vllm_argv(python, request.model_path, request.draft_path, request.depth, request.tp, request.port,
                                request.bind, list(request.extra_args))

    def with_depth(self, argv: list[str], depth: DepthConfig) -> list[str]:
        return launch.vllm_with_depth(argv, depth)

    def with_draft(self, argv: list[str], draft_path: str) -> list[str]:
        return launch.vllm_with_draft(argv, draft_path)

    def depth_of_argv(self, argv: list[str]) -> DepthConfig | None:
        return launch.depth_of_argv(argv)

    def is_command(self, argv: list[str]) -> bool:
        return vllm_argv_words.is_vllm_command(argv)

    def command_args(self, argv: list[str]) -> list[str]:
        args, model, _ = vllm_argv_words.strip_launcher(argv)
        return ([model] if model else []) + args

    def validate_launch(self, params: dict[str, Any], nodes: int) -> str | None:
        from cockpit.vllm.versions import version_problem

        if params.get("vllm_version") and version_problem(str(params["vllm_version"])):
            return f"vllm_version: {version_problem(str(params['vllm_version']))}"
        from cockpit.vllm.group import validate

        if validate(params, nodes):
            return validate(params, nodes)
        if str(params.get("algorithm") or "EAGLE3").upper() != "EAGLE3":
            return (f"algorithm {params['algorithm']!r}: vLLM's launch step drafts with method eagle3 only (an EAGLE-3 draft); "
                    "give another method in extra_args' --speculative-config, or leave algorithm out")
        return None

    def foreign_line(self, words: list[str]) -> dict | None:
        from cockpit.vllm.crosswalk import other_engine_line

        return other_engine_line(words)

    def version_problem(self, text: str) -> str | None:
        from cockpit.vllm.versions import version_problem

        return version_problem(text)

    # --- its flags and rules -----------------------------------------------------------------------
    async def host_schema(self, transport: Any, python: str, launcher: list[str] | None = None) -> FlagSchema:
        from cockpit.vllm.hostschema import host_vllm

        return (await host_vllm(transport, python, launcher=launcher))[1]  # its version is the schema's

    def lint(self, argv: list[str], version: str | None, schema: FlagSchema | None) -> LintReport:
        from cockpit.vllm.lint import lint, shipped_schema

        # no --help of its own: the recorded flags of the release that judges it (as SGLang's does)
        return lint(argv, version or getattr(schema, "version", None), schema if schema is not None else shipped_schema(version))

    def apply_fix(self, argv: list[str], diagnosis: Diagnosis) -> list[str]:
        from cockpit.vllm.lint import apply_fix

        return apply_fix(argv, diagnosis)

    async def lint_line(self, words: list[str], version: str | None = None, help_text: str | None = None, transport: Any = None,
                        python: str = "python3", deep: bool = False) -> Any:
        """`lint-flags`: the line against the host's own engine, a --help file, or what the cockpit ships."""
        from cockpit.vllm.lint import lint_line

        return await lint_line(words, version, help_text, transport, python, deep)

    # --- its log -----------------------------------------------------------------------------------
    def owns_line(self, line: str) -> bool:
        return diagnose.owns_line(line)

    def run_start(self, line: str) -> bool:
        return (("vLLM" in line or "version" in line) and diagnose.RUN_START.search(line) is not None) or line.startswith("usage: vllm")

    def read_log(self, lines: list[str], numbers: list[int], schema: FlagSchema | None) -> LogReading:
        return diagnose.read_log(lines, numbers, schema)

    def live_line(self, line: str) -> LiveLine | None:
        return logs.live_line(line)

    # --- its /metrics ------------------------------------------------------------------------------
    def series_of_samples(self, samples: list[tuple[str, dict, float]]) -> dict[str, float] | None:
        return metrics.series_of_samples(samples) or None

    def figures_of_series(self, series: dict[str, float], before: tuple[dict[str, float], float] | None,
                          now: float) -> dict[str, float]:
        """vLLM's series under the core's names where they mean the same; its acceptance from its own counters:
        1 + Δaccepted / Δdrafts (the bonus token counted, as SGLang counts it)."""
        values = {"generation_tokens_total": series.get("generation_tokens_total"), "prompt_tokens_total": series.get("prompt_tokens_total"),
                  "num_running_reqs": series.get("num_requests_running"), "num_queue_reqs": series.get("num_requests_waiting"),
                  "token_usage": series.get("kv_cache_usage_perc", series.get("gpu_cache_usage_perc"))}
        accepted, drafts = series.get("spec_decode_num_accepted_tokens_total"), series.get("spec_decode_num_drafts_total")
        if accepted is not None and drafts:
            values["lifetime_accept_length"] = 1.0 + accepted / drafts  # since it started: as SGLang's /server_info says it
        if before is not None:
            values["spec_accept_length"] = metrics.acceptance_between(before[0], series)
            generated, earlier = series.get("generation_tokens_total"), before[0].get("generation_tokens_total")
            if generated is not None and earlier is not None and now > before[1] and generated >= earlier:
                values["gen_throughput"] = (generated - earlier) / (now - before[1])
        return {k: v for k, v in values.items() if v is not None}

    def acceptance_between(self, before: dict[str, float] | None, after: dict[str, float] | None) -> float | None:
        return metrics.acceptance_between(before, after)


ENGINE: Engine = VLLM()
