"""STAND-IN for the pynvml module (nvidia-ml-py), for tests only: there is no GPU here.

It answers the calls cockpit.telemetry.nvml makes with values recorded through the real NVML on an
H200 (tests/fixtures/gpu/h200_cockpit_query/nvml_memory_*.json, ../h200/nvml_busy.json): bytes and
milliwatts exactly as NVML returned them.  Memory answers v1 and v2 differently, as the real one does.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
nvmlMemory_v2 = 33554472  # the real constant's value


class NVMLError_NotSupported(Exception):
    pass


class StandInNvml:
    def __init__(self, state: str = "busy"):
        self.memory = json.loads((FIXTURES / "h200_cockpit_query" / f"nvml_memory_{state}.json").read_text())
        self.busy = json.loads((FIXTURES / "h200" / "nvml_busy.json").read_text())[0]
        self.state = state
        self.nvmlMemory_v2 = nvmlMemory_v2

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return self.busy["uuid"]

    def nvmlDeviceGetName(self, handle):
        return self.busy["name"]

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=b"00000000:00:06.0")

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        m = self.memory
        if version == nvmlMemory_v2:
            return SimpleNamespace(used=m["v2_used"], total=m["v2_total"], free=m["v2_free"], reserved=m["v2_reserved"])
        return SimpleNamespace(used=m["v1_used"], total=m["v1_total"], free=m["v1_free"])

    def nvmlDeviceGetPowerUsage(self, handle):
        return self.busy["power_mw"]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return self.busy["power_limit_mw"]

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self.busy["util"], memory=23)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return self.busy["temp"]

    def nvmlDeviceGetClockInfo(self, handle, clock):
        raise NVMLError_NotSupported("Not Supported")

    def nvmlDeviceGetPerformanceState(self, handle):
        return 0

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p["used"]) for p in self.busy["procs"]] if self.state == "busy" else []
