"""A terminal driver whose input thread sleeps until something happens.

Textual's Linux driver reads the terminal in a thread that wakes ten times a second whether or not a key
was pressed (`select(0.1)`), only so that a lone Escape can time out into an Escape key. In a cockpit left
for days in a tmux split, those wake-ups were about a sixth of the whole TUI's CPU at 8 hosts x 8 GPUs.
This driver runs the same loop, but it waits with no timeout while the key parser holds nothing, and
with the short timeout only while a key sequence may still be completing; the thread is woken to stop
through a pipe that the driver's exit event writes to.

Only the Textual versions this was read from use it (`ui/textual_internals.py`); any other version,
or Windows, gets Textual's own driver unchanged.
"""

from __future__ import annotations

import os
import selectors
import sys
from codecs import getincrementaldecoder
from threading import Event

from cockpit.ui.textual_internals import mirrored

# after bytes came, the parser is ticked once the escape delay (ESCDELAY, Textual's ESCAPE_DELAY, 100 ms
# by default) has passed: a lone Escape is then known to be one, whatever ESCDELAY says
PENDING_INPUT_MARGIN_S = 0.02


def pending_tick() -> float:
    from textual import constants

    return float(getattr(constants, "ESCAPE_DELAY", 0.1)) + PENDING_INPUT_MARGIN_S


def input_timeout(parser_waiting: bool) -> float | None:
    """How long the input thread may sleep: for ever when nothing is half-parsed, else until the
    escape delay has passed."""
    return pending_tick() if parser_waiting else None


class _WakingEvent(Event):
    """The driver's exit event: setting it also wakes the input thread out of its wait."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        if self._wake_fd >= 0:
            try:
                os.write(self._wake_fd, b"x")
            except OSError:
                pass

    def detach(self) -> None:
        """The pipe is closing: never write to its number again (Textual sets the event once more
        after the driver is closed, when the number may already belong to another file)."""
        self._wake_fd = -1


def quiet_driver_class():
    """The driver class for this platform and Textual, or None where Textual's own should be used."""
    if sys.platform == "win32" or not mirrored():
        return None
    try:
        from textual._loop import loop_last
        from textual._parser import ParseError
        from textual._xterm_parser import XTermParser
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:
        return None

    class QuietLinuxDriver(LinuxDriver):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            self.exit_event = self._waking = _WakingEvent(self._wake_write)

        def close(self) -> None:
            super().close()
            self._waking.detach()
            for fd in (self._wake_read, self._wake_write):
                try:
                    os.close(fd)
                except OSError:
                    pass

        def _drain_wake(self) -> None:
            try:
                while os.read(self._wake_read, 64):
                    pass
            except OSError:
                pass

        def run_input_thread(self) -> None:
            """Textual's input loop (8.x), sleeping while nothing is half-parsed."""
            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            fileno = self.fileno
            parser = XTermParser(self._debug)
            feed, tick = parser.feed, parser.tick
            decode = getincrementaldecoder("utf-8")().decode
            waiting = False

            def process(events, final: bool = False) -> bool:
                """Feed what the terminal sent; True when bytes came (a sequence may be half-read)."""
                got = False
                terminal_events = [(key, mask) for key, mask in events if key.fd == fileno]
                if len(terminal_events) < len(events):
                    self._drain_wake()
                for last, (_key, mask) in loop_last(terminal_events):
                    if mask & selectors.EVENT_READ:
                        data = decode(os.read(fileno, 1024 * 4), final=final and last)
                        if not data:
                            break
                        got = True
                        for event in feed(data):
                            self.process_message(event)
                for event in tick():
                    self.process_message(event)
                return got

            try:
                while not self.exit_event.is_set():
                    waiting = process(selector.select(input_timeout(waiting)))
                selector.unregister(self.fileno)
                process(selector.select(pending_tick()), final=True)
            finally:
                selector.close()
                try:
                    for _event in feed(""):
                        pass
                except (EOFError, ParseError):
                    pass

    return QuietLinuxDriver
