"""The command log pane: every command the cockpit ran on any host, with its exit status."""

from __future__ import annotations

import time

from rich.text import Text

from cockpit.hosts.commandlog import CommandRecord
from cockpit.format import plural
from cockpit.ui.widgets.bounded_log import BoundedRichLog


def format_record(record: CommandRecord) -> Text:
    stamp = time.strftime("%H:%M:%S", time.localtime(record.finished_at or record.started_at))
    line = Text()
    line.append(f"{stamp} ", style="dim")
    line.append(f"{record.host:<12} ", style="bold")
    if record.running:
        line.append("  ... " if record.kind == "run" else "  >>> ", style="cyan")
    elif record.exit_status == 0:
        line.append(f"{'ok':>5} ", style="green")
    else:
        status = "?" if record.exit_status is None else str(record.exit_status)
        line.append(f"{status:>5} ", style="bold red")
    line.append(record.command)
    if record.error:
        line.append(f"  ({record.error})", style="red")
    return line


SEEN_AT_MOST = 2000  # commands remembered as succeeded (their repeats are counted, not shown)

class CommandLogPane(BoundedRichLog):
    DEFAULT_CSS = """
    CommandLogPane {
        height: 8;
        border: round $primary-darken-2;
        border-title-color: $text-muted;
    }
    CommandLogPane:focus {
        border: heavy $accent;
    }
    """

    def __init__(self, **kwargs):
        super().__init__(max_lines=500, wrap=False, markup=False, auto_scroll=True, **kwargs)
        self.border_title = "command log"
        self.shown = 0
        self.repeats_hidden = 0
        self._seen_ok: dict[tuple[str, str], None] = {}  # commands that succeeded, oldest first (bounded)

    def add(self, record: CommandRecord) -> None:
        """Show a command: streams when they start and end, runs when they end.  A command that
        already succeeded on the same host (the periodic process poll) is counted, not repeated;
        failures are always shown."""
        if record.running and record.kind == "run":
            return
        key = (record.host, record.command)
        if not record.running and record.exit_status == 0 and record.kind == "run":
            if key in self._seen_ok:
                self.repeats_hidden += 1
                self.border_title = f"command log · {plural(self.repeats_hidden, 'repeat', 'repeats')} of a command above that succeeded again, not shown"
                return
            self._seen_ok[key] = None
            if len(self._seen_ok) > SEEN_AT_MOST:  # each pid's `ps -p PID`, each kill: forget the oldest
                del self._seen_ok[next(iter(self._seen_ok))]
        elif record.exit_status not in (0, None) or record.error:
            self._seen_ok.pop(key, None)
        self.shown += 1
        self.write(format_record(record))
