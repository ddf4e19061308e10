"""The cockpit's text input: Textual's Input with a cursor that does not blink.  A blinking cursor redraws its line
twice a second for as long as a dialog waits for words (a cockpit left in tmux for days), and made the snapshot of the
skip-a-gate dialog depend on the moment it was taken (in a loaded suite the capture came more than half a second after
the focus: the cursor had blinked off, the recorded one is on)."""

from __future__ import annotations

from textual.reactive import reactive
from textual.widgets import Input


class SteadyInput(Input):
    cursor_blink = reactive(False, init=False)
