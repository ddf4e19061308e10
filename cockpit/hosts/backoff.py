"""Reconnect delays: capped exponential backoff with jitter, so 64 hosts do not retry in lockstep."""

from __future__ import annotations

import random


class Backoff:
    def __init__(self, initial: float = 1.0, maximum: float = 60.0, factor: float = 2.0, rng: random.Random | None = None):
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        """The delay before the next attempt: between half and all of the capped exponential step."""
        ceiling = min(self.maximum, self.initial * (self.factor ** self.attempt))
        self.attempt += 1
        return ceiling * (0.5 + 0.5 * self._rng.random())

    def reset(self) -> None:
        self.attempt = 0
