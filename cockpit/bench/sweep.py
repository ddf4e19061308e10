"""Depth sweeps: for each depth config, relaunch the server through the runbook's launch step (the
gate re-verifies the GPUs each time), wait until ready, record the effective server config, warm up,
measure each concurrency, repeat, and report the median with its spread; then decide (the best
config per concurrency) and leave the server running the recommended config, the original one, or
none, as the user chose.

Depth N is N steps of a topk-1 chain (N + 1 draft tokens; serving/depth.py).  The configs are the
baseline, the chains of `depths`, any `configs` given with all three numbers, and the launch step's
own current config (the one a fix produced, say), each once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from cockpit.bench.client import APIS, Workload, run_closed_loop
from cockpit.bench.decision import Decision, decide, predicted_vs_measured, recommend, table
from cockpit.serving.live import opener_for, server_info
from cockpit.bench.stats import summarize
from cockpit.bench.store import save_run
from cockpit.bench.workload import load_prompts
from cockpit.errors import CockpitError
from cockpit.runbook.engine import GateClosed
from cockpit.runbook.model import StepState
from cockpit.serving.depth import DepthConfig
from cockpit.serving import engines
from cockpit.serving.server import wait_ready
from cockpit.serving.steps import is_launch, is_ready

AFTER = ("recommended", "original", "stop")


@dataclass(frozen=True)
class SweepSpec:
    launch_step: str
    depths: tuple[int, ...] = (16, 10, 5)  # steps of topk-1 chains
    configs_given: tuple[DepthConfig, ...] = ()  # [[bench.configs]] with steps, topk, draft_tokens
    baseline: bool = True
    include_launch: bool = True  # also the launch step's own current config
    concurrency: tuple[int, ...] = (1, 8)
    requests: int = 64
    max_tokens: int = 256
    repeats: int = 3
    prompts: str | None = None
    api: str | None = None  # sglang (/generate) or openai (/v1/chat/completions); default: the launch step's engine's own
    temperature: float = 0.0
    ready_timeout_s: float = 1800.0
    seed: int | None = None
    after: str = "recommended"  # what runs when the sweep is done: recommended, original, stop
    serve_concurrency: int | None = None  # the concurrency the recommendation is made for (default: the highest)
    drafter_accuracy: tuple[float, ...] = ()  # the drafter's per-position accuracies, for predicted acceptance

    def configs(self, launch: DepthConfig | None = None) -> list[DepthConfig]:
        found = ([DepthConfig()] if self.baseline else []) + [DepthConfig.chain(n) for n in self.depths] + list(self.configs_given)
        if self.include_launch and launch is not None and launch.speculative:
            found.append(launch)
        return list(dict.fromkeys(found))


SWEEP_KEYS = (set(SweepSpec.__dataclass_fields__) - {"configs_given"}) | {"configs"}


def sweep_value_problem(key: str, value: Any) -> str | None:
    """Why a [bench] (or bench_sweep step) value is wrong; None when it is good.  One place for both."""
    if key in ("depths", "concurrency"):
        if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            return f"{key} must be a non-empty list of positive integers, got {value!r}"
    elif key in ("requests", "max_tokens", "repeats"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{key} must be a positive integer, got {value!r}"
    elif key == "api":
        if value not in APIS:
            return f"api must be {' or '.join(repr(a) for a in APIS)}, got {value!r}"
    elif key == "after":
        if value not in AFTER:
            return f"after must be one of {', '.join(AFTER)} (what runs when the sweep is done), got {value!r}"
    elif key in ("baseline", "include_launch"):
        if not isinstance(value, bool):
            return f"{key} must be true or false, got {value!r}"
    elif key == "serve_concurrency":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"serve_concurrency must be a positive integer, got {value!r}"
    elif key == "drafter_accuracy":
        if not isinstance(value, list) or not value or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in value):
            return f"drafter_accuracy must be a list of per-position accuracies between 0 and 1, got {value!r}"
    elif key == "configs":
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            return "configs must be tables with steps, topk and draft_tokens: configs = [{steps = 4, topk = 4, draft_tokens = 8}]"
        for item in value:
            extra = set(item) - {"steps", "topk", "draft_tokens"}
            if extra:
                return f"a config takes steps, topk and draft_tokens, not {', '.join(sorted(extra))}"
            depth = DepthConfig.from_json(item)
            if depth is None or not depth.speculative:
                return f"a config needs steps, topk and draft_tokens as integers, got {item!r}"
            problem = depth.problem()
            if problem:
                return f"config {item!r} is impossible: {problem}"
    elif key in ("temperature", "ready_timeout_s"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            return f"{key} must be a non-negative number, got {value!r}"
    elif key == "seed":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"seed must be an integer, got {value!r}"
    elif key in ("prompts", "launch_step"):
        if not isinstance(value, str) or not value:
            return f"{key} must be a non-empty string, got {value!r}"
    return None


def parse_sweep(config, runbook_spec) -> SweepSpec:
    """The [bench] table, checked against the runbook: errors name the file, line and key."""
    from cockpit.config import did_you_mean, locate
    from cockpit.errors import ConfigError

    raw = config.raw.get("bench") or {}
    where = str(config.path or "<config>")

    def fail(key: str | None, message: str) -> ConfigError:
        return ConfigError(where, message, line=locate(config.text, ("bench",), key), key=key)

    if not isinstance(raw, dict):
        raise ConfigError(where, "[bench] must be a table", key="bench")
    for key in raw:
        if key not in SWEEP_KEYS:
            hint = did_you_mean(key, SWEEP_KEYS)
            raise fail(key, f"[bench] has no key '{key}'{hint}; keys: {', '.join(sorted(SWEEP_KEYS))}")
        problem = sweep_value_problem(key, raw[key])
        if problem:
            raise fail(key, problem)
    launches = [s.name for s in runbook_spec.steps if is_launch(s.kind)]
    step = raw.get("launch_step") or (launches[-1] if launches else None)
    if step is None or step not in launches:
        hint = did_you_mean(step or "", launches)
        named = f"'{step}' is not" if step else "needs"
        raise fail("launch_step" if "launch_step" in raw else None,
                   f"launch_step {named} a serve_launch step of the runbook{hint} (have: {', '.join(launches) or 'none'})")
    values: dict[str, Any] = {"launch_step": step}
    for key, value in raw.items():
        if key == "configs":
            values["configs_given"] = tuple(DepthConfig.from_json(v) for v in value)
        elif key != "launch_step":
            values[key] = tuple(value) if isinstance(value, list) else value
    if values.get("serve_concurrency") is not None and values["serve_concurrency"] not in values.get("concurrency", SweepSpec.concurrency):
        raise fail("serve_concurrency", f"serve_concurrency {values['serve_concurrency']} is not one of the concurrencies measured")
    return SweepSpec(**values)


@dataclass
class SweepResult:
    runs: list[dict[str, Any]] = field(default_factory=list)  # one summary per (config, concurrency, repeat)
    failures: list[str] = field(default_factory=list)
    sweep_id: str = ""
    accuracies: tuple[float, ...] = ()
    serve_concurrency: int | None = None
    serving: str = ""  # what runs now, said in one line

    @classmethod
    def from_runs(cls, runs: list[dict[str, Any]]) -> "SweepResult":
        """A sweep read back from its stored runs (what `bench report` shows)."""
        accuracies = next((r.get("drafter_accuracy") for r in runs if r.get("drafter_accuracy")), None) or ()
        return cls(runs=list(runs), sweep_id=str(runs[0].get("sweep") or "") if runs else "", accuracies=tuple(accuracies))

    def table(self) -> list[dict[str, Any]]:
        return table(self.runs)

    def render(self, fmt: str = "text") -> str:
        from cockpit.bench import report

        data = self.to_json()
        if fmt == "json":
            return json.dumps(data, indent=2)
        if fmt == "csv":
            return report.sweep_csv(data)
        decisions = decide(data["rows"])
        recommended = recommend(decisions, self.serve_concurrency)
        return (report.sweep_markdown if fmt == "md" else report.sweep_text)(data, decisions, recommended)

    def decisions(self) -> list[Decision]:
        return decide(self.table())

    def recommendation(self) -> Decision | None:
        return recommend(self.decisions(), self.serve_concurrency)

    def to_json(self) -> dict[str, Any]:
        rows = self.table()
        rec = self.recommendation()
        return {"sweep": self.sweep_id, "rows": rows, "decisions": [d.to_json() for d in decide(rows)],
                "recommended": rec.to_json() if rec else None, "serving": self.serving,
                "acceptance": predicted_vs_measured(rows, list(self.accuracies)), "failures": self.failures,
                "runs": [r.get("file") for r in self.runs]}


def variant_of(depth: DepthConfig) -> dict[str, Any]:
    """The launch step's depth parameters for one run of this config (a fix applied by hand keeps the
    rest of its command line; only the depth flags change)."""
    if depth.speculative:
        return {"depth": None, "steps": depth.steps, "topk": depth.topk, "draft_tokens": depth.draft_tokens}
    return {"depth": None, "steps": None, "topk": None, "draft_tokens": None, "draft_path": None}


async def _relaunch(runbook, launch, depth: DepthConfig | None, confirm, report) -> tuple[Any, str | None]:
    """Stop what the launch step runs and start it with `depth` (None: its own config), through its
    gate; the GPUs of a stopped server can take a moment to free.  (launched server, failure)."""
    label = depth.label if depth is not None else "the launch step's own config"
    return await relaunch(runbook, launch, variant_of(depth) if depth is not None else None, label, confirm, report)


@dataclass(frozen=True)
class LaunchTarget:
    """What a measurement through a launch step works with: the step, its engine, its host's transport, and whether
    its server ran before (the step passed: it runs its own config again afterwards)."""

    launch: Any
    serving: Any
    transport: Any
    was_serving: bool


def launch_target(runbook, name: str) -> LaunchTarget:
    launch = runbook.spec.step(name)
    serving = engines.engine(getattr(runbook.kind(launch), "engine", lambda _spec: None)(launch))
    before = runbook.result(launch.name)
    return LaunchTarget(launch, serving, runbook.hub.pool.get(launch.host), before is not None and before.state is StepState.PASSED)


async def relaunch_ready(runbook, target: LaunchTarget, variant: dict[str, Any] | None, label: str, confirm, report,
                         timeout_s: float) -> tuple[Any, str | None]:
    """`relaunch`, then wait until its server is ready.  (launched server, failure: said with `label`)."""
    server, failure = await relaunch(runbook, target.launch, variant, label, confirm, report)
    if failure is None:
        report(f"waiting for {label} to be ready")
        ready = await wait_ready(target.transport, server.pid, server.port, server.log, timeout_s)
        if ready.state != "ready":
            failure = f"{label}: server not ready: {ready.diagnoses[0].message if ready.diagnoses else ready.state}"
    return server, failure


async def relaunch(runbook, launch, variant: dict[str, Any] | None, label: str, confirm, report) -> tuple[Any, str | None]:
    """Stop what the launch step runs and start it with `variant` over its parameters (None: as it is), through its
    gate; the GPUs of a stopped server can take a moment to free.  (launched server, failure)."""
    await runbook.stop_server(launch.name, confirm, planned=True)
    report(f"launching {label}")
    hosts = runbook.kind(launch).hosts(launch)
    before = runbook.spec.steps[: runbook.spec.steps.index(launch)]
    for attempt in range(6):
        # the stopped server's memory may have turned the launch host's gates stale: verified again, not an error
        for gate in [g for g in runbook.gates() if g in before and g.host in hosts]:
            if runbook.result(gate.name) is None or runbook.result(gate.name).state is not StepState.PASSED:
                await runbook.run_step(gate.name, confirm)
        try:
            launched = await runbook.run_step(launch.name, confirm, variant=variant)
        except GateClosed as exc:
            if attempt == 5 or [s for s in before if s not in runbook.gates() and runbook.result(s.name) is not None
                                and runbook.result(s.name).state is not StepState.PASSED]:
                return None, f"{label}: {exc}"
            report(f"{label}: gate closed ({'; '.join(exc.reasons)[:120]}); retrying in 2 s")
            await asyncio.sleep(2)
            continue
        if launched.state is not StepState.PASSED:
            return None, f"{label}: {launched.message}"
        return runbook.launched(launch.name), None
    return None, f"{label}: not launched"


async def run_sweep(runbook, sweep: SweepSpec, confirm, progress=None, after: str | None = None) -> SweepResult:
    """Relaunch per config through the runbook (its gates apply), measure, decide, and leave the
    server as `after` (default: the sweep's own setting) says.  `progress` gets every progress state."""
    from cockpit.serving.steps import launch_depth

    target = launch_target(runbook, sweep.launch_step)
    launch, serving, transport = target.launch, target.serving, target.transport
    engine = serving.name
    api = sweep.api or serving.capabilities.bench_api
    after = after or sweep.after
    prompts = load_prompts(sweep.prompts, sweep.seed)
    configs = sweep.configs(launch_depth(runbook, launch))
    total = len(configs) * len(sweep.concurrency) * sweep.repeats
    done = 0
    started = time.monotonic()
    result = SweepResult(sweep_id=time.strftime("%Y%m%d-%H%M%S"), accuracies=sweep.drafter_accuracy,
                         serve_concurrency=sweep.serve_concurrency)

    def report(text: str) -> None:
        elapsed = time.monotonic() - started
        eta = (elapsed / done * (total - done)) if done else None
        state = {"text": text, "done": done, "total": total, "elapsed_s": elapsed, "eta_s": eta, "runs": list(result.runs)}
        if progress is not None:
            progress(state)

    approved = False

    async def confirm_once(text: str) -> bool:
        nonlocal approved
        if approved:
            return True
        approved = await confirm("The sweep relaunches the server for each depth config:\n" + text)
        return approved

    failure = await bring_up(runbook, launch, confirm, report)
    if failure is not None:
        result.failures.append(f"{failure} before the sweep")
        return result
    finished = False
    try:
        for depth in configs:
            server, failure = await relaunch_ready(runbook, target, variant_of(depth), depth.label, confirm_once, report,
                                                   sweep.ready_timeout_s)
            if failure is not None:
                result.failures.append(failure)
                done += len(sweep.concurrency) * sweep.repeats
                continue
            info = await server_info(transport, server.port) if serving.capabilities.server_info else {}
            for concurrency in sweep.concurrency:
                for repeat in range(1, sweep.repeats + 1):
                    report(f"{depth.label}: concurrency {concurrency}, run {repeat}/{sweep.repeats}")
                    workload = Workload(prompts, sweep.requests, concurrency, sweep.max_tokens, sweep.temperature)
                    summary, records = await measure(serving, transport, server.port, api, workload)
                    summary.update(config=depth.label, label=f"{depth.short} c{concurrency} r{repeat}", concurrency=concurrency, engine=engine,
                                   repeat=repeat, speculative=depth.speculative, **depth.to_json(), api=api,
                                   max_tokens=sweep.max_tokens, sweep=result.sweep_id, drafter_accuracy=list(sweep.drafter_accuracy),
                                   server_info={k: info.get(k) for k in ("speculative_algorithm", "speculative_num_steps",
                                                                          "speculative_eagle_topk", "speculative_num_draft_tokens",
                                                                          "max_running_requests", "tp_size", "model_path") if k in info},
                                   time=time.time(), host=launch.host)
                    summary["file"] = str(save_run(summary, [r.to_json() for r in records], summary["label"]))
                    result.runs.append(summary)
                    done += 1
                    report(f"{depth.label}: concurrency {concurrency}, run {repeat} done: "
                           f"{summary['output_throughput_tok_s']:.1f} tok/s")
        finished = True
    finally:
        if not finished:
            with contextlib.suppress(CockpitError):
                await runbook.stop_server(launch.name, _yes, planned=True)
    result.serving = await _leave_serving(runbook, launch, result, after, report)
    report(f"sweep done; {result.serving}")
    return result


async def bring_up(runbook, launch, confirm, report) -> str | None:
    """Run the steps before the launch step that have not passed (they are its gates); the first that fails, said."""
    for spec in runbook.spec.steps:
        if spec.name == launch.name:
            break
        result_before = runbook.result(spec.name)
        if result_before is None or result_before.state is not StepState.PASSED:
            report(f"running '{spec.name}' first")
            outcome = await runbook.run_step(spec.name, confirm)
            if outcome.state is not StepState.PASSED:
                return f"'{spec.name}' failed: {outcome.message}"
    return None


async def measure(serving, transport, port: int, api: str, workload: Workload) -> tuple[dict[str, Any], list]:
    """One closed-loop run against the server on `port` of the launch host: its summary (the acceptance length as the
    engine gives it: in each response, or its counters across the run where responses carry none, as vLLM's) and
    its requests."""
    by_metrics = serving.capabilities.acceptance_source == "metrics"
    before = await _series(serving, transport, port) if by_metrics else None
    records, start, end = await run_closed_loop(f"http://127.0.0.1:{port}", api, workload, opener=opener_for(transport))
    summary = summarize(records, start, end)
    if by_metrics:
        # responses that carry no verify count (vLLM's): its counters across the run (as `vllm bench serve`)
        measured = serving.acceptance_between(before, await _series(serving, transport, port))
        summary.update(accept_length=round(measured, 4) if measured is not None else None,
                       accept_length_source=f"{serving.capabilities.metrics_prefix}spec_decode counters (/metrics)")
    return summary, records


async def follow_ready(runbook, launch, report) -> None:
    """The readiness steps after the launch step that follow its server, run again for the server now launched."""
    for spec in runbook.spec.steps[runbook.spec.steps.index(launch) + 1:]:
        kind = runbook.kind(spec)
        if is_ready(spec.kind) and kind.launch_of(runbook, spec) == launch.name:
            report(f"waiting for '{spec.name}'")
            await runbook.run_step(spec.name, _yes)


class AskOnce:
    """The one question of a measurement that relaunches the server once or more: asked at the first relaunch, its
    answer kept for the rest."""

    def __init__(self, confirm, preface: str):
        self.confirm, self.preface = confirm, preface
        self.answer: bool | None = None

    async def __call__(self, text: str) -> bool:
        if self.answer is None:
            self.answer = bool(await self.confirm(f"{self.preface}:\n{text}"))
        return self.answer

    @property
    def refused(self) -> bool:
        return self.answer is False


async def wind_up(runbook, launch, ask: AskOnce, was_serving: bool, finished: bool, report) -> tuple[str, str | None]:
    """After a measurement's relaunches: nothing changed where its question was refused; else the launch step's server
    as it was before (what `restore` says), a measurement cut short by an error stopping its own server first."""
    if ask.refused:
        return "nothing was changed (not confirmed)", None
    if not finished:
        with contextlib.suppress(CockpitError):
            await runbook.stop_server(launch.name, _yes, planned=True)
    return await restore(runbook, launch, was_serving, report)


async def restore(runbook, launch, was_serving: bool, report) -> tuple[str, str | None]:
    """After a measurement that relaunched the launch step: its own config again where it ran before (its readiness
    steps following it), else nothing left running.  (what runs now, the failure to relaunch it)."""
    if not was_serving:
        await runbook.stop_server(launch.name, _yes, planned=True)
        return "the server is stopped", None
    server, failure = await relaunch(runbook, launch, None, "the launch step's own config", _yes, report)
    if failure is not None:
        return f"the server could not be relaunched: {failure}", failure
    await follow_ready(runbook, launch, report)
    return f"serving the launch step's own config again (pid {server.pid})", None


async def _series(serving, transport, port: int) -> dict | None:
    """The engine's /metrics series now (None: not answered)."""
    from cockpit.serving.live import get

    answer = await get(opener_for(transport), f"http://127.0.0.1:{port}/metrics")
    if answer is None or answer[0] != 200:
        return None
    from cockpit.serving.live import metrics_series

    return metrics_series(serving, answer[1].decode("utf-8", "replace"))


async def _leave_serving(runbook, launch, result: SweepResult, after: str, report) -> str:
    """What runs when the sweep is done: the recommended config (kept as the launch step's command
    line), the launch step's own, or nothing; the readiness steps after the launch follow the server."""
    recommended = result.recommendation()
    if after == "stop" or (after == "recommended" and recommended is None):
        await runbook.stop_server(launch.name, _yes, planned=True)
        return "the server is stopped" + (" (nothing to recommend)" if after == "recommended" else "")
    depth = None
    if after == "recommended" and recommended is not None:
        depth = DepthConfig.from_json(recommended.best) or DepthConfig()
    server, failure = await _relaunch(runbook, launch, depth, _yes, report)
    if failure is not None:
        result.failures.append(f"after the sweep: {failure}")
        return f"the server could not be relaunched: {failure}"
    if depth is not None:
        runbook.set_override(launch.name, list(server.argv), f"the sweep's recommendation: {depth.label}")
    await follow_ready(runbook, launch, report)
    what = depth.label if depth is not None else "the launch step's own config"
    return f"serving {what} (pid {server.pid})"


async def _yes(_text: str) -> bool:
    return True  # stopping what the sweep itself started needs no question


def stored_report(runs: list[str], sweep_id: str | None, fmt: str, last: int = 10, against: str | None = None) -> str:
    """`bench report`: the named runs side by side; else a sweep's report (the latest, or the one
    named), or two sweeps side by side (`against`: an SGLang and a vLLM sweep of one drafter), else the
    latest runs side by side."""
    from cockpit.bench import store
    from cockpit.bench.report import render_markdown, render_side_by_side, render_table

    if against:
        from cockpit.bench.decision import side_by_side

        first, second = store.sweep_runs(sweep_id), store.sweep_runs(against)
        for named, found in ((sweep_id or "the latest", first), (against, second)):
            if not found:
                raise CockpitError(f"no stored runs of sweep '{named}' in {store.runs_dir()}")
        rows = side_by_side(first, second)
        if fmt == "json":
            return json.dumps({"side_by_side": rows}, indent=2)
        return render_side_by_side(rows, "md" if fmt == "md" else "text")

    sweep = [] if runs else store.sweep_runs(sweep_id)
    if sweep_id and not sweep:
        raise CockpitError(f"no stored runs of sweep '{sweep_id}' in {store.runs_dir()}")
    if sweep:
        return SweepResult.from_runs(sweep).render(fmt)
    paths = runs or [str(p) for p in store.list_runs()[-last:]]
    if not paths:
        raise CockpitError(f"no stored benchmark runs in {store.runs_dir()}: make one with `cockpit bench run --endpoint HOST:PORT` "
                           "or `cockpit bench sweep`; the demo keeps its own in its folder (DIR/data/bench): "
                           "`cockpit bench report -c DIR/demo.toml`")
    rows = store.compare([store.load_run(p) for p in paths])
    if fmt == "json":
        return json.dumps({"runs": rows}, indent=2)
    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["label"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue().rstrip("\n")
    return render_markdown(rows) if fmt == "md" else render_table(rows)


def finished_sweep_alerts(runbook, since: float, seen: dict[str, float]) -> list:
    """An alert for each sweep step that ended (passed or failed) after `since` and is not in
    `seen` (step -> finished_at already alerted; updated here)."""
    from cockpit.alerts import Alert
    from cockpit.runbook.model import StepState

    alerts = []
    for spec in runbook.spec.steps:
        result = runbook.result(spec.name)
        if (spec.kind != "bench_sweep" or result is None or result.finished_at is None
                or result.state not in (StepState.PASSED, StepState.FAILED)):
            continue
        if result.finished_at <= since or seen.get(spec.name) == result.finished_at:
            continue
        seen[spec.name] = result.finished_at
        passed = result.state is StepState.PASSED
        alerts.append(Alert("sweep_done", f"sweep:{spec.name}:{result.finished_at}", f"{spec.name}: the sweep {'is done' if passed else 'failed'}",
                            result.message, "info" if passed else "error"))
    return alerts
