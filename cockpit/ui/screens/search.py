"""Asks for a search in a log (`/`, as less and k9s): a regular expression, case-smart (an upper-case letter in it
makes it case-sensitive).  Enter searches (empty: clears the search); a bad expression is said, not searched."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from cockpit.ui.widgets.steady_input import SteadyInput


def compile_search(text: str) -> re.Pattern | None:
    """The search as a pattern: case-insensitive unless it has an upper-case letter (less's -i, vim's smartcase)."""
    if not text:
        return None
    return re.compile(text, 0 if any(c.isupper() for c in text) else re.IGNORECASE)


class SearchScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SearchScreen {
        align: center bottom;
    }
    SearchScreen > Vertical {
        width: 100%;
        height: auto;
        background: $panel;
        padding: 0 1;
    }
    SearchScreen #search-hint {
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel", id="search.cancel")]

    def __init__(self, where: str, current: str = "", hint: str = "enter: search (n next, N previous)   empty: clear"):
        super().__init__()
        self.where, self.current, self.hint = where, current, hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield SteadyInput(value=self.current, placeholder=f"search {self.where} (a regular expression; case-smart)", id="search")
            yield Static(f"{self.hint}   esc: cancel", id="search-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            compile_search(event.value)
        except re.error as exc:
            self.query_one("#search-hint", Static).update(Text(f"not a regular expression: {exc}", style="bold"))
            return
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
