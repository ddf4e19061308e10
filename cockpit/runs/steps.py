"""Runbook step `wait_run`: wait for a training run of [runs] to finish into a complete checkpoint.

Passes when the run has finished and its newest checkpoint is complete (evidence: the checkpoint,
its key layout, the estimated acceptance length); fails at once when the run crashes, dies or stalls,
with the log line that shows it.  A `drafter_check` step with `from_step` checks that checkpoint.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cockpit.runbook.kind import Param, RunContext, StepKind
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState


class WaitRun(StepKind):
    name = "wait_run"
    params = {
        "run": Param(str, None, required=True, help="the [runs.NAME] to wait for"),
        "timeout_min": Param((int, float), 24 * 60, help="give up after this many minutes"),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"training run {spec.params['run']} finished into a checkpoint"

    def why(self, spec: StepSpec) -> str:
        return "the draft to serve is the run's last complete checkpoint, not one still being written"

    def validate(self, spec: StepSpec) -> str | None:
        if spec.params.get("timeout_min") is not None and spec.params["timeout_min"] <= 0:
            return "timeout_min must be more than 0"
        return None

    def check_references(self, spec: StepSpec, before, config) -> tuple[str | None, str] | None:
        from cockpit.runs.spec import parse_runs

        runs = parse_runs(config)
        run = runs.get(spec.params["run"])
        if run is None:
            return "run", f"no [runs.{spec.params['run']}] in the config; runs: {', '.join(sorted(runs)) or 'none'}"
        if run.host != spec.host:
            return "host", f"run '{run.name}' is on host '{run.host}': the step's host must be that one"
        return None

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        lines = []
        if evidence.get("state"):
            lines.append(f"run {spec.params['run']}: {evidence['state']}" + (f" ({evidence['finished']})" if evidence.get("finished") else ""))
        checkpoint = evidence.get("checkpoint") or {}
        if checkpoint:
            lines.append(f"checkpoint {checkpoint.get('path')}: {checkpoint.get('key_layout') or 'layout unknown'}; {checkpoint.get('verdict', '')}")
        estimate = evidence.get("estimate") or {}
        if estimate:
            lines.append(f"estimated acceptance length {estimate['with_bonus']:.2f} with the bonus token "
                         f"({estimate['without_bonus']:.2f} without) at depth {estimate['depth']}, from {estimate['source']} accuracy")
        lines += [f"{f['kind']}: {f['message']}" for f in evidence.get("flags") or []]
        return lines

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        from cockpit.runs.spec import parse_runs
        from cockpit.runs.watch import CONFIRM_AFTER_S, RunWatcher

        started = _now()
        runs = parse_runs(ctx.hub.config)
        run = runs[spec.params["run"]]
        watcher = RunWatcher(run, ctx.transport(run.host))
        deadline = started + 60.0 * float(spec.params.get("timeout_min") or 24 * 60)
        while True:
            status, _ = await watcher.poll(catch_up=True)
            evidence = {"run": run.name, "state": status.state, "why": status.evidence, "step": status.step, "total": status.total,
                        "finished": status.finished, "checkpoint": status.latest_checkpoint, "estimate": status.estimate,
                        "per_position_acc": status.per_position_acc, "per_position_source": status.per_position_source,
                        "flags": [f.to_json() for f in status.flags]}
            ctx.progress({"text": f"run {run.name}: {status.state}, step {status.step}/{status.total or '?'}",
                          "done": status.step or 0, "total": status.total or 0})
            checkpoint = status.latest_checkpoint
            if status.state == "finished" and checkpoint and checkpoint.get("complete"):
                return StepResult(StepState.PASSED, started, _now(), f"run {run.name} finished; checkpoint {checkpoint['path']}", evidence)
            if status.state in ("crashed", "oom", "stalled", "died", "cancelled", "ended"):
                flag = status.flags[0] if status.flags else None
                why = flag.message + (f" ({flag.line[:120]})" if flag and flag.line else "") if flag else status.state
                return StepResult(StepState.FAILED, started, _now(), f"run {run.name} {status.state}: {why}", evidence)
            if status.read_error and status.step is None:
                return StepResult(StepState.FAILED, started, _now(), f"run {run.name}: {status.read_error}", evidence)
            if _now() > deadline:
                return StepResult(StepState.FAILED, started, _now(), f"run {run.name} still {status.state} after "
                                  f"{spec.params.get('timeout_min')} min", evidence)
            await asyncio.sleep(CONFIRM_AFTER_S if watcher.confirming else run.poll_s)  # an ending is confirmed by a second look


RUNS_KINDS = (WaitRun,)
