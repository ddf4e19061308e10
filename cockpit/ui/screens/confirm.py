"""Confirmation for destructive actions: shows exactly what will be done; y confirms, n or esc refuses."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: 100;
        max-width: 96%;
        height: auto;
        max-height: 90%;
        border: thick $warning;
        background: $panel;
        padding: 0 1;
    }
    ConfirmScreen VerticalScroll {
        height: auto;
        max-height: 16;
    }
    ConfirmScreen Horizontal {
        height: auto;
        align: right middle;
    }
    ConfirmScreen Button {
        margin: 0 1;
    }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm.no"),
    ]

    def __init__(self, title: str, plan: str):
        super().__init__()
        self.title_text = title
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            with VerticalScroll():
                yield Static(Text(self.plan))
            with Horizontal():
                yield Button("No (n)", id="no")
                yield Button("Yes, do it (y)", id="yes", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
