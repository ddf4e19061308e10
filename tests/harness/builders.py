"""What several test files build the same way, written once: the recorded training runs and their
checkpoints, SGLang's decode lines, runbook configs over the loopback sshd, host panes' snapshots, the
snapshot tests' config and a telemetry hub that never starts, benchmark runs.  No test file imports
another test file; they import from here."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.follow import clean
from cockpit.hosts.local import LocalTransport
from cockpit.hosts.state import HostState
from cockpit.serving.depth import DepthConfig
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import ComputeProcess, GpuSample, HostSnapshot

# --- recorded training runs and their checkpoints; a local transport ------------------------------------------------------------

TRAINING = Path(__file__).resolve().parent.parent / "fixtures" / "training"


def lines_of(path: Path) -> list[str]:
    parts = re.split(rb"\r\n|\r|\n", path.read_bytes())
    return [clean(p) for p in parts if p]


def write_checkpoint(directory: Path, fixture: str, prefix: str, complete: bool = True) -> Path:
    """A checkpoint as the trainer leaves it: config.json and model.safetensors rebuilt from the real
    header (zeros for the tensors: only the header and the size are ever read)."""
    directory.mkdir(parents=True, exist_ok=True)
    header = (TRAINING / fixture / f"{prefix}__model.safetensors.header.bin").read_bytes()
    (length,) = struct.unpack("<Q", header[:8])
    end = max(t["data_offsets"][1] for k, t in json.loads(header[8:8 + length]).items() if k != "__metadata__")
    size = 8 + length + end
    with open(directory / "model.safetensors", "wb") as handle:
        handle.write(header)
        handle.truncate(size if complete else size - 4096)
    (directory / "config.json").write_bytes((TRAINING / fixture / f"{prefix}__config.json").read_bytes())
    return directory


def local() -> LocalTransport:
    from cockpit.config import HostConfig

    return LocalTransport(HostConfig(name="here", local=True), CommandLog())


# --- SGLang's decode lines, one per wording ------------------------------------------------------------

DECODE_LINES = [
    "[2025-05-01 10:00:00 TP0] Decode batch. #running-req: 8, #token: 21730, token usage: 0.04, accept len: 2.95, cuda graph: True, "
    "gen throughput (token/s): 812.40, #queue-req: 0",
    "[2025-05-01 10:00:02 TP0] Decode batch. #running-req: 8, #token: 21730, token usage: 0.04, accept len: 2.90, cuda graph: True, "
    "gen throughput (token/s): 800.00, #queue-req: 1, ",
    "[2025-10-01 10:00:04 TP0] Decode batch, #running-req: 8, #token: 21730, token usage: 0.04, accept len: 2.80, accept rate: 0.70, "
    "cuda graph: True, gen throughput (token/s): 790.00, #queue-req: 2, ",
    "[2026-10-01 10:00:06.123 DP1 TP8] Decode batch, #running-req: 6, #token: 1000, token usage: 0.10, accept len: 2.70, "
    "accept rate: 0.57, cuda graph: True, gen throughput (token/s): 780.00, #queue-req: 3",
    "(SchedulerActor pid=123, ip=10.0.0.2) [2026-10-01 10:00:08 PP1 TP0] Decode batch [7], #running-req: 5, #token: 900, "
    "token usage: 0.09, accept len: 2.60, accept rate: 0.53, cap len: 2.10, cuda graph: True, gen throughput (token/s): 770.00, "
    "#queue-req: 4, est. decode TFLOPS/s (per GPU): 100.00",
]


# --- runbook configs over the loopback sshd ------------------------------------------------------------

DIRTY_GPU5 = {"gpus": 8, "set": {"5": {"memory.used": 30000}},
              "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}]}


async def yes(_: str) -> bool:
    return True


def runbook_toml(sshd, steps: str, extra_hosts: str = "") -> str:
    return sshd.config_toml(sshd.host_toml("gpu-server") + extra_hosts) + '\n[runbook]\nname = "t"\nfreshness_s = 30\n' + steps


GATED = """
[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "gpu-server"
argv = ["sleep", "30"]
settle_s = 0.5
log = "{log}"
"""


def cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=90,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


# --- host panes' snapshots ------------------------------------------------------------

PANE_HOSTS = ("alpha", "bravo", "charlie", "delta")


PANE_HOSTS_CONFIG = "".join(f'[hosts.{name}]\naddress = "{name}.example"\nuser = "root"\n\n' for name in PANE_HOSTS)


FUTURE = 4102444800.0  # ages read "live": the titles do not move while the test runs


def host_snapshot(host: int, tick: int, state: HostState = HostState.UP) -> HostSnapshot:
    """Every value of every GPU moves each tick, as the issue's worst case has it."""
    gpus = tuple(GpuSample(index=i, uuid=f"GPU-{host}-{i}", name="NVIDIA H200", memory_used_mib=1000 * ((tick + i) % 3),
                           memory_total_mib=143771, power_w=100.0 + 97 * host + 7 * i + 3 * tick, power_limit_w=700.0,
                           utilization_pct=(11 * tick + i) % 101, temperature_c=40 + (tick + i) % 50) for i in range(8))
    processes = (ComputeProcess(4242, "python3", 30000, f"GPU-{host}-5", 5),) if host == 0 else ()
    return HostSnapshot(PANE_HOSTS[host], state, gpus=gpus, sampled_at=FUTURE + tick, source="nvidia-smi", processes=processes)


# --- benchmark runs ------------------------------------------------------------

def bench_run(depth: int | None, concurrency: int, tput: float, accept: float | None, ttft: float, itl: float) -> dict:
    config = DepthConfig.chain(depth) if depth else DepthConfig()
    return {"config": config.label, **config.to_json(), "speculative": config.speculative, "concurrency": concurrency,
            "output_throughput_tok_s": tput, "accept_length": accept, "failed": 0, "requests": 8,
            "ttft_ms": {"p50": ttft, "p90": ttft * 1.2, "p99": ttft * 1.5}, "itl_ms": {"p50": itl, "p90": itl * 1.3, "p99": itl * 2},
            "tpot_ms": {"p50": itl * 1.1, "p90": itl * 1.4, "p99": itl * 2}}


RUNS = [
    bench_run(None, 1, 150.0, None, 40.0, 6.5), bench_run(None, 8, 900.0, None, 60.0, 8.0),
    bench_run(16, 1, 330.0, 2.95, 45.0, 3.1), bench_run(16, 8, 1500.0, 2.9, 70.0, 5.0),
    bench_run(10, 1, 360.0, 2.8, 44.0, 2.9), bench_run(10, 8, 1650.0, 2.7, 66.0, 4.5),
    bench_run(5, 1, 300.0, 2.4, 42.0, 3.3), bench_run(5, 8, 1600.0, 2.3, 63.0, 4.4),
]


# --- the snapshot tests' config and a hub that never starts ------------------------------------------------------------

SNAPSHOT_CONFIG = """
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
    future = 4102444800.0  # 2100-01-01: ages read "live" whenever the snapshot is taken, and the raw evidence is the same
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


def steps_toml(port: int, log, extra_args: list[str], scenario: str = "{}", draft_tokens: int = 16) -> str:
    """A runbook over the loopback sshd's gpu-server: clean, an SGLang launch of the stand-in, ready."""
    return f"""
[runbook]
name = "serve"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
host = "gpu-server"
model_path = "/models/Kimi-K2.5"
draft_path = "/ckpt/eagle3"
draft_tokens = {draft_tokens}
tp = 8
port = {port}
log = "{log}"
settle_s = 1.0
extra_args = {json.dumps(extra_args)}
env = {{ SGLANG_STANDIN = {json.dumps(scenario)} }}

[[runbook.steps]]
name = "ready"
kind = "sglang_ready"
host = "gpu-server"
timeout_s = 30
poll_s = 0.2
"""
