"""Is the process behind a log still there?  Evidence read on the host, in one poll, and what it could not see:

- the processes that hold the log open for writing (the `nohup trainer > train.log 2>&1 &` pattern:
  the trainer and every torchrun rank inherit that descriptor; `tee`, a logging FileHandler),
  found through /proc (`find -L /proc/PID/fd -samefile LOG`, then each descriptor's open flags
  in /proc/PID/fdinfo: a reader such as the cockpit's own SFTP read is not a writer).  Another
  user's descriptors cannot be read (a container's root, a colleague's trainer): the script counts
  the processes it could not look into, and "no writer" then proves nothing;
- or a configured pid file (its number, alive and not a zombie);
- or a configured command pattern (a regular expression over `ps -ww` command lines, which any user
  may read unless /proc is mounted with hidepid);
- or pids seen before, looked up again (`ps -p`: whether a pid lives is visible to every user).

A process of any user counts as a sign of life (liveness is not ownership: the kill steps keep to
the acting user's own).  `gone` is `complete` only where the cockpit could see every process it
needed to; otherwise the answer says what was hidden.  Every command is an argument list; the one
script is a constant and the log's path travels as its positional parameter.  When the host cannot
tell (no /proc, no GNU find, ps failing, the host unreachable) the answer is `unknown`, with why.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from cockpit.hosts.procs import acting_user
from cockpit.hosts.transport import Transport, TransportError

# $1 is the log.  Prints "#nofind" when this host's find cannot do it (busybox, BSD), "#noproc"
# without /proc fdinfo, else one "/proc/PID/fdinfo/FD:flags:\tOCTAL" line per descriptor on the
# log, then "#end" (the proof the script ran to its end: an empty answer is "nobody").
HOLDERS_SCRIPT = (
    'log="$1"; '
    '[ -r /proc/self/fdinfo/0 ] || { echo "#noproc"; exit 0; }; '
    '[ "$(find -L /dev/null -maxdepth 0 -samefile /dev/null 2>/dev/null)" = /dev/null ] || { echo "#nofind"; exit 0; }; '
    # the processes whose descriptors this user cannot read (another user's: root's, a container's, a colleague's)
    # (a process that exits between the glob and the test is gone, not hidden: unreadable counts only while it is there)
    'h=0; for d in /proc/[0-9]*/fd; do [ -r "$d" ] || { [ -d "${d%/fd}" ] && h=$((h+1)); }; done; echo "#hidden $h"; '
    'grep -qs "hidepid=[12]\\|hidepid=invisible\\|hidepid=noaccess" /proc/mounts && echo "#hidepid"; '
    'find -L /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 -samefile "$log" 2>/dev/null '
    "| sed -n 's#^/proc/\\([0-9][0-9]*\\)/fd/\\([0-9][0-9]*\\)$#/proc/\\1/fdinfo/\\2#p' "
    "| xargs -r grep -H '^flags:' 2>/dev/null; "
    'echo "#end"'
)
PS_COLUMNS = "pid=,ppid=,user=,stat=,time=,args="
_ACCESS_MODE = 0o3  # O_RDONLY 0, O_WRONLY 1, O_RDWR 2


@dataclass(frozen=True)
class Proc:
    pid: int
    user: str
    stat: str
    cpu_s: float | None
    args: str

    @property
    def zombie(self) -> bool:
        return self.stat.startswith("Z")


@dataclass(frozen=True)
class Liveness:
    """What the host showed: `alive` (pids), `gone` (nobody), or `unknown` (and why).  `complete`: a `gone`
    that the cockpit could see all of (every process's descriptors readable, or pids it knew looked up
    again); an incomplete one says what was hidden in `why`."""

    state: str  # "alive", "gone", "unknown"
    how: str  # what was looked for: "processes writing LOG", "pid file F", "processes matching 'P'"
    procs: tuple[Proc, ...] = ()
    why: str = ""  # for unknown, or an incomplete gone: what could not be read
    at: float = 0.0
    complete: bool = True
    hidden: int = 0  # processes whose descriptors could not be read

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.procs)

    @property
    def cpu_s(self) -> float | None:
        times = [p.cpu_s for p in self.procs if p.cpu_s is not None]
        return sum(times) if times else None

    def describe(self) -> str:
        if self.state == "unknown":
            return f"unknown: {self.why}"
        if self.state == "gone":
            return f"no process: {self.how}" + ("" if self.complete else f" (but {self.why})")
        first = self.procs[0]
        more = f" and {len(self.procs) - 1} more" if len(self.procs) > 1 else ""
        return f"pid {first.pid}{more} ({first.args[:80]}{', user ' + first.user if first.user else ''})"

    def to_json(self) -> dict:
        return {"state": self.state, "how": self.how, "pids": list(self.pids), "why": self.why or None, "complete": self.complete,
                "hidden": self.hidden, "cpu_s": self.cpu_s, "users": sorted({p.user for p in self.procs}),
                "commands": [p.args[:300] for p in self.procs[:8]]}


def cpu_seconds(text: str) -> float | None:
    """ps's TIME: [[DD-]HH:]MM:SS."""
    days, _, rest = text.rpartition("-")
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or not parts or (days and not days.isdigit()):
        return None
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + (int(days) * 86400 if days else 0)


def parse_ps(text: str) -> list[Proc]:
    procs = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        procs.append(Proc(int(parts[0]), parts[2], parts[3], cpu_seconds(parts[4]), parts[5] if len(parts) > 5 else ""))
    return procs


def writer_pids(text: str) -> list[int]:
    """The pids whose descriptor on the log is open for writing (HOLDERS_SCRIPT's fdinfo lines)."""
    pids = []
    for line in text.splitlines():
        m = re.match(r"^/proc/(\d+)/fdinfo/\d+:flags:\s*([0-7]+)\s*$", line)
        if m and int(m.group(2), 8) & _ACCESS_MODE in (1, 2) and int(m.group(1)) not in pids:
            pids.append(int(m.group(1)))
    return pids


async def _ps(transport: Transport, pids: list[int] | None) -> list[Proc]:
    argv = ["ps", "-ww", "-o", PS_COLUMNS] + (["-p", ",".join(str(p) for p in pids)] if pids else ["-e"])
    result = await transport.run(argv, timeout=30)
    # ps -p exits 1 when none of the pids exists: that is an answer ("none"), not a failure
    if result.exit_status not in (0, 1) or (result.exit_status == 1 and not pids):
        raise TransportError(f"ps failed on {transport.name}: {result.output.strip()[:200]}")
    return parse_ps(result.stdout)


def _alive(procs: list[Proc]) -> tuple[Proc, ...]:
    return tuple(p for p in procs if not p.zombie)


async def _hidepid(transport: Transport) -> bool:
    """Whether /proc hides other users' processes from this user (then `ps` lists only its own)."""
    result = await transport.run(["grep", "-qs", "hidepid=[12]\\|hidepid=invisible\\|hidepid=noaccess", "/proc/mounts"], timeout=30)
    return result.exit_status == 0


async def probe(transport: Transport, log: str | None = None, pid_file: str | None = None,
                pattern: str | None = None, clock=time.time, known_pids: tuple[int, ...] = ()) -> Liveness:
    """One look.  A pid file or a pattern, when configured, decides; else the log's writers, and when those
    cannot all be seen, the pids seen writing it before (`known_pids`), looked up again."""
    now = clock()
    how = (f"pid file {pid_file}" if pid_file else f"processes matching {pattern!r}" if pattern
           else f"processes writing {log}")
    try:
        await acting_user(transport)  # the host answers as someone: an unreachable one is unknown, not gone
        if pid_file:
            if await transport.stat(pid_file) is None:
                return Liveness("gone", how + " (not there)", at=now)  # a pid file removed: its process ended
            data = await transport.read_range(pid_file, 0, 64)
            text = data.decode("ascii", "replace").strip()
            if not text:
                return Liveness("gone", how, why="", at=now)
            if not text.isdigit():
                return Liveness("unknown", how, why=f"{pid_file} does not hold a pid ({text[:20]!r})", at=now)
            procs = _alive(await _ps(transport, [int(text)]))
            if not procs and await _hidepid(transport):
                return Liveness("gone", how, at=now, complete=False, why="/proc is mounted with hidepid: another user's pid is not seen")
        elif pattern:
            regex = re.compile(pattern)
            procs = tuple(p for p in _alive(await _ps(transport, None)) if regex.search(p.args) and not p.args.startswith("ps -ww -o "))
            if not procs and await _hidepid(transport):
                return Liveness("gone", how, at=now, complete=False, why="/proc is mounted with hidepid: `ps` lists this user's processes only")
        else:
            if not log:
                return Liveness("unknown", how, why="no log, pid file or command pattern to look for", at=now)
            result = await transport.run(["sh", "-c", HOLDERS_SCRIPT, "sh", log], timeout=30)
            out = result.stdout
            if "#noproc" in out:
                return Liveness("unknown", how, why=f"{transport.name} has no /proc fdinfo: set pid_file or process", at=now)
            if "#nofind" in out:
                return Liveness("unknown", how, why=f"{transport.name}'s find has no -samefile (GNU findutils): "
                                "set pid_file or process", at=now)
            if "#end" not in out:
                return Liveness("unknown", how, why=f"the process check did not finish on {transport.name}: "
                                f"{result.output.strip()[:160] or 'no answer'}", at=now)
            hidden_m = re.search(r"^#hidden (\d+)$", out, re.M)
            hidden = int(hidden_m.group(1)) if hidden_m else 0
            pids = writer_pids(out)
            procs = _alive(await _ps(transport, pids)) if pids else ()
            if not procs and known_pids and hidden:
                # pids seen writing it before, whose descriptors this user cannot read now: whether they live is
                # visible to every user (unless hidepid).  One whose descriptors it can read was looked at above.
                me = await acting_user(transport)
                still = tuple(p for p in _alive(await _ps(transport, list(known_pids))) if me != "root" and p.user != me)
                if still:
                    return Liveness("alive", how + f" (pid {still[0].pid}, seen writing it before)", still, at=now, hidden=hidden)
                if "#hidepid" not in out:
                    return Liveness("gone", how, at=now, hidden=hidden,
                                    why=f"pid {', '.join(map(str, known_pids[:4]))}, seen writing it, writes it no more")
            if not procs and hidden:
                user = await acting_user(transport)
                return Liveness("gone", how, at=now, complete=False, hidden=hidden,
                                why=f"the descriptors of {hidden} processes on {transport.name} cannot be read by {user} "
                                    "(other users': root's, a container's, a colleague's)")
            return Liveness("alive" if procs else "gone", how, tuple(procs), at=now, hidden=hidden)
    except TransportError as exc:
        return Liveness("unknown", how, why=str(exc), at=now)
    except OSError as exc:
        return Liveness("unknown", how, why=f"{transport.name}: {exc}", at=now)
    return Liveness("alive" if procs else "gone", how, tuple(procs), at=now)
