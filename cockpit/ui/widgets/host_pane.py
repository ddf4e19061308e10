"""A host's pane: its state in the border, one line per GPU, its compute processes."""

from __future__ import annotations

import time
from typing import Self

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from cockpit.config import HostConfig
from cockpit.hosts.state import HostState
from cockpit.telemetry.history import HostHistory
from cockpit.telemetry.model import HostSnapshot
from cockpit.ui.line_filters import FilteredStyles
from cockpit.ui.textual_internals import plain
from cockpit.ui.render import (HISTORY_KINDS, gpu_detail, gpu_history_lines, gpu_row, gpu_row_segments, host_body, host_title,
                               title_moving_parts)


class HostPane(Widget, can_focus=True):
    """Renders one host.  Fed by the app (`show`); it never reads collectors itself.

    Its height is set from its line count, so a new sample repaints the pane without a layout
    pass over the whole screen (the costly part of a Textual refresh)."""

    DEFAULT_CSS = """
    HostPane {
        border: round $primary-darken-2;
        height: 3;
        padding: 0 1;
        margin: 0 0 0 0;
    }
    HostPane:focus {
        border: heavy $accent;
    }
    HostPane.-down {
        border: round $error;
    }
    HostPane.-down:focus {
        border: heavy $error;
    }
    HostPane.-stale {
        border: round $warning;
    }
    HostPane.-stale:focus {
        border: heavy $warning;
    }
    """

    def __init__(self, host: HostConfig, ascii_only: bool = False):
        super().__init__(id=f"host-{host.name}", classes="host-pane")
        self.host = host
        self._base_style: Style | None = None
        self._background: Color  # the pane's background as render_lines last read it (set before any use)
        self.ascii_only = ascii_only
        self.snapshot = HostSnapshot(name=host.name, state=HostState.CONNECTING, roles=host.roles)
        self.history: HostHistory | None = None
        self._rest_key: tuple | None = None
        self._rest: tuple[list[Text], list[Text]] = ([], [])
        # Lines are rendered to strips when the compositor asks for them (render_line), so a pane
        # scrolled out of view costs its text only, not its segments (64 hosts: most are).
        self._lines: list[tuple[Segment, ...] | Text] = []
        self._strips: list[Strip | None] = []
        self.lines_repainted = 0
        self.zoomed_gpu: int | None = None  # one GPU shown in detail (keys 0-9 while the host is zoomed)
        self.zoom_rows = 0  # zoomed (the other hosts hidden): the rows it fills, each GPU's history under its row
        self._title_key: tuple | None = None
        self._state_shown: HostState | None = None
        self._rendered_width = 0
        self.renders = 0
        self._behind = False  # samples arrived while the pane was scrolled out of view: drawn when it shows
        # The pane as last drawn (every line, border included, as the compositor got it) and what it
        # was drawn for; rows changed since then are made straight into it (render_lines).
        self._drawn: list[Strip] | None = None
        self._drawn_key: tuple | None = None
        self._edges: tuple[list[Segment], list[Segment]] = ([], [])
        self._fast_rows: set[int] = set()
        self._filtered = FilteredStyles()  # the app's line filters, applied once per style
        self._plain = plain("rows")  # measured without this departure: Textual draws every line
        self._refreshing_rows = False
        self.rows_drawn_here = 0
        self.lines_skipped = 0
        self._accent_border(focused=False)

    def _accent_border(self, focused: bool) -> None:
        """A host's own colour (config `accent`) replaces the theme's; heavy still marks the focus."""
        if self.host.accent:
            self.styles.border = ("heavy" if focused else "round", self.host.accent)

    def on_mount(self) -> None:
        self._refresh_title()
        self._refresh_body(force=True)

    def on_resize(self) -> None:
        self._refresh_body(force=True)

    def on_focus(self) -> None:
        self._accent_border(focused=True)
        self._refresh_body(force=True)  # the focused pane's colours differ: rebuild the strips

    def on_blur(self) -> None:
        self._accent_border(focused=False)
        self._refresh_body(force=True)

    def show(self, snapshot: HostSnapshot, history: HostHistory | None, in_view: bool = True) -> None:
        """A new sample.  `in_view`: whether any line of the pane is on the screen (the hosts column
        works it out once a paint for all its panes: HostsView.panes_in_view)."""
        self.snapshot = snapshot
        self.history = history
        if snapshot.state is not self._state_shown:
            self._state_shown = snapshot.state
            self.set_class(snapshot.state in (HostState.UNREACHABLE, HostState.AUTH_FAILED, HostState.HOST_KEY_UNKNOWN,
                                              HostState.HOST_KEY_CHANGED, HostState.DRIVER_ERROR), "-down")
            self.set_class(snapshot.state is HostState.STALE, "-stale")
        self._refresh_title()
        if self.zoomed_gpu is None and not in_view:
            # Nobody sees its rows: keep the sample, fit the height (the column's scroll range stays
            # true), and make the rows when the pane is drawn again (render_lines).  Refreshing a pane
            # that is not on the screen also makes Textual rebuild its map of every widget.
            self._behind = True
            self.lines_skipped += len(snapshot.gpus)
            self._fit_height()
            return
        self._refresh_body()

    def _catch_up(self) -> None:
        if self._behind:
            self._behind = False
            self._refresh_body(force=True)

    def _fit_height(self) -> None:
        head, tail = self._rest_lines(max(40, self._content_width() or 80))
        height = max(1, len(head) + len(self.snapshot.gpus) + len(tail)) + 2
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        if not self._refreshing_rows:
            self._drawn = None  # anything but new rows (a style, the title, the size): Textual draws it all
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _draw_key(self, crop: Region) -> tuple:
        return (crop, self.outer_size, self._rendered_width, len(self._lines), self.has_focus, self.classes, self.app.theme)

    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual draws a pane line by line through its styles (border, padding, colours, filters):
        the costliest part of a frame when every GPU row changes each second.  After Textual has drawn
        the pane once, a changed row is made here as Textual would make it (the border and padding
        around it as Textual drew them, the app's line filters applied) and the other lines are the
        ones drawn last time; anything else that changes (a style, the title, the size) goes through
        Textual again.  Each time the pane learns the edges it checks that a row made this way is
        the row Textual drew (if not, Textual goes on drawing them); a test holds the screens equal."""
        self._catch_up()  # back in view: its rows are made from the newest sample now
        if self._plain:
            return super().render_lines(crop)
        drawn = self._drawn
        if drawn is not None and self._drawn_key == self._draw_key(crop):
            if self._fast_rows:
                self._filtered.prepare(self.get_line_filters(), self._background)
                for y in self._fast_rows:
                    drawn[self._top + y] = self._row_strip(y)
                self.rows_drawn_here += len(self._fast_rows)
                self._fast_rows.clear()
            return list(drawn)
        strips = super().render_lines(crop)
        self._fast_rows.clear()
        self._drawn = None
        self._learn(crop, strips)
        return strips

    def _learn(self, crop: Region, strips: list[Strip]) -> None:
        """Keep what Textual drew, and the border and padding around a row, when the pane was drawn
        whole and a row made here is the row Textual drew (a tint or an opacity, which change every
        cell, or another Textual's way of drawing a line, fail that check: Textual goes on drawing)."""
        if crop != Region(0, 0, *self.outer_size):
            return
        gutter = self.styles.gutter
        self._top = gutter.top
        width = self.outer_size.width
        for y, line in enumerate(self._lines):
            if isinstance(line, tuple) and gutter.top + y < len(strips):
                strip = strips[gutter.top + y]
                self._edges = (list(strip.crop(0, gutter.left)), list(strip.crop(width - gutter.right, width)))
                self._background = self.background_colors[1]
                self._filtered.prepare(self.get_line_filters(), self._background)
                if list(self._row_strip(y)) == list(strip):
                    self._drawn = list(strips)
                    self._drawn_key = self._draw_key(crop)
                # else this Textual draws a row some other way: it keeps drawing them all
                return

    def _row_strip(self, y: int) -> Strip:
        """GPU row `y` as Textual draws it: border and padding either side, the app's filters
        (prepared once per draw) applied."""
        left, right = self._edges
        segments = self._filtered.apply(self._lines[y])
        return Strip([*left, *segments, *right], self.outer_size.width)

    def zoom_gpu(self, index: int | None) -> None:
        self.zoomed_gpu = index
        self._refresh_body(force=True)

    def fill(self, rows: int) -> None:
        """Zoomed, the host fills `rows` (its border included) with its GPUs' histories; 0: its own rows."""
        if rows != self.zoom_rows:
            self.zoom_rows = rows
            self._refresh_body(force=True)

    def tick(self) -> None:
        """Once a second: the age in the title moves even when no sample arrives."""
        self._refresh_title()

    def _refresh_title(self) -> None:
        now = time.time()
        moving = title_moving_parts(self.snapshot, now)
        key = (self.snapshot.state, moving, self.snapshot.roles, self.host.label)
        if key == self._title_key:  # made only when something in it moved (an equal title would still repaint the pane)
            return
        self._title_key = key
        self.border_title = host_title(self.snapshot, self.host.label, now, self.ascii_only, moving)

    def _lines_for(self, width: int) -> list[tuple[Segment, ...] | Text]:
        """The pane's lines: GPU rows as segments (they change every second), the rest as Text."""
        gpus = {g.index: g for g in self.snapshot.gpus}
        histories = self.history.gpus if self.history else {}
        if self.zoomed_gpu is not None and self.zoomed_gpu in gpus:
            body = gpu_detail(gpus[self.zoomed_gpu], histories.get(self.zoomed_gpu), width, self.snapshot.processes, self.ascii_only)
            return list(body.split("\n", allow_blank=True)) if body.plain else [Text("")]
        snap = self.snapshot
        dim = snap.state is HostState.STALE
        head_lines, tail_lines = self._rest_lines(width)
        if self._base_style is None:
            self._base_style = self.rich_style  # the widget's own colours under the line's, as Textual's Log does
        base = self._base_style
        lines: list[tuple[Segment, ...] | Text] = list(head_lines)
        spare = self.zoom_rows - 2 - len(head_lines) - len(snap.gpus) - len(tail_lines)
        kinds = min(len(HISTORY_KINDS), spare // len(snap.gpus)) if snap.gpus and spare > 0 else 0
        for gpu in snap.gpus:
            history = histories.get(gpu.index)
            row = gpu_row_segments(gpu, history, width, self.ascii_only, dim, base)
            lines.append(row if row is not None else gpu_row(gpu, history, width, self.ascii_only, dim))
            if kinds:
                lines += gpu_history_lines(gpu, history, width, kinds, self.ascii_only)
        lines += tail_lines
        return lines or [Text("")]

    def _rest_lines(self, width: int) -> tuple[list[Text], list[Text]]:
        """The lines around the GPU rows (error, processes): they change rarely, so they are made
        again only when what they show changed."""
        snap = self.snapshot
        rest_key = (snap.error, snap.state, bool(snap.gpus), snap.processes, snap.source, width, self.ascii_only)
        if rest_key != self._rest_key:
            head, tail = host_body(snap, self.history.gpus if self.history else {}, width, self.ascii_only, rows=False)
            self._rest_key = rest_key
            self._rest = (head.split("\n", allow_blank=True) if head.plain else [],
                          tail.split("\n", allow_blank=True) if tail.plain else [])
        return self._rest

    def _content_width(self) -> int:
        # From the pane's own size, not content_region: that asks the compositor's map where the
        # pane is on the screen, on every line drawn (a tenth of the TUI's time at 8x8).
        return max(0, self.outer_size.width - self.styles.gutter.width)

    def _refresh_body(self, force: bool = False) -> None:
        width = max(40, self._content_width() or 80)
        if force or width != self._rendered_width:
            self._base_style = None  # colours or width changed: rows are finished with the new ones
        lines = self._lines_for(width)
        height = len(lines) + 2  # lines plus the border
        if force or width != self._rendered_width or len(lines) != len(self._lines):
            self._lines = lines
            self._strips = [None] * len(lines)
            self._rendered_width = width
            self.renders += 1
            if self.styles.height is None or self.styles.height.value != height:
                self.styles.height = height  # only a change of line count costs a layout
            self.refresh()
            return
        # Same shape: repaint only the lines that changed (an idle GPU's line rarely does), in one
        # region.  A line is compared as it is: segments as built (cached styles), a Text by its
        # text and spans; the lines around the rows are the very same objects until they change.
        changed = [y for y, (old, new) in enumerate(zip(self._lines, lines)) if old != new]
        for y in changed:
            self._strips[y] = None
        if changed:
            if self._drawn is not None:
                if all(isinstance(lines[y], tuple) for y in changed):
                    self._fast_rows.update(changed)  # GPU rows, finished at this width: render_lines makes them
                else:
                    self._drawn = None  # another kind of line changed: Textual draws it
            self._refreshing_rows = True
            try:
                # the whole pane's width, borders included: the terminal is then sent each row's
                # strip as drawn, where a region of the content alone made Textual cut every row
                left = self.styles.gutter.left
                self.refresh(Region(-left, changed[0], self.outer_size.width, changed[-1] - changed[0] + 1))
            finally:
                self._refreshing_rows = False
            self.lines_repainted += len(changed)
        self._lines = lines

    def _strip(self, line: tuple[Segment, ...] | Text, width: int) -> Strip:
        if isinstance(line, tuple):
            return Strip(line, width)  # a GPU row: finished on the base style at this width already
        segments = list(line.render(self.app.console, end=""))
        if self._base_style is None:
            self._base_style = self.rich_style  # the widget's own colours under the line's, as Textual's Log does
        return Strip(segments).crop_extend(0, width, None).apply_style(self._base_style)

    def render_line(self, y: int) -> Strip:
        width = self._content_width() or self._rendered_width
        if 0 <= y < len(self._strips):
            strip = self._strips[y]
            if strip is None:
                strip = self._strips[y] = self._strip(self._lines[y], self._rendered_width)
            return strip if strip.cell_length == width else strip.crop_extend(0, width, None)
        return Strip.blank(width)

    @property
    def content(self) -> Text:
        """The pane's text (for tests and screenshots; the screen is drawn from segments), up to date
        even while the pane is out of view."""
        self._catch_up()
        parts = [line if isinstance(line, Text) else Text.assemble(*((s.text, s.style or "") for s in line)) for line in self._lines]
        return Text("\n").join(parts) if parts else Text("")
