"""Benchmark results: one JSON-lines file per run under the XDG data dir (a summary line, then a
line per request), written atomically; and the side-by-side comparison of runs."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cockpit.errors import CockpitError
from cockpit.paths import atomic_write, data_dir


def runs_dir() -> Path:
    return data_dir() / "bench"


def save_run(summary: dict[str, Any], records: list[dict[str, Any]], name: str | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "".join(c if c.isalnum() or c in "-_." else "-" for c in (name or summary.get("label") or "run"))[:60]
    path = runs_dir() / f"{stamp}-{label}.jsonl"
    counter = 1
    while path.exists():
        counter += 1
        path = runs_dir() / f"{stamp}-{label}-{counter}.jsonl"
    lines = [json.dumps({"type": "summary", **summary}, default=str)]
    lines += [json.dumps({"type": "request", **r}, default=str) for r in records]
    atomic_write(path, "\n".join(lines) + "\n")
    return path


SUMMARY_LIMIT = 1 << 20  # characters: a run's summary line is a few kB


def load_run(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists() and not path.is_absolute():
        candidate = runs_dir() / path
        path = candidate if candidate.exists() else runs_dir() / f"{path}.jsonl"
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline(SUMMARY_LIMIT + 1)  # bounded: a file of one endless line is not read whole
        if len(first) > SUMMARY_LIMIT:
            raise CockpitError(f"{path}: not a benchmark run (its first line is over {SUMMARY_LIMIT // (1 << 20)} MiB)")
        summary = json.loads(first)
    except FileNotFoundError:
        raise CockpitError(f"{path}: no such benchmark run") from None
    except (OSError, ValueError) as exc:
        raise CockpitError(f"{path}: not a benchmark run ({exc})") from None
    if not isinstance(summary, dict) or summary.get("type") != "summary":
        raise CockpitError(f"{path}: not a benchmark run (no summary line)")
    _check_summary(path, summary)
    summary["file"] = str(path)
    return summary


_NUMBERS = ("concurrency", "requests", "failed", "output_throughput_tok_s", "accept_length", "duration_s", "warmup")
_PERCENTILES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "chunk_ms")


def _check_summary(path: Path, summary: dict[str, Any]) -> None:
    """The fields `bench report` computes with must be what `bench run` writes (a hand-edited or
    foreign file is named, not a traceback)."""
    def number(value) -> bool:
        return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))

    bad = [k for k in _NUMBERS if not number(summary.get(k))]
    bad += [k for k in _PERCENTILES if summary.get(k) is not None and not (
        isinstance(summary[k], dict) and all(number(v) for v in summary[k].values()))]
    if not isinstance(summary.get("label", ""), (str, type(None))):
        bad.append("label")
    if bad:
        raise CockpitError(f"{path}: not a benchmark run this cockpit wrote (unexpected fields: {', '.join(bad)})")


def list_runs() -> list[Path]:
    return sorted(runs_dir().glob("*.jsonl"))


def sweep_runs(sweep_id: str | None = None) -> list[dict[str, Any]]:
    """Every stored run of one sweep (None: the latest sweep), in the order they were measured."""
    runs = recent_sweep_runs(limit=None)
    if sweep_id is None:
        ids = [r.get("sweep") for r in runs if r.get("sweep")]
        if not ids:
            return []
        sweep_id = ids[-1]
    return [r for r in runs if r.get("sweep") == sweep_id]


def recent_sweep_runs(limit: int | None = 40) -> list[dict[str, Any]]:
    """The latest stored runs that belong to a depth sweep (they name their config); a run file this
    cockpit cannot read is skipped, not fatal."""
    runs = []
    for path in list_runs()[-limit if limit else 0:]:
        try:
            run = load_run(path)
        except CockpitError:
            continue
        if run.get("config"):
            runs.append(run)
    return runs


def compare(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows side by side; speedup of output throughput over the run labelled baseline (or the first
    run without speculation), at the same concurrency."""
    baselines = {r.get("concurrency"): r for r in runs if not r.get("speculative")}
    rows = []
    for run in runs:
        base = baselines.get(run.get("concurrency"))
        speedup = None
        if base and base.get("output_throughput_tok_s"):
            speedup = round(run["output_throughput_tok_s"] / base["output_throughput_tok_s"], 3)
        rows.append({
            "label": run.get("label"), "file": run.get("file"), "concurrency": run.get("concurrency"),
            "requests": run.get("requests"), "failed": run.get("failed"),
            "output_throughput_tok_s": run.get("output_throughput_tok_s"), "speedup": speedup,
            "accept_length": run.get("accept_length"), "ttft_p50_ms": (run.get("ttft_ms") or {}).get("p50"),
            "ttft_p99_ms": (run.get("ttft_ms") or {}).get("p99"), "itl_p50_ms": (run.get("itl_ms") or {}).get("p50"),
            "itl_p99_ms": (run.get("itl_ms") or {}).get("p99"), "tpot_p50_ms": (run.get("tpot_ms") or {}).get("p50"),
            "e2e_p50_ms": (run.get("e2e_ms") or {}).get("p50"),
        })
    return rows


_NAMED: dict[str, tuple[tuple | None, list[dict[str, Any]]]] = {}  # per word: the store read once per change of its folder


def _runs_named(word: str, keep) -> list[dict[str, Any]]:
    """The stored runs whose label has `word` (save_run puts the label in the file's name) and that `keep` takes, oldest
    first.  The store is read again only when its folder changed (a run saved or removed): pollers ask every second."""
    folder = runs_dir()
    try:
        stat = folder.stat()
        key: tuple | None = (str(folder), stat.st_mtime_ns, stat.st_ino)
    except OSError:
        return []
    cached = _NAMED.get(word)
    if cached is not None and cached[0] == key:
        return cached[1]
    found = []
    for path in list_runs():
        if f"-{word}-" not in path.name:
            continue
        try:
            run = load_run(path)
        except CockpitError:
            continue
        if keep(run):
            found.append(run)
    _NAMED[word] = (key, found)
    return found


def checkpoint_runs(training_run: str) -> dict[str, dict[str, Any]]:
    """The latest stored measurement of each checkpoint of `training_run` (bench/checkpoints.py), by checkpoint path."""
    found: dict[str, dict[str, Any]] = {}
    for run in _runs_named("checkpoint", lambda r: bool(r.get("training_run") and r.get("checkpoint_path"))):
        if run["training_run"] == training_run:
            found[str(run["checkpoint_path"])] = run  # the files sort by time: the latest stays
    return found


def requested_baselines() -> dict[int, dict[str, Any]]:
    """The latest baseline measured on request (bench/baseline.py) at each concurrency."""
    found: dict[int, dict[str, Any]] = {}
    for run in _runs_named("baseline", lambda r: bool(r.get("baseline_on_request")) and isinstance(r.get("concurrency"), int)):
        found[int(run["concurrency"])] = run
    return found
