"""Which panes show, for the terminal the cockpit meets.

At 160x48 and up (any terminal at least COMPACT_WIDTH wide and COMPACT_HEIGHT high) the hosts and the
checklist stand side by side, and the server log, benchmarks and command log open below them.  In a
smaller terminal (80x24 in a tmux split) one primary pane fills the screen and the others are one
key away: a view bar names them, their keys, and how the checklist stands, whatever is shown."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.widgets import Static

COMPACT_WIDTH, COMPACT_HEIGHT = 100, 28
VIEWS = (("hosts", "h"), ("checklist", "c"), ("procs", "p"), ("runs", "t"), ("server", "s"), ("bench", "b"), ("log", "l"))
BOTTOM = ("procs", "runs", "server", "bench", "log")
NAMES = {"procs": "processes", "runs": "training runs", "server": "server log", "bench": "benchmarks", "log": "command log"}
KEYS = dict(VIEWS)
DESIRED = {"procs": 8, "runs": 10, "server": 14, "bench": 16, "log": 8}  # a bottom pane's rows when there is room for them all
MIN_PANE = 5  # no pane below 3 rows of its own (and its border)


def main_rows(rows: int) -> int:
    """What the hosts and the checklist keep of a large terminal's rows, however many panes are open."""
    return max(12, rows * 2 // 5)


@dataclass
class Layout:
    compact: bool = False
    view: str = "hosts"  # the pane that fills a small terminal
    opened: set[str] = field(default_factory=set)  # the bottom panes open in a large one
    order: list[str] = field(default_factory=list)  # the open bottom panes, the one shown or focused last at the end
    visible: set[str] | None = None  # the bottom panes the last share gave room (None: not laid out yet)

    def _open(self, view: str) -> None:
        self.opened.add(view)
        self.order = [v for v in self.order if v != view] + [view]

    def _close(self, view: str) -> None:
        self.opened.discard(view)
        self.order = [v for v in self.order if v != view]

    def shares(self, rows: int, desired: dict[str, int] | None = None) -> tuple[dict[str, int], list[str]]:
        """A large terminal's `rows` (less the title and the footer) shared out: the hosts and the
        checklist keep main_rows; each open bottom pane gets the rows it wants when all fit, else the
        one shown last gets its rows and the others a share of the rest in proportion (never below
        MIN_PANE); when even that does not fit, they stack as tabs: the last one shown gets the room
        less a tab line naming the others.
        Returns ({view: rows} of the panes shown, [the panes behind tabs])."""
        desired = {**DESIRED, **(desired or {})}
        open_ = [v for v in self.order if v in self.opened] + sorted(self.opened - set(self.order))
        room = rows - main_rows(rows)
        if not open_:
            self.visible = set()
            return {}, []
        wanted = {v: desired[v] for v in open_}
        if sum(wanted.values()) <= room:
            heights, tabbed = wanted, list[str]()
        elif room >= MIN_PANE * len(open_):
            # the pane shown last (the one being read) gets the rows it wants, the others share the rest
            active, others = open_[-1], open_[:-1]
            heights = {active: min(wanted[active], room - MIN_PANE * len(others))}
            rest = room - heights[active]
            total = sum(wanted[v] for v in others)
            heights.update({v: max(MIN_PANE, rest * wanted[v] // total) for v in others})
            while sum(heights.values()) > room:  # rounding up to MIN_PANE: take it back from the tallest of the others
                tallest = max(others, key=lambda v: heights[v])
                heights[tallest] -= 1
            heights = {v: heights[v] for v in open_}
            tabbed = []
        else:
            active = open_[-1]
            heights, tabbed = {active: max(MIN_PANE, room - 1)}, open_[:-1]
        self.visible = set(heights)
        return heights, tabbed

    @staticmethod
    def is_compact(width: int, height: int) -> bool:
        return width < COMPACT_WIDTH or height < COMPACT_HEIGHT

    def resized(self, compact: bool, focused: str | None) -> str | None:
        """The terminal crossed the line between small and large: the pane in use stays in view, and in
        focus.  `focused`: the view the focus is in now.  Returns the view to focus (None: nothing changed)."""
        if compact == self.compact:
            return None
        self.compact = compact
        if compact:
            self.view = focused or "hosts"
            return self.view
        view = focused or self.view  # the pane a small terminal showed opens in the large one
        if view in BOTTOM:
            self._open(view)
        return view

    def press(self, view: str, focused: str | None = None) -> str:
        """A view's key shows its pane and returns it to focus (as k9s does); the same key on the pane
        already in focus hides it (in a small terminal: back to the hosts).  `focused`: the view the
        focus is in now."""
        if self.compact:
            self.view = "hosts" if self.view == view and view != "hosts" else view
            return self.view
        if view in BOTTOM:
            if view in self.opened and focused == view:
                self._close(view)
                return "hosts"
            self._open(view)
        return view

    def hide(self, view: str | None) -> str | None:
        """Escape: hide the pane in focus (a bottom pane of a large terminal; in a small one, back to the
        hosts).  Returns the view to focus then, or None when there was nothing to hide."""
        if self.compact:
            if self.view == "hosts":
                return None
            self.view = "hosts"
            return "hosts"
        if view in BOTTOM and view in self.opened:
            self._close(view)
            return "hosts"
        return None

    def reveal(self, view: str) -> None:
        """Something happened in that pane (a sweep runs, a server started): show it.  A pane already
        open keeps its place: a sweep's server and benchmark updates must not swap the front tab back
        and forth while the user reads one."""
        if self.compact:
            self.view = view
        elif view not in self.opened:
            self._open(view)

    def shown(self, view: str) -> bool:
        if self.compact:
            return self.view == view
        if view in ("hosts", "checklist"):
            return True
        return view in self.opened and (self.visible is None or view in self.visible or (bool(self.order) and view == self.order[-1]))


class ViewBar(Static):
    """One line in a small terminal: the views and their keys, the current one marked, and the
    checklist's progress and next step (visible from every view)."""

    DEFAULT_CSS = """
    ViewBar {
        height: 1;
        background: $boost;
    }
    """

    def show_state(self, layout: Layout, available: set[str], progress: str) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        for name, key in VIEWS:
            if name not in available:
                continue
            current = layout.view == name
            text.append(f" {key} ", style="bold reverse" if current else "bold")
            label = f"{name} {progress}" if name == "checklist" and progress else name
            text.append(f"{label} ", style="bold" if current else "dim")
        self.update(text)


class TabLine(Static):
    """A large terminal with more bottom panes open than fit: the ones stacked behind the pane shown,
    with their keys."""

    DEFAULT_CSS = """
    TabLine {
        height: 1;
        background: $boost;
    }
    """

    def show_tabs(self, shown: str | None, tabbed: list[str]) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        if shown:
            text.append(f" {KEYS[shown]} ", style="bold reverse")
            text.append(f"{NAMES[shown]} ", style="bold")
        for view in tabbed:
            text.append(f" {KEYS[view]} ", style="bold")
            text.append(f"{NAMES[view]} ", style="dim")
        text.append("  (open, no room for all: a key shows its pane)", style="dim italic")
        self.update(text)
        self.display = bool(tabbed)


class MessageBar(Static):
    """The cockpit's messages (Textual's toasts, which covered a pane's text): the latest in lines of their own
    above the footer, so that they take room from the panes instead of covering them."""

    DEFAULT_CSS = """
    MessageBar {
        height: auto;
        max-height: 4;
        background: $panel;
        padding: 0 1;
    }
    """
    LINES = 2  # messages shown at once (the newest last)
    STYLES = {"error": "bold red", "warning": "yellow", "information": ""}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.messages: list[tuple[float, str, str, str]] = []  # (until, severity, title, message)

    def add(self, message: str, title: str, severity: str, timeout: float, now: float) -> None:
        self.messages = [m for m in self.messages if m[0] > now][-(self.LINES - 1):] + [(now + timeout, severity, title, message)]
        self.show_now(now)

    def show_now(self, now: float) -> None:
        self.messages = [m for m in self.messages if m[0] > now]
        text = Text()
        for _, severity, title, message in self.messages:
            if text:
                text.append("\n")
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{title}: " if title else "", style="bold")
            line.append(" ".join(message.split()), style=self.STYLES.get(severity, ""))
            line.truncate(max(20, self.size.width - 2) if self.size.width else 400, overflow="ellipsis")
            text.append_text(line)
        self.update(text)
        self.display = bool(self.messages)

    def revise(self, revised, now: float) -> bool:
        """Say each shown message again as `revised(title, message)` says it now (None: it no longer holds): a line
        derived from a state follows the state.  True when any changed."""
        kept = []
        for until, severity, title, message in self.messages:
            again = revised(title, message)
            if again is not None:
                kept.append((until, severity, title, again))
        changed = kept != self.messages
        if changed:
            self.messages = kept
            self.show_now(now)
        return changed

    @property
    def rows(self) -> int:
        """The rows the bar takes now (the layout gives the panes the rest)."""
        return len(self.messages)
