"""Benchmark results as text: one run, stored runs side by side, a sweep's table."""

from __future__ import annotations

from typing import Any

from cockpit.format import num


def render_summary(s: dict) -> str:
    lines = [f"{s['label']}: {s['requests']} requests ({s['failed']} failed) in {s['duration_s']:.2f} s at concurrency {s['concurrency']}",
             f"  output throughput {s['output_throughput_tok_s']:.1f} tok/s, {s['request_throughput_req_s']:.2f} req/s"
             + (f", acceptance length {s['accept_length']:.2f}" if s.get("accept_length") else "")]
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        p = s[key]
        lines.append(f"  {key[:-3].upper():<5} p50 {num(p['p50'])} ms  p90 {num(p['p90'])} ms  p99 {num(p['p99'])} ms")
    for error in s.get("errors") or []:
        lines.append(f"  error: {error}")
    if s.get("file"):
        lines.append(f"  saved: {s['file']}")
    return "\n".join(lines)


def render_table(rows: list[dict]) -> str:
    head = f"{'run':<28} {'conc':>4} {'tok/s':>9} {'speedup':>8} {'accept':>7} {'TTFT p50':>9} {'ITL p50':>8} {'ITL p99':>8} {'fail':>5}"
    lines = [head]
    for r in rows:
        lines.append(f"{(r['label'] or '?')[:28]:<28} {r['concurrency'] or 0:>4} {num(r['output_throughput_tok_s']):>9} "
                     f"{num(r['speedup'], '{:.2f}x'):>8} {num(r['accept_length'], '{:.2f}'):>7} {num(r['ttft_p50_ms']):>9} "
                     f"{num(r['itl_p50_ms']):>8} {num(r['itl_p99_ms']):>8} {r['failed'] or 0:>5}")
    return "\n".join(lines)


def render_sweep(rows: list[dict[str, Any]]) -> str:
    head = f"{'config':<40} {'conc':>4} {'tok/s median':>12} {'spread':>15} {'speedup':>8} {'accept':>7} {'ITL p50':>8}"
    lines = [head]
    for r in rows:
        spread = f"{r['throughput_min']:.0f}-{r['throughput_max']:.0f}" + (" NOISY" if r["noisy"] else "")
        speedup = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        accept = "-" if r["accept_length"] is None else f"{r['accept_length']:.2f}"
        lines.append(f"{r['config'][:40]:<40} {r['concurrency']:>4} {r['throughput_median']:>12.1f} {spread:>15} {speedup:>8} {accept:>7} "
                     f"{r['itl_p50_ms']:>8.2f}")
    return "\n".join(lines)
