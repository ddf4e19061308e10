"""A host's compute processes as nvitop shows them: pid, user, GPU, GPU memory, CPU %, resident memory, run time and
command line, sortable by any column.

The GPUs' own list (nvidia-smi's compute apps, from the host's latest sample) says which processes hold GPU memory;
one `ps` over the host's existing connection per poll says who they are (on the cockpit's own machine the same fields
are read from /proc in-process: no process spawned each poll, no `ps` line in the command log every poll, CPU time in
clock ticks rather than ps's whole seconds).  CPU % is measured between two polls (the CPU time each process used over
the wall time between them), never ps's lifetime average; the first poll has none.
A process the GPU lists but ps cannot see (another PID namespace: a container; hidepid) is kept, its user and
command said unknown, with why."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any

from cockpit.hosts.transport import Transport, TransportError

# one ps per poll, of the given pids only (-p; never -e, which would add every process to them): cumulative CPU seconds
# (times), resident KiB, seconds since start (etimes); -ww: whole command lines
PS_TABLE_ARGV = ["ps", "-ww", "-o", "pid=,user:32=,times=,rss=,etimes=,args="]
COLUMNS = ("pid", "user", "gpu", "gpu_mib", "cpu", "rss", "time", "command")  # the order shown, and what `sort` takes
NOT_SEEN = "not in ps on this host (another PID namespace, e.g. a container, or hidden by hidepid): user and command unknown"


@dataclass(frozen=True)
class ProcRow:
    pid: int
    gpus: tuple[int | None, ...]  # the GPU index of each GPU it holds
    gpu_mib: int | None  # its GPU memory, summed over them (the sort's key)
    user: str | None = None
    cpu_percent: float | None = None  # of one core, between the last two polls (None: the first poll, or not seen)
    rss_kib: int | None = None
    run_s: int | None = None
    command: str | None = None
    seen: bool = True  # whether ps saw it (False: why in NOT_SEEN)
    gpu_mibs: tuple[int | None, ...] = ()  # its memory on each GPU of `gpus`, in their order
    owner: str | None = None  # who holds it, as its cgroup and its manager say ("Slurm job 4412 train-eagle (alice)")

    @property
    def per_gpu(self) -> str:
        """Its memory as a GPU holds it: one GPU's figure, "N MiB each" on several alike, else the range (never the sum:
        a 70B server on 8 GPUs holds 126518 MiB on each, not 1 TB)."""
        known = [m for m in self.gpu_mibs if m is not None]
        if not known:
            return "-" if self.gpu_mib is None else f"{self.gpu_mib}MiB"
        if len(self.gpu_mibs) == 1:
            return f"{known[0]}MiB"
        low, high = min(known), max(known)
        return f"{high}MiB each" if low == high and len(known) == len(self.gpu_mibs) else f"{low}-{high}MiB each"

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "gpus": list(self.gpus), "gpu_mib": self.gpu_mib, "gpu_mibs": list(self.gpu_mibs), "owner": self.owner, "user": self.user, "cpu_percent": self.cpu_percent,
                "rss_kib": self.rss_kib, "run_s": self.run_s, "command": self.command, "seen": self.seen,
                **({} if self.seen else {"why": NOT_SEEN})}

    def key(self, column: str) -> tuple:
        """The sort key of one column; unknown values last whatever the direction."""
        value: Any = {"pid": self.pid, "user": self.user, "gpu": min((g for g in self.gpus if g is not None), default=None),
                      "gpu_mib": self.gpu_mib, "cpu": self.cpu_percent, "rss": self.rss_kib, "time": self.run_s,
                      "command": self.command}[column]
        return (value is None, value if value is not None else 0)


@dataclass(frozen=True)
class _PsRow:
    user: str
    cpu_s: float
    rss_kib: int
    run_s: int
    args: str


def parse_ps_table(text: str) -> dict[int, _PsRow]:
    rows: dict[int, _PsRow] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or not all(p.isdigit() for p in (parts[0], parts[2], parts[3], parts[4])):
            continue
        rows[int(parts[0])] = _PsRow(parts[1], int(parts[2]), int(parts[3]), int(parts[4]), parts[5] if len(parts) > 5 else "")
    return rows


def read_proc(pids: list[int], root: str = "/proc") -> dict[int, _PsRow]:
    """ps's fields for `pids`, read from /proc here (the cockpit's own machine): user, CPU seconds (utime + stime, in
    clock ticks), resident KiB, seconds since start, command line (`[comm]` where it has none, as ps shows a kernel
    thread).  A pid gone or unreadable is left out, as ps leaves it out."""
    import pwd

    ticks, page_kib = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE") // 1024
    try:
        with open(f"{root}/uptime") as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    rows: dict[int, _PsRow] = {}
    for pid in pids:
        try:
            with open(f"{root}/{pid}/stat") as handle:
                stat = handle.read()
            with open(f"{root}/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read()
            uid = os.stat(f"{root}/{pid}").st_uid
        except OSError:
            continue
        comm, _, after = stat.rpartition(")")
        fields = after.split()
        if len(fields) < 22:
            continue
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = str(uid)
        words = [" ".join(w.decode("utf-8", "replace").split()) for w in cmdline.split(b"\0") if w]  # as ps: no newlines
        args = " ".join(words) if words else f"[{comm.partition('(')[2]}]"
        rows[pid] = _PsRow(user, (int(fields[11]) + int(fields[12])) / ticks, int(fields[21]) * page_kib,
                           max(0, int(uptime - int(fields[19]) / ticks)), args)
    return rows


class ProcessTable:
    """One host's table, kept between polls (for CPU %); bounded by the host's compute processes."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._last: dict[int, tuple[float, float]] = {}  # pid -> (when, its CPU seconds then)
        self.rows: list[ProcRow] = []
        self.polled_at: float | None = None
        self.error: str | None = None

    def update(self, compute: list[tuple[int, int | None, int | None]], ps_text: str, now: float | None = None,
               seen: dict[int, _PsRow] | None = None) -> list[ProcRow]:
        """compute: (pid, GPU index, MiB) of each compute process on each GPU, as the GPU driver lists them; ps_text: ps's
        output (or `seen`: the same fields read from /proc)."""
        now = self._clock() if now is None else now
        seen = parse_ps_table(ps_text) if seen is None else seen
        held: dict[int, list[tuple[int | None, int | None]]] = {}
        for pid, index, mib in compute:
            held.setdefault(pid, []).append((index, mib))
        rows, last = [], {}
        for pid, gpus in held.items():
            known = [m for _, m in gpus if m is not None]
            ordered = sorted(gpus, key=lambda g: (g[0] is None, g[0] or 0))
            base = ProcRow(pid, tuple(i for i, _ in ordered), sum(known) if known else None, gpu_mibs=tuple(m for _, m in ordered))
            ps = seen.get(pid)
            if ps is None:
                rows.append(replace(base, seen=False))
                continue
            cpu = None
            before = self._last.get(pid)
            if before is not None and now > before[0]:
                cpu = round(max(0.0, (ps.cpu_s - before[1]) / (now - before[0]) * 100.0), 1)
            last[pid] = (now, ps.cpu_s)
            rows.append(replace(base, user=ps.user, cpu_percent=cpu, rss_kib=ps.rss_kib, run_s=ps.run_s, command=ps.args))
        self._last = last  # only the processes still there: bounded
        self.rows, self.polled_at, self.error = rows, now, None
        return rows

    async def poll(self, transport: Transport, compute: list[tuple[int, int | None, int | None]]) -> list[ProcRow]:
        """One ps over the host's connection, of the compute processes only (`-p`), joined with them; none: no ps."""
        pids = sorted({pid for pid, _, _ in compute})
        if not pids:
            return self.update(compute, "")
        if transport.host.local:  # the cockpit's own machine: /proc is right here
            return self.update(compute, "", seen=read_proc(pids))
        done = await transport.run([*PS_TABLE_ARGV, "-p", ",".join(map(str, pids))], timeout=30)
        if done.exit_status == 1 and not done.stdout.strip():
            return self.update(compute, "")  # ps -p exits 1 when none of them is there any more (or none is visible)
        if done.exit_status != 0:
            self.error = f"ps failed on {transport.name}: {done.output.strip()[:200]}"
            raise TransportError(self.error)
        return self.update(compute, done.stdout)


def sort_rows(rows: list[ProcRow], column: str = "gpu_mib", descending: bool = True) -> list[ProcRow]:
    """Rows by one column (COLUMNS), unknown values last in either direction."""
    if column not in COLUMNS:
        raise ValueError(f"sort by one of {', '.join(COLUMNS)}, not {column!r}")
    known = [r for r in rows if not r.key(column)[0]]
    unknown = [r for r in rows if r.key(column)[0]]
    known.sort(key=lambda r: (r.key(column)[1], r.pid), reverse=descending)
    return known + sorted(unknown, key=lambda r: r.pid)


def duration(seconds: int | None) -> str:
    """nvitop's run time: 59s, 12:03, 3:02:11, 2d 04h."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours == 0:
        return f"{minutes}:{secs:02d}"
    days, hours = divmod(hours, 24)
    return f"{hours}:{minutes:02d}:{secs:02d}" if days == 0 else f"{days}d {hours:02d}h"


def memory(kib: int | None) -> str:
    if kib is None:
        return "-"
    if kib >= 1 << 20:
        return f"{kib / (1 << 20):.1f}G"
    return f"{kib / 1024:.0f}M"


HEADINGS = {"pid": "PID", "user": "USER", "gpu": "GPU", "gpu_mib": "GPU-MEM", "cpu": "%CPU", "rss": "RSS", "time": "TIME",
            "command": "COMMAND", "owner": "OWNER"}


def columns_for(rows: list[ProcRow]) -> tuple[str, ...]:
    """The columns shown: OWNER (a Slurm job, a container, a pod) before the command where any row has one."""
    return COLUMNS if not any(r.owner for r in rows) else (*COLUMNS[:-1], "owner", "command")


def cells(row: ProcRow) -> dict[str, str]:
    """One row's cells as the table and `cockpit procs` show them."""
    return {"pid": str(row.pid), "user": row.user if row.user is not None else "?",
            "gpu": ",".join("?" if g is None else str(g) for g in row.gpus) or "-",
            "gpu_mib": row.per_gpu, "cpu": "-" if row.cpu_percent is None else f"{row.cpu_percent:.0f}",
            "rss": memory(row.rss_kib), "time": duration(row.run_s), "owner": row.owner or "-",
            "command": row.command if row.command is not None else "(not seen by ps: another PID namespace?)"}


def render_table(rows: list[ProcRow], sort: str = "gpu_mib", descending: bool = True) -> str:
    """The table as text: the sorted column marked, the command last and whole."""
    if not rows:
        return "no compute process on its GPUs"
    shown = [cells(r) for r in rows]
    columns = columns_for(rows)
    widths = {c: max(len(HEADINGS[c]) + 1, *(len(s[c]) for s in shown)) for c in columns if c != "command"}
    mark = "v" if descending else "^"
    head = "  ".join((HEADINGS[c] + (mark if c == sort else "")).ljust(widths[c]) if c != "command"
                     else HEADINGS[c] + (mark if c == sort else "") for c in columns)
    lines = [head]
    for s in shown:
        lines.append("  ".join(s[c].rjust(widths[c]) if c in ("pid", "gpu_mib", "cpu", "rss", "time") else
                               (s[c].ljust(widths[c]) if c != "command" else s[c]) for c in columns))
    return "\n".join(lines)
