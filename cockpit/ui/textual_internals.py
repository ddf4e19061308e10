"""Where the cockpit mirrors Textual's private code (the quiet input driver, the covering compositor):
the Textual versions that code was read from.  On any other version both step aside and Textual's own
parts run (correct, only slower), so an upgrade of Textual cannot run a stale copy of its internals."""

from __future__ import annotations

import textual

READ_FROM = ("8.",)  # Textual 8.2.8's LinuxDriver.run_input_thread and Compositor._render_chops


def mirrored() -> bool:
    """Whether the running Textual is one the mirrored code was read from."""
    return textual.__version__.startswith(READ_FROM)
