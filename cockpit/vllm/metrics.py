"""vLLM's /metrics (vllm-facts §4.2): its `vllm:` series summed over engines (a DP rank each), a
fraction's mean; and the acceptance length between two reads, as vLLM's own benchmark computes it:
1 + Δaccepted / Δdrafts (the bonus token counted, as SGLang counts it)."""

from __future__ import annotations


def series_of_samples(samples) -> dict[str, float]:
    """Every `vllm:` series by name (without the prefix), summed over its engines (a DP rank each); a fraction's
    mean.  From /metrics or as a Prometheus scraped them."""
    found: dict[str, float] = {}
    counted: dict[str, int] = {}
    for full, _labels, value in samples:
        if not full.startswith("vllm:") or full.endswith(("_bucket", "_created")):
            continue
        name = full[len("vllm:"):]
        found[name] = found.get(name, 0.0) + value
        counted[name] = counted.get(name, 0) + 1
    for name in [n for n in found if n.endswith("_perc")]:  # a fraction per engine: their mean, not their sum
        found[name] /= counted[name]
    return found


def acceptance_between(before: dict[str, float] | None, after: dict[str, float] | None) -> float | None:
    """1 + Δaccepted / Δdrafts between two reads of the series; None without drafts in between."""
    from cockpit.serving.engine import counter_deltas

    moved = counter_deltas(before, after, ("spec_decode_num_accepted_tokens_total", "spec_decode_num_drafts_total"))
    if moved is None:
        return None
    accepted, drafts = moved
    return 1.0 + accepted / drafts if drafts > 0 and accepted >= 0 else None
