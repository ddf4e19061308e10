"""nvidia-smi parsers on the real H200 outputs and on every odd value nvidia-smi prints."""

import pytest

from cockpit.telemetry.monitor import GpuTableBuilder
from cockpit.telemetry.smi import (
    GPU_FIELDS,
    FailureKind,
    GpuStreamAssembler,
    LostGpu,
    classify_failure,
    gpu_query_argv,
    header_fields,
    parse_apps,
    parse_gpu_line,
    parse_gpu_table,
)

FIXTURE_FIELDS = header_fields(
    "index, uuid, name, pci.bus_id, memory.used [MiB], memory.total [MiB], memory.free [MiB], power.draw [W], "
    "power.limit [W], utilization.gpu [%], utilization.memory [%], temperature.gpu, clocks.current.sm [MHz], "
    "clocks.current.memory [MHz], pstate, fan.speed [%], ecc.errors.uncorrected.volatile.total"
)


def test_idle_with_units_and_header(fixtures):
    gpus, lost = parse_gpu_table((fixtures / "gpu/h200/smi_idle_query.csv").read_text())
    assert not lost and len(gpus) == 1
    gpu = gpus[0]
    assert gpu.index == 0
    assert gpu.uuid == "GPU-8e692359-ca1c-4b88-ad3e-63bdf1d2fa0f"
    assert gpu.name == "NVIDIA H200"
    assert gpu.memory_used_mib == 0 and gpu.memory_total_mib == 143771
    assert gpu.power_w == pytest.approx(120.48) and gpu.power_limit_w == pytest.approx(700.0)
    assert gpu.utilization_pct == 0 and gpu.temperature_c == 39
    assert gpu.sm_clock_mhz == 375 and gpu.mem_clock_mhz == 3201 and gpu.pstate == "P0"
    assert gpu.problems == ()  # fan.speed [N/A] on a passively cooled card is "not reported", not a fault


def test_busy_nounits(fixtures):
    line = (fixtures / "gpu/h200/smi_busy_stream.csv").read_text().splitlines()[0]
    gpu = parse_gpu_line(line, FIXTURE_FIELDS)
    assert gpu.memory_used_mib == 41971 and gpu.power_w == pytest.approx(692.63)
    assert gpu.utilization_pct == 100 and gpu.temperature_c == 61


def test_busy_apps(fixtures):
    gpus, _ = parse_gpu_table((fixtures / "gpu/h200/smi_busy_query.csv").read_text())
    procs = parse_apps((fixtures / "gpu/h200/smi_busy_apps.csv").read_text(), gpus)
    assert len(procs) == 1
    proc = procs[0]
    assert (proc.pid, proc.name, proc.used_memory_mib, proc.gpu_index) == (480, "python3", 41962, 0)
    assert parse_apps((fixtures / "gpu/h200/smi_idle_apps.csv").read_text()) == []


def test_stream_of_real_ticks(fixtures):
    lines = (fixtures / "gpu/h200/smi_stream.csv").read_text().splitlines()
    assembler = GpuStreamAssembler(FIXTURE_FIELDS)
    ticks = [t for t in (assembler.feed(line) for line in lines) if t]
    # One GPU: the first tick is known complete when index 0 repeats, then every line is a tick.
    assert len(ticks) == len(lines) - 1
    assert [round(t[0][0].power_w, 2) for t in ticks][:2] == [106.90, 86.41]


def row(index, **values):
    base = {
        "index": str(index), "uuid": f"GPU-{index}", "name": "NVIDIA H200", "pci.bus_id": f"00000000:{index:02X}:00.0",
        "memory.used": "0", "memory.total": "143771", "power.draw": "120.00", "power.limit": "700.00",
        "utilization.gpu": "0", "utilization.memory": "0", "temperature.gpu": "40", "clocks.sm": "345",
        "clocks.mem": "3201", "pstate": "P0",
    }
    base.update(values)
    return ", ".join(base[f] for f in GPU_FIELDS)


def test_eight_gpu_stream_ticks_and_vanishing_gpu():
    assembler = GpuStreamAssembler()
    out = [assembler.feed(row(i)) for i in range(8)]
    assert out == [None] * 8  # first tick: the GPU count is not known yet
    tick = assembler.feed(row(0))
    assert [g.index for g in tick[0]] == list(range(8))
    out = [assembler.feed(row(i)) for i in range(1, 8)]
    assert [g.index for g in out[-1][0]] == list(range(8)) and out[:-1] == [None] * 6
    # GPU 7 vanishes: the tick ends when index 0 repeats.
    assert all(assembler.feed(row(i)) is None for i in range(7))
    tick = assembler.feed(row(0))
    assert [g.index for g in tick[0]] == list(range(7))


def test_a_garbled_last_row_does_not_cut_the_next_ticks_in_two():
    assembler = GpuStreamAssembler(expected_max_index=7)
    ticks = [t for t in (assembler.feed(row(i)) for i in range(8)) if t]
    assert [[g.index for g in t[0]] for t in ticks] == [list(range(8))]
    # GPU 7's row arrives cut short: that tick ends when index 0 repeats, without GPU 7 ...
    for i in range(7):
        assert assembler.feed(row(i)) is None
    assert assembler.feed(row(7)[:40]) is None
    lines = [row(i) for i in range(8)] * 2
    ticks = [t for t in (assembler.feed(line) for line in lines) if t]
    # ... and the ticks after it are whole again, not 0-6 then 7 alone.
    assert [[g.index for g in t[0]] for t in ticks] == [list(range(7)), list(range(8)), list(range(8))]
    # A GPU gone for good: after three short ticks a tick ends at the new last GPU again.
    lines = [row(i) for i in range(7)] * 5
    ticks = [t for t in (assembler.feed(line) for line in lines) if t]
    assert all([g.index for g in t[0]] == list(range(7)) for t in ticks) and len(ticks) >= 4


@pytest.mark.parametrize("value, field, expect_problem", [
    ("[N/A]", "power.draw", False),
    ("[Not Supported]", "power.draw", False),
    ("[Unknown Error]", "power.draw", True),
    ("ERR!", "temperature.gpu", True),
    ("[GPU is lost]", "memory.used", True),
    ("12abc", "utilization.gpu", True),
])
def test_odd_values_become_none(value, field, expect_problem):
    gpu = parse_gpu_line(row(3, **{field: value}))
    attr = {"power.draw": "power_w", "temperature.gpu": "temperature_c", "memory.used": "memory_used_mib", "utilization.gpu": "utilization_pct"}[field]
    assert getattr(gpu, attr) is None
    assert bool(gpu.problems) is expect_problem
    if expect_problem:
        assert field in gpu.problems[0]


def test_lost_gpu_line_keeps_its_row():
    message = "Unable to determine the device handle for GPU0000:28:00.0: GPU is lost.  Reboot the system to recover this GPU"
    parsed = parse_gpu_line(message)
    assert isinstance(parsed, LostGpu) and parsed.bus_id == "0000:28:00.0"
    builder = GpuTableBuilder()
    first = builder.build([parse_gpu_line(row(i, **{"pci.bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0"})) for i in range(3)], [])
    assert len(first) == 3
    later = builder.build([first[0], first[2]], [parsed])
    assert [g.index for g in later] == [0, 1, 2]
    assert later[1].lost and later[1].uuid == "GPU-1" and "GPU is lost" in later[1].problems[0]


@pytest.mark.parametrize("text, status, kind", [
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.", 9, FailureKind.DRIVER),
    ("No devices were found", 6, FailureKind.NO_DEVICES),
    ("Failed to initialize NVML: Driver/library version mismatch", 18, FailureKind.DRIVER),
    ("bash: line 1: nvidia-smi: command not found", 127, FailureKind.NOT_INSTALLED),
    ("", 127, FailureKind.NOT_INSTALLED),
])
def test_whole_command_failures(text, status, kind):
    failure = classify_failure(text, status)
    assert failure is not None and failure.kind is kind


def test_garbage_is_never_a_sample():
    for junk in ["", "garbage", ",,,,", "\x00\xff", "index, uuid", "x, " * 13 + "x", "-1, " + row(0)[3:]]:
        assert not isinstance(parse_gpu_line(junk), type(parse_gpu_line(row(0))))
    assert classify_failure("0, GPU-1, NVIDIA H200", 0) is None


def test_query_argv_is_a_list_not_a_shell_string():
    argv = gpu_query_argv("/opt/nv smi/nvidia-smi", 500)
    assert argv[0] == "/opt/nv smi/nvidia-smi" and argv[-2:] == ["-lms", "500"]


def test_gpu_rows_drawn_from_segments_match_the_text_form():
    """The TUI draws GPU rows straight from segments (its hot path); they hold the same cells and
    styles as the Rich Text form, for every width, state and dimming."""
    from rich.console import Console
    from rich.segment import Segment

    from cockpit.telemetry.history import GpuHistory
    from cockpit.telemetry.model import GpuSample
    from cockpit.ui.render import gpu_row, gpu_row_segments

    console = Console(width=200, color_system="truecolor")
    history = GpuHistory(30)
    samples = [GpuSample(index=3, name="NVIDIA H200", memory_used_mib=61234, memory_total_mib=143771, power_w=693.4,
                         power_limit_w=700.0, utilization_pct=97, temperature_c=88, problems=("ECC",)),
               GpuSample(index=0, memory_used_mib=2, memory_total_mib=143771, power_w=None, power_limit_w=700.0,
                         utilization_pct=None, temperature_c=39),
               GpuSample(index=1)]
    for gpu in samples:
        for value in (100.0, 350.0, 690.0):
            history.power_w.append(value)
        for width in (60, 90, 160):
            for ascii_only in (False, True):
                for dim in (False, True):
                    text = gpu_row(gpu, history, width, ascii_only, dim)
                    a = list(Segment.simplify(text.render(console, end="")))
                    b = list(Segment.simplify(gpu_row_segments(gpu, history, width, ascii_only, dim)))
                    assert [(s.text, s.style) for s in a] == [(s.text, s.style) for s in b], (gpu.index, width, ascii_only, dim)


def test_finished_gpu_rows_are_exactly_the_pane_width():
    """With the pane's style, a row is finished at exactly the width asked: padded when short, cut
    when a narrow pane cannot hold it (the pane draws it as it is, with no crop of its own)."""
    from rich.style import Style

    from cockpit.telemetry.history import GpuHistory
    from cockpit.telemetry.model import GpuSample
    from cockpit.ui.render import gpu_row_segments

    history = GpuHistory(30)
    history.power_w.append(690.0)
    gpu = GpuSample(index=3, name="NVIDIA H200", memory_used_mib=61234, memory_total_mib=143771, power_w=693.4,
                    power_limit_w=700.0, utilization_pct=97, temperature_c=88, problems=("ECC",))
    base = Style(bgcolor="black")
    for width in (40, 45, 52, 60, 109, 110, 160):
        row = gpu_row_segments(gpu, history, width, base=base)
        assert sum(len(segment.text) for segment in row) == width, width
    assert "".join(s.text for s in gpu_row_segments(gpu, history, 40, base=base)).startswith("GPU 3 ")


def test_a_rings_sparkline_kept_incrementally_equals_the_sparkline_of_its_values():
    """The pane keeps each power value's character as it arrives; through the ring filling, wrapping
    round, a jump of many values at once, a new power limit and both character sets, it must read
    as the sparkline made afresh from the ring's values."""
    import random

    from cockpit.telemetry.history import GpuHistory
    from cockpit.ui.render import ring_sparkline, sparkline

    rng = random.Random(3)
    rings = {False: GpuHistory(24).power_w, True: GpuHistory(24).power_w}  # one per character set, as a pane has
    top = 700.0
    for step in range(300):
        for _ in range(rng.choice([1, 1, 1, 2, 30])):  # sometimes more than the ring holds at once
            value = rng.choice([None, 0.0, rng.uniform(0, 760)])
            for ring in rings.values():
                ring.append(value)
        if step == 150:
            top = 350.0
        for ascii_only, ring in rings.items():
            for width in (1, 12, 24, 40):
                assert ring_sparkline(ring, width, top, ascii_only) == sparkline(ring.values(width), width, top, ascii_only), (step, width)
    assert all(ring.memo[1] == ring.appended for ring in rings.values())
