"""Benchmark results as text: one run, stored runs side by side, a sweep's table."""

from __future__ import annotations

from typing import Any

from cockpit.drafter.acceptance import FORMULA_WITH, FORMULA_WITHOUT
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


def render_markdown(rows: list[dict]) -> str:
    """Stored runs side by side as a Markdown table (`bench report RUN... --format md`)."""
    head = "| run | concurrency | tok/s | speedup | accept | TTFT p50 ms | ITL p50 ms | ITL p99 ms | failed |"
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['label'] or '?'} | {r['concurrency'] or 0} | {num(r['output_throughput_tok_s'])} | "
                     f"{num(r['speedup'], '{:.2f}x')} | {num(r['accept_length'], '{:.2f}')} | {num(r['ttft_p50_ms'])} | "
                     f"{num(r['itl_p50_ms'])} | {num(r['itl_p99_ms'])} | {r.get('failed') or 0} |")
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
    head = (f"{'config':<44} {'conc':>4} {'tok/s median':>12} {'spread':>15} {'speedup':>15} {'accept':>7} "
            f"{'TPOT p50':>9} {'ITL p50':>8}")
    lines = [head]
    for r in rows:
        spread = f"{r['throughput_min']:.0f}-{r['throughput_max']:.0f}" + (" NOISY" if r["noisy"] else "")
        lines.append(f"{r['config'][:44]:<44} {r['concurrency']:>4} {r['throughput_median']:>12.1f} {spread:>15} "
                     f"{_speedup(r):>15} {num(r['accept_length'], '{:.2f}'):>7} {num(r.get('tpot_p50_ms'), '{:.2f}'):>9} "
                     f"{r['itl_p50_ms']:>8.2f}")
    return "\n".join(lines)


def _speedup(row: dict) -> str:
    if row.get("speedup") is None:
        return "-"
    if row.get("speedup_min") is None or row["speedup_min"] == row["speedup_max"]:
        return f"{row['speedup']:.2f}x"
    return f"{row['speedup']:.2f}x ({row['speedup_min']:.2f}-{row['speedup_max']:.2f})"


def render_decisions(decisions: list, recommended=None) -> str:
    lines = ["Decision: the best config per concurrency, by output throughput"]
    lines += [f"  {d.text()}" for d in decisions]
    if recommended is not None:
        lines.append(f"Recommended for serving (concurrency {recommended.concurrency}): {recommended.best['config']}")
    return "\n".join(lines)


def measured_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The concurrencies the acceptance was measured at, in order: one column each (acceptance moves with
    the batch, so one number for several would be none of them)."""
    return sorted({c for r in rows for c in (r.get("measured_at_concurrency") or {})}, key=int)


def measured_at(row: dict[str, Any], concurrency: str) -> float | None:
    return (row.get("measured_at_concurrency") or {}).get(concurrency)


def render_acceptance(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    columns = measured_columns(rows)
    lines = ["Acceptance length: the drafter's estimate at each depth (greedy topk-1 chain) next to the median measured "
             "at each concurrency",
             f"{'config':<44} {'estimate +bonus':>15} {'estimate':>9}" + "".join(f" {'measured c' + c:>13}" for c in columns)]
    for r in rows:
        lines.append(f"{r['config'][:44]:<44} {num(r['estimate_with_bonus'], '{:.2f}'):>15} {num(r['estimate_without_bonus'], '{:.2f}'):>9}"
                     + "".join(f" {num(measured_at(r, c), '{:.2f}'):>13}" for c in columns))
    if rows:
        lines.append(f"estimate +bonus = {rows[0]['formula_with_bonus']} (what the engine's accept length counts); "
                     f"estimate = {rows[0]['formula_without_bonus']} (SpecForge's simulated_acc_len)")
    return "\n".join(lines)


def text_bars(rows: list[dict[str, Any]], width: int = 40) -> str:
    """Output throughput per config, one block of bars per concurrency: a chart that needs no terminal."""
    from cockpit.serving.depth import DepthConfig

    blocks = []
    for concurrency in sorted({r["concurrency"] for r in rows}):
        here = [r for r in rows if r["concurrency"] == concurrency]
        top = max(r["throughput_median"] for r in here) or 1.0
        lines = [f"concurrency {concurrency}: output tok/s (median)"]
        for r in here:
            name = DepthConfig(r["steps"], r["topk"], r["draft_tokens"]).short
            bar = "#" * max(1, round(width * r["throughput_median"] / top))
            lines.append(f"  {name:<10} {bar:<{width}} {r['throughput_median']:.0f}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def sweep_text(report: dict[str, Any], decisions: list, recommended) -> str:
    parts = [render_sweep(report["rows"]), "", render_decisions(decisions, recommended)]
    if report.get("acceptance"):
        parts += ["", render_acceptance(report["acceptance"])]
    if report.get("serving"):
        parts += ["", f"Now: {report['serving']}"]
    parts += [f"failed: {f}" for f in report.get("failures") or []]
    return "\n".join(parts)


def sweep_markdown(report: dict[str, Any], decisions: list, recommended) -> str:
    rows = report["rows"]
    out = [f"# Depth sweep {report.get('sweep') or ''}".rstrip(), "",
           "Depth N is N steps of a topk-1 chain (N + 1 draft tokens). Median of the repeats; speedup over the baseline "
           "at the same concurrency, with its spread over the repeats.", "",
           "| config | steps | topk | draft tokens | concurrency | tok/s (median) | min | max | speedup | accept len | TPOT p50 ms | ITL p50 ms | failed |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['config']} | {num(r['steps'], '{}')} | {num(r['topk'], '{}')} | {num(r['draft_tokens'], '{}')} | "
                   f"{r['concurrency']} | {r['throughput_median']:.1f} | {r['throughput_min']:.1f} | {r['throughput_max']:.1f} | "
                   f"{_speedup(r)} | {num(r['accept_length'], '{:.2f}')} | {num(r.get('tpot_p50_ms'), '{:.2f}')} | "
                   f"{r['itl_p50_ms']:.2f} | {r['failed']} |")
    out += ["", "## Decision", "", "| concurrency | best by throughput | tok/s | speedup | within noise | best by latency |",
            "|---:|---|---:|---:|---|---|"]
    for d in decisions:
        j = d.to_json()
        out.append(f"| {d.concurrency} | {j['best']} | {j['throughput_median']:.1f} | {_speedup(d.best)} | "
                   f"{'yes: ' + j['runner_up'] if d.within_noise else 'no'} | {j['best_by_latency'] or '-'} |")
    if recommended is not None:
        out += ["", f"**Recommended for serving** (concurrency {recommended.concurrency}): {recommended.best['config']}."]
    if report.get("acceptance"):
        columns = measured_columns(report["acceptance"])
        out += ["", "## Predicted vs measured acceptance", "",
                f"Estimate of a greedy topk-1 chain truncated at each depth: with the bonus token `{FORMULA_WITH}` "
                f"(what the engine's accept length counts), without it `{FORMULA_WITHOUT}`; measured: the median at each concurrency.", "",
                "| config | estimate (+bonus) | estimate |" + "".join(f" measured at c{c} |" for c in columns),
                "|---|---:|---:|" + "---:|" * len(columns)]
        for a in report["acceptance"]:
            out.append(f"| {a['config']} | {num(a['estimate_with_bonus'], '{:.2f}')} | {num(a['estimate_without_bonus'], '{:.2f}')} |"
                       + "".join(f" {num(measured_at(a, c), '{:.2f}')} |" for c in columns))
    out += ["", "## Charts", "", "```", text_bars(rows), "```", ""]
    return "\n".join(out)


def sweep_csv(report: dict[str, Any]) -> str:
    import csv
    import io

    keys = ["config", "steps", "topk", "draft_tokens", "concurrency", "repeats", "throughput_median", "throughput_min",
            "throughput_max", "speedup", "speedup_min", "speedup_max", "noisy", "accept_length", "ttft_p50_ms", "tpot_p50_ms",
            "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "failed"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(report["rows"])
    return buffer.getvalue()


def render_side_by_side(rows: list[dict[str, Any]], fmt: str = "text") -> str:
    """Two sweeps side by side (decision.side_by_side): throughput, acceptance and speedup of each."""
    names = [k for k in (rows[0] if rows else {}) if k not in ("config", "concurrency")]

    def cells(value: dict | None) -> list[str]:
        if value is None:
            return ["-", "-", "-"]
        noisy = " ~" if value.get("noisy") else ""
        return [num(value["throughput_median"]) + noisy, num(value["accept_length"], "{:.2f}"), num(value["speedup"], "{:.2f}x")]

    if fmt == "md":
        head = "| config | concurrency | " + " | ".join(f"{n} tok/s | {n} accept | {n} speedup" for n in names) + " |"
        lines = [head, "|" + "---|" * (2 + 3 * len(names))]
        for r in rows:
            lines.append(f"| {r['config']} | {r['concurrency']} | " + " | ".join(" | ".join(cells(r[n])) for n in names) + " |")
        return "\n".join(lines)
    head = f"{'config':<44} {'conc':>4} " + " ".join(f"{n[:14] + ' tok/s':>20} {'accept':>7} {'speedup':>8}" for n in names)
    lines = [head]
    for r in rows:
        parts = [f"{c[0]:>20} {c[1]:>7} {c[2]:>8}" for c in (cells(r[n]) for n in names)]
        lines.append(f"{r['config'][:44]:<44} {r['concurrency']:>4} " + " ".join(parts))
    lines.append("(acceptance length as SGLang and vLLM report it, the bonus token counted; ~ a noisy median; each speedup over its own baseline)")
    return "\n".join(lines)
