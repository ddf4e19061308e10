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

import re
from collections import deque

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog

from cockpit.ui import actions
from cockpit.ui.messages import CopyRequested

MATCH_STYLE = "black on yellow"
CURRENT_STYLE = "bold black on dark_orange"


class BoundedRichLog(RichLog):
    DEFAULT_CSS = """
    BoundedRichLog {
        overflow-x: hidden;
        scrollbar-gutter: stable;
    }
    """

    BINDINGS = actions.bindings("logview")

    def __init__(self, *args, max_lines: int, **kwargs):
        super().__init__(*args, max_lines=max_lines, min_width=1, **kwargs)
        self.search: re.Pattern | None = None
        self.search_text = ""
        self.match_at: int | None = None  # the index (in kept) of the current match
        self.following = True  # new lines scroll to the end; scrolling up pauses it, G resumes
        self.wide = False  # long lines drawn whole, read by scrolling sideways (left/right), instead of cut or wrapped
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
        if isinstance(content, Text):
            content.no_wrap, content.overflow = True, "ellipsis"  # kept cut; drawn wrapped (a copy) while wrap is on
        self.kept.append(content)
        if not self.size.width:
            self.backlog.append(content)
            return self
        return self._draw(content)

    def _shaped(self, content, index: int | None = None):
        """A kept line as drawn now: cut with an ellipsis or wrapped, its search matches marked."""
        if not isinstance(content, Text):
            return content
        if self.search is None and not self.wrap and not self.wide and content.no_wrap and content.overflow == "ellipsis":
            return content
        shaped = content.copy()
        shaped.no_wrap, shaped.overflow = (False, "fold") if self.wrap else ((True, "ignore") if self.wide else (True, "ellipsis"))
        if self.search is not None:
            current = index is not None and index == self.match_at
            shaped.highlight_regex(self.search, style=CURRENT_STYLE if current else MATCH_STYLE)
        return shaped

    def _draw(self, content, index: int | None = None):
        width = self.scrollable_content_region.width
        self._drawn_at = width
        content = self._shaped(content, len(self.kept) - 1 if index is None else index)
        scroll = self.following if self.auto_scroll else False
        if isinstance(content, Text) and self.wide:
            return super().write(content, width=max(width, min(4000, content.cell_len)), scroll_end=scroll)  # whole: read sideways
        if isinstance(content, Text) and width:
            return super().write(content, width=width, scroll_end=scroll)  # not measured: Rich caps a measure at the console's width
        return super().write(content, scroll_end=scroll)

    def _redraw(self) -> None:
        """Every kept line again (a new search, wrap turned on or off, a new width)."""
        if not self.size.width:
            return
        RichLog.clear(self)
        self.backlog.clear()
        for index, content in enumerate(self.kept):
            self._draw(content, index)

    # --- search, follow, wrap (the keys: ui/actions.py scope "logview") ---------------------------------

    def set_search(self, text: str | None) -> int:
        """Search the kept lines (None or empty: clear); jumps to the newest match.  Returns how many lines match."""
        from cockpit.ui.screens.search import compile_search

        self.search_text = text or ""
        self.search = compile_search(self.search_text)
        found = self.matches()
        self.match_at = found[-1] if found else None
        self._redraw()
        self._show_match()
        self._say(found)
        return len(found)

    def matches(self) -> list[int]:
        if self.search is None:
            return []
        return [i for i, line in enumerate(self.kept) if self.search.search(line.plain if isinstance(line, Text) else str(line))]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """n and N move between matches only while a search is on; otherwise the keys go on to the app (n: the next
        step of the checklist, from any pane)."""
        if action == "search_next":
            return self.search is not None
        return True

    def action_search_next(self, step: int) -> None:
        found = self.matches()
        if not found:
            self._say()
            return
        if self.match_at is None:
            self.match_at = found[-1]
        else:
            after = [i for i in found if (i - self.match_at) * step > 0]
            self.match_at = (min(after) if step > 0 else max(after)) if after else (found[0] if step > 0 else found[-1])
        self._redraw()
        self._show_match()
        self._say(found)

    def _show_match(self) -> None:
        if self.match_at is None or self.wrap:
            return  # wrapped lines take rows of their own: the view stays (the matches are marked)
        self.following = False
        self.scroll_to(y=max(0, self.match_at - self.scrollable_content_region.height // 2), animate=False)

    def action_search(self) -> None:
        from cockpit.ui.screens.search import SearchScreen

        def searched(text: str | None) -> None:
            if text is not None:
                self.set_search(text)
        self.app.push_screen(SearchScreen(self.border_title or "the log", self.search_text), searched)

    def action_copy_match(self) -> None:
        """Through the app's copy (OSC 52): the current match's line; else the fix the pane offers (a server's crash:
        the flags that fix it, shell-quoted so they paste as they run); else the newest line."""
        from cockpit.format import shell_words

        fix = getattr(self.parent, "top_fix", None)
        if self.match_at is not None and self.match_at < len(self.kept):
            line, what = self.kept[self.match_at], "the matching line"
            text = line.plain if isinstance(line, Text) else str(line)
        elif fix is not None and (fix.replacement or fix.suggestions):
            text = shell_words(list(fix.replacement)) if fix.replacement else fix.suggestions[0]
            what = "the fix"
        elif self.kept:
            line, what = self.kept[-1], "the last line"
            text = line.plain if isinstance(line, Text) else str(line)
        else:
            return
        self.post_message(CopyRequested(text, what))

    def action_toggle_wrap(self) -> None:
        """w: cut at the edge -> wrapped -> whole lines read sideways (left/right) -> cut."""
        if not self.wrap and not self.wide:
            self.wrap = True
        elif self.wrap:
            self.wrap, self.wide = False, True
        else:
            self.wide = False
        self.styles.overflow_x = "auto" if self.wide else "hidden"
        if not self.wide:
            self.scroll_to(x=0, animate=False)
        self._redraw()
        self._say()

    def action_sideways(self, step: int) -> None:
        if not self.wide:
            self.app.notify("w (twice) draws long lines whole, to read them sideways", timeout=4)
            return
        self.scroll_to(x=max(0, self.scroll_x + step * max(8, self.scrollable_content_region.width // 2)), animate=False)

    def action_follow(self) -> None:
        self.following = True
        self.scroll_end(animate=False)
        self._say()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old and new < self.max_scroll_y:  # the reader scrolled up: new lines no longer pull the view down
            if self.following:
                self.following = False
                self._say()
        elif new >= self.max_scroll_y and not self.following and self.search is None:
            self.following = True
            self._say()

    def _say(self, found: list[int] | None = None) -> None:
        """The log's state in its bottom border: following or paused, wrap, the search and its matches (`found`: the
        matches when the caller has just searched them)."""
        parts = ["following" if self.following else "paused: G follows"]
        if self.wrap:
            parts.append("wrap")
        elif self.wide:
            parts.append("whole lines: left/right")
        if self.search is not None:
            found = self.matches() if found is None else found
            where = f"{found.index(self.match_at) + 1}/{len(found)}" if self.match_at in found else f"{len(found)} lines"
            parts.append(f"/{self.search_text}/ {where}" if found else f"/{self.search_text}/ not found")
        said = " · ".join(parts)
        if said != self._holder.border_subtitle:
            self._holder.border_subtitle = said

    @property
    def _holder(self):
        """Where the log's state is said: its own border, or the pane's it sits in (the server log's lines have none)."""
        return self if self.styles.border_bottom[0] not in ("", "none", "hidden") or self.parent is None else self.parent

    @property
    def state_line(self) -> str:
        """What the border says of the log (following or paused, wrap, the search)."""
        return str(self._holder.border_subtitle or "")

    def on_mount(self) -> None:
        self._say()

    def on_resize(self, event: Resize) -> None:
        self._replaying = True
        try:
            super().on_resize(event)
        finally:
            self._replaying = False
        if not event.size.width:
            return
        if self.scrollable_content_region.width != self._drawn_at and len(self.kept) > len(self.backlog):
            self._redraw()  # lines drawn at another width: all again, at this one
            return
        start = len(self.kept) - len(self.backlog)
        while self.backlog:
            self._draw(self.backlog.popleft(), start)
            start += 1

    def clear(self):
        self.backlog.clear()
        self.kept.clear()
        return super().clear()
