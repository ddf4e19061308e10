"""A RichLog that stays bounded while it has no size, and cuts long lines with an ellipsis.

Textual's RichLog keeps every write made before it first has a size (a pane hidden since start-up,
such as the command log or the server log) in an unbounded queue, to replay them when it is shown.
In a cockpit left running for days with its logs hidden that queue grows without end; this one
keeps only the last `max_lines` of them, which is all the log would show anyway.

A line longer than the pane ends in "…" at the pane's edge (RichLog cuts it silently), and the log
never scrolls sideways: RichLog renders at least `min_width` (78) cells, so a narrower pane grew a
horizontal scrollbar that covered the last line (the server's "ready to roll").
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog


class BoundedRichLog(RichLog):
    DEFAULT_CSS = """
    BoundedRichLog {
        overflow-x: hidden;
        scrollbar-gutter: stable;
    }
    """

    def __init__(self, *args, max_lines: int, **kwargs):
        super().__init__(*args, max_lines=max_lines, min_width=1, **kwargs)
        self.kept: deque[object] = deque(maxlen=max_lines)  # what is shown, to draw again at a new width
        self.backlog: deque[object] = deque(maxlen=max_lines)  # written while it had no size
        self._drawn_at = 0  # the width the shown lines were drawn at
        self._replaying = False

    def write(self, content, *args, **kwargs):
        """A line (Text or str; other renderables as RichLog draws them), drawn at the log's width."""
        if self._replaying:  # RichLog's own replay of what it deferred (on_resize): drawn already counted
            return super().write(content, *args, **kwargs)
        if isinstance(content, str):
            content = Text(content)
        if isinstance(content, Text) and not self.wrap:
            content.no_wrap, content.overflow = True, "ellipsis"
        self.kept.append(content)
        if not self.size.width:
            self.backlog.append(content)
            return self
        return self._draw(content)

    def _draw(self, content):
        width = self.scrollable_content_region.width
        self._drawn_at = width
        if isinstance(content, Text) and width:
            return super().write(content, width=width)  # not measured: Rich caps a measure at the console's width
        return super().write(content)

    def on_resize(self, event: Resize) -> None:
        self._replaying = True
        try:
            super().on_resize(event)
        finally:
            self._replaying = False
        if not event.size.width:
            return
        if self.scrollable_content_region.width != self._drawn_at and len(self.kept) > len(self.backlog):
            RichLog.clear(self)  # lines drawn at another width: all again, at this one
            self.backlog = deque(self.kept, maxlen=self.backlog.maxlen)
        while self.backlog:
            self._draw(self.backlog.popleft())

    def clear(self):
        self.backlog.clear()
        self.kept.clear()
        return super().clear()
