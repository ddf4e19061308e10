"""The cockpit's main screen (Textual's default screen, given by App.get_default_screen): the panes are laid out for a
new terminal size when this screen takes that size, not when the app hears of it.

Textual tells the app of a resize first and the screen 1/120 s later (App._on_resize's timer).  The layout used to
follow the app's event: the panes' new heights were set while the screen still had the old size, the screen laid
them out and drew a frame of the old size into the smaller terminal (a 48-row frame into 30 rows scrolls the terminal:
the title and the GPU rows went off the top; seen in CI, measured on every resize by
tests/test_layout.py::test_no_frame_is_drawn_at_a_size_the_terminal_no_longer_has).  Here the heights are set in the
screen's own Resize, in the same step as Textual's layout at that size; and the app passes its Resize on to the screens
at once (ui/view_actions.py), so that no repaint falls between the two."""

from __future__ import annotations

from typing import Protocol

from textual import events
from textual.geometry import Size
from textual.screen import Screen


class LaysOut(Protocol):
    def screen_resized(self, size: Size) -> None: ...


class MainScreen(Screen[None]):
    def __init__(self, layout: LaysOut, **kwargs):
        super().__init__(**kwargs)
        self._layout = layout
        self._sized: Size | None = None  # the size the panes were last laid out for

    def on_resize(self, event: events.Resize) -> None:
        # each resize comes twice (the app's word at once, Textual's own 1/120 s later): laid out once
        if event.size != self._sized:
            self._sized = event.size
            self._layout.screen_resized(event.size)

    def on_screen_resume(self, _event: events.ScreenResume) -> None:
        # a resize while another screen covered this one (Textual resizes a covered screen when it comes back)
        if self.outer_size != self.app.size:  # (the size it was laid out at; Screen.size is the app's)
            self._sized = self.app.size
            self._layout.screen_resized(self.app.size)
