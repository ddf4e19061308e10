"""What the last copy put on the clipboard, shown whole to select (issue 40: "where the terminal cannot, the text is
shown selectable").  The cockpit copies through OSC 52, which a terminal may ignore and cannot tell it about; `Y` opens
this: the text in a read-only text area (select it with the mouse, Shift+drag where the terminal keeps the mouse for
the app; ctrl+c copies the selection), esc closes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea


class CopiedScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    CopiedScreen {
        align: center middle;
    }
    CopiedScreen > Vertical {
        width: 90%;
        max-width: 120;
        height: auto;
        max-height: 90%;
        background: $panel;
        border: round $accent;
        padding: 0 1;
    }
    CopiedScreen TextArea {
        height: auto;
        max-height: 20;
    }
    CopiedScreen #copied-hint {
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("escape", "close", "close", id="copied.close")]

    def __init__(self, text: str, what: str):
        super().__init__()
        self.text, self.what = text, what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"copied {self.what} (OSC 52)", id="copied-title")
            yield TextArea(self.text, read_only=True, soft_wrap=True, show_line_numbers=False, id="copied-text")
            yield Static("select with the mouse (Shift+drag in most terminals)   esc: close", id="copied-hint")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.select_all()

    def action_close(self) -> None:
        self.dismiss(None)
