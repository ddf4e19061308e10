"""nvidia-smi: the query the cockpit runs, and parsers for what comes back.

Parsers never raise on odd output: every oddity becomes an explicit value (None plus a problem
string on the sample) or a classified failure the host state can show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from enum import Enum

from cockpit.telemetry.model import ComputeProcess, GpuSample

# The GPU fields the cockpit asks for, in order.  Every one is answered by drivers from 450 on.
GPU_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.used",
    "memory.total",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "clocks.sm",
    "clocks.mem",
    "pstate",
)
APP_FIELDS: tuple[str, ...] = ("pid", "process_name", "used_memory", "gpu_uuid")

# Values nvidia-smi prints instead of a number.  N/A and Not Supported mean "not reported";
# the others are faults worth showing.
NOT_REPORTED = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unsupported]", ""}
FAULTS = {"[Unknown Error]", "Unknown Error", "ERR!", "[ERR!]", "[GPU is lost]", "[Insufficient Permissions]", "[Requested functionality has been deprecated]"}

_UNIT_RE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:MiB|W|%|MHz|C)?$")
_LOST_RE = re.compile(r"Unable to determine the device handle for (?:GPU|gpu)\s*([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])?:?\s*(.*)")


def gpu_query_argv(nvidia_smi: str = "nvidia-smi", interval_ms: int | None = None) -> list[str]:
    argv = [nvidia_smi, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"]
    if interval_ms is not None:
        argv += ["-lms", str(int(interval_ms))]
    return argv


def apps_query_argv(nvidia_smi: str = "nvidia-smi") -> list[str]:
    return [nvidia_smi, "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"]


class FailureKind(str, Enum):
    NOT_INSTALLED = "not_installed"
    DRIVER = "driver"
    NO_DEVICES = "no_devices"


@dataclass(frozen=True)
class SmiFailure:
    kind: FailureKind
    message: str


_FAILURES: tuple[tuple[re.Pattern[str], FailureKind], ...] = (
    (re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"), FailureKind.DRIVER),
    (re.compile(r"Failed to initialize NVML: .*"), FailureKind.DRIVER),
    (re.compile(r"Driver/library version mismatch"), FailureKind.DRIVER),
    (re.compile(r"No devices were found"), FailureKind.NO_DEVICES),
    (re.compile(r"(?:nvidia-smi|\S+): (?:command )?not found|No such file or directory"), FailureKind.NOT_INSTALLED),
)


def classify_failure(text: str, exit_status: int | None = None) -> SmiFailure | None:
    """Recognise nvidia-smi's whole-command failures in its output (stdout and stderr together)."""
    for pattern, kind in _FAILURES:
        match = pattern.search(text)
        if match:
            line = next((ln.strip() for ln in text.splitlines() if pattern.search(ln)), match.group(0))
            if kind is FailureKind.NOT_INSTALLED:
                return SmiFailure(kind, "nvidia-smi not found: no NVIDIA driver is installed on this host")
            return SmiFailure(kind, line)
    if exit_status == 127:
        return SmiFailure(FailureKind.NOT_INSTALLED, "nvidia-smi not found: no NVIDIA driver is installed on this host")
    return None


def _split(line: str) -> list[str]:
    # nvidia-smi separates fields with ", " and never quotes; names hold no commas.
    return [part.strip() for part in line.split(",")]


_PLAIN_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _number(raw: str, field: str, problems: list[str], kind: type) -> int | float | None:
    if _PLAIN_NUMBER.fullmatch(raw):  # the common case (nounits): no set lookups, no unit
        return int(round(float(raw))) if kind is int else float(raw)
    if raw in NOT_REPORTED:
        return None
    if raw in FAULTS:
        problems.append(f"{field}: {raw}")
        return None
    match = _UNIT_RE.match(raw)
    if not match:
        problems.append(f"{field}: unreadable {raw[:40]!r}")
        return None
    value = float(match.group(1))
    return int(round(value)) if kind is int else value


def _text(raw: str, field: str, problems: list[str]) -> str | None:
    if raw in NOT_REPORTED:
        return None
    if raw in FAULTS:
        problems.append(f"{field}: {raw}")
        return None
    return raw


_INT_FIELDS = {
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "utilization.gpu": "utilization_pct",
    "utilization.memory": "memory_utilization_pct",
    "temperature.gpu": "temperature_c",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.mem": "mem_clock_mhz",
    "clocks.current.memory": "mem_clock_mhz",
}
_FLOAT_FIELDS = {"power.draw": "power_w", "power.limit": "power_limit_w"}
_TEXT_FIELDS = {"uuid": "uuid", "name": "name", "pci.bus_id": "bus_id", "pstate": "pstate"}


@dataclass(frozen=True)
class LostGpu:
    """A line saying a GPU could not be reached (fell off the bus, or an unknown error)."""

    bus_id: str | None
    message: str


def _field_value(field_name: str, kind: type, raw: str) -> tuple[object, str | None]:
    """A field's value and its problem, if any."""
    problems: list[str] = []
    value = _text(raw, field_name, problems) if kind is str else _number(raw, field_name, problems, kind)
    return value, (problems[0] if problems else None)


@lru_cache(maxsize=16)
def _line_plan(fields: tuple[str, ...]) -> tuple[int | None, tuple[tuple[int, str, str, type], ...]]:
    """For a query's fields: where the index is, and (position, GpuSample attribute, field, type)
    of every other field read (fields the cockpit does not know are skipped)."""
    index_at = fields.index("index") if "index" in fields else None
    read = []
    for pos, name in enumerate(fields):
        for table, kind in ((_INT_FIELDS, int), (_FLOAT_FIELDS, float), (_TEXT_FIELDS, str)):
            if name in table:
                read.append((pos, table[name], name, kind))
                break
    return index_at, tuple(read)


def parse_gpu_line(line: str, fields: tuple[str, ...] = GPU_FIELDS) -> GpuSample | LostGpu | None:
    """Parse one CSV line of the GPU query.  Returns None for a line that is not a GPU row."""
    return line_reader(fields)(line)


@lru_cache(maxsize=16)
def line_reader(fields: tuple[str, ...]) -> Callable[[str], GpuSample | LostGpu | None]:
    """parse_gpu_line for one query's fields.  Every GPU of every host sends a line a second: the
    fields are read by a plan made once per query, and each field's text is looked up among the
    texts already seen at that position (names, uuids, totals, limits and clocks repeat tick after
    tick; the values that move repeat often too) before it is parsed."""
    index_at, read = _line_plan(fields)
    width = len(fields)
    plan: tuple[tuple[int, str, str, type, dict[str, tuple[object, str | None]]], ...] = tuple(
        (pos, attribute, field_name, kind, {}) for pos, attribute, field_name, kind in read)

    def parse(line: str) -> GpuSample | LostGpu | None:
        line = line.strip().lstrip("\ufeff")
        if not line:
            return None
        if "device handle" in line:  # the lost-GPU wording; the regex runs only on such lines
            lost = _LOST_RE.search(line)
            if lost:
                return LostGpu(bus_id=lost.group(1), message=line)
        parts = line.split(",")
        if len(parts) != width or index_at is None:
            return None
        raw = parts[index_at].strip()
        if not (raw.isascii() and raw.isdigit()):
            return None
        values: dict[str, object] = {"index": int(raw)}
        problems: list[str] | None = None
        for pos, attribute, field_name, kind, seen in plan:
            raw = parts[pos].strip()
            hit = seen.get(raw)
            if hit is None:
                hit = _field_value(field_name, kind, raw)
                if len(seen) >= 2048:
                    seen.clear()  # bounded: a stream of ever-new values cannot grow it
                seen[raw] = hit
            values[attribute] = hit[0]
            if hit[1] is not None:
                if problems is None:
                    problems = []
                problems.append(hit[1])
        if problems is None:
            return GpuSample(**values)  # type: ignore[arg-type]
        return GpuSample(problems=tuple(problems), lost=any("GPU is lost" in p for p in problems), **values)  # type: ignore[arg-type]

    return parse


def header_fields(header: str) -> tuple[str, ...]:
    """Field names from a `--format=csv` header (``memory.used [MiB]`` -> ``memory.used``)."""
    names = []
    for part in _split(header):
        names.append(part.split(" [", 1)[0].strip())
    return tuple(names)


def parse_gpu_table(text: str, fields: tuple[str, ...] | None = None) -> tuple[list[GpuSample], list[LostGpu]]:
    """Parse a whole GPU query output (with or without a header line)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if fields is None:
        fields = GPU_FIELDS
        if lines and lines[0].lstrip().startswith("index"):
            fields = header_fields(lines.pop(0))
    gpus: list[GpuSample] = []
    lost: list[LostGpu] = []
    for line in lines:
        parsed = parse_gpu_line(line, fields)
        if isinstance(parsed, GpuSample):
            gpus.append(parsed)
        elif isinstance(parsed, LostGpu):
            lost.append(parsed)
    return gpus, lost


def parse_apps(text: str, gpus: tuple[GpuSample, ...] | list[GpuSample] = ()) -> list[ComputeProcess]:
    """Parse `--query-compute-apps=pid,process_name,used_memory,gpu_uuid` output (header optional)."""
    by_uuid = {g.uuid: g.index for g in gpus if g.uuid}
    processes: list[ComputeProcess] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("pid"):
            continue
        parts = _split(line)
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        problems: list[str] = []
        used = _number(parts[2], "used_memory", problems, int)
        uuid = _text(parts[3], "gpu_uuid", problems)
        name = _text(parts[1], "process_name", problems)
        processes.append(ComputeProcess(pid=int(parts[0]), name=name, used_memory_mib=None if used is None else int(used),
                                        gpu_uuid=uuid, gpu_index=None if uuid is None else by_uuid.get(uuid)))
    return processes


class GpuStreamAssembler:
    """Turns the line stream of `nvidia-smi --query-gpu ... -lms N` into one complete tick at a time.

    nvidia-smi prints one line per GPU per interval, GPUs in index order.  A tick ends when the line
    for the last GPU of the previous tick arrives, or when an index repeats (a GPU appeared or
    vanished, or this is the first tick and the GPU count is not known yet).
    """

    def __init__(self, fields: tuple[str, ...] = GPU_FIELDS, expected_max_index: int | None = None):
        self.fields = fields
        self._read = line_reader(fields)
        self._pending: dict[int, GpuSample] = {}
        self._lost: list[LostGpu] = []
        self._expected_max = expected_max_index
        self._short_ticks = 0
        self.garbage_lines = 0

    def expect(self, max_index: int | None) -> None:
        self._expected_max = max_index

    def feed(self, line: str) -> tuple[list[GpuSample], list[LostGpu]] | None:
        """Feed one line; returns a finished tick (GPUs, lost GPUs) or None."""
        parsed = self._read(line)
        if parsed is None:
            if line.strip():
                self.garbage_lines += 1
            return None
        if isinstance(parsed, LostGpu):
            self._lost.append(parsed)
            return None
        if parsed.index in self._pending:
            done = self._flush()
            self._pending[parsed.index] = parsed
            return done
        self._pending[parsed.index] = parsed
        if self._expected_max is not None and parsed.index >= self._expected_max:
            return self._flush()
        return None

    def flush(self) -> tuple[list[GpuSample], list[LostGpu]] | None:
        """Hand out whatever is pending (at the end of the stream)."""
        if not self._pending and not self._lost:
            return None
        return self._flush()

    def _flush(self) -> tuple[list[GpuSample], list[LostGpu]]:
        gpus = [self._pending[i] for i in sorted(self._pending)]
        lost = self._lost
        if gpus:
            # The last GPU's line ends a tick.  A tick whose top GPU is missing (its row garbled)
            # must not lower that mark at once, or the next tick is cut in two; only a GPU count
            # that stays lower for three ticks does.
            top = gpus[-1].index
            if self._expected_max is None or top >= self._expected_max:
                self._expected_max, self._short_ticks = top, 0
            else:
                self._short_ticks += 1
                if self._short_ticks >= 3:
                    self._expected_max, self._short_ticks = top, 0
        self._pending = {}
        self._lost = []
        return gpus, lost
