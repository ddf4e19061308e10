"""The `cockpit` command: Ctrl-C at any moment, start-up's imports included, ends it quietly (exit 130)."""

from __future__ import annotations

import sys


def run() -> None:
    try:
        from cockpit.cli import main

        code = main()
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        code = 130
    raise SystemExit(code)
