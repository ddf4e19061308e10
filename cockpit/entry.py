"""The `cockpit` command: Ctrl-C at any moment, start-up's imports included, ends it quietly (exit 130).

Until a command starts, Ctrl-C ends the process at once: nothing is open or written yet, and an
interrupt raised inside an imported library's start-up can be caught there and lost (seen: a Ctrl-C
0.05 s after start ignored, `status --watch` then ran on).  The command itself gets Python's usual
KeyboardInterrupt (cli.main restores it), so that what it writes is finished or cleaned up."""

from __future__ import annotations

import os
import signal
import sys


def _quit_now(_signum, _frame) -> None:
    os.write(2, b"\n")
    os._exit(130)


def run() -> None:
    signal.signal(signal.SIGINT, _quit_now)
    try:
        from cockpit.cli import main

        code = main(interrupts_from_now=True)
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        code = 130
    raise SystemExit(code)
