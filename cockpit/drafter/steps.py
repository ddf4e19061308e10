"""Runbook step `drafter_check`: inspect the draft SGLang will load; offer the key fix (asks first)."""

from __future__ import annotations

import asyncio
from typing import Any

from cockpit.drafter.fixkeys import DEFAULT_RULES
from cockpit.runbook.kind import Param, RunContext, StepKind
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState


async def _inspect(ctx: RunContext, spec: StepSpec):
    if ctx.hub.config.host(spec.host).local:
        from cockpit.drafter.inspect import inspect_draft

        return await asyncio.to_thread(inspect_draft, spec.params["path"])
    from cockpit.drafter.remote import inspect_remote

    return await inspect_remote(ctx.transport(spec.host), spec.params["path"])


async def _fix(ctx: RunContext, spec: StepSpec):
    if ctx.hub.config.host(spec.host).local:
        from cockpit.drafter.fixkeys import fix_keys

        return await asyncio.to_thread(fix_keys, spec.params["path"], DEFAULT_RULES)
    from cockpit.drafter.remote import _fix_remote

    return await _fix_remote(ctx.transport(spec.host), spec.params["path"], DEFAULT_RULES, False)


class DrafterCheck(StepKind):
    name = "drafter_check"
    params = {
        "path": Param(str, None, required=True, help="the draft directory (or file) on the host"),
        "sglang": Param(str, None, help="the SGLang version that will load it (default: any supported version)"),
        "fix": Param(bool, True, help="offer the layers.0. -> midlayer. fix when it is the problem"),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"draft at {spec.params['path']} ready for SGLang {spec.params.get('sglang') or '(any)'}"

    def why(self, spec: StepSpec) -> str:
        return "layers.0.* keys are skipped silently by SGLang 0.4.9-0.5.11 (accept len 1.00): checked from the headers"

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        if "tensors" not in evidence:
            return []
        lines = [f"{evidence['tensors']} tensors in {', '.join(evidence.get('files') or [])} at {evidence.get('path')} on {evidence.get('host')}"]
        if evidence.get("fixed"):
            lines.append(f"renamed {evidence['fixed']} keys layers.0.* to midlayer.* (header only)")
        for sglang_range, problems in (evidence.get("verdicts") or {}).items():
            lines.append(f"SGLang {sglang_range}: " + ("ready" if not problems else "; ".join(problems)))
        return lines

    async def plan(self, ctx: RunContext, spec: StepSpec):
        report = await _inspect(ctx, spec)
        version = spec.params.get("sglang")
        if report.ready(version):
            return None, report
        problems = [p for ps in report.verdicts(version).values() for p in ps]
        fixable = {p.code for p in problems} == {"layers0_keys"}
        if fixable and spec.params.get("fix", True):
            count = sum(1 for name in report.tensors if name.startswith("layers.0."))
            return (f"On {spec.host}, rename {count} keys layers.0.* to midlayer.* in {', '.join(report.files)} "
                    f"under {spec.params['path']} (the header only; journaled, crash-safe; the index too)."), report
        return None, report

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        version = spec.params.get("sglang")
        report = planned
        evidence: dict[str, Any] = {"path": spec.params["path"], "host": spec.host, "files": report.files, "tensors": len(report.tensors)}
        if not report.ready(version):
            problems = [p for ps in report.verdicts(version).values() for p in ps]
            if {p.code for p in problems} == {"layers0_keys"} and spec.params.get("fix", True):
                fixed = await _fix(ctx, spec)
                ctx.audit("fix_keys", host=spec.host, step=spec.name, path=spec.params["path"], renamed=fixed.changed)
                evidence["fixed"] = fixed.changed
                report = await _inspect(ctx, spec)
        evidence["verdicts"] = {r: [p.message for p in ps] for r, ps in report.verdicts(version).items()}
        if report.ready(version):
            extra = f"; renamed {evidence['fixed']} keys" if evidence.get("fixed") else ""
            return StepResult(StepState.PASSED, started, _now(), f"draft ready ({len(report.tensors)} tensors, "
                              f"{report.total_bytes / 2**20:.0f} MiB){extra}", evidence)
        first = next(p for ps in report.verdicts(version).values() for p in ps)
        return StepResult(StepState.FAILED, started, _now(), first.message + (f" (fix: {first.fix})" if first.fix else ""), evidence)


DRAFTER_KINDS = (DrafterCheck,)
