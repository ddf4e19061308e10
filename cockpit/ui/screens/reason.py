"""Asks why a gate is skipped: forcing a step past its gate needs a reason, recorded in the audit
log (as `plan run --force STEP --reason TEXT`).  Enter with a reason answers it; esc declines."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from cockpit.ui.widgets.steady_input import SteadyInput


class ReasonScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    ReasonScreen {
        align: center middle;
    }
    ReasonScreen > Vertical {
        width: 90;
        max-width: 96%;
        height: auto;
        border: thick $warning;
        background: $panel;
        padding: 0 1;
    }
    ReasonScreen #reason-hint {
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel", id="reason.cancel")]

    def __init__(self, title: str, explanation: str):
        super().__init__()
        self.title_text, self.explanation = title, explanation

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield Static(Text(self.explanation))
            yield SteadyInput(placeholder="why the gate is skipped (recorded in the audit log)", id="reason")
            yield Static("", id="reason-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self.query_one("#reason-hint", Static).update("enter: go on   esc: cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if not reason:
            self.query_one("#reason-hint", Static).update(Text("a reason is needed: say why the gate is skipped (esc: cancel)", style="bold"))
            return
        self.dismiss(reason)

    def action_cancel(self) -> None:
        self.dismiss(None)
