"""The fault suite's report: a row per fault, printed as a table at the end of the test run by
tests/conftest.py (and written as JSON to $COCKPIT_FAULT_REPORT when that is set)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field


@dataclass
class FaultRow:
    fault: str
    injected: int
    ui: str
    data_lost: int
    recovery_s: list[float] = field(default_factory=list)
    others_max_gap_s: float | None = None
    note: str = ""

    def recovery_text(self) -> str:
        def seconds(value: float) -> str:
            return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value:.2f} s"

        if not self.recovery_s:
            return "-"
        if len(self.recovery_s) == 1:
            return seconds(self.recovery_s[0])
        return f"median {seconds(statistics.median(self.recovery_s))} / max {seconds(max(self.recovery_s))}"

    def as_dict(self) -> dict:
        return asdict(self)


REPORT: list[FaultRow] = []


def report(row: FaultRow) -> FaultRow:
    REPORT.append(row)
    return row


def format_table(rows: list[FaultRow]) -> str:
    header = ("fault", "injected", "UI responsive", "data lost", "recovery", "others' max gap", "note")
    body = [
        (r.fault, str(r.injected), r.ui, str(r.data_lost), r.recovery_text(),
         "-" if r.others_max_gap_s is None else f"{r.others_max_gap_s:.2f} s", r.note)
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    def fmt(line):
        return " | ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()
    return "\n".join([fmt(header), "-+-".join("-" * w for w in widths), *map(fmt, body)])
