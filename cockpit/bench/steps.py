"""Runbook step `bench_sweep`: the depth sweep of [bench], relaunching through the launch step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cockpit.runbook.kind import Param, RunContext, StepKind
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState


class BenchSweep(StepKind):
    name = "bench_sweep"
    destructive = True
    params = {
        "launch_step": Param(str, None), "depths": Param(list, None), "concurrency": Param(list, None),
        "requests": Param(int, None), "max_tokens": Param(int, None), "repeats": Param(int, None),
        "baseline": Param(bool, None), "prompts": Param(str, None), "api": Param(str, None),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or "benchmark sweep over draft depths"

    def validate(self, spec: StepSpec) -> str | None:
        from cockpit.bench.sweep import sweep_value_problem

        for key, value in spec.params.items():
            problem = None if value is None else sweep_value_problem(key, value)
            if problem:
                return problem
        return None

    def why(self, spec: StepSpec) -> str:
        return "relaunches the server per depth config (gated each time) and measures throughput, latency and acceptance"

    async def plan(self, ctx: RunContext, spec: StepSpec):
        from cockpit.bench.sweep import parse_sweep

        sweep = parse_sweep(ctx.hub.config, ctx.runbook.spec)
        overrides = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.params.items() if v is not None}
        sweep = replace(sweep, **overrides)
        configs = ", ".join(c.label for c in sweep.configs())
        text = (f"Relaunch '{sweep.launch_step}' for each of: {configs}; at concurrency {', '.join(map(str, sweep.concurrency))}, "
                f"{sweep.repeats} repeat(s) of {sweep.requests} requests each; then stop the server.")
        return text, sweep

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        from cockpit.bench.sweep import run_sweep

        started = _now()

        async def yes(_text: str) -> bool:
            return True  # confirmed once, for the whole sweep, by the plan

        result = await run_sweep(ctx.runbook, planned, yes, progress=ctx.progress)
        rows = result.table()
        evidence = {"rows": rows, "failures": result.failures, "runs": [r["file"] for r in result.runs]}
        if result.failures or not rows:
            return StepResult(StepState.FAILED, started, _now(), "; ".join(result.failures) or "no run completed", evidence)
        best = max(rows, key=lambda r: r["speedup"] or 0)
        return StepResult(StepState.PASSED, started, _now(), f"{len(result.runs)} runs; best {best['config']} at concurrency "
                          f"{best['concurrency']}: {best['throughput_median']:.0f} tok/s"
                          + (f", {best['speedup']:.2f}x the baseline" if best["speedup"] else ""), evidence)


BENCH_KINDS = (BenchSweep,)
