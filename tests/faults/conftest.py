"""The fault suite's report: every fault test adds a row, and the table is printed at the end of
the run (and written to $COCKPIT_FAULT_REPORT when that is set)."""

from __future__ import annotations

import json
import os

from faultrig import REPORT, format_table


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not REPORT:
        return
    terminalreporter.write_sep("=", "fault suite")
    for line in format_table(REPORT).splitlines():
        terminalreporter.write_line(line)
    target = os.environ.get("COCKPIT_FAULT_REPORT")
    if target:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump([row.as_dict() for row in REPORT], handle, indent=2)
