"""A short baseline without speculation, measured on request (issue 51 item 1): the launch step's server relaunched
without its draft (its gates first; its own line, a fix's included, less every speculative flag), one closed-loop run
at the asked concurrency with the shipped prompts, stored as a benchmark run; then the launch step's own config again
where it ran before.  The live verdict ("is speculation paying?") compares against it where it is newer than the last
sweep's baseline at that concurrency (bench/steps.py sweep_baseline)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from cockpit.bench.client import Workload
from cockpit.bench.store import save_run
from cockpit.bench.sweep import AskOnce, bring_up, launch_target, measure, relaunch_ready, variant_of, wind_up
from cockpit.bench.workload import load_prompts
from cockpit.serving.depth import DepthConfig

REQUESTS = 32  # short: a few seconds of a loaded server, enough for its throughput
MAX_TOKENS = 64
READY_TIMEOUT_S = 600.0


@dataclass
class BaselineMeasure:
    launch_step: str
    concurrency: int
    engine: str = ""
    output_throughput_tok_s: float | None = None
    file: str | None = None
    serving: str = "nothing was relaunched"  # what runs when it is done
    failure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"launch_step": self.launch_step, "concurrency": self.concurrency, "engine": self.engine,
                "output_throughput_tok_s": self.output_throughput_tok_s, "file": self.file, "serving": self.serving,
                "failure": self.failure}


async def measure_baseline(runbook, launch_name: str, concurrency: int, confirm, progress: Callable[[str], None] | None = None,
                           requests: int = REQUESTS, max_tokens: int = MAX_TOKENS) -> BaselineMeasure:
    target = launch_target(runbook, launch_name)
    launch, serving, was_serving = target.launch, target.serving, target.was_serving
    result = BaselineMeasure(launch.name, concurrency, serving.name)
    ask = AskOnce(confirm, f"A baseline at concurrency {concurrency} relaunches the server of '{launch.name}' on {launch.host} "
                           f"without speculation ({requests} requests), then {'its own config again' if was_serving else 'stops it'}")

    def report(text: str) -> None:
        if progress is not None:
            progress(text)

    failure = await bring_up(runbook, launch, confirm, report)
    if failure is not None:
        result.failure = f"{failure} before the baseline"
        return result
    finished = False
    try:
        server, failure = await relaunch_ready(runbook, target, variant_of(DepthConfig()), "the baseline (no speculation)", ask,
                                               report, READY_TIMEOUT_S)
        if failure is not None:
            result.failure = failure
        else:
            report(f"the baseline: {requests} requests at concurrency {concurrency}")
            summary, records = await measure(serving, target.transport, server.port, serving.capabilities.bench_api,
                                             Workload(load_prompts(None, 0), requests, concurrency, max_tokens, 0.0))
            summary.update(label=f"baseline c{concurrency}", concurrency=concurrency, engine=serving.name, speculative=False,
                           baseline_on_request=True, launch_step=launch.name, max_tokens=max_tokens, time=time.time(),
                           host=launch.host, accept_length=None)
            summary["file"] = str(save_run(summary, [r.to_json() for r in records], summary["label"]))
            result.output_throughput_tok_s, result.file = summary.get("output_throughput_tok_s"), summary["file"]
            if summary.get("failed"):
                result.failure = f"{summary['failed']} of its requests failed"
        finished = True
    finally:
        result.serving, _failure = await wind_up(runbook, launch, ask, was_serving, finished, report)
    return result
