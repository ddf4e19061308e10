"""`?` / F1: the keys that work right now, and what the focused pane shows."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 86;
        max-width: 98%;
        height: auto;
        max-height: 100%;
        border: round $accent;
        border-subtitle-align: left;  /* toasts stack at the bottom right */
        background: $panel;
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "close", id="help.close"),
    ]

    def __init__(self, bindings: list[tuple[str, str, str]], context: str):
        super().__init__()
        self.rows = bindings
        self.context = context

    @classmethod
    def for_widget(cls, focused) -> "HelpScreen":
        """The keys of the app, those of the focused pane, and what that pane shows."""
        from cockpit.ui import actions
        from cockpit.ui.widgets.bench_pane import BenchPane
        from cockpit.ui.widgets.checklist import ChecklistPane
        from cockpit.ui.widgets.command_log import CommandLogPane
        from cockpit.ui.widgets.runs_pane import RunsPane
        from cockpit.ui.widgets.server_log import ServerLogPane

        rows = actions.help_rows("app")
        chain = [focused, *(focused.ancestors if focused is not None else [])]
        for kind, name in ((ChecklistPane, "checklist"), (CommandLogPane, "log"), (ServerLogPane, "server"), (BenchPane, "bench"),
                           (RunsPane, "runs")):
            if any(isinstance(node, kind) for node in chain):
                extra = actions.help_rows(name) if name in ("checklist", "bench") else []
                return cls(extra + rows, actions.PANE_HELP[name])
        return cls(rows, actions.PANE_HELP["host"])

    def compose(self) -> ComposeResult:
        table = Table(show_header=True, header_style="bold", box=None, expand=True)
        table.add_column("key", style="bold cyan", no_wrap=True)
        table.add_column("does")
        table.add_column("id", style="dim", no_wrap=True)
        for key, description, binding_id in self.rows:
            table.add_row(key, description, binding_id)
        scroll = VerticalScroll()
        scroll.border_title = "keys"
        scroll.border_subtitle = "esc, q or ? closes · arrows scroll"  # on the frame: always in view
        with scroll:
            yield Static(Text(self.context + "\n", style="italic"))
            yield Static(table)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
