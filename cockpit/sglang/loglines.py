"""SGLang's serving lines and series in the core's terms (serving/engine.py LiveLine): its `Decode batch` and
`Prefill batch` lines of every wording from 0.4.6 to 0.5.23 (runs-facts b.1-b.7), a server's start, and its
`sglang:` series of /metrics (the stats rank's: tp_rank 0, dp_rank 0)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from cockpit.serving.engine import LiveLine
from cockpit.sglang.diagnose import SHUTDOWN, STAMP

# runs-facts "What a monitor should parse", item 5: every version's decode and prefill lines
BATCH_RE = re.compile(
    r"^(?:\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s*)?\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d{3})?"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (?P<kind>Decode|Prefill) batch(?: \[\d+\])?[.,] (?P<body>.*?)(?:, )?,?\s*$")


@dataclass(frozen=True)
class BatchLine:
    kind: str  # "Decode" or "Prefill"
    ts: float  # the log's own timestamp (local time of the server), seconds
    ranks: str
    fields: dict

    def number(self, key: str) -> float | None:
        value = self.fields.get(key)
        if value is None:
            return None
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None  # a garbled "nan" is not a figure


def parse_batch_line(line: str) -> BatchLine | None:
    m = BATCH_RE.match(line.rstrip())
    if m is None:
        return None
    fields = {}
    for part in m.group("body").split(", "):
        key, sep, value = part.partition(": ")
        if sep:
            fields[key.strip()] = value.strip().rstrip(",")
    try:
        ts = time.mktime(time.strptime(m.group("ts"), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None
    return BatchLine(m.group("kind"), ts, m.group("ranks").strip(), fields)



def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def live_line(line: str) -> LiveLine | None:
    """A decode or prefill line's figures, or a server's start; None for any other line (cheap: a substring first)."""
    if "batch" in line:
        batch = parse_batch_line(line)
        if batch is not None:
            if batch.kind == "Prefill":
                return LiveLine("prefill", batch.ts, detail=dict(batch.fields))
            return LiveLine("decode", batch.ts, batch.number("gen throughput (token/s)"), _int(batch.number("#running-req")),
                            _int(batch.number("#queue-req")),
                            batch.number("token usage") if "token usage" in batch.fields else batch.number("full token usage"),
                            batch.number("accept len"))
    if "server_args=ServerArgs(" in line:
        return LiveLine("start")
    if "fired up" in line and "The server is fired up and ready to roll" in line:  # diagnose.READY_LINE
        return LiveLine("ready", line_time(line))
    if ("hut" in line or "Finished server" in line) and SHUTDOWN.search(line.rstrip()) is not None:
        return LiveLine("stop", line_time(line), detail={"line": line.strip()[:300]})
    return None


def line_time(line: str) -> float | None:
    """The time an SGLang line carries (`[2026-12-07 22:03:58]`, the server's local time), as epoch seconds; None for a
    line without its stamp (a traceback, a progress bar)."""
    m = STAMP.match(line)
    if m is None:
        return None
    try:
        return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def series_of_samples(samples) -> dict[str, float] | None:
    """The `sglang:` series by name (without the prefix), the stats rank's (tp_rank 0, dp_rank 0), counters
    summed; None when there are none (another engine's series)."""
    values: dict[str, float] = {}
    for full, labels, value in samples:
        if not full.startswith("sglang:"):
            continue
        name = full[len("sglang:"):]
        if name.endswith(("_bucket", "_created")) or labels.get("tp_rank", "0") != "0" or labels.get("dp_rank", "0") != "0":
            continue
        if not math.isfinite(value):
            continue
        values[name] = values.get(name, 0.0) + value if name.endswith("_total") else value
    return values or None
