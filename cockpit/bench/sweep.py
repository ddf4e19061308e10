"""Depth sweeps: for each depth config, relaunch the server through the runbook's launch step (the
gate re-verifies the GPUs each time), wait until ready, record the effective server config, warm up,
measure each concurrency, repeat, and report the median with its spread; stop the server at the end.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from cockpit.bench.client import Workload, run_closed_loop
from cockpit.bench.http import request
from cockpit.bench.stats import summarize
from cockpit.bench.store import save_run
from cockpit.bench.workload import load_prompts
from cockpit.errors import CockpitError
from cockpit.runbook.engine import GateClosed
from cockpit.runbook.model import StepState
from cockpit.sglang.server import DepthConfig, wait_ready

NOISY_SPREAD = 0.10  # max-min over the median, above which a config is flagged noisy


@dataclass(frozen=True)
class SweepSpec:
    launch_step: str
    depths: tuple[int, ...] = (16, 10, 5)
    baseline: bool = True
    concurrency: tuple[int, ...] = (1, 8)
    requests: int = 64
    max_tokens: int = 256
    repeats: int = 3
    prompts: str | None = None
    api: str = "sglang"
    temperature: float = 0.0
    ready_timeout_s: float = 1800.0
    seed: int | None = None

    def configs(self) -> list[DepthConfig]:
        return ([DepthConfig()] if self.baseline else []) + [DepthConfig.chain(n) for n in self.depths]


SWEEP_KEYS = set(SweepSpec.__dataclass_fields__)


def sweep_value_problem(key: str, value: Any) -> str | None:
    """Why a [bench] (or bench_sweep step) value is wrong; None when it is good.  One place for both."""
    if key in ("depths", "concurrency"):
        if not isinstance(value, list) or not value or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            return f"{key} must be a non-empty list of positive integers, got {value!r}"
    elif key in ("requests", "max_tokens", "repeats"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"{key} must be a positive integer, got {value!r}"
    elif key == "api":
        if value not in ("sglang", "openai"):
            return f"api must be 'sglang' or 'openai', got {value!r}"
    elif key == "baseline":
        if not isinstance(value, bool):
            return f"baseline must be true or false, got {value!r}"
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
    import difflib

    from cockpit.config import locate
    from cockpit.errors import ConfigError

    raw = config.raw.get("bench") or {}
    where = str(config.path or "<config>")

    def fail(key: str | None, message: str) -> ConfigError:
        return ConfigError(where, message, line=locate(config.text, ("bench",), key), key=key)

    if not isinstance(raw, dict):
        raise ConfigError(where, "[bench] must be a table", key="bench")
    for key in raw:
        if key not in SWEEP_KEYS:
            close = difflib.get_close_matches(key, sorted(SWEEP_KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise fail(key, f"[bench] has no key '{key}'{hint}; keys: {', '.join(sorted(SWEEP_KEYS))}")
        problem = sweep_value_problem(key, raw[key])
        if problem:
            raise fail(key, problem)
    launches = [s.name for s in runbook_spec.steps if s.kind == "sglang_launch"]
    step = raw.get("launch_step") or (launches[-1] if launches else None)
    if step is None or step not in launches:
        close = difflib.get_close_matches(step or "", launches, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        named = f"'{step}' is not" if step else "needs"
        raise fail("launch_step" if "launch_step" in raw else None,
                   f"launch_step {named} an sglang_launch step of the runbook{hint} (have: {', '.join(launches) or 'none'})")
    values: dict[str, Any] = {"launch_step": step}
    for key, value in raw.items():
        if key != "launch_step":
            values[key] = tuple(value) if isinstance(value, list) else value
    return SweepSpec(**values)


@dataclass
class SweepResult:
    runs: list[dict[str, Any]] = field(default_factory=list)  # one summary per (config, concurrency, repeat)
    failures: list[str] = field(default_factory=list)

    def table(self) -> list[dict[str, Any]]:
        """Median and spread per (config, concurrency), speedup over the baseline at that concurrency."""
        groups: dict[tuple[str, int], list[dict]] = {}
        for run in self.runs:
            groups.setdefault((run["config"], run["concurrency"]), []).append(run)
        rows = []
        for (label, concurrency), runs in groups.items():
            tput = [r["output_throughput_tok_s"] for r in runs]
            median = statistics.median(tput)
            accept = [r["accept_length"] for r in runs if r.get("accept_length")]
            rows.append({
                "config": label, "concurrency": concurrency, "repeats": len(runs),
                "throughput_median": round(median, 2), "throughput_min": round(min(tput), 2), "throughput_max": round(max(tput), 2),
                "noisy": median > 0 and (max(tput) - min(tput)) / median > NOISY_SPREAD,
                "accept_length": round(statistics.median(accept), 3) if accept else None,
                "ttft_p50_ms": statistics.median([r["ttft_ms"]["p50"] for r in runs if r["ttft_ms"]["p50"] is not None] or [0]),
                "itl_p50_ms": statistics.median([r["itl_ms"]["p50"] for r in runs if r["itl_ms"]["p50"] is not None] or [0]),
                "itl_p99_ms": statistics.median([r["itl_ms"]["p99"] for r in runs if r["itl_ms"]["p99"] is not None] or [0]),
                "failed": sum(r["failed"] for r in runs),
            })
        base = {r["concurrency"]: r["throughput_median"] for r in rows if r["config"] == "baseline"}
        for row in rows:
            b = base.get(row["concurrency"])
            row["speedup"] = round(row["throughput_median"] / b, 3) if b else None
        return rows


def opener_for(transport):
    async def opener(host: str, port: int):
        return await transport.open_tcp(host, port)

    return opener


async def server_info(transport, port: int) -> dict[str, Any]:
    for path in ("/server_info", "/get_server_info"):
        try:
            status, body = await request(opener_for(transport), "GET", f"http://127.0.0.1:{port}{path}")
        except (OSError, asyncio.TimeoutError, ValueError):
            continue
        if status == 200:
            try:
                data = json.loads(body)
            except ValueError:
                return {}
            return data if isinstance(data, dict) else {}
    return {}


async def run_sweep(runbook, sweep: SweepSpec, confirm, progress=None) -> SweepResult:
    """Relaunch per config through the runbook (its gates apply), measure, and stop at the end.
    `progress` gets every progress state (the sweep topic of the context publishes it to the TUI)."""
    launch = runbook.spec.step(sweep.launch_step)
    prompts = load_prompts(sweep.prompts, sweep.seed)
    configs = sweep.configs()
    total = len(configs) * len(sweep.concurrency) * sweep.repeats
    done = 0
    started = time.monotonic()
    result = SweepResult()
    transport = runbook.hub.pool.get(launch.host)

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

    # bring the runbook up to the launch step: the steps before it must pass (they are the gates)
    for spec in runbook.spec.steps:
        if spec.name == launch.name:
            break
        result_before = runbook.result(spec.name)
        if result_before is None or result_before.state is not StepState.PASSED:
            report(f"running '{spec.name}' first")
            outcome = await runbook.run_step(spec.name, confirm)
            if outcome.state is not StepState.PASSED:
                result.failures.append(f"'{spec.name}' failed before the sweep: {outcome.message}")
                return result
    try:
        for depth in configs:
            # the launch step's own depth parameters, varied for one run (a fix applied by hand keeps the rest of its line)
            if depth.speculative:
                variant: dict = {"draft_tokens": depth.draft_tokens, "steps": depth.steps, "topk": depth.topk}
            else:
                variant = {"draft_tokens": None, "steps": None, "topk": None, "draft_path": None}
            await runbook.stop_server(launch.name, confirm_once)
            report(f"launching {depth.label}")
            launched = None
            for attempt in range(6):  # GPU memory of the stopped server can take a moment to free
                try:
                    launched = await runbook.run_step(launch.name, confirm_once, variant=variant)
                    break
                except GateClosed as exc:
                    if attempt == 5 or runbook.prerequisites(launch.name):
                        result.failures.append(f"{depth.label}: {exc}")
                        break
                    report(f"{depth.label}: gate closed ({'; '.join(exc.reasons)[:120]}); retrying in 5 s")
                    await asyncio.sleep(5)
            if launched is None:
                done += len(sweep.concurrency) * sweep.repeats
                continue
            if launched.state is not StepState.PASSED:
                result.failures.append(f"{depth.label}: {launched.message}")
                done += len(sweep.concurrency) * sweep.repeats
                continue
            server = runbook.launched(launch.name)
            report(f"waiting for {depth.label} to be ready")
            ready = await wait_ready(transport, server.pid, server.port, server.log, sweep.ready_timeout_s)
            if ready.state != "ready":
                top = ready.diagnoses[0].message if ready.diagnoses else ready.state
                result.failures.append(f"{depth.label}: server not ready: {top}")
                done += len(sweep.concurrency) * sweep.repeats
                continue
            info = await server_info(transport, server.port)
            endpoint = f"http://127.0.0.1:{server.port}"
            for concurrency in sweep.concurrency:
                for repeat in range(1, sweep.repeats + 1):
                    report(f"{depth.label}: concurrency {concurrency}, run {repeat}/{sweep.repeats}")
                    workload = Workload(prompts, sweep.requests, concurrency, sweep.max_tokens, sweep.temperature)
                    records, start, end = await run_closed_loop(endpoint, sweep.api, workload, opener=opener_for(transport))
                    summary = summarize(records, start, end)
                    summary.update(config=depth.label, label=f"{depth.label} c{concurrency} r{repeat}", concurrency=concurrency,
                                   repeat=repeat, speculative=depth.speculative, steps=depth.steps, topk=depth.topk,
                                   draft_tokens=depth.draft_tokens, api=sweep.api, max_tokens=sweep.max_tokens,
                                   server_info={k: info.get(k) for k in ("speculative_algorithm", "speculative_num_steps",
                                                                          "speculative_eagle_topk", "speculative_num_draft_tokens",
                                                                          "max_running_requests", "tp_size", "model_path") if k in info},
                                   time=time.time(), host=launch.host)
                    summary["file"] = str(save_run(summary, [r.to_json() for r in records], summary["label"]))
                    result.runs.append(summary)
                    done += 1
                    report(f"{depth.label}: concurrency {concurrency}, run {repeat} done: "
                           f"{summary['output_throughput_tok_s']:.1f} tok/s")
    finally:
        try:
            await runbook.stop_server(launch.name, _yes)
        except CockpitError:
            pass
    report("sweep done")
    return result


async def _yes(_text: str) -> bool:
    return True  # stopping what the sweep itself started needs no question
