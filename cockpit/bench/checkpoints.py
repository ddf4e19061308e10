"""Acceptance per checkpoint, measured by serving (issue 51 item 4): each complete checkpoint of a training run served
through the runbook's launch step (its gates, its engine and release, its own depth and flags: only the draft changes), the
same small prompt set at concurrency 1 for each, and the acceptance length the engine itself reports.  Each measurement is
a benchmark run in the store (`bench report` lists it), named by the training run and the checkpoint; the runs watcher
reads them back and ships by them (runs/watch.py), the estimate from accuracy standing where none was measured.

A checkpoint the engine cannot load as it is (its key layout, a training state that needs an export) is not launched: it
is named with why, as the runs pane judges it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from cockpit.bench.client import Workload
from cockpit.bench.store import save_run
from cockpit.bench.sweep import AskOnce, bring_up, launch_target, measure, relaunch_ready, wind_up
from cockpit.bench.workload import load_prompts
from cockpit.serving.steps import launch_depth

REQUESTS = 8  # a small fixed set: the same prompts, in the same order, for every checkpoint
MAX_TOKENS = 64
PROMPTS_SEED = 0
READY_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Candidate:
    """A checkpoint to measure: its name and path (on the launch host), when it was last written, and why it cannot be
    served as it is (None: it can)."""
    name: str
    path: str
    mtime: float = 0.0
    unservable: str | None = None


@dataclass
class Measured:
    checkpoint: str
    path: str
    accept_length: float | None = None
    output_throughput_tok_s: float | None = None
    file: str | None = None
    failure: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "path": self.path, "accept_length": self.accept_length,
                "output_throughput_tok_s": self.output_throughput_tok_s, "file": self.file, "failure": self.failure}


@dataclass
class CheckpointMeasure:
    run: str
    launch_step: str
    engine: str = ""
    rows: list[Measured] = field(default_factory=list)
    serving: str = "nothing was relaunched"  # what runs when it is done
    failures: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "launch_step": self.launch_step, "engine": self.engine, "rows": [r.to_json() for r in self.rows],
                "serving": self.serving, "failures": self.failures}


async def measure_checkpoints(runbook, launch_name: str, run: str, find: Callable[[], Awaitable[list[Candidate]]], confirm,
                              progress: Callable[[str], None] | None = None, requests: int = REQUESTS,
                              max_tokens: int = MAX_TOKENS) -> CheckpointMeasure:
    """Serve each checkpoint `find` gives (asked once the steps before the launch have passed: a key fix among them
    changes what loads) through the launch step and measure it; then the launch step's own config again where it had
    passed (its server up), else nothing left running."""
    target = launch_target(runbook, launch_name)
    launch, serving, was_serving = target.launch, target.serving, target.was_serving
    result = CheckpointMeasure(run, launch.name, serving.name)
    depth = launch_depth(runbook, launch)
    prompts = load_prompts(None, PROMPTS_SEED)

    def report(text: str) -> None:
        if progress is not None:
            progress(text)

    ask = AskOnce(confirm, f"Measuring the checkpoints of {run} relaunches the server of '{launch.name}' on {launch.host} "
                           f"once for each (its own flags, only the draft changes), then "
                           f"{'its own config again' if was_serving else 'stops it'}")

    failure = await bring_up(runbook, launch, confirm, report)
    if failure is not None:
        result.failures.append(f"{failure} before the measurement")
        return result
    candidates = await find()
    if not candidates:
        result.failures.append(f"run '{run}' has no complete checkpoint yet")
        return result
    servable = [c for c in candidates if c.unservable is None]
    result.rows = [Measured(c.name, c.path, failure=f"not served: {c.unservable}") for c in candidates if c.unservable]
    result.failures += [f"{r.checkpoint}: {r.failure}" for r in result.rows]
    if not servable:
        return result
    finished = False
    try:
        for candidate in servable:
            row = Measured(candidate.name, candidate.path)
            result.rows.append(row)
            server, failure = await relaunch_ready(runbook, target, {"draft_path": candidate.path}, f"checkpoint {candidate.name}",
                                                   ask, report, READY_TIMEOUT_S)
            if failure is not None:  # (said with the checkpoint's name)
                row.failure = failure
                result.failures.append(failure)
                if ask.refused:
                    break  # refused: nothing more is launched
                continue
            report(f"checkpoint {candidate.name}: {requests} requests")
            summary, records = await measure(serving, target.transport, server.port, serving.capabilities.bench_api,
                                             Workload(prompts, requests, 1, max_tokens, 0.0))
            summary.update(label=f"checkpoint {candidate.name}", concurrency=1, engine=serving.name, speculative=True,
                           training_run=run, checkpoint=candidate.name, checkpoint_path=candidate.path,
                           checkpoint_mtime=candidate.mtime, launch_step=launch.name, max_tokens=max_tokens,
                           depth=depth.to_json() if depth is not None else None, time=time.time(), host=launch.host)
            summary["file"] = str(save_run(summary, [r.to_json() for r in records], summary["label"]))
            row.accept_length, row.output_throughput_tok_s, row.file = (summary.get("accept_length"),
                                                                        summary.get("output_throughput_tok_s"), summary["file"])
            if row.accept_length is None:
                row.failure = "the engine reported no acceptance (is speculative decoding on?)"
                result.failures.append(f"{candidate.name}: {row.failure}")
            report(f"checkpoint {candidate.name}: acceptance "
                   f"{row.accept_length:.2f}" if row.accept_length is not None else f"checkpoint {candidate.name}: no acceptance")
        finished = True
    finally:
        result.serving, failure = await wind_up(runbook, launch, ask, was_serving, finished, report)
    if failure is not None:
        result.failures.append(f"after the measurement: {failure}")
    return result
