"""vLLM's periodic log lines, as the server pane and `cockpit server` read them (vllm-facts §4.1).

Every 10 s the API server logs a throughput line (`Engine 000: Avg prompt throughput: ...`, V0 without
the engine prefix) and, when speculating, a `SpecDecoding metrics:` line right after it.  Fields are
matched by name: versions add fields and reorder them.  The mean acceptance length is given as SGLang
counts it, with the bonus token: vLLM 0.10.2 and later print it so; 0.8.5 printed it without (one less:
its range was 0..N), and that line is told by its field order (`Draft acceptance rate` first)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = r"^(?:\(\w+ pid=\d+\)\s*)?(?:(?:INFO|DEBUG|WARNING)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s+)?(?:\(\w+ pid=\d+\)\s*)?"
THROUGHPUT_RE = re.compile(_PREFIX + r"(?:Engine \d+: |\d+ Engines Aggregated: )?(?P<body>Avg prompt throughput: .*)$")
SPEC_RE = re.compile(_PREFIX + r"(?P<body>(?:SpecDecoding|Speculative) metrics: .*)$")
_NUMBER = r"(-?\d+(?:\.\d+)?)"


@dataclass(frozen=True)
class ThroughputLine:
    generation_tok_s: float | None
    prompt_tok_s: float | None
    running: int | None
    waiting: int | None
    kv_usage: float | None  # 0..1


@dataclass(frozen=True)
class SpecLine:
    mean_acceptance_length: float | None  # with the bonus token (SGLang's "accept len")
    draft_acceptance_rate: float | None  # 0..1
    accepted: int | None
    drafted: int | None
    accepted_tok_s: float | None
    drafted_tok_s: float | None
    per_position: tuple[float, ...]
    as_printed: float | None  # the mean length the line printed
    bonus_in_line: bool | None  # whether the printed mean length counts the bonus token (None: not printed)

    def to_json(self) -> dict:
        return {"mean_acceptance_length": self.mean_acceptance_length, "draft_acceptance_rate": self.draft_acceptance_rate,
                "accepted": self.accepted, "drafted": self.drafted, "accepted_tok_s": self.accepted_tok_s,
                "drafted_tok_s": self.drafted_tok_s, "per_position": list(self.per_position), "as_printed": self.as_printed,
                "bonus_in_line": self.bonus_in_line}


def _field(body: str, name: str) -> float | None:
    m = re.search(re.escape(name) + r":\s*" + _NUMBER, body)
    return float(m.group(1)) if m else None


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def parse_throughput(line: str) -> ThroughputLine | None:
    m = THROUGHPUT_RE.match(line.strip())
    if m is None:
        return None
    body = m.group("body")
    kv = _field(body, "GPU KV cache usage")
    return ThroughputLine(_field(body, "Avg generation throughput"), _field(body, "Avg prompt throughput"),
                          _int(_field(body, "Running")), _int(_field(body, "Waiting") if "Waiting" in body else _field(body, "Pending")),
                          None if kv is None else kv / 100.0)


def _counts_bonus(body: str, printed: float, positions: tuple[float, ...]) -> bool:
    """Whether the printed mean acceptance length counts the bonus token.  The line's own per-position rates say it
    (each is accepted-at-that-position over drafts: their sum is the mean without the bonus token, so the printed
    mean is either that sum or one more), whatever the version; without them, the field order: 0.8.5-0.9 printed
    `Draft acceptance rate` first and the mean without the bonus (their source's formula, cockpit/vllm/data)."""
    if positions:
        without = sum(positions)
        return abs(printed - (without + 1.0)) < abs(printed - without)
    return not body.split(":", 1)[1].lstrip().startswith("Draft acceptance rate")


def parse_spec(line: str) -> SpecLine | None:
    m = SPEC_RE.match(line.strip())
    if m is None:
        return None
    body = m.group("body")
    printed = _field(body, "Mean acceptance length")
    found = re.search(r"(?:Avg )?Draft acceptance rate:\s*" + _NUMBER + r"(%?)", body)
    rate = None if found is None else float(found.group(1)) / (100.0 if found.group(2) else 1.0)
    per = re.search(r"Per-position acceptance rate:\s*([\d.,\s]+?)(?:,\s*[A-Z]|$)", body)
    positions = tuple(float(v) for v in per.group(1).replace(" ", "").split(",") if v) if per else ()
    accepted, drafted = _int(_field(body, "Accepted")), _int(_field(body, "Drafted"))
    bonus: bool | None = None
    mean = None
    if printed is not None:
        bonus = _counts_bonus(body, printed, positions)
        mean = printed if bonus else printed + 1.0
    elif positions:
        mean = 1.0 + sum(positions)  # per-position rates are unconditional: 1 + their sum (vllm-facts §4.1)
    return SpecLine(mean, rate, accepted, drafted, _field(body, "Accepted throughput"), _field(body, "Drafted throughput"),
                    positions, printed, bonus)


# a vLLM server starting (vllm-facts §4.3): its figures before are another server's
START_RE = re.compile(r"vLLM API server version \S+|vLLM server version \S+|Starting vLLM API server|Starting vLLM server on|"
                      r"[█▄▀]\s+version \d")  # 0.11 on: the banner's version beside its art


# vLLM's own stamp on each of its lines: `INFO 12-07 08:25:53 [file.py:N]` (month-day, the server's local time, no year)
_STAMP = re.compile(r"(?:^|\) )(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) \[")
READY_RE = re.compile(r"Application startup complete\.")  # uvicorn's, once vLLM's routes are up
# a stop's own words (a real 0.20.2 stopped by SIGINT: the EngineCore's "Shutdown complete", then uvicorn's)
# a graceful stop's own words: 0.20.2's (the engine's, then uvicorn's), and 0.26.0's trigger, logged first, before the
# teardown's own EngineDeadError (a real 0.26.0 on an H100 stopped with SIGINT: tests/fixtures/gpu-engines/vllm-0.26.0-h100)
SHUTDOWN = re.compile(r"Shutdown complete$|Application shutdown complete\.|Finished server process \[\d+\]|"
                      r"\[shutdown\] (?:EngineCore: trigger received signal=SIG\w+|API server: shutdown triggered)")


def line_time(line: str, now: float | None = None) -> float | None:
    """The time a vLLM line carries (its year: the one that puts it at most a day ahead of `now`), as epoch seconds in
    this machine's local time; None for a line without vLLM's stamp."""
    import time

    m = _STAMP.search(line)
    if m is None:
        return None
    now = time.time() if now is None else now
    month, day, hour, minute, second = (int(g) for g in m.groups())
    year = time.localtime(now).tm_year
    try:
        stamp = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
        if stamp > now + 86400:  # December's line read in January
            stamp = time.mktime((year - 1, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError):
        return None
    return stamp


def live_line(line: str):
    """A throughput line (a window: vLLM logs one every 10 s), a SpecDecoding line (that window's acceptance), a
    server's start or its graceful stop, in the core's terms (serving/engine.py LiveLine), each with the time the line
    carries; None for any other line."""
    from cockpit.serving.engine import LiveLine

    if "throughput:" in line and (throughput := parse_throughput(line)) is not None:
        return LiveLine("decode", line_time(line), throughput.generation_tok_s, throughput.running, throughput.waiting,
                        throughput.kv_usage)
    if " metrics: " in line and (spec := parse_spec(line)) is not None:
        return LiveLine("acceptance", line_time(line), accept_len=spec.mean_acceptance_length, detail=spec.to_json())
    if ("vLLM" in line or "version" in line) and START_RE.search(line) is not None:  # the substrings first: this runs per line
        return LiveLine("start")
    if "startup complete" in line and READY_RE.search(line) is not None:
        return LiveLine("ready", line_time(line))
    if ("hutdown" in line or "Finished server" in line) and SHUTDOWN.search(line.rstrip()) is not None:
        return LiveLine("stop", line_time(line), detail={"line": line.strip()[:300]})
    return None
