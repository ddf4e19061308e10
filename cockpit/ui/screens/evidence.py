"""`x` on a step: its evidence as the raw JSON the CLI's `plan show --json` prints, in a scrollable, selectable view over
whatever panes are open (it used to replace the step's detail in the checklist, below the fold when the lower panes
were open).  Esc or x closes it."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea


class EvidenceScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    EvidenceScreen {
        align: center middle;
    }
    EvidenceScreen > Vertical {
        width: 90%;
        max-width: 140;
        height: 90%;
        background: $panel;
        border: round $accent;
        padding: 0 1;
    }
    EvidenceScreen TextArea {
        height: 1fr;
    }
    EvidenceScreen #evidence-hint {
        color: $text-muted;
    }
    """
    BINDINGS = [Binding("escape,x", "close", "close", id="evidence.close")]

    def __init__(self, step: str, evidence: dict):
        super().__init__()
        self.step = step
        self.text = json.dumps(evidence, indent=2, default=str, ensure_ascii=False) if evidence else "{}"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"evidence of step '{self.step}' (raw JSON, as `cockpit plan show --json`)", id="evidence-title")
            yield TextArea(self.text, read_only=True, soft_wrap=True, show_line_numbers=False, id="evidence-text")
            yield Static("scroll with the arrows or PgUp/PgDn; select with the mouse (Shift+drag)   esc or x: close",
                         id="evidence-hint")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_close(self) -> None:
        self.dismiss(None)
