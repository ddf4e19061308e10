"""Runbook step `bench_sweep`: the depth sweep of [bench], relaunching through the launch step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cockpit.format import plural
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
        "after": Param(str, None, help="what runs when the sweep is done: recommended (default), original or stop"),
        "serve_concurrency": Param(int, None, help="the concurrency the recommendation is made for"),
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

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        lines = []
        for decision in evidence.get("decisions") or []:
            line = f"concurrency {decision.get('concurrency')}: best {decision.get('best')}"
            if decision.get("speedup"):
                line += f", {decision['speedup']:.2f}x the baseline"
            if decision.get("within_noise"):
                line += f" (within noise of {decision.get('runner_up')})"
            lines.append(line)
        if evidence.get("serving"):
            lines.append(f"now {evidence['serving']}")
        lines += [f"failed: {f}" for f in evidence.get("failures") or []]
        return lines

    def why(self, spec: StepSpec) -> str:
        return "relaunches the server per depth config (gated each time) and measures throughput, latency and acceptance"

    async def plan(self, ctx: RunContext, spec: StepSpec):
        from cockpit.bench.sweep import parse_sweep

        sweep = parse_sweep(ctx.hub.config, ctx.runbook.spec)
        overrides: dict[str, Any] = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.params.items() if v is not None}
        sweep = replace(sweep, **overrides)
        if not sweep.drafter_accuracy:
            # no accuracies in [bench]: the training run a step before waited for measured them
            trained = _trained_accuracy(ctx, spec)
            if trained:
                sweep = replace(sweep, drafter_accuracy=trained)
        from cockpit.serving.steps import launch_depth

        configs = "\n".join(f"  {c.label}" for c in sweep.configs(launch_depth(ctx.runbook, ctx.runbook.spec.step(sweep.launch_step))))
        then = {"recommended": "then leave the recommended config running", "original": "then relaunch the launch step's own config",
                "stop": "then stop the server"}[sweep.after]
        text = (f"Relaunch '{sweep.launch_step}' for each of:\n{configs}\nat concurrency {', '.join(map(str, sweep.concurrency))}, "
                f"{plural(sweep.repeats, 'repeat')} of {sweep.requests} requests each; {then}.")
        return text, sweep

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        from cockpit.bench.sweep import run_sweep

        started = _now()

        async def yes(_text: str) -> bool:
            return True  # confirmed once, for the whole sweep, by the plan

        result = await run_sweep(ctx.runbook, planned, yes, progress=ctx.progress)
        evidence = result.to_json()
        if result.failures or not result.runs:
            return StepResult(StepState.FAILED, started, _now(), "; ".join(result.failures) or "no run completed", evidence)
        rec = result.recommendation()
        if rec is None:
            return StepResult(StepState.PASSED, started, _now(), f"{len(result.runs)} runs; nothing to recommend; {result.serving}",
                              evidence)
        message = f"{len(result.runs)} runs; recommended at concurrency {rec.concurrency}: {rec.best['config']}"
        if rec.best["speedup"]:
            message += f", {rec.best['speedup']:.2f}x the baseline"
        if rec.within_noise:
            message += " (within noise of the next)"
        return StepResult(StepState.PASSED, started, _now(), f"{message}; {result.serving}", evidence)


def _trained_accuracy(ctx: RunContext, spec: StepSpec) -> tuple[float, ...]:
    """The per-position accuracy a passed step before this one recorded (a `wait_run` step's run)."""
    steps = ctx.runbook.spec.steps
    for earlier in reversed(steps[: steps.index(ctx.runbook.spec.step(spec.name))]):
        result = ctx.runbook.result(earlier.name)
        values = (result.evidence or {}).get("per_position_acc") if result is not None and result.state is StepState.PASSED else None
        if values and all(isinstance(v, (int, float)) and 0 <= v <= 1 for v in values):
            return tuple(float(v) for v in values)
    return ()


BENCH_KINDS = (BenchSweep,)


def sweep_baseline(runbook):
    """The baseline without speculation the runbook's last sweep measured (its `baseline` rows, and where it found
    speculation should be off), for the live 'is speculation paying' verdict; None without a sweep that measured one."""
    import time as _time

    from cockpit.runbook.model import StepState
    from cockpit.serving.paying import baseline_of

    found = None
    for spec in runbook.spec.steps if runbook is not None else ():
        result = runbook.result(spec.name)
        if spec.kind == BenchSweep.name and result is not None and result.state is StepState.PASSED and result.evidence.get("rows"):
            if found is None or (result.finished_at or 0) > (found[1].finished_at or 0):
                found = (spec, result)
    stored = _stored_sweep()  # a sweep `cockpit bench sweep` ran (its runs are in the store, not in a step's result)
    swept, since = None, 0.0
    if found is not None and (stored is None or (found[1].finished_at or 0) >= stored[0]):
        spec, result = found
        when = _time.strftime("%Y-%m-%d %H:%M", _time.localtime(result.finished_at)) if result.finished_at else "an earlier run"
        swept, since = baseline_of(result.evidence["rows"], result.evidence.get("decisions"), f"sweep '{spec.name}' of {when}"), \
            float(result.finished_at or 0)
    elif stored is not None:
        ended, sweep_id, rows = stored
        from cockpit.bench.decision import decide

        swept, since = baseline_of(rows, [d.to_json() for d in decide(rows)],
                                   f"the stored sweep {sweep_id} of {_time.strftime('%Y-%m-%d %H:%M', _time.localtime(ended))}"), ended
    return _with_requested(swept, since)


def _with_requested(swept, since: float):
    """The sweep's baseline with each baseline measured on request since it (`cockpit bench baseline`) in its place at
    that concurrency; those alone where no sweep measured one."""
    import time as _time
    from dataclasses import replace

    from cockpit.bench.store import requested_baselines
    from cockpit.serving.paying import Baseline

    newer = {c: r for c, r in requested_baselines().items() if float(r.get("time") or 0) > since and r.get("output_throughput_tok_s")}
    if not newer:
        return swept
    base = swept if swept is not None else Baseline()
    tok_s, sources = dict(base.tok_s), dict(base.sources)
    for concurrency, run in newer.items():
        tok_s[concurrency] = float(run["output_throughput_tok_s"])
        sources[concurrency] = f"a baseline measured on request at {_time.strftime('%Y-%m-%d %H:%M', _time.localtime(float(run['time'])))}"
    return replace(base, tok_s=tok_s, sources=sources)


_STORED: dict[str, Any] = {"key": None, "found": None}  # the store read once per change of its folder (a verdict a second)


def _stored_sweep() -> tuple[float, str, list[dict[str, Any]]] | None:
    """The latest sweep in the benchmark store that measured a baseline: (when it ended, its id, its decision rows).
    Read again only when the store's folder changed (a run saved or removed): the live verdict asks at every poll."""
    from cockpit.bench.decision import table
    from cockpit.bench.store import runs_dir, sweep_runs

    folder = runs_dir()
    try:
        stat = folder.stat()
        key: tuple | None = (str(folder), stat.st_mtime_ns, stat.st_ino)
    except OSError:
        return None
    if key == _STORED["key"]:
        return _STORED["found"]
    runs = sweep_runs()
    found = None
    if runs and any(not r.get("speculative") for r in runs):
        found = (max(float(r.get("time") or 0) for r in runs), str(runs[-1].get("sweep")), table(runs))
    _STORED.update(key=key, found=found)
    return found


def live_verdict(runbook, step: str | None, figures: dict[str, Any]):
    """Is speculation paying for the server a launch step started (or one named by hand: `step` None), from its live
    figures: one rule for the CLI and the TUI.  Speculative where the step launched a draft or acceptance is read."""
    from cockpit.serving.paying import judge

    launched = runbook.spec.step(step) if runbook is not None and step else None
    accept = figures.get("accept_length") or {}
    speculative = bool(launched is not None and launched.params.get("draft_path")) or any(
        accept.get(k) is not None for k in ("window", "lifetime", "counters", "last"))
    return judge(figures, speculative, sweep_baseline(runbook))


def depth_schedule(runbook) -> dict[str, Any]:
    """The depth to serve at each load (issue 51 item 3), from the runbook's last sweep: per concurrency its best
    configuration (the median of its repeats, said when within the noise of the runner-up) as the engine's own command
    line (SGLang's three flags, vLLM's --speculative-config JSON: the launch step's line with that depth), or off where
    the baseline won; and the concurrency above which speculation should be off."""
    from cockpit.format import shell_words
    from cockpit.runbook.model import StepState
    from cockpit.serving.depth import DepthConfig
    from cockpit.serving.engines import engine_or_default

    sweeps = [(spec, runbook.result(spec.name)) for spec in runbook.spec.steps if spec.kind == BenchSweep.name]
    done = [(spec, result) for spec, result in sweeps if result is not None and result.state is StepState.PASSED
            and result.evidence.get("decisions")]
    if not done:
        from cockpit.errors import CockpitError

        raise CockpitError("no sweep has passed yet: run the sweep step first (its decisions are the schedule)")
    spec, result = max(done, key=lambda pair: pair[1].finished_at or 0)
    launch = spec.params.get("launch_step") or next((s.name for s in runbook.spec.steps if runbook.kind(s).launch), None)
    launched = runbook.launched(launch) if launch else None
    base = list(launched.argv) if launched is not None and launched.argv else []
    serving = engine_or_default(runbook.spec.step(launch).params.get("engine") if launch else None)
    rows, off_above = [], None
    for decision in sorted(result.evidence["decisions"], key=lambda d: d.get("concurrency") or 0):
        depth = DepthConfig.from_json(decision.get("best_depth"))
        off = decision.get("best") == "baseline" or depth is None or depth.steps is None
        if off and off_above is None:
            off_above = decision.get("concurrency")
        row = {"concurrency": decision.get("concurrency"), "best": decision.get("best"), "speedup": decision.get("speedup"),
               "within_noise": bool(decision.get("within_noise")), "runner_up": decision.get("runner_up"), "off": off}
        if not off and depth is not None and base:
            row["argv"] = shell_words(serving.with_depth(base, depth))
        rows.append(row)
    return {"sweep": spec.name, "engine": serving.name, "launch_step": launch, "rows": rows, "off_above": off_above,
            "note": None if base else f"'{launch}' has not launched: its command line per load is not known (depths only)"}


def render_schedule(schedule: dict[str, Any]) -> str:
    lines = [f"depth per load from sweep '{schedule['sweep']}' ({schedule['engine']}):"]
    for row in schedule["rows"]:
        head = f"  c={row['concurrency']}: "
        if row["off"]:
            lines.append(head + "speculation off (the baseline without it was fastest)")
            continue
        said = f"{row['best']}" + (f", {row['speedup']:.2f}x the baseline" if row.get("speedup") else "")
        if row["within_noise"] and row.get("runner_up"):
            said += f" (within noise of {row['runner_up']})"
        lines.append(head + said)
        if row.get("argv"):
            lines.append(f"      {row['argv']}")
    if schedule.get("off_above") is not None:
        lines.append(f"speculation should be off from c={schedule['off_above']}")
    if schedule.get("note"):
        lines.append(f"note: {schedule['note']}")
    return "\n".join(lines)
