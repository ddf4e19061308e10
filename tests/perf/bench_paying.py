"""The 'is speculation paying' verdict's cost in the resident TUI (issue 51 item 1: at most 0.1 % of a core).

Run on demand:  python tests/perf/bench_paying.py [--polls 20000]
Each server poll the server pane draws its figures line (ui/widgets/server_log.py live_text) and, now, judges the
verdict: the runbook's last sweep read for its baseline (bench/steps.py sweep_baseline over a runbook whose sweep
passed, 4 configs x 3 concurrencies) and serving/paying.py's judge.  Both are timed side by side in one run, on the same
figures; the verdict's share of a core is its time per poll at the TUI's server poll rate (one a second).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cockpit.config import parse_config  # noqa: E402
from cockpit.context import Context  # noqa: E402
from cockpit.runbook.model import StepResult, StepState  # noqa: E402

CONFIG = """
[hosts.gpu]
local = true
nvidia_smi = "/nonexistent/nvidia-smi"
[runbook]
name = "bench-paying"
[[runbook.steps]]
name = "launch"
kind = "serve_launch"
host = "gpu"
model_path = "/m"
draft_path = "/d"
port = 30000
[[runbook.steps]]
name = "sweep"
kind = "bench_sweep"
host = "gpu"
launch_step = "launch"
"""
FIGURES = {"activity": {"state": "serving", "why": ""}, "running": 8, "queued": 0, "token_usage": 0.2, "throughput_tok_s": 1100.0,
           "figures_are_last": False, "figures_age_s": 0.4, "sources": ["log"], "flags": [], "history": [],
           "accept_length": {"window": 2.6, "lifetime": 2.5, "counters": None}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=20000)
    args = parser.parse_args()
    from cockpit.bench.steps import sweep_baseline
    from cockpit.serving.paying import judge
    from cockpit.ui.widgets.server_log import live_text

    ctx = Context.of(parse_config(CONFIG))
    rows = [{"config": c, "concurrency": n, "throughput_median": 100.0 * n * (1.5 if c != "baseline" else 1.0)}
            for c in ("baseline", "depth 2", "depth 5", "depth 10") for n in (1, 8, 32)]
    decisions = [{"concurrency": n, "best": "depth 5"} for n in (1, 8)] + [{"concurrency": 32, "best": "baseline"}]
    ctx.runbook.results["sweep"] = StepResult(StepState.PASSED, 1.0, 2.0, "done", evidence={"rows": rows, "decisions": decisions})

    def timed(work) -> float:
        started = time.perf_counter()
        for _ in range(args.polls):
            work()
        return (time.perf_counter() - started) / args.polls

    drawn = timed(lambda: live_text(FIGURES))
    verdict = timed(lambda: judge(FIGURES, True, sweep_baseline(ctx.runbook)))
    both = timed(lambda: live_text(FIGURES, judge(FIGURES, True, sweep_baseline(ctx.runbook))))
    print(f"per server poll ({args.polls} polls): figures line {drawn * 1e6:.1f} us, verdict {verdict * 1e6:.1f} us, "
          f"both {both * 1e6:.1f} us")
    print(f"verdict / figures line: {verdict / drawn:.2f}x; the verdict at one poll a second: {verdict * 100:.4f} % of a core "
          f"(target <= 0.1 %)")
    return 0 if verdict * 100 <= 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
