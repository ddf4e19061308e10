"""Immutable telemetry samples: what collectors produce and every view consumes."""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.hosts.state import HostState


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one instant.  None means the GPU does not report the value."""

    index: int
    uuid: str | None = None
    name: str | None = None
    bus_id: str | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    utilization_pct: int | None = None
    memory_utilization_pct: int | None = None
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    pstate: str | None = None
    problems: tuple[str, ...] = ()  # e.g. ("power.draw: [Unknown Error]",)
    lost: bool = False  # fell off the bus: nvidia-smi could not get a handle

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "bus_id": self.bus_id,
            "memory_used_mib": self.memory_used_mib,
            "memory_total_mib": self.memory_total_mib,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "utilization_pct": self.utilization_pct,
            "temperature_c": self.temperature_c,
            "sm_clock_mhz": self.sm_clock_mhz,
            "mem_clock_mhz": self.mem_clock_mhz,
            "pstate": self.pstate,
            "problems": list(self.problems),
            "lost": self.lost,
        }


@dataclass(frozen=True, slots=True)
class ComputeProcess:
    """A process holding a CUDA context, as the GPU driver reports it (host PIDs, even in containers)."""

    pid: int
    name: str | None
    used_memory_mib: int | None
    gpu_uuid: str | None
    gpu_index: int | None = None

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "name": self.name,
            "used_memory_mib": self.used_memory_mib,
            "gpu_uuid": self.gpu_uuid,
            "gpu_index": self.gpu_index,
        }


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """Everything known about one host at one moment; a new one replaces the old on every change."""

    name: str
    state: HostState
    error: str | None = None
    gpus: tuple[GpuSample, ...] = ()
    processes: tuple[ComputeProcess, ...] = ()
    sampled_at: float | None = None  # wall clock of the last good GPU sample
    source: str | None = None  # "nvidia-smi" or "nvml"
    roles: tuple[str, ...] = field(default=())
    retry_at: float | None = None  # wall clock of the next reconnect attempt, while the host is down

    def age(self, now: float) -> float | None:
        return None if self.sampled_at is None else max(0.0, now - self.sampled_at)

    def to_json(self, now: float | None = None) -> dict:
        return {
            "name": self.name,
            "state": self.state.value,
            "error": self.error,
            "roles": list(self.roles),
            "source": self.source,
            "sampled_at": self.sampled_at,
            "retry_at": self.retry_at,
            "age_s": None if now is None or self.sampled_at is None else round(max(0.0, now - self.sampled_at), 3),
            "gpus": [g.to_json() for g in self.gpus],
            "processes": [p.to_json() for p in self.processes],
        }
