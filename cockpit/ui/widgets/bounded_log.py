"""A RichLog that stays bounded while it has no size.

Textual's RichLog keeps every write made before it first has a size (a pane hidden since start-up,
such as the command log or the server log) in an unbounded queue, to replay them when it is shown.
In a cockpit left running for days with its logs hidden that queue grows without end; this one
keeps only the last `max_lines` of them, which is all the log would show anyway.
"""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog


class BoundedRichLog(RichLog):
    def __init__(self, *args, max_lines: int, **kwargs):
        super().__init__(*args, max_lines=max_lines, **kwargs)
        self.backlog: deque[tuple[object, tuple, dict]] = deque(maxlen=max_lines)

    def write(self, content, *args, **kwargs):
        if not self.size.width:
            self.backlog.append((content.copy() if isinstance(content, Text) else content, args, kwargs))
            return self
        return super().write(content, *args, **kwargs)

    def on_resize(self, event: Resize) -> None:
        super().on_resize(event)
        if event.size.width:
            while self.backlog:
                content, args, kwargs = self.backlog.popleft()
                super().write(content, *args, **kwargs)

    def clear(self):
        self.backlog.clear()
        return super().clear()
