"""STAND-IN model of speculative decoding, for the demo's SGLang and the tests' stand-in server: what
they serve depends on the depth the way a real EAGLE-3 deployment does, so a depth sweep has a
trade-off to find.

- Acceptance: a drafter like the story's (per-position accuracies whose estimate is 2.96 with the
  bonus token at SpecForge's 7 positions, decaying further beyond them); served acceptance trails the
  training estimate (SERVING_FACTOR), as it does in the field (2.95 estimated, 2.1 measured).  Each
  verify step accepts the draft tokens up to the first miss, plus the bonus token.
- Cost: a verify forward pass is memory-bound (a fixed time) until the batch's tokens make it
  compute-bound; each draft step costs a little more.  So depth pays at concurrency 1 and costs at
  high concurrency: the best depth moves down as concurrency grows.
"""

from __future__ import annotations

import random

DRAFTER_ACCURACY = (0.747, 0.675, 0.635, 0.595, 0.565, 0.535, 0.505)
BEYOND_DECAY = 0.94  # each position past the trained ones keeps this much of the one before
SERVING_FACTOR = 0.9
TARGET_MS = 10.0  # a memory-bound forward pass of the target
TARGET_MS_PER_TOKEN = 0.35  # once the batch's tokens make it compute-bound
DRAFT_MS = 0.25  # one draft step at batch 1
DRAFT_MS_PER_REQUEST = 0.02


# STAND-IN: what a draft "is" to the stand-in engines, since they run no model: a file beside its weights giving its
# per-position accuracies (the demo's training run writes one into each checkpoint, as its epochs' accuracies); a draft
# without one is the demo drafter (DRAFTER_ACCURACY).  No real engine or trainer reads or writes it.
DRAFT_ACCURACY_FILE = "STANDIN-draft-accuracy.json"


def accuracy(position: int, accuracies: tuple[float, ...] = DRAFTER_ACCURACY) -> float:
    """The drafter's accuracy at a 0-based chain position."""
    if position < len(accuracies):
        return accuracies[position]
    return accuracies[-1] * BEYOND_DECAY ** (position - len(accuracies) + 1)


def draft_accuracies(draft_path: str | None) -> tuple[float, ...]:
    """The per-position accuracies of the draft at `draft_path` (its STAND-IN file), else the demo drafter's."""
    import json
    from pathlib import Path

    if not draft_path:
        return DRAFTER_ACCURACY
    try:
        values = json.loads((Path(draft_path) / DRAFT_ACCURACY_FILE).read_text())["accuracy"]
        found = tuple(float(v) for v in values)
    except (OSError, ValueError, KeyError, TypeError):
        return DRAFTER_ACCURACY
    return found if found and all(0.0 <= v <= 1.0 for v in found) else DRAFTER_ACCURACY


class SpecModel:
    def __init__(self, steps: int = 0, topk: int = 1, draft_tokens: int = 0, seed: int = 0,
                 accuracies: tuple[float, ...] = DRAFTER_ACCURACY):
        self.steps = max(0, steps)
        self.topk = max(1, topk)
        self.draft_tokens = draft_tokens if draft_tokens else (self.steps + 1 if self.steps else 1)
        depth = min(self.steps, max(0, self.draft_tokens - 1))
        # a tree (topk > 1) gives each position more than one chance
        self.accept = [1.0 - (1.0 - SERVING_FACTOR * accuracy(i, accuracies)) ** (1.0 + 0.5 * (self.topk - 1))
                       for i in range(depth)]
        self.rng = random.Random(seed)

    @property
    def speculative(self) -> bool:
        return self.steps > 0

    def tokens_per_step(self) -> int:
        """Tokens one verify step commits: the accepted draft tokens and the bonus token."""
        accepted = 0
        for probability in self.accept:
            if self.rng.random() >= probability:
                break
            accepted += 1
        return accepted + 1

    def expected_accept_length(self) -> float:
        total, product = 1.0, 1.0
        for probability in self.accept:
            product *= probability
            total += product
        return total

    def step_seconds(self, active: int) -> float:
        """One decode (or verify) step with `active` requests in the batch."""
        active = max(1, active)
        tokens = active * (self.draft_tokens if self.speculative else 1)
        target = max(TARGET_MS, TARGET_MS_PER_TOKEN * tokens)
        draft = self.steps * (DRAFT_MS + DRAFT_MS_PER_REQUEST * active)
        return (target + draft) / 1000.0
