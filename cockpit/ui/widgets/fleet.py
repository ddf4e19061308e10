"""The fleet view: one line per host, for many hosts (128 x 8 GPUs stays one screen of lines).

Each line: the host, its state and sample age, its GPUs as one bar each (memory in use), memory,
power, mean utilisation, hottest GPU, processes ("?" when its GPUs come from Prometheus, which
has none).  `/` filters (a name's part, `role:serving`, `state:down`); `enter` opens the host's own
pane.  Lines are drawn on demand (Textual's line API): a host out of view costs nothing to paint.
"""

from __future__ import annotations

import time

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.config import HostConfig
from cockpit.hosts.state import HostState
from cockpit.telemetry.model import HostSnapshot
from cockpit.telemetry.report import HostSummary, summarize

BARS = " ▁▂▃▄▅▆▇█"
DOWN = {HostState.UNREACHABLE, HostState.AUTH_FAILED, HostState.HOST_KEY_UNKNOWN, HostState.HOST_KEY_CHANGED, HostState.DRIVER_ERROR}


def matches(host: HostConfig, snapshot: HostSnapshot | None, text: str) -> bool:
    """`text`: words that must all hold: `role:NAME`, `state:up|stale|down|...`, or a part of the name."""
    for word in text.split():
        key, sep, value = word.partition(":")
        if sep and key == "role":
            if value not in host.roles:
                return False
        elif sep and key == "state":
            state = snapshot.state if snapshot else HostState.CONNECTING
            if not (state.value == value or (value == "down" and state in DOWN)):
                return False
        elif word.lower() not in host.name.lower():
            return False
    return True


def gpu_bars(snapshot: HostSnapshot) -> str:
    out = []
    for gpu in snapshot.gpus:
        if gpu.lost or not gpu.memory_total_mib:
            out.append("?")
            continue
        fraction = (gpu.memory_used_mib or 0) / gpu.memory_total_mib
        out.append(BARS[min(len(BARS) - 1, int(round(fraction * (len(BARS) - 1))))])
    return "".join(out)


class FleetTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    FleetTable {
        height: 1fr;
        border: round $primary-darken-2;
        padding: 0 1;
    }
    FleetTable:focus {
        border: heavy $accent;
    }
    """
    BINDINGS = [Binding("down,j", "move(1)", "next host", show=False), Binding("up,k", "move(-1)", "previous host", show=False),
                Binding("enter", "open", "open host", id="fleet.open"), Binding("slash", "filter", "filter", id="fleet.filter"),
                Binding("escape", "clear", "clear filter", show=False)]

    class Open(Message):
        def __init__(self, host: str) -> None:
            super().__init__()
            self.host = host

    class Filter(Message):
        pass

    def __init__(self, hosts: tuple[HostConfig, ...], **kwargs):
        super().__init__(**kwargs)
        self.hosts = hosts
        self.snapshots: dict[str, HostSnapshot] = {}
        self.filter_text = ""
        self.selected = 0
        self.rows: list[HostConfig] = list(hosts)
        self._lines: dict[str, Strip] = {}
        self.repaints = 0

    # --- data -----------------------------------------------------------------------------------

    def update(self, snapshot: HostSnapshot) -> None:
        """A host's new sample: only its line is repainted (when it is in view)."""
        self.snapshots[snapshot.name] = snapshot
        self._lines.pop(snapshot.name, None)
        for y, host in enumerate(self.rows):
            if host.name == snapshot.name:
                top = int(self.scroll_offset.y)
                if top <= y < top + self.size.height:  # out of view: nothing to paint
                    self.refresh(Region(0, y - top, self.size.width, 1))
                    self.repaints += 1
                break

    def tick(self) -> None:
        """Once per paint: the ages move, and the title's totals are summed once (not per host update)."""
        self._lines.clear()
        self.refresh()
        self._title()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self.rows = [h for h in self.hosts if matches(h, self.snapshots.get(h.name), self.filter_text)]
        self.selected = min(self.selected, max(0, len(self.rows) - 1))
        self._lines.clear()
        self.virtual_size = Size(self.size.width, len(self.rows))
        self.refresh()
        self._title()

    def _title(self) -> None:
        summaries = [summarize(s, time.time()) for s in self.snapshots.values()]
        down = sum(1 for s in summaries if s.state not in ("up", "stale", "connecting"))
        stale = sum(1 for s in summaries if s.state == "stale")
        used, total = sum(s.used_mib for s in summaries), sum(s.total_mib for s in summaries)
        shown = f"{len(self.rows)} of {len(self.hosts)} hosts" if self.filter_text else f"{len(self.hosts)} hosts"
        parts = [shown, f"{sum(s.gpus for s in summaries)} GPUs"]
        if down:
            parts.append(f"{down} down")
        if stale:
            parts.append(f"{stale} stale")
        if total:
            parts.append(f"memory {100 * used / total:.0f}%")
        parts.append(f"{sum(s.power_w for s in summaries) / 1000:.1f} kW")
        if self.filter_text:
            parts.append(f"filter: {self.filter_text}")
        title = "fleet · " + " · ".join(parts)
        if title != self.border_title:
            self.border_title = title

    # --- drawing --------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        self._title()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.rows))
        self._lines.clear()

    def render_line(self, y: int) -> Strip:
        row = y + int(self.scroll_offset.y)
        width = self.content_region.width or self.size.width
        if not 0 <= row < len(self.rows):
            return Strip.blank(width)
        host = self.rows[row]
        key = host.name if row != self.selected or not self.has_focus else f"{host.name}\0selected"
        strip = self._lines.get(key)
        if strip is None or strip.cell_length != width:
            strip = self._line(host, width, selected=row == self.selected)
            self._lines[key] = strip
        return strip

    def _line(self, host: HostConfig, width: int, selected: bool) -> Strip:
        snapshot = self.snapshots.get(host.name) or HostSnapshot(host.name, HostState.CONNECTING, roles=host.roles)
        s: HostSummary = summarize(snapshot, time.time())
        state_style = {"up": "green", "stale": "yellow", "connecting": "dim"}.get(s.state, "bold red")
        age = f"{s.age_s:>5.0f}s" if s.age_s is not None else "     "
        mem = f"{s.used_mib / 1024:>5.0f}/{s.total_mib / 1024:<4.0f}G" if s.total_mib else " " * 11
        util = f"{s.util_pct:>3.0f}%" if s.util_pct is not None else "   -"
        temp = f"{s.temp_max_c:>3}C" if s.temp_max_c is not None else "   -"
        procs = "?" if s.processes is None else str(s.processes)
        base = Style(reverse=True) if selected and self.has_focus else Style()
        segments = [
            Segment(f"{host.name[:18]:<18} ", base + Style(bold=True)),
            Segment(f"{s.state[:12]:<12}", base + Style.parse(state_style)),
            Segment(f"{age} ", base + Style(dim=True)),
            Segment(f"{gpu_bars(snapshot):<8} ", base + Style.parse("cyan")),
            Segment(f"{mem} {s.power_w / 1000:>4.1f}kW util {util} {temp} procs {procs:>2}", base),
        ]
        if s.problems:
            segments.append(Segment(f"  ! {s.problems}", base + Style.parse("bold red")))
        if s.error and s.state not in ("up",):
            segments.append(Segment(f"  {s.error}", base + Style(dim=True)))
        return Strip(segments).crop_extend(0, width, base if selected and self.has_focus else None)

    # --- keys -----------------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        if self.rows:
            self.selected = (self.selected + step) % len(self.rows)
            self._lines = {k: v for k, v in self._lines.items() if "\0" not in k}
            self.refresh()
            self.scroll_to(y=max(0, self.selected - self.size.height // 2), animate=False)

    def action_open(self) -> None:
        if self.rows:
            self.post_message(self.Open(self.rows[self.selected].name))

    def action_filter(self) -> None:
        self.post_message(self.Filter())

    def action_clear(self) -> None:
        self.set_filter("")

    def on_focus(self) -> None:
        self._lines.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._lines.clear()
        self.refresh()
