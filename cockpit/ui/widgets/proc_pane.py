"""The processes pane (issue 40): one host's compute processes as nvitop shows them (hosts/proctable.py), sorted by any
column, filtered by `/` (a regular expression over the row, case-smart, as the logs' search), one selected; K kills the
selected one through the kill steps' plan and confirmation, y copies its command line.  The pane polls only while it
is shown: the host's latest GPU sample and one `ps` over its connection."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from cockpit.where.owners import with_owners
from cockpit.hosts.proctable import COLUMNS, HEADINGS, ProcessTable, ProcRow, cells, columns_for, sort_rows
from cockpit.hosts.transport import TransportError
from cockpit.ui import actions
from cockpit.ui.messages import CopyRequested, KillRequested

NUMERIC = ("pid", "gpu_mib", "cpu", "rss", "time")


@dataclass
class ProcessesPolled(Message):
    host: str
    rows: list[ProcRow]
    error: str | None


class ProcessPane(Static, can_focus=True):
    DEFAULT_CSS = """
    ProcessPane {
        height: auto;
        max-height: 12;
        border: round $primary-darken-2;
        padding: 0 1;
    }
    ProcessPane:focus {
        border: heavy $accent;
    }
    """
    BINDINGS = actions.bindings("procs")

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.border_title = "processes"
        self.host: str | None = None
        self.rows: list[ProcRow] = []
        self.looked = False  # the rows are a look at the host's processes (before the first: nothing is said of them)
        self.sort, self.descending = "gpu_mib", True
        self.selected_pid: int | None = None
        self.error: str | None = None
        self.filter_text = ""
        self._filter: re.Pattern | None = None
        self._table = ProcessTable()
        self._owners: dict[int, str | None] = {}  # pid -> who holds it (None: a bare process), for the pids shown now
        self._shown: tuple | None = None

    # --- what the app asks ------------------------------------------------------------------------

    def follow(self, host: str) -> None:
        """Show this host's processes (the host in focus when the pane was opened)."""
        if host != self.host:
            self.host, self.rows, self.selected_pid, self.error, self.looked = host, [], None, None, False
            self._table, self._owners = ProcessTable(), {}
            self._draw()

    def on_mount(self) -> None:
        self._draw()
        self.run_worker(self._poll(), name="process table", group="procs", exclusive=True, exit_on_error=False)

    async def _poll(self) -> None:
        """While shown: the host's compute processes (its latest sample) and one ps of them, every processes_interval_s."""
        app = self.app
        # as often as the hub polls a host's compute processes ([telemetry] processes_interval_s, 5 s), at most every 2 s
        # (nvitop's own refresh): one ps of their pids (measured: a ps a second cost the TUI 0.6 % of a core, RESULTS.md)
        interval = max(2.0, app.config.telemetry.processes_interval_s)  # type: ignore[attr-defined]
        while True:
            host = self.host
            if host is not None and self.display and self.is_attached:
                snapshot = app.hub.latest.get(host)  # type: ignore[attr-defined]
                compute = [(p.pid, p.gpu_index, p.used_memory_mib) for p in (snapshot.processes if snapshot else ())]
                try:
                    transport = app.hub.pool.get(app.config.host(host))  # type: ignore[attr-defined]
                    # each row's owner (a Slurm job, a container), asked once per pid: cockpit/where/owners.py
                    rows = await with_owners(transport, await self._table.poll(transport, compute), self._owners)
                    self.post_message(ProcessesPolled(host, rows, None))
                except (TransportError, OSError, asyncio.TimeoutError) as exc:
                    self.post_message(ProcessesPolled(host, [], f"{host}: {exc}"))
            await asyncio.sleep(interval)

    def on_processes_polled(self, message: ProcessesPolled) -> None:
        if message.host != self.host:
            return  # the pane moved to another host meanwhile
        self.rows, self.error, self.looked = message.rows, message.error, True
        self._draw()

    # --- keys ---------------------------------------------------------------------------------------

    def ordered(self) -> list[ProcRow]:
        """The rows shown: sorted, and only those the filter matches (anywhere in the row as it is drawn)."""
        rows = sort_rows(self.rows, self.sort, self.descending)
        if self._filter is None:
            return rows
        pattern = self._filter
        return [r for r in rows if pattern.search(" ".join(cells(r).values()))]

    def set_filter(self, text: str) -> None:
        from cockpit.ui.screens.search import compile_search

        self.filter_text, self._filter = text, compile_search(text)
        self._draw()

    def action_filter(self) -> None:
        from cockpit.ui.screens.search import SearchScreen

        def filtered(text: str | None) -> None:
            if text is not None:
                self.set_filter(text)
        self.app.push_screen(SearchScreen("the processes", self.filter_text, hint="enter: show only the matching rows   empty: all"), filtered)

    def selected(self) -> ProcRow | None:
        rows = self.ordered()
        return next((r for r in rows if r.pid == self.selected_pid), rows[0] if rows else None)

    def action_move(self, step: int) -> None:
        rows = self.ordered()
        if not rows:
            return
        current = self.selected()
        index = rows.index(current) if current in rows else 0
        self.selected_pid = rows[max(0, min(len(rows) - 1, index + step))].pid
        self._draw()

    def action_next_sort(self) -> None:
        self.sort = COLUMNS[(COLUMNS.index(self.sort) + 1) % len(COLUMNS)]
        self.descending = self.sort in NUMERIC  # the biggest first for numbers, A to Z for words
        self._draw()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._draw()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """K in the footer only where it can kill (not --read-only)."""
        return actions.check_writable(self.app, action, parameters)

    def action_kill_selected(self, _shown: str = "") -> None:
        if getattr(self.app, "read_only", False):
            self.app.notify("Read-only mode: no process can be killed", severity="warning")
            return
        if self._hidden_by_filter():
            return
        row = self.selected()
        if row is None or self.host is None:
            self.app.notify("no process selected", severity="warning")
            return
        self.post_message(KillRequested(self.host, row.pid))

    def _hidden_by_filter(self) -> bool:
        """Every row hidden by the filter (not by ps): said so, naming it, where a key finds no row."""
        if self.filter_text and self.rows and not self.ordered():
            self.app.notify(f"no row shown: the filter /{self.filter_text} hides every process (Esc clears it)", severity="warning")
            return True
        return False

    def action_clear_filter(self) -> None:
        """Esc: clear the filter where one is set; else what Esc does elsewhere (leave a zoom, hide the pane)."""
        if self.filter_text:
            self.set_filter("")
            self.app.notify("filter cleared: every process shown")
            return
        self.app.action_hide_pane()  # type: ignore[attr-defined]

    def action_copy_selected(self) -> None:
        if self._hidden_by_filter():
            return
        row = self.selected()
        if row is None or row.command is None:
            self.app.notify("no command line to copy (the process is not seen by ps here)", severity="warning")
            return
        self.post_message(CopyRequested(row.command, f"the command line of pid {row.pid}"))

    # --- drawing --------------------------------------------------------------------------------------

    def _draw(self) -> None:
        rows = self.ordered()
        selected = self.selected()
        width = max(20, self.size.width - 2)
        title = f"processes · {self.host or 'no host'} · by {HEADINGS[self.sort]} {'v' if self.descending else '^'}"
        if self._filter is not None:
            title += f" · /{self.filter_text} ({len(rows)} of {len(self.rows)})"
        lines: list[Text] = []
        if self.error:
            lines.append(Text(f"could not read: {self.error}", style="yellow", no_wrap=True, overflow="ellipsis"))
        if not rows:
            empty = "focus a host, then p" if not self.host else (
                f"no process matches /{self.filter_text} (Esc: every process)" if self.rows else
                "no compute process on its GPUs" if self.looked else f"reading the processes of {self.host}…")
            lines.append(Text(empty, style="dim"))
        else:
            shown = [cells(r) for r in rows]
            columns = columns_for(rows)
            widths = {c: max(len(HEADINGS[c]) + 1, *(len(s[c]) for s in shown)) for c in columns if c != "command"}
            widths["user"] = min(widths["user"], 10)
            if "owner" in widths:
                widths["owner"] = min(widths["owner"], 48)

            def fit(text: str, wide: int) -> str:
                return text if len(text) <= wide else text[: wide - 1] + "…"  # cut once, and said to be cut

            def line(values: dict[str, str]) -> str:
                return " ".join(fit(values[c], widths[c]).rjust(widths[c]) if c in NUMERIC else fit(values[c], widths[c]).ljust(widths[c])
                                for c in columns if c != "command") + " " + values["command"]

            head = {c: HEADINGS[c] + ("v" if self.descending else "^") * (c == self.sort) for c in columns}
            lines.append(Text(line(head)[:width], style="bold", no_wrap=True))
            for row, values in zip(rows, shown):
                style = "reverse" if row is selected and self.has_focus else ("bold" if row is selected else "")
                if not row.seen:
                    style += " dim"
                lines.append(Text(line(values)[:width], style=style.strip(), no_wrap=True))
        drawn = (title, tuple(t.plain for t in lines), tuple(str(t.style) for t in lines), self.has_focus)
        if drawn == self._shown:
            return
        layout = self._shown is None or len(self._shown[1]) != len(lines)
        self._shown = drawn
        if title != self.border_title:
            self.border_title = title
        self.update(Text("\n").join(lines), layout=layout)

    def on_focus(self) -> None:
        self._draw()

    def on_blur(self) -> None:
        self._draw()

    def on_resize(self, _event) -> None:
        self._shown = None
        self._draw()

