"""The GPU-clean check shared by `cockpit verify`, the gpu_clean step and its invalidation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from cockpit.hosts.state import HostState
from cockpit.telemetry.model import HostSnapshot
from cockpit.format import plural

DEFAULT_MAX_USED_MIB = 256


@dataclass(frozen=True)
class CleanReport:
    host: str
    clean: bool
    reasons: tuple[str, ...] = ()
    error: str | None = None  # could not verify at all (host unreachable, driver error)
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.error is not None:
            return 2
        return 0 if self.clean else 1

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "clean": self.clean if self.error is None else None,
                "reasons": list(self.reasons), "error": self.error, "evidence": self.evidence}

    def render(self, limit_mib: int) -> str:
        if self.error:
            return f"{self.host}: could not verify: {self.error}"
        if self.clean:
            return f"{self.host}: clean: {plural(len(self.evidence['gpus']), 'GPU')} at or below {limit_mib} MiB, no compute processes"
        return "\n".join([f"{self.host}: NOT clean:", *(f"  {reason}" for reason in self.reasons)])


def dirty_reasons(snapshot: HostSnapshot, max_used_mib: int = DEFAULT_MAX_USED_MIB,
                  gpus: list[int] | None = None, expect_gpus: int | None = None) -> list[str]:
    """Why the host's GPUs are not clean: every GPU checked (never a sample), and every compute process."""
    reasons: list[str] = []
    present = {g.index: g for g in snapshot.gpus}
    if expect_gpus is not None and len([g for g in snapshot.gpus if not g.lost]) != expect_gpus:
        reasons.append(f"expected {expect_gpus} GPUs, the host reports {len([g for g in snapshot.gpus if not g.lost])}")
    wanted = sorted(present) if gpus is None else list(gpus)
    for index in wanted:
        gpu = present.get(index)
        if gpu is None:
            reasons.append(f"GPU {index}: not reported by the host")
            continue
        if gpu.lost:
            reasons.append(f"GPU {index}: lost ({'; '.join(gpu.problems)})")
            continue
        if gpu.memory_used_mib is None:
            reasons.append(f"GPU {index}: memory use unknown ({'; '.join(gpu.problems) or 'not reported'})")
        elif gpu.memory_used_mib > max_used_mib:
            reasons.append(f"GPU {index}: {gpu.memory_used_mib} MiB used (limit {max_used_mib} MiB)")
    wanted_set = set(wanted)
    for proc in snapshot.processes:
        if proc.gpu_index is None or proc.gpu_index in wanted_set:
            where = f"GPU {proc.gpu_index}" if proc.gpu_index is not None else f"GPU {proc.gpu_uuid or '?'}"
            memory = f"{proc.used_memory_mib} MiB" if proc.used_memory_mib is not None else "memory n/a"
            reasons.append(f"{where}: compute process pid {proc.pid} ({proc.name or '?'}, {memory})")
    if not snapshot.gpus and gpus is None and expect_gpus is None:
        reasons.append("the host reports no GPUs")
    return reasons


def evidence_of(snapshot: HostSnapshot) -> dict[str, Any]:
    return {
        "host": snapshot.name,
        "time": snapshot.sampled_at or time.time(),
        "source": snapshot.source,
        "gpus": [{"index": g.index, "uuid": g.uuid, "memory_used_mib": g.memory_used_mib,
                  "memory_total_mib": g.memory_total_mib, "lost": g.lost} for g in snapshot.gpus],
        "processes": [p.to_json() for p in snapshot.processes],
    }


def judge(snapshot: HostSnapshot, max_used_mib: int = DEFAULT_MAX_USED_MIB, gpus: list[int] | None = None,
          expect_gpus: int | None = None) -> CleanReport:
    if snapshot.state not in (HostState.UP, HostState.STALE) or snapshot.sampled_at is None:
        return CleanReport(snapshot.name, False, error=f"{snapshot.state.value}: {snapshot.error or 'no sample'}")
    reasons = dirty_reasons(snapshot, max_used_mib, gpus, expect_gpus)
    return CleanReport(snapshot.name, not reasons, tuple(reasons), evidence=evidence_of(snapshot))


async def verify_host(hub, host: str, max_used_mib: int = DEFAULT_MAX_USED_MIB, gpus: list[int] | None = None,
                      expect_gpus: int | None = None, timeout: float | None = None) -> CleanReport:
    """A fresh one-shot sample of the host (never the streaming cache), judged."""
    snapshot = await hub.gate_sample(hub.config.host(host), timeout)  # with its processes (SSH for a Prometheus host)
    hub.publish(snapshot)
    return judge(snapshot, max_used_mib, gpus, expect_gpus)
