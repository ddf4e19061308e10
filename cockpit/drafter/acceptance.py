"""From a drafter's per-position accuracies to the acceptance length a topk-1 chain should reach
(runs-facts a.5).  Two conventions exist and both are shown, named:

- without the bonus token: sum over k of prod_{i<=k} acc_i (SpecForge's simulated_acc_len, TorchSpec,
  vLLM speculators' EAL);
- with the bonus token: 1 + the same (ModelOpt, NeMo, DeepSpec; what SGLang's `accept len` counts,
  so the one to put next to a measured value).

Truncated at the serving depth (speculative-num-steps): a chain of d steps can accept at most d.
"""

from __future__ import annotations

from dataclasses import dataclass

FORMULA_WITHOUT = "sum_k prod_{i<=k} acc_i"
FORMULA_WITH = "1 + sum_k prod_{i<=k} acc_i"


@dataclass(frozen=True)
class Estimate:
    with_bonus: float
    without_bonus: float
    depth: int  # the positions the sum covers (the serving depth, or fewer when fewer accuracies are known)

    def to_json(self) -> dict:
        return {"with_bonus": round(self.with_bonus, 4), "without_bonus": round(self.without_bonus, 4), "depth": self.depth,
                "formula_with_bonus": FORMULA_WITH, "formula_without_bonus": FORMULA_WITHOUT}


def estimate(accuracies: list[float] | tuple[float, ...], depth: int | None = None) -> Estimate | None:
    """The estimate truncated at `depth` (None: every position known); None without accuracies."""
    values = [float(a) for a in accuracies if a is not None]
    if not values:
        return None
    positions = values if depth is None else values[: max(0, depth)]
    total, product = 0.0, 1.0
    for accuracy in positions:
        product *= min(1.0, max(0.0, accuracy))
        total += product
    return Estimate(1.0 + total, total, len(positions))
