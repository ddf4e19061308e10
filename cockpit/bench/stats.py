"""Figures from request records: percentiles, throughput, pooled acceptance length."""

from __future__ import annotations

import statistics
from typing import Any

from cockpit.bench.client import RequestRecord


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ms(values: list[float]) -> dict[str, float | None]:
    scaled = [v * 1000.0 for v in values]
    out: dict[str, float | None] = {q: (None if (p := percentile(scaled, n)) is None else round(p, 3))
                                    for q, n in (("p50", 50), ("p90", 90), ("p99", 99))}
    out["mean"] = round(statistics.fmean(scaled), 3) if scaled else None
    return out


def summarize(records: list[RequestRecord], window_start: float, window_end: float) -> dict[str, Any]:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    failed = [r for r in measured if not r.ok]
    duration = max(1e-9, window_end - window_start)
    tokens = sum(r.completion_tokens for r in ok)
    verify = sum(r.spec_verify_ct or 0 for r in ok)
    per_request_accept = [r.accept_length for r in ok if r.accept_length is not None]
    itls = [x for r in ok for x in r.itls()]
    chunks = [x for r in ok for x in r.chunk_latencies()]
    return {
        "requests": len(measured),
        "failed": len(failed),
        "errors": sorted({r.error or "" for r in failed})[:5],
        "duration_s": round(duration, 4),
        "ttft_ms": _ms([r.ttft for r in ok if r.ttft is not None]),
        "tpot_ms": _ms([r.tpot for r in ok if r.tpot is not None]),
        "itl_ms": _ms(itls),
        "chunk_latency_ms": _ms(chunks),
        "e2e_ms": _ms([r.e2e for r in ok if r.e2e is not None]),
        "output_tokens": tokens,
        "output_throughput_tok_s": round(tokens / duration, 3),
        "request_throughput_req_s": round(len(ok) / duration, 4),
        "accept_length": round(tokens / verify, 4) if verify else None,
        "accept_length_per_request": {
            "p50": percentile(per_request_accept, 50), "p90": percentile(per_request_accept, 90),
            "min": min(per_request_accept) if per_request_accept else None,
            "max": max(per_request_accept) if per_request_accept else None,
        },
    }
