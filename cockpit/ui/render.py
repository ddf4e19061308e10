"""Pure functions that turn snapshots into Rich text (or, for the lines that change every second,
straight into segments): no widgets, easy to test, cheap to call."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from cockpit.hosts.state import HostState
from cockpit.telemetry.history import GpuHistory
from cockpit.telemetry.model import ComputeProcess, GpuSample, HostSnapshot

SPARK = "▁▂▃▄▅▆▇█"
ASCII_SPARK = "_.-~=*#@"

STATE_STYLE = {
    HostState.CONNECTING: "dim",
    HostState.UP: "bold green",
    HostState.STALE: "bold yellow",
    HostState.UNREACHABLE: "bold red",
    HostState.AUTH_FAILED: "bold red",
    HostState.HOST_KEY_UNKNOWN: "bold red",
    HostState.HOST_KEY_CHANGED: "bold white on red",
    HostState.DRIVER_ERROR: "bold magenta",
}


def sparkline(values: list[float], width: int, top: float | None = None, ascii_only: bool = False) -> str:
    chars = ASCII_SPARK if ascii_only else SPARK
    values = values[-width:]
    if not values:
        return " " * width
    high = top if top else max(values)
    if high <= 0:
        line = chars[0] * len(values)
    else:
        line = "".join(chars[min(len(chars) - 1, max(0, int(v / high * (len(chars) - 1) + 0.5)))] for v in values)
    return line.rjust(width)


def ring_sparkline(ring, width: int, top: float | None, ascii_only: bool = False) -> str:
    """sparkline of a history ring's last `width` values, kept up to date incrementally: each value's
    character is computed once, when it arrives (a fixed top, such as a GPU's power limit), and the
    characters are kept as one string as long as the ring, instead of every value of the window on
    every repaint."""
    if not top:
        return sparkline(ring.values(width), width, top, ascii_only)
    memo = ring.memo
    if not isinstance(memo, list) or memo[0] != (top, ascii_only) or ring.appended - memo[1] > len(memo[2]):
        memo = ring.memo = [(top, ascii_only), ring.appended, _spark_chars(ring.values(), top, ascii_only)]
    elif ring.appended != memo[1]:
        memo[2] = (memo[2] + _spark_chars(ring.values(ring.appended - memo[1]), top, ascii_only))[-ring.capacity:]
        memo[1] = ring.appended
    return memo[2][-width:].rjust(width)


def _spark_chars(values, top: float, ascii_only: bool) -> str:
    """Each value's sparkline character against a fixed top: sparkline([v], 1, top) for each v."""
    chars = ASCII_SPARK if ascii_only else SPARK
    if top <= 0:
        return chars[0] * len(values)
    last = len(chars) - 1
    return "".join(chars[min(last, max(0, int(v / top * last + 0.5)))] for v in values)


def usage_style(fraction: float) -> str:
    if fraction >= 0.9:
        return "red"
    if fraction >= 0.5:
        return "yellow"
    return "green"


def memory_bar(used: int | None, total: int | None, width: int, ascii_only: bool = False) -> Text:
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    if used is None or not total:
        return Text("?" * width, style="dim")
    fraction = max(0.0, min(1.0, used / total))
    filled = int(round(fraction * width))
    if used > 0 and filled == 0:
        filled = 1  # a few MiB left behind must be visible: that is what "not clean" looks like
    bar = Text(full * filled, style=usage_style(fraction))
    bar.append(empty * (width - filled), style="dim")
    return bar


def _num(value, fmt: str = "{}", missing: str = "n/a") -> str:
    return missing if value is None else fmt.format(value)


def gpu_row(gpu: GpuSample, history: GpuHistory | None, width: int, ascii_only: bool = False, dim: bool = False) -> Text:
    """One GPU on one line, fitted to `width` columns (80-column terminals get the compact form)."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"GPU{gpu.index:>2} ", style="bold")
    if gpu.lost:
        line.append("LOST ", style="bold white on red")
        line.append(gpu.bus_id or "", style="dim")
        line.append("  " + ("; ".join(gpu.problems))[: max(0, width - 30)], style="red")
        return line
    wide = width >= 110
    bar_width = 16 if wide else 10
    if wide:
        line.append(f"{(gpu.name or '?')[:14]:<14} ", style="dim")
    line.append_text(memory_bar(gpu.memory_used_mib, gpu.memory_total_mib, bar_width, ascii_only))
    line.append(f" {_num(gpu.memory_used_mib):>6}/{_num(gpu.memory_total_mib):<6}M")
    power = f"{_num(gpu.power_w, '{:.0f}')}/{_num(gpu.power_limit_w, '{:.0f}')}W"
    line.append(f" {power:>8}")
    util = gpu.utilization_pct
    line.append(f" {_num(util, '{}%'):>4}", style=usage_style((util or 0) / 100) if util is not None else "dim")
    temp = gpu.temperature_c
    line.append(f" {_num(temp, '{}C'):>4}", style="red" if temp is not None and temp >= 85 else "")
    used = len(line.plain)
    room = width - used - 1
    if history is not None and room >= 4:
        spark = sparkline(history.power_w.values(min(room, 40 if wide else 12)), min(room, 40 if wide else 12), top=gpu.power_limit_w, ascii_only=ascii_only)
        line.append(" " + spark, style="cyan")
    if gpu.problems:
        line.append(" !", style="bold red")
    if dim:
        line.stylize("dim")
    return line


@lru_cache(maxsize=256)
def _style(name: str, dim: bool = False, base: Style | None = None) -> Style:
    style = Style.parse(name) if name else Style()
    style = style + Style(dim=True) if dim else style
    return base + style if base is not None else style


@lru_cache(maxsize=1024)
def _row_prefix(index: int, name: str | None, used_mib: int | None, total_mib: int | None, wide: bool, ascii_only: bool,
                dim: bool, base: Style | None) -> tuple[tuple[Segment, ...], int]:
    """A GPU row's start (number, name, memory bar and figures) and its width: it moves only when
    the GPU's memory does, so it is made once per value, not once a second."""
    out: list[Segment] = []

    def add(text: str, style: str = "") -> None:
        if text:
            out.append(Segment(text, _style(style, dim, base)))

    add(f"GPU{index:>2} ", "bold")
    bar_width = 16 if wide else 10
    if wide:
        add(f"{(name or '?')[:14]:<14} ", "dim")
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    if used_mib is None or not total_mib:
        add("?" * bar_width, "dim")
    else:
        fraction = max(0.0, min(1.0, used_mib / total_mib))
        filled = int(round(fraction * bar_width))
        if used_mib > 0 and filled == 0:
            filled = 1
        add(full * filled, usage_style(fraction))
        add(empty * (bar_width - filled), usage_style(fraction) + " dim")  # memory_bar's Text style runs under it
    add(f" {_num(used_mib):>6}/{_num(total_mib):<6}M")
    return tuple(out), Segment.get_line_length(out)  # in cells (a GPU's name is its only free text)


def gpu_row_segments(gpu: GpuSample, history: GpuHistory | None, width: int, ascii_only: bool = False,
                     dim: bool = False, base: Style | None = None) -> tuple[Segment, ...] | None:
    """gpu_row as segments, built directly: every GPU line of every host changes each second, and
    going through Rich Text (spans, style resolution) was the TUI's largest cost.  The same cells and
    styles as gpu_row (a test holds them equal).  With `base` (the pane's own style) the row is
    finished as the screen needs it: each style on top of the base, exactly `width` cells (padded,
    or cut where a narrow pane cannot hold it), so the pane makes its strip without another pass.
    None for a lost GPU (rare: gpu_row renders it)."""
    if gpu.lost:
        return None
    wide = width >= 110
    prefix, used = _row_prefix(gpu.index, gpu.name, gpu.memory_used_mib, gpu.memory_total_mib, wide, ascii_only, dim, base)
    out: list[Segment] = list(prefix)

    def add(text: str, style: str = "") -> None:
        nonlocal used
        if text:
            out.append(Segment(text, _style(style, dim, base)))
            used += len(text)

    power = f"{_num(gpu.power_w, '{:.0f}')}/{_num(gpu.power_limit_w, '{:.0f}')}W"
    add(f" {power:>8}")
    util = gpu.utilization_pct
    add(f" {_num(util, '{}%'):>4}", usage_style((util or 0) / 100) if util is not None else "dim")
    temp = gpu.temperature_c
    add(f" {_num(temp, '{}C'):>4}", "red" if temp is not None and temp >= 85 else "")
    room = width - used - 1
    if history is not None and room >= 4:
        add(" " + ring_sparkline(history.power_w, min(room, 40 if wide else 12), gpu.power_limit_w, ascii_only), "cyan")
    if gpu.problems:
        add(" !", "bold red")
    if base is not None and used != width:  # finished: exactly `width` cells, padded or cut
        if used < width:  # `used` is in cells: the prefix measured once, the rest one cell a character
            out.append(Segment(" " * (width - used), base))
        else:
            out = Segment.adjust_line_length(out, width, base)
    return tuple(out)


def title_moving_parts(snapshot: HostSnapshot, now: float) -> tuple[str | None, str | None]:
    """What of a host's title moves with the clock: the sample's age and the retry countdown."""
    age = snapshot.age(now)
    age_text = (f"{age:.0f}s ago" if age >= 2 else "live") if age is not None and snapshot.state in (HostState.UP, HostState.STALE) else None
    retry = f"retry in {max(0.0, snapshot.retry_at - now):.0f}s (R: now)" if snapshot.retry_at is not None and snapshot.state is not HostState.UP else None
    return age_text, retry


def host_title(snapshot: HostSnapshot, label: str, now: float, ascii_only: bool = False,
               moving: tuple[str | None, str | None] | None = None) -> Text:
    title = Text(no_wrap=True)
    sep = " | " if ascii_only else " · "
    title.append(label, style="bold")
    title.append(sep, style="dim")
    title.append(snapshot.state.value, style=STATE_STYLE[snapshot.state])
    age_text, retry = moving or title_moving_parts(snapshot, now)
    if age_text is not None:
        title.append(sep, style="dim")
        title.append(age_text, style="yellow" if snapshot.state is HostState.STALE else "dim")
    if retry is not None:
        title.append(sep, style="dim")
        title.append(retry, style="dim")
    if snapshot.roles:
        title.append(sep, style="dim")
        title.append(", ".join(snapshot.roles), style="dim")
    return title


def gpu_ranges(indices: list[int]) -> str:
    """GPU indices as ranges: [0, 1, 2, 3, 5] -> 'GPU0-3,5'."""
    parts: list[str] = []
    run: list[int] = []
    for index in sorted(set(indices)):
        if run and index == run[-1] + 1:
            run.append(index)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [index]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return "GPU" + ",".join(parts)


def process_groups(processes: Sequence[ComputeProcess]) -> list[tuple[str, ComputeProcess, int]]:
    """One line per process and memory, whatever the number of GPUs it holds it on (a server with
    tensor parallelism 8 is one line, not eight): (its GPUs, the process, how many GPUs)."""
    groups: dict[tuple, list] = {}
    for proc in processes:
        groups.setdefault((proc.pid, proc.name, proc.used_memory_mib), []).append(proc)
    out = []
    for members in groups.values():
        known = [p.gpu_index for p in members if p.gpu_index is not None]
        where = gpu_ranges(known) if known else "GPU?"
        out.append((where, members[0], len(members)))
    return out


def host_body(snapshot: HostSnapshot, histories: dict[int, GpuHistory], width: int, ascii_only: bool = False,
              rows: bool = True):
    """The pane's text: the error, a line per GPU, the compute processes.  With rows=False the GPU
    rows are left out and (the lines before them, the lines after them) are returned: the pane
    draws the rows itself from gpu_row_segments."""
    head = Text(no_wrap=True, overflow="ellipsis")
    tail = Text(no_wrap=True, overflow="ellipsis")
    dim = snapshot.state is HostState.STALE
    if snapshot.error:
        style = "yellow" if snapshot.state in (HostState.STALE, HostState.CONNECTING, HostState.UP) else "red"
        head.append(snapshot.error + "\n", style=style)
    if not snapshot.gpus:
        if snapshot.state is HostState.CONNECTING:
            head.append("connecting…" if not ascii_only else "connecting...", style="dim")
        elif not snapshot.error:
            head.append("no GPUs reported", style="dim")
        head.rstrip()
        return head if rows else (head, tail)
    if snapshot.processes:
        for where, proc, count in process_groups(snapshot.processes):
            memory = _num(proc.used_memory_mib, '{} MiB')
            memory = f"{count} x {memory}" if count > 1 else memory
            tail.append(f"  {where:<7} pid {proc.pid:<8} {memory:>10}  {(proc.name or '?')[:40]}\n", style="yellow")
    elif snapshot.source == "prometheus":
        tail.append("  processes: unknown here (DCGM exports none; a GPU gate asks the host over SSH)\n", style="dim")
    elif snapshot.state.reached:
        tail.append("  no compute processes\n", style="dim")
    head.rstrip()
    tail.rstrip()
    if not rows:
        return head, tail
    body = head.copy()
    if body.plain:
        body.append("\n")
    for gpu in snapshot.gpus:
        body.append_text(gpu_row(gpu, histories.get(gpu.index), width, ascii_only, dim))
        body.append("\n")
    body.append_text(tail)
    body.rstrip()
    return body


HISTORY_KINDS = (("power", "cyan"), ("memory", "green"), ("util", "yellow"))


def gpu_history_lines(gpu: GpuSample, history: GpuHistory | None, width: int, kinds: int, ascii_only: bool = False) -> list[Text]:
    """A zoomed host's GPU: up to `kinds` lines of its history at the pane's width (power, memory,
    utilisation), so the host fills the rows the other hosts left."""
    lines = []
    span = max(10, width - 12)
    for name, style in HISTORY_KINDS[:kinds]:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"   {name:<8} ", style="dim")
        if history is None:
            line.append("no history yet", style="dim")
        elif name == "power":
            line.append(ring_sparkline(history.power_w, span, gpu.power_limit_w, ascii_only), style=style)
        elif name == "memory":
            line.append(sparkline(history.memory_used_mib.values(), span, top=float(gpu.memory_total_mib or 0) or None,
                                  ascii_only=ascii_only), style=style)
        else:
            line.append(sparkline(history.utilization_pct.values(), span, top=100.0, ascii_only=ascii_only), style=style)
        lines.append(line)
    return lines


def gpu_detail(gpu: GpuSample, history: GpuHistory | None, width: int, processes=(), ascii_only: bool = False) -> Text:
    """One GPU zoomed: every field nvidia-smi gave, and its history at full width."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"GPU {gpu.index}  {gpu.name or '?'}  {gpu.uuid or ''}  {gpu.bus_id or ''}\n", style="bold")
    fields = [
        ("memory", f"{_num(gpu.memory_used_mib)} / {_num(gpu.memory_total_mib)} MiB"),
        ("power", f"{_num(gpu.power_w, '{:.1f}')} / {_num(gpu.power_limit_w, '{:.0f}')} W"),
        ("utilisation", f"{_num(gpu.utilization_pct, '{}%')} (memory {_num(gpu.memory_utilization_pct, '{}%')})"),
        ("temperature", _num(gpu.temperature_c, "{} C")),
        ("clocks", f"SM {_num(gpu.sm_clock_mhz, '{} MHz')}, memory {_num(gpu.mem_clock_mhz, '{} MHz')}"),
        ("performance state", _num(gpu.pstate)),
    ]
    for label, value in fields:
        text.append(f"  {label:<18}", style="dim")
        text.append(value + "\n")
    if gpu.lost:
        text.append("  LOST from the bus\n", style="bold white on red")
    for problem in gpu.problems:
        text.append(f"  ! {problem}\n", style="red")
    if history is not None:
        span = max(10, width - 22)
        text.append("  power history     ", style="dim")
        text.append(sparkline(history.power_w.values(), span, top=gpu.power_limit_w, ascii_only=ascii_only) + "\n", style="cyan")
        text.append("  memory history    ", style="dim")
        text.append(sparkline(history.memory_used_mib.values(), span, top=float(gpu.memory_total_mib or 0) or None,
                              ascii_only=ascii_only) + "\n", style="green")
        text.append("  utilisation       ", style="dim")
        text.append(sparkline(history.utilization_pct.values(), span, top=100.0, ascii_only=ascii_only) + "\n", style="yellow")
    mine = [p for p in processes if p.gpu_index == gpu.index]
    for proc in mine:
        text.append(f"  pid {proc.pid} {proc.name or '?'} {_num(proc.used_memory_mib, '{} MiB')}\n", style="yellow")
    if not mine:
        text.append("  no compute process on this GPU\n", style="dim")
    text.rstrip()
    return text
