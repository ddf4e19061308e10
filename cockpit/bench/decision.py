"""The end of a depth sweep: its runs as a table (median and spread per config and concurrency,
speedup over the baseline), the decision (the best config per concurrency, by throughput and by
latency, with a flag when the difference is within noise), and the drafter's predicted acceptance
next to the measured one."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from cockpit.drafter.acceptance import FORMULA_WITH, FORMULA_WITHOUT, estimate
from cockpit.serving.depth import DepthConfig

NOISY_SPREAD = 0.10  # max-min over the median, above which a config is flagged noisy
WITHIN_NOISE = 0.05  # a best config less than this ahead of the next (or with overlapping spreads) is not a clear win


def _median(runs: list[dict], key: str, quantile: str = "p50") -> float | None:
    values: list[float] = [v for v in ((r.get(key) or {}).get(quantile) for r in runs) if v is not None]
    return round(statistics.median(values), 3) if values else None


def depth_of_run(run: dict) -> DepthConfig:
    return DepthConfig(run.get("steps"), run.get("topk"), run.get("draft_tokens")) if run.get("speculative") else DepthConfig()


def table(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and spread per (config, concurrency), speedup over the baseline at that concurrency."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for run in runs:
        groups.setdefault((run["config"], run["concurrency"]), []).append(run)
    rows = []
    for (label, concurrency), group in groups.items():
        tput = [r["output_throughput_tok_s"] for r in group]
        median = statistics.median(tput)
        accept = [r["accept_length"] for r in group if r.get("accept_length")]
        depth = depth_of_run(group[0])
        rows.append({
            "config": label, **depth.to_json(), "concurrency": concurrency, "repeats": len(group),
            "throughput_median": round(median, 2), "throughput_min": round(min(tput), 2), "throughput_max": round(max(tput), 2),
            "noisy": median > 0 and (max(tput) - min(tput)) / median > NOISY_SPREAD,
            "accept_length": round(statistics.median(accept), 3) if accept else None,
            "ttft_p50_ms": _median(group, "ttft_ms") or 0, "tpot_p50_ms": _median(group, "tpot_ms"),
            "itl_p50_ms": _median(group, "itl_ms") or 0, "itl_p99_ms": _median(group, "itl_ms", "p99") or 0,
            "e2e_p50_ms": _median(group, "e2e_ms"), "failed": sum(r["failed"] for r in group),
        })
    base = {r["concurrency"]: r["throughput_median"] for r in rows if r["config"] == "baseline"}
    for row in rows:
        b = base.get(row["concurrency"])
        row["speedup"] = round(row["throughput_median"] / b, 3) if b else None
        row["speedup_min"] = round(row["throughput_min"] / b, 3) if b else None
        row["speedup_max"] = round(row["throughput_max"] / b, 3) if b else None
    return sorted(rows, key=lambda r: (r["concurrency"], r["config"] != "baseline", -(r["steps"] or 0)))


def engine_of(runs: list[dict[str, Any]]) -> str:
    """The engine a sweep's runs were served by (runs stored before vLLM was an engine: SGLang)."""
    engines = {r.get("engine") or "sglang" for r in runs}
    return engines.pop() if len(engines) == 1 else "mixed"


def side_by_side(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two sweeps of the same drafter (an SGLang one and a vLLM one, say): per depth config and
    concurrency, each one's median throughput, acceptance and speedup over its own baseline."""
    a, b = table(first), table(second)
    names = (engine_of(first), engine_of(second))
    if names[0] == names[1]:
        names = (f"{names[0]} {first[0].get('sweep') if first else ''}", f"{names[1]} {second[0].get('sweep') if second else ''}")
    keyed = [{(r["config"], r["concurrency"]): r for r in rows} for rows in (a, b)]
    out = []
    for key in sorted(set(keyed[0]) | set(keyed[1]), key=lambda k: (k[1], k[0] != "baseline", k[0])):
        row: dict[str, Any] = {"config": key[0], "concurrency": key[1]}
        for name, rows in zip(names, keyed):
            mine = rows.get(key)
            row[name] = None if mine is None else {k: mine[k] for k in ("throughput_median", "accept_length", "speedup", "noisy")}
        out.append(row)
    return out


@dataclass(frozen=True)
class Decision:
    concurrency: int
    best: dict[str, Any]  # the row with the highest median output throughput
    runner_up: dict[str, Any] | None
    within_noise: bool  # the best is not clearly ahead of the runner-up
    fastest: dict[str, Any] | None  # the row with the lowest median TPOT (per-request speed)

    @property
    def latency_differs(self) -> bool:
        return self.fastest is not None and self.fastest["config"] != self.best["config"]

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {"concurrency": self.concurrency, "best": best["config"], "best_depth": {k: best[k] for k in ("steps", "topk", "draft_tokens")},
                "throughput_median": best["throughput_median"], "speedup": best["speedup"],
                "speedup_spread": [best["speedup_min"], best["speedup_max"]],
                "runner_up": self.runner_up["config"] if self.runner_up else None, "within_noise": self.within_noise,
                "best_by_latency": self.fastest["config"] if self.fastest else None, "latency_differs": self.latency_differs}

    def text(self) -> str:
        best = self.best
        speed = ""
        if best["speedup"] is not None:
            spread = "" if best["speedup_min"] == best["speedup_max"] else f" ({best['speedup_min']:.2f}-{best['speedup_max']:.2f})"
            speed = f", {best['speedup']:.2f}x the baseline{spread}"
        line = f"concurrency {self.concurrency}: {best['config']}, {best['throughput_median']:.0f} tok/s{speed}"
        if self.within_noise and self.runner_up:
            line += f"; WITHIN NOISE of {self.runner_up['config']} ({self.runner_up['throughput_median']:.0f} tok/s)"
        if self.latency_differs and self.fastest:
            line += f"; lowest latency: {self.fastest['config']} (TPOT p50 {self.fastest['tpot_p50_ms']:.1f} ms)"
        return line


def decide(rows: list[dict[str, Any]]) -> list[Decision]:
    decisions = []
    for concurrency in sorted({r["concurrency"] for r in rows}):
        here = sorted((r for r in rows if r["concurrency"] == concurrency and not r["failed"]),
                      key=lambda r: -r["throughput_median"])
        if not here:
            continue
        best, runner = here[0], (here[1] if len(here) > 1 else None)
        close = runner is not None and (best["throughput_median"] - runner["throughput_median"]) < WITHIN_NOISE * best["throughput_median"]
        overlap = runner is not None and best["throughput_min"] <= runner["throughput_max"]
        timed = [r for r in here if r["tpot_p50_ms"] is not None]
        fastest = min(timed, key=lambda r: r["tpot_p50_ms"]) if timed else None
        decisions.append(Decision(concurrency, best, runner, bool(close or overlap), fastest))
    return decisions


def recommend(decisions: list[Decision], serve_concurrency: int | None = None) -> Decision | None:
    """The decision to serve with: at the concurrency the server will see (default: the highest measured)."""
    if not decisions:
        return None
    if serve_concurrency is not None:
        at = [d for d in decisions if d.concurrency == serve_concurrency]
        if at:
            return at[0]
    return decisions[-1]


def predicted_vs_measured(rows: list[dict[str, Any]], accuracies: list[float] | None) -> list[dict[str, Any]]:
    """Per speculative config: the drafter's estimate truncated at its depth (topk-1 chains; with and
    without the bonus token, formulas named) next to the measured acceptance length (SGLang counts
    the bonus token)."""
    out = []
    for label in dict.fromkeys(r["config"] for r in rows if r["steps"] is not None):
        mine = [r for r in rows if r["config"] == label]
        measured = [r["accept_length"] for r in mine if r["accept_length"] is not None]
        at: dict[str, float] = {}  # the measure at each concurrency: acceptance moves with the batch
        for concurrency in sorted({r.get("concurrency") or 0 for r in mine}):
            values = [r["accept_length"] for r in mine if (r.get("concurrency") or 0) == concurrency and r["accept_length"] is not None]
            if values:
                at[str(concurrency)] = round(statistics.median(values), 3)
        steps, topk = mine[0]["steps"], mine[0]["topk"]
        guess = estimate(accuracies, steps) if accuracies and topk == 1 else None
        out.append({"config": label, "steps": steps, "topk": topk,
                    "estimate_with_bonus": round(guess.with_bonus, 3) if guess else None,
                    "estimate_without_bonus": round(guess.without_bonus, 3) if guess else None,
                    "positions_known": guess.depth if guess else None,
                    "measured": round(statistics.median(measured), 3) if measured else None,  # over every concurrency
                    "measured_at_concurrency": at,
                    "formula_with_bonus": FORMULA_WITH, "formula_without_bonus": FORMULA_WITHOUT})
    return out
