"""Replays of the exact queries the cockpit runs, recorded on a real H200 (tests/fixtures/README.md)."""

import json

import pytest

from cockpit.telemetry.smi import GpuStreamAssembler, parse_apps, parse_gpu_table

H200 = "gpu/h200_cockpit_query"


def test_busy_query_matches_the_table_nvidia_smi_printed(fixtures):
    gpus, lost = parse_gpu_table((fixtures / H200 / "smi_query_busy.csv").read_text())
    assert not lost and len(gpus) == 1
    gpu = gpus[0]
    table = (fixtures / H200 / "smi_table_busy.txt").read_text()
    # | N/A   58C    P0            693W /  700W |   21455MiB / 143771MiB |    100%      Default |
    assert f"{gpu.memory_used_mib}MiB / {gpu.memory_total_mib}MiB" in table
    # power and temperature move between the two calls; the limit and the load do not
    assert f"W /  {round(gpu.power_limit_w)}W" in table and gpu.power_w > 600
    assert gpu.utilization_pct == 100 and f"{gpu.utilization_pct}%" in table
    procs = parse_apps((fixtures / H200 / "smi_apps_busy.csv").read_text(), gpus)
    assert [(p.pid, p.name, p.used_memory_mib, p.gpu_index) for p in procs] == [(478, "python3", 21446, 0)]
    assert f"{procs[0].used_memory_mib}MiB" in table


def test_idle_query_is_clean(fixtures):
    gpus, _ = parse_gpu_table((fixtures / H200 / "smi_query_idle.csv").read_text())
    assert gpus[0].memory_used_mib == 0 and gpus[0].problems == ()
    assert parse_apps((fixtures / H200 / "smi_apps_idle.csv").read_text()) == []


def test_apps_loop_prints_header_once(fixtures):
    idle = (fixtures / H200 / "apps_loop_idle.csv").read_text().splitlines()
    busy = (fixtures / H200 / "apps_loop_busy.csv").read_text().splitlines()
    assert len(idle) == 1 and idle[0].startswith("pid")
    assert sum(line.startswith("pid") for line in busy) == 1 and len(busy) > 2
    # with units and a header, the parser still reads every row
    assert {p.pid for p in parse_apps("\n".join(busy))} == {478}


def test_recorded_stream_assembles_into_ticks(fixtures):
    lines = (fixtures / H200 / "smi_stream.csv").read_text().splitlines()
    assembler = GpuStreamAssembler()
    ticks = [t for t in map(assembler.feed, lines) if t]
    assert len(ticks) == len(lines) - 1 and all(len(t[0]) == 1 for t in ticks)
    assert all(t[0][0].power_w == pytest.approx(79.5, abs=2) for t in ticks)


@pytest.mark.parametrize("state, smi_file", [("idle", "smi_memory_idle.csv"), ("busy", "smi_memory_busy.csv")])
def test_nvml_memory_matches_nvidia_smi(fixtures, state, smi_file):
    """NVML's v1 memory call counts the driver's 615 MiB reserve as used; the cockpit reads v2,
    which agrees with nvidia-smi (replayed through the NVML stand-in, recorded on an H200)."""
    from cockpit.telemetry.nvml import read_all
    from standin.pynvml_standin import StandInNvml

    gpus, procs = read_all(StandInNvml(state))
    used, total, _free = (int(v) for v in (fixtures / H200 / smi_file).read_text().split(","))
    assert gpus[0].memory_used_mib == used and gpus[0].memory_total_mib == total
    assert gpus[0].power_w == pytest.approx(692.369) and gpus[0].sm_clock_mhz is None and gpus[0].problems == ()
    assert (len(procs) == 1) is (state == "busy")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL", "SIGINT"])
def test_a_killed_real_stream_ends_on_whole_rows(fixtures, how):
    """Recorded on the H200: a killed `-lms` stream leaves only whole GPU rows, and the stand-in
    exits the way the real nvidia-smi did."""
    import signal
    import subprocess
    import time

    from harness.sshd import STANDIN_DIR

    folder = fixtures / "gpu" / "h200_stream_faults"
    raw = (folder / f"killed_{how}.bin").read_text()
    assembler = GpuStreamAssembler()
    ticks = [t for t in (assembler.feed(line) for line in raw.splitlines()) if t]
    assert len(ticks) >= 8 and assembler.garbage_lines == 0
    assert all([g.index for g in t[0]] == [0] and t[0][0].memory_total_mib == 143771 for t in ticks)
    recorded = json.loads((folder / "killed.json").read_text())[how]["exit"]
    standin = subprocess.Popen([str(STANDIN_DIR / "nvidia-smi"), "--query-gpu=index", "--format=csv,noheader", "-lms", "100"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    standin.send_signal(getattr(signal, how))
    standin.communicate(timeout=10)
    assert standin.returncode == recorded
