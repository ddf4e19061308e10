"""NVML reads (nvidia-ml-py) for a local host.  Each value that fails becomes None plus a problem
string, exactly like nvidia-smi's [N/A] and [Unknown Error]."""

from __future__ import annotations

import os
from typing import Any

from cockpit.telemetry.model import ComputeProcess, GpuSample

MIB = 1024 * 1024


def _try(problems: list[str], field: str, fn, *args) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported, _GpuIsLost, ...
        name = type(exc).__name__
        if "NotSupported" not in name and "NoPermission" not in name:
            problems.append(f"{field}: {exc}")
        return None


def _memory_info(nvml, handle, problems: list[str]):
    """Memory as nvidia-smi reports it.  The v1 call counts the driver's reserved memory as used
    (615 MiB on an idle H200, measured): that would make every idle GPU look dirty.  The v2 call
    reports reserved apart, and its `used` matches nvidia-smi's memory.used."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            return nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except Exception:  # noqa: BLE001 - drivers before R510 lack v2
            pass
    return _try(problems, "memory", nvml.nvmlDeviceGetMemoryInfo, handle)


def _process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def read_all(nvml, with_processes: bool = True) -> tuple[list[GpuSample], list[ComputeProcess]]:
    gpus: list[GpuSample] = []
    processes: list[ComputeProcess] = []
    count = nvml.nvmlDeviceGetCount()
    for index in range(count):
        problems: list[str] = []
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # noqa: BLE001 - a GPU lost from the bus
            gpus.append(GpuSample(index=index, problems=(f"handle: {exc}",), lost="lost" in str(exc).lower()))
            continue
        uuid = _try(problems, "uuid", nvml.nvmlDeviceGetUUID, handle)
        memory = _memory_info(nvml, handle, problems)
        power = _try(problems, "power.draw", nvml.nvmlDeviceGetPowerUsage, handle)
        limit = _try(problems, "power.limit", nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        util = _try(problems, "utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
        temp = _try(problems, "temperature", nvml.nvmlDeviceGetTemperature, handle, 0)
        pci = _try(problems, "pci", nvml.nvmlDeviceGetPciInfo, handle)
        gpus.append(
            GpuSample(
                index=index,
                uuid=uuid,
                name=_try(problems, "name", nvml.nvmlDeviceGetName, handle),
                bus_id=(pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId) if pci else None,
                memory_used_mib=int(round(memory.used / MIB)) if memory else None,
                memory_total_mib=int(round(memory.total / MIB)) if memory else None,
                power_w=power / 1000.0 if power is not None else None,
                power_limit_w=limit / 1000.0 if limit is not None else None,
                utilization_pct=int(util.gpu) if util else None,
                memory_utilization_pct=int(util.memory) if util else None,
                temperature_c=int(temp) if temp is not None else None,
                sm_clock_mhz=_try(problems, "clocks.sm", nvml.nvmlDeviceGetClockInfo, handle, 1),
                mem_clock_mhz=_try(problems, "clocks.mem", nvml.nvmlDeviceGetClockInfo, handle, 2),
                pstate=(lambda p: None if p is None else f"P{int(p)}")(_try(problems, "pstate", nvml.nvmlDeviceGetPerformanceState, handle)),
                problems=tuple(problems),
            )
        )
        if with_processes:
            for proc in _try([], "processes", nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []:
                used = getattr(proc, "usedGpuMemory", None)
                processes.append(
                    ComputeProcess(
                        pid=int(proc.pid),
                        name=_process_name(int(proc.pid)),
                        used_memory_mib=int(used // MIB) if isinstance(used, int) and used >= 0 else None,
                        gpu_uuid=uuid,
                        gpu_index=index,
                    )
                )
    return gpus, processes


def nvml_disabled() -> bool:
    return os.environ.get("COCKPIT_NO_NVML") == "1"
