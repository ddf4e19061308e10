"""A serving engine's log read and diagnosed: the core's part, for every engine.

The log is read as users have it (a file from its end, standard input, all of a 200 MB log streamed in bounded
memory; through docker, kubectl, journald, colour, a terminal's wrapping: cockpit/intake.py), the engine whose log
it is found once (serving/engines.py), and that engine reads its last run (its argparse errors, crash texts and
start-up milestones).  Never raises on odd input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cockpit.errors import CockpitError
from cockpit.intake import clean, take_lines
from cockpit.hosts.procs import LAUNCH_MARKER  # written by the cockpit before a launched server starts
from cockpit.serving.helpschema import FlagSchema
from cockpit.diagnosis import Diagnosis
from cockpit.format import plural, shell_words

TAIL_BYTES = 8 * 1024 * 1024  # a log is read from its end: never more than this
MAX_LINE = 64 * 1024


@dataclass
class LogReport:
    diagnoses: list[Diagnosis] = field(default_factory=list)
    ready: bool = False
    lines: int = 0
    run_start_line: int = 1
    truncated: bool = False
    notes: list[str] = field(default_factory=list)
    milestones: list[tuple[str, int]] = field(default_factory=list)
    engine: str = "sglang"  # whose log it is (the registry's name of its engine)
    stopped_at: int | None = None  # the line of a graceful stop after it came up

    @property
    def state(self) -> str:
        """What the log says of the server, in the lifecycle's words: crashed, stopped, ready or starting."""
        if any(d.severity == "error" for d in self.diagnoses):
            return "crashed"
        if self.stopped_at is not None:
            return "stopped"
        return "ready" if self.ready else "starting"

    def to_json(self) -> dict:
        return {"diagnoses": [d.to_json() for d in self.diagnoses], "ready": self.ready, "state": self.state,
                "stopped_at": self.stopped_at, "lines": self.lines, "engine": self.engine,
                "run_start_line": self.run_start_line, "truncated": self.truncated, "notes": self.notes,
                "milestones": [{"milestone": m, "line": n} for m, n in self.milestones]}

def read_log_tail(path: str | Path, limit: int = TAIL_BYTES) -> tuple[list[str], int, bool]:
    """The last `limit` bytes of a log as lines: (lines, number of the first line kept, truncated?).
    Seeks: a multi-GB log costs the same as a small one.  Raises CockpitError for a binary file."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            start = max(0, size - limit)
            handle.seek(start)
            data = handle.read(limit)
    except IsADirectoryError:
        raise CockpitError(f"{path}: is a directory, not a log file") from None
    except OSError as exc:
        raise CockpitError(f"{path}: {exc.strerror or exc}") from None
    _check_text(data if start == 0 else b"", str(path))
    if looks_binary(data[:65536]):
        raise CockpitError(f"{path}: binary file, not a server log")
    truncated = start > 0
    if truncated:
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    return text_lines(data), 1, truncated


_TEXT_CONTROLS = frozenset("\t\n\r\f\v\b\x07\x1b")


def text_lines(data: bytes) -> list[str]:
    """A log's lines as an editor numbers them: split at each newline (CRLF counted once); a carriage return inside a
    line (a progress bar redrawn: checkpoint loading, CUDA-graph capture) stays inside it."""
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [(line[:-1] if line.endswith("\r") else line)[:MAX_LINE] for line in lines]


def looks_binary(sample: bytes) -> bool:
    """Whether bytes are not a log's text: a NUL, or more than 30 % of what they decode to is not text
    (bytes that are not UTF-8, control characters other than a terminal's).  A log with colour, a tmux
    capture's odd byte or a stray Latin-1 letter stays text; 200 random bytes do not."""
    if not sample:
        return False
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    bad = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in _TEXT_CONTROLS) or "\x7f" <= ch < "\xa0")
    return bad * 10 > 3 * len(text)


READ_CHUNK = 1 << 20


def bounded_lines(handle, max_line: int = MAX_LINE, first=None):
    """The lines of a byte stream (without their newline), each cut at `max_line` bytes (the rest of a
    longer line is skipped, never held): memory stays bounded on any input, endless or with no newline at
    all (`< /dev/zero`), and Ctrl-C is heard between reads.  `first(chunk)`: called with the first bytes
    read, before any line (to refuse a binary or compressed stream at once)."""
    read = getattr(handle, "read1", None) or handle.read  # what is there now: a pipe is read as it comes
    pending = bytearray()
    skipping = False
    seen = False
    while True:
        chunk = read(READ_CHUNK)
        if not chunk:
            break
        if not seen:
            seen = True
            if first is not None:
                first(chunk)
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end
            if not skipping:
                room = max_line - len(pending)
                pending += chunk[start:start + max(0, min(room, stop - start))]
                skipping = stop - start > room
            if end < 0:
                break
            yield bytes(pending)
            pending.clear()
            skipping = False
            start = end + 1
    if pending:
        yield bytes(pending)


def _check_text(head: bytes, name: str) -> None:
    """A compressed log is named as such (what to run instead), not diagnosed as text; so is a UTF-16 one (Windows
    tools, PowerShell's `>`), with the conversion to run."""
    shown = name if name != "standard input" else "FILE"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) >= 8 and head[1:8:2] == b"\x00\x00\x00\x00" and b"\x00" not in head[0:8:2]):
        raise CockpitError(f"{name}: UTF-16 text, not UTF-8: convert it with `iconv -f utf-16 -t utf-8 {shown} | cockpit parse-log -`")
    if head.startswith(b"\x1f\x8b"):
        raise CockpitError(f"{name}: a gzip file: read it with `zcat {name if name != 'standard input' else 'FILE'} | cockpit parse-log -`")
    if head.startswith((b"\x28\xb5\x2f\xfd", b"BZh", b"\xfd7zXZ")):
        raise CockpitError(f"{name}: a compressed file (zstd, bzip2 or xz): decompress it and pipe it to `cockpit parse-log -`")


def read_stream_tail(limit: int = TAIL_BYTES) -> tuple[list[str], int, bool, int]:
    """Standard input's last `limit` bytes as lines (a pipe cannot seek: read through, the last kept)."""
    import sys
    from collections import deque

    chunks: deque = deque()
    held = total = 0
    stream = sys.stdin.buffer
    read = getattr(stream, "read1", None) or stream.read  # a Python loop: Ctrl-C is heard between reads
    while True:
        chunk = read(READ_CHUNK)
        if not chunk:
            break
        if not total:  # refused at its first bytes: an endless binary stream ends here, not never
            _check_text(chunk, "standard input")
            if looks_binary(chunk[:65536]):
                raise CockpitError("standard input: binary data, not a server log")
        chunks.append(chunk)
        held += len(chunk)
        total += len(chunk)
        while held - len(chunks[0]) >= limit:
            held -= len(chunks.popleft())
    data = b"".join(chunks)
    if looks_binary(data[:65536]):
        raise CockpitError("standard input: binary data, not a server log")
    truncated = total > limit
    if truncated:
        data = data[-limit:]
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    return text_lines(data), 1, truncated, total


def diagnose_lines(lines: list[str], schema: FlagSchema | None = None, first_line: int = 1,
                   numbers: list[int] | None = None, engine=None) -> LogReport:
    """A log's lines (as read: through docker, kubectl, journald, colour, a terminal's wrapping: the
    intake reads them) diagnosed by the engine whose log it is (`engine`: that one, without asking); every
    message keeps the line's number in what was read (`numbers`: each line's own, when the lines are a
    selection of a longer log)."""
    from cockpit.serving.engines import engine_of_log

    taken, intake = take_lines(lines, first_line, numbers)
    lines = [line.text for line in taken]
    numbers = [line.number for line in taken]
    report = LogReport(lines=len(lines))
    said = []
    if intake["prefixes"]:
        said.append("per-line prefixes removed: " + ", ".join(intake["prefixes"]))
    if intake["constant_prefix"]:
        said.append(f"a constant prefix removed: {intake['constant_prefix']!r}")
    if intake["rejoined"]:
        said.append(f"{plural(intake['rejoined'], 'line')} wrapped at {intake['wrap_width']} columns rejoined")
    if said:
        report.notes.append("read through: " + "; ".join(said))
    reader = engine or engine_of_log(lines)
    if reader.name != _default():
        report.notes.append(f"read as a {reader.label} log")
    report.engine = reader.name
    reading = reader.read_log(lines, numbers, schema)
    # what a server logs after its own graceful stop began is the stop's teardown, not a crash (vLLM 0.26.0 logs an
    # EngineDeadError then); the live watch holds the same rule (serving/live.py LiveFigures.feed)
    report.diagnoses = [d for d in reading.diagnoses if not (reading.stopped_at is not None and d.severity == "error"
                                                             and d.line is not None and d.line > reading.stopped_at)]
    report.ready = reading.ready
    report.milestones = reading.milestones
    report.stopped_at = reading.stopped_at
    report.run_start_line = reading.run_start_line if reading.run_start_line is not None else (numbers[0] if numbers else first_line)
    return report


def _default() -> str:
    from cockpit.serving.engines import DEFAULT

    return DEFAULT

def render_diagnoses(diagnoses: list[Diagnosis]) -> str:
    """Diagnoses as text: one line each with its kind and line, then its one fix (the words `f` in the
    TUI and `plan fix` put in the step's command line), or, with no fix to apply, up to three guesses."""
    marks = {"error": "error", "warning": "warning", "info": "note"}
    lines = []
    for d in diagnoses:
        where = f"line {d.line}: " if d.line else ""
        lines.append(f"{marks.get(d.severity, d.severity)}: {where}[{d.kind}] {d.message}")
        if d.replacement:
            lines.append(f"    fix: {shell_words(d.replacement)}")
            continue
        for suggestion in d.suggestions[:3]:
            if suggestion and suggestion not in d.message:
                lines.append(f"    try: {suggestion}")
    return "\n".join(lines)


def render_log_report(report: LogReport) -> str:
    lines = [render_diagnoses(report.diagnoses)] if report.diagnoses else []
    if report.state == "crashed" and report.ready:
        lines.append("crashed: it came up, then failed (above)")
    elif report.state == "stopped":
        lines.append(f"stopped: it came up, then shut down cleanly at line {report.stopped_at} (who stopped it, the log "
                     "does not say)")
    elif report.ready:
        lines.append("ready: the server is up")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)



@lru_cache(maxsize=1)
def _worth_keeping() -> re.Pattern:
    """What a whole-log read keeps besides the current run's context: lines any engine's diagnosis reads."""
    from cockpit.serving.engines import engines

    return re.compile("|".join([r": error: ", r"^usage: ", r"Traceback \(most recent call last\)",
                                *(f"(?:{e.keep_words.pattern})" for e in engines()), r"(?:Error|Exception|Exit|Interrupt)\b"]))


def _run_start(line: str) -> bool:
    from cockpit.serving.engines import engines

    return LAUNCH_MARKER in line[:80] or any(e.run_start(line) for e in engines())


def _bulk() -> tuple[bytes, ...]:
    from cockpit.serving.engines import engines

    return tuple(word for e in engines() for word in e.bulk_words)

CONTEXT_LINES = 8
KEEP_AT_MOST = 200_000
KEEP_DECODE = 400
KEEP_BYTES = 64 * 1024 * 1024  # the kept lines of the last run, at most (their text)


def _open_log(path: str | Path):
    if str(path) == "-":
        import sys

        return sys.stdin.buffer, "standard input"
    path = Path(path)
    try:
        return open(path, "rb"), str(path)
    except IsADirectoryError:
        raise CockpitError(f"{path}: is a directory, not a log file") from None
    except OSError as exc:
        raise CockpitError(f"{path}: {exc.strerror or exc}") from None


def read_log_all(path: str | Path) -> tuple[list[str], list[int], int]:
    """Every line of a log read once, streamed (a 200 MB log in constant memory): what the last run
    in it says, kept as (lines, their numbers, lines read).  Of the last run, only the lines a
    diagnosis reads are kept (errors, usage, tracebacks, signatures, milestones, decode lines) with
    CONTEXT_LINES around each."""
    from collections import deque

    handle, name = _open_log(path)
    worth, bulk = _worth_keeping(), _bulk()
    kept: deque = deque(maxlen=KEEP_AT_MOST)
    kept_bytes = 0  # what `kept` holds: bounded in bytes too (200,000 lines of 64 KiB would be 12 GiB)
    decodes: deque = deque(maxlen=KEEP_DECODE)  # a serving run's decode lines: its last ones
    before: deque = deque(maxlen=CONTEXT_LINES)
    after = 0
    in_usage = False
    number = 0
    shapes: dict[bytes, int] = {}

    def refuse_binary(head: bytes) -> None:
        _check_text(head, name)
        if looks_binary(head[:65536]):
            raise CockpitError(f"{name}: binary file, not a server log")

    def keep(item: tuple[int, str]) -> None:
        nonlocal kept_bytes
        if len(kept) == kept.maxlen:
            kept_bytes -= len(kept[0][1])
        kept.append(item)
        kept_bytes += len(item[1])
        while kept_bytes > KEEP_BYTES and len(kept) > 1:
            kept_bytes -= len(kept.popleft()[1])

    try:
        for raw in bounded_lines(handle, MAX_LINE, refuse_binary):
            number += 1
            if any(word in raw for word in bulk):  # the bulk of a serving log (decode lines): no other diagnosis reads these
                decodes.append((number, raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n")))
                continue
            # a big log is the same few lines with other numbers: each shape (digits dropped) is judged once
            shape = raw[:512].translate(None, b"0123456789")
            verdict = shapes.get(shape)
            if verdict is None:
                bare = clean(raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n"))
                verdict = 2 if _run_start(bare) else 1 if worth.search(bare) else 0
                if len(shapes) < 100_000:
                    shapes[shape] = verdict
            text = raw[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n")
            if verdict == 2:
                kept.clear()
                kept_bytes = 0
                decodes.clear()
                before.clear()
            in_usage = text.startswith("usage: ") or (in_usage and text[:1] in (" ", "\t", "["))
            if in_usage or verdict:
                for item in before:
                    keep(item)
                before.clear()
                keep((number, text))
                after = CONTEXT_LINES
            elif after:
                keep((number, text))
                after -= 1
            else:
                before.append((number, text))
    except OSError as exc:
        raise CockpitError(f"{name}: {exc.strerror or exc}") from None
    finally:
        if handle is not getattr(__import__("sys").stdin, "buffer", None):
            handle.close()
    merged = sorted([*kept, *decodes])
    return [t for _, t in merged], [n for n, _ in merged], number


def diagnose_file(path: str | Path, schema: FlagSchema | None = None, read_all: bool = False, engine=None) -> LogReport:
    """`parse-log`: a file or standard input ("-"); its last 8 MiB, or all of it (`read_all`, streamed)."""
    if read_all:
        lines, numbers, count = read_log_all(path)
        report = diagnose_lines(lines, schema, numbers=numbers, engine=engine)
        report.lines = count
        if not count:
            report.notes.append("the log is empty")
        elif report.state == "starting":
            report.notes.append("no crash found, and the server is not ready (yet)")
        return report
    if str(path) == "-":
        lines, first, truncated, total = read_stream_tail()
        size: int | None = total
    else:
        lines, first, truncated = read_log_tail(path)
        size = Path(path).stat().st_size if truncated else None
    report = diagnose_lines(lines, schema, first, engine=engine)
    report.truncated = truncated
    if truncated:
        of = f" of {size / (1024 * 1024):.0f} MiB" if size else ""
        report.notes.append(f"only the last {TAIL_BYTES // (1024 * 1024)} MiB{of} were read (line numbers count from there): "
                            "a crash before that is not seen; pass --all to read all of it")
    if not lines:
        report.notes.append("the log is empty")
    elif report.state == "starting":
        report.notes.append("no crash found, and the server is not ready (yet)")
    return report

