"""Snapshots of the cockpit's panes at 80x24 and 160x48 in two themes, from fixed telemetry."""

from __future__ import annotations

import time

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import ComputeProcess, GpuSample, HostSnapshot
from cockpit.ui.app import CockpitApp

CONFIG = """
[hosts.gpu-server]
address = "gpu-server.example"
user = "root"
roles = ["serving"]

[hosts.trainer]
address = "trainer.example"
roles = ["training"]

[runbook]
name = "snap"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "gpu-server"
argv = ["python3", "-m", "sglang.launch_server"]
"""


def fixed_hub(config) -> TelemetryHub:
    hub = TelemetryHub(config)  # never started: no collector runs, only these snapshots
    future = time.time() + 10**6  # ages read "live" whenever the snapshot is taken
    for tick in range(12):
        gpus = tuple(GpuSample(index=i, uuid=f"GPU-{i}", name="NVIDIA H200", memory_used_mib=30000 if i == 5 else 0,
                               memory_total_mib=143771, power_w=80.0 + ((tick + i) % 4) * 9, power_limit_w=700.0,
                               utilization_pct=0, temperature_c=39) for i in range(8))
        hub.publish(HostSnapshot("gpu-server", HostState.UP, gpus=gpus, sampled_at=future + tick, source="nvidia-smi",
                                 roles=("serving",), processes=(ComputeProcess(4242, "python3", 30000, "GPU-5", 5),)))
        busy = tuple(GpuSample(index=i, uuid=f"T-{i}", name="NVIDIA H200", memory_used_mib=61234, memory_total_mib=143771,
                               power_w=690.0 + tick % 3, power_limit_w=700.0, utilization_pct=100, temperature_c=61) for i in range(4))
        hub.publish(HostSnapshot("trainer", HostState.UP, gpus=busy, sampled_at=future + tick, source="nvidia-smi", roles=("training",)))
    return hub


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("theme", ["cockpit-dark", "cockpit-light"])
def test_cockpit_snapshot(snap_compare, tmp_path, size, theme):
    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config), theme=theme)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    assert snap_compare(app, terminal_size=size)
