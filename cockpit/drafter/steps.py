"""Runbook step `drafter_check`: inspect the draft SGLang will load; offer the key fix (asks first)."""

from __future__ import annotations

import asyncio
from typing import Any

from cockpit.drafter.fixkeys import DEFAULT_RULES
from cockpit.drafter.inspect import range_label
from cockpit.format import size
from cockpit.runbook.kind import Param, RunContext, StepKind
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState


def draft_path(ctx: RunContext | None, spec: StepSpec) -> str:
    """The draft the step checks: its `path`, or the checkpoint a step before it handed on (a
    `wait_run` step's newest complete checkpoint, `from_step`)."""
    if spec.params.get("path"):
        return spec.params["path"]
    source = spec.params.get("from_step")
    result = ctx.runbook.result(source) if ctx is not None and source else None
    checkpoint = (result.evidence or {}).get("checkpoint") if result is not None and result.state is StepState.PASSED else None
    if not checkpoint or not checkpoint.get("path"):
        from cockpit.errors import CockpitError

        raise CockpitError(f"'{source}' has not passed with a checkpoint yet: run it first (it hands its checkpoint to this step)")
    return checkpoint["path"]


def _label(spec: StepSpec) -> str:
    return spec.params.get("path") or f"the checkpoint of '{spec.params.get('from_step')}'"


async def inspect_on(hub, host: str, path: str):
    """inspect_draft of a path on a host: the local disk, or header-only over SFTP."""
    if hub.config.host(host).local:
        from cockpit.drafter.inspect import inspect_draft

        return await asyncio.to_thread(inspect_draft, path)
    from cockpit.drafter.remote import inspect_remote

    return await inspect_remote(hub.pool.get(host), path)


async def _inspect(ctx: RunContext, spec: StepSpec):
    report = await inspect_on(ctx.hub, spec.host, draft_path(ctx, spec))
    target = spec.params.get("target")
    if target:
        from cockpit.drafter.target import check_against, read_target, read_target_on

        if ctx.hub.config.host(spec.host).local:
            facts = await asyncio.to_thread(read_target, str(target))
        else:
            facts = await read_target_on(ctx.hub.pool.get(spec.host), str(target))
        against = check_against(report, facts)
        report.problems.extend(against.problems)
        report.notes.extend(against.notes)
        report.target = {"config": facts.source, "hidden_size": facts.hidden_size, "vocab_size": facts.vocab_size,
                         "num_hidden_layers": facts.num_hidden_layers, "mismatches": len(against.problems)}
    return report


async def _fix(ctx: RunContext, spec: StepSpec):
    path = draft_path(ctx, spec)
    if ctx.hub.config.host(spec.host).local:
        from cockpit.drafter.fixkeys import fix_keys

        return await asyncio.to_thread(fix_keys, path, DEFAULT_RULES)
    from cockpit.drafter.remote import _fix_remote

    return await _fix_remote(ctx.transport(spec.host), path, DEFAULT_RULES, False)


class DrafterCheck(StepKind):
    name = "drafter_check"
    params = {
        "path": Param(str, None, help="the draft directory (or file) on the host"),
        "from_step": Param(str, None, help="instead of path: the checkpoint a wait_run step before this one found (read at this step's host: shared storage)"),
        "sglang": Param(str, None, help="the SGLang version that will load it (default: any supported version)"),
        "vllm": Param(str, None, help="instead: the vLLM version that will load it (vLLM's loader judges it)"),
        "fix": Param(bool, True, help="offer the layers.0. -> midlayer. fix when it is the problem"),
        "target": Param(str, None, help="the target model's folder (or its config.json) on the host: the draft is checked "
                        "against it (hidden size, vocabulary, the layers it reads); a mismatch fails the step"),
    }

    @staticmethod
    def judge(spec: StepSpec) -> tuple[str | None, str]:
        """(the version, the engine) whose loader judges the draft."""
        from cockpit.serving.engines import judged_by

        return judged_by(spec.params)

    def title(self, spec: StepSpec) -> str:
        version, engine = self.judge(spec)
        from cockpit.serving.engines import label

        return spec.title or f"draft at {_label(spec)} ready for {label(engine)} {version or '(any)'}"

    def validate(self, spec: StepSpec) -> str | None:
        from cockpit.serving.engines import engine, names

        given = [name for name in names() if spec.params.get(name)]
        if len(given) > 1:
            return f"give {' or '.join(repr(n) for n in given)} (the engine that will load the draft), not both"
        for name in given:
            problem = engine(name).version_problem(str(spec.params[name]))
            if problem:
                return f"{name}: {problem}"
        if bool(spec.params.get("path")) == bool(spec.params.get("from_step")):
            return "give 'path' (the draft on the host) or 'from_step' (a wait_run step whose checkpoint it checks), one of them"
        return None

    def check_references(self, spec: StepSpec, before, config):
        source = spec.params.get("from_step")
        if source is None:
            return None
        earlier = {s.name: s for s in before}
        if source not in earlier:
            return "from_step", f"'{source}' is not a step before this one"
        if earlier[source].kind != "wait_run":
            return "from_step", f"'{source}' is a {earlier[source].kind} step: from_step takes a wait_run step (it hands on a checkpoint)"
        return None

    def why(self, spec: StepSpec) -> str:
        # one version on screen: the one the step judges for; the range only where no version is known
        from cockpit.serving.engines import engine as engine_of

        version, engine = self.judge(spec)
        loading = engine_of(engine).draft_loading
        hint = f" ({loading.hint})" if loading.hint else ""
        if version:
            return f"judged by {loading.label} {version}'s loader, from the headers{hint}"
        return f"judged by {loading.label}'s loader at every release, from the headers{hint}"

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        if "tensors" not in evidence:
            return []
        lines = [f"{evidence['tensors']} tensors in {', '.join(evidence.get('files') or [])} at {evidence.get('path')} on {evidence.get('host')}"]
        if evidence.get("fixed"):
            lines.append(f"renamed {evidence['fixed']} keys layers.0.* to midlayer.* (header only)")
        if evidence.get("target"):
            target = evidence["target"]
            lines.append(f"checked against its target {target.get('config')}: hidden size {target.get('hidden_size')}, vocabulary "
                         f"{target.get('vocab_size')}, {target.get('num_hidden_layers')} layers"
                         + (f"; {target['mismatches']} mismatch(es)" if target.get("mismatches") else ": it fits"))
        for version_range, problems in (evidence.get("verdicts") or {}).items():
            who = range_label(version_range)
            lines.append(f"{who}: " + ("ready" if not problems else "; ".join(problems)))
        return lines

    async def plan(self, ctx: RunContext, spec: StepSpec):
        report = await _inspect(ctx, spec)
        version, engine = self.judge(spec)
        if report.ready(version, engine):
            return None, report
        problems = [p for ps in report.verdicts(version, engine).values() for p in ps]
        fixable = {p.code for p in problems} == {"layers0_keys"}
        if fixable and spec.params.get("fix", True):
            count = sum(1 for name in report.tensors if name.startswith("layers.0."))
            return (f"On {spec.host}, rename {count} keys layers.0.* to midlayer.* in {', '.join(report.files)} "
                    f"under {draft_path(ctx, spec)} (the header only; journaled, crash-safe; the index too)."), report
        return None, report

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        version, engine = self.judge(spec)
        report = planned
        evidence: dict[str, Any] = {"path": draft_path(ctx, spec), "host": spec.host, "files": report.files, "tensors": len(report.tensors)}
        if not report.ready(version, engine):
            problems = [p for ps in report.verdicts(version, engine).values() for p in ps]
            if {p.code for p in problems} == {"layers0_keys"} and spec.params.get("fix", True):
                fixed = await _fix(ctx, spec)
                ctx.audit("fix_keys", host=spec.host, step=spec.name, path=evidence["path"], renamed=fixed.changed)
                evidence["fixed"] = fixed.changed
                report = await _inspect(ctx, spec)
        evidence["verdicts"] = {r: [p.message for p in ps] for r, ps in report.verdicts(version, engine).items()}
        if report.target is not None:
            evidence["target"] = report.target
        if report.ready(version, engine):
            extra = f"; renamed {evidence['fixed']} keys" if evidence.get("fixed") else ""
            if report.target is not None:  # what the check against its target rests on
                extra += (f"; fits its target (hidden size {report.target['hidden_size']}, vocabulary {report.target['vocab_size']}: "
                          f"{report.target['config']})")
            return StepResult(StepState.PASSED, started, _now(), f"draft ready ({len(report.tensors)} tensors, "
                              f"{size(report.total_bytes)}){extra}", evidence)
        first = next(p for ps in report.verdicts(version, engine).values() for p in ps)
        return StepResult(StepState.FAILED, started, _now(), first.message + (f" (fix: {first.fix})" if first.fix else ""), evidence)


DRAFTER_KINDS = (DrafterCheck,)
