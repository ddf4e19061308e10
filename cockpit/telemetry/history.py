"""Bounded history: a fixed-size ring per GPU metric, so days of monitoring use constant memory."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from cockpit.telemetry.model import HostSnapshot


class Ring:
    """A fixed-capacity series of floats; the oldest value falls off when full."""

    __slots__ = ("_values", "appended", "memo")

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._values: deque[float] = deque(maxlen=capacity)
        self.appended = 0  # values ever appended: tells a reader what is new since it last looked
        self.memo: object = None  # a reader's derived state (the UI's sparkline characters)

    @property
    def capacity(self) -> int:
        return self._values.maxlen or 0

    def append(self, value: float | None) -> None:
        # A missing reading is kept as 0 so the time axis stays aligned across metrics.
        self._values.append(0.0 if value is None else float(value))
        self.appended += 1

    def extend(self, values: Iterable[float | None]) -> None:
        for value in values:
            self.append(value)

    def values(self, last: int | None = None) -> list[float]:
        if last is None or last >= len(self._values):
            return list(self._values)
        return list(self._values)[-last:]

    def __len__(self) -> int:
        return len(self._values)


class GpuHistory:
    __slots__ = ("memory_used_mib", "power_w", "utilization_pct")

    def __init__(self, capacity: int):
        self.memory_used_mib = Ring(capacity)
        self.power_w = Ring(capacity)
        self.utilization_pct = Ring(capacity)


class HostHistory:
    """History of every GPU of one host, keyed by GPU index; fed one snapshot per sample."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.gpus: dict[int, GpuHistory] = {}
        self._last_sampled_at: float | None = None

    def add(self, snapshot: HostSnapshot) -> bool:
        """Record a snapshot's GPU values once per distinct sample; returns True when it added one."""
        if snapshot.sampled_at is None or snapshot.sampled_at == self._last_sampled_at:
            return False
        self._last_sampled_at = snapshot.sampled_at
        for gpu in snapshot.gpus:
            hist = self.gpus.get(gpu.index)
            if hist is None:
                hist = self.gpus[gpu.index] = GpuHistory(self.capacity)
            hist.memory_used_mib.append(gpu.memory_used_mib)
            hist.power_w.append(gpu.power_w)
            hist.utilization_pct.append(gpu.utilization_pct)
        return True
