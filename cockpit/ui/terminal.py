"""Where the TUI draws: the terminal, even when stderr was sent elsewhere.

Textual draws on standard error (fd 2).  `cockpit demo 2>err.log` drew the whole screen into err.log and
left a blank terminal.  When stderr is not a terminal and stdout is, fd 2 becomes the terminal for the
TUI's lifetime, and what Python writes to `sys.stderr` still goes where the user sent it; both are
restored when the TUI ends.  Public file-descriptor calls only: Textual's own drivers are untouched."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def drawn_on_the_terminal() -> Iterator[None]:
    try:
        redirected = not os.isatty(2) and os.isatty(1)
    except OSError:
        redirected = False
    if not redirected:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)  # where the user sent stderr (err.log)
    os.dup2(1, 2)  # the terminal, for Textual
    before = sys.stderr
    theirs = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    sys.stderr = theirs
    try:
        yield
    finally:
        try:
            theirs.flush()
        except OSError:
            pass
        sys.stderr = before
        theirs.close()
        os.dup2(saved, 2)
        os.close(saved)
