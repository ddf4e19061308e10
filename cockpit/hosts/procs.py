"""Processes on a host, by PID: alive or not, stopped, started detached, listed (ps).  Commands are
argument lists.  A process the cockpit started detached is a LaunchedProcess, recorded as evidence."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

from cockpit.hosts.transport import Transport

# The first line the cockpit writes to a log before it starts a process detached: it splits a log
# that keeps earlier runs into runs (the diagnosis reads the last one).
LAUNCH_MARKER = "# cockpit: launch "


def launch_marker(step: str, host: str) -> str:
    return f"{LAUNCH_MARKER}{time.strftime('%Y-%m-%dT%H:%M:%S')} step={step} host={host}"


@dataclass(frozen=True)
class LaunchedProcess:
    """A process the cockpit started detached on a host: what a launch step records, and what
    stopping it, following its log and asking its port need.  Stored as the step's evidence (the
    same keys state files have always had, so old ones still load)."""

    host: str
    pid: int
    log: str
    argv: tuple[str, ...] = ()
    port: int | None = None
    started_at: float | None = None  # wall clock when the cockpit started it

    def to_evidence(self) -> dict[str, Any]:
        evidence: dict[str, Any] = {"host": self.host, "pid": self.pid, "log": self.log, "argv": list(self.argv)}
        if self.port is not None:
            evidence["port"] = self.port
        if self.started_at is not None:
            evidence["started_at"] = self.started_at
        return evidence

    @classmethod
    def from_evidence(cls, evidence: dict[str, Any] | None, host: str | None = None) -> "LaunchedProcess | None":
        """The process a step's evidence records; None when it records none (or a hand-edited file
        holds something else)."""
        if not isinstance(evidence, dict):
            return None
        pid, log = evidence.get("pid"), evidence.get("log")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or not isinstance(log, str):
            return None
        port = evidence.get("port")
        argv = evidence.get("argv") or ()
        started = evidence.get("started_at")
        return cls(host=str(evidence.get("host") or host or ""), pid=pid, log=log,
                   argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
                   port=port if isinstance(port, int) and not isinstance(port, bool) else None,
                   started_at=started if isinstance(started, (int, float)) and not isinstance(started, bool) else None)


def group_of(evidence: dict[str, Any] | None) -> list[LaunchedProcess]:
    """Every rank a launch group's evidence records (`group`: one entry per node, rank 0 first);
    a one-host launch: its one process; nothing: []."""
    if not isinstance(evidence, dict):
        return []
    members = evidence.get("group")
    if isinstance(members, list) and members:
        found = [LaunchedProcess.from_evidence(m) for m in members if isinstance(m, dict)]
        return [m for m in found if m is not None]
    one = LaunchedProcess.from_evidence(evidence)
    return [one] if one is not None else []


# --- listing processes ------------------------------------------------------------------------------

PS_ARGV = ["ps", "-ww", "-eo", "pid=,ppid=,user=,args="]  # -ww: never cut command lines to COLUMNS


@dataclass(frozen=True)
class ProcessRow:
    pid: int
    ppid: int
    user: str
    args: str
    gpu_mib: int | None = None  # memory on the GPUs, summed (None: not a GPU process, or unknown)
    gpus: tuple[tuple[int | None, int | None], ...] = ()  # (GPU index, MiB) of each GPU it holds

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "ppid": self.ppid, "user": self.user, "args": self.args, "gpu_mib": self.gpu_mib,
                "gpus": [{"index": i, "mib": m} for i, m in self.gpus]}


def parse_ps(text: str) -> list[ProcessRow]:
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        rows.append(ProcessRow(int(parts[0]), int(parts[1]), parts[2], parts[3] if len(parts) > 3 else ""))
    return rows


def ancestors(rows: list[ProcessRow], pid: int) -> set[int]:
    """pid and every process above it."""
    parents = {r.pid: r.ppid for r in rows}
    seen: set[int] = set()
    while pid and pid not in seen:
        seen.add(pid)
        pid = parents.get(pid, 0)
    return seen


def descendants(rows: list[ProcessRow], pids: set[int]) -> set[int]:
    """pids and every process below them."""
    children: dict[int, list[int]] = {}
    for row in rows:
        children.setdefault(row.ppid, []).append(row.pid)
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


NEVER_KILL = re.compile(r"^(sshd|/usr/sbin/sshd|sshd-session|/usr/lib/openssh/sshd-session|systemd|init|tmux|screen)(\s|:|$)")


async def acting_user(transport: Transport) -> str:
    """The user the cockpit acts as on the host (`id -un` there, asked once per connection)."""
    cached = getattr(transport, "_acting_user", None)
    if cached:
        return cached
    from cockpit.hosts.transport import TransportError

    result = await transport.run(["id", "-un"], timeout=30)
    name = result.stdout.strip()
    if result.exit_status != 0 or not name:
        raise TransportError(f"cannot tell which user the cockpit is on {transport.name}: {result.output.strip()[:200]}")
    transport._acting_user = name  # type: ignore[attr-defined]
    return name


async def list_processes(transport: Transport) -> list[ProcessRow]:
    from cockpit.hosts.transport import TransportError

    listing = await transport.run(PS_ARGV, timeout=30)
    if listing.exit_status != 0:
        raise TransportError(f"ps failed on {transport.name}: {listing.output.strip()[:200]}")
    return parse_ps(listing.stdout)

# Start argv detached (outlives the cockpit and its SSH session), output appended to log after a
# marker line that starts a new run in it; prints the PID.  Every value travels as a positional
# parameter of sh, never inside the script text.
DETACH_SCRIPT = (
    'log="$1"; dir="$2"; marker="$3"; shift 3; '
    'if [ -n "$dir" ]; then cd "$dir" || exit 97; fi; '
    'if [ -n "$marker" ]; then printf "%s\\n" "$marker" >>"$log" || exit 98; fi; '
    'setsid nohup "$@" >>"$log" 2>&1 </dev/null & echo $!'
)


def detached_argv(argv: list[str], log: str, cwd: str | None = None, env: dict[str, str] | None = None,
                  marker: str = "") -> list[str]:
    command = list(argv)
    if env:
        command = ["env", *[f"{k}={v}" for k, v in env.items()], *command]
    return ["sh", "-c", DETACH_SCRIPT, "sh", log, cwd or "", marker, *command]


async def process_alive(transport: Transport, pid: int) -> bool:
    """Running, and not a zombie (kill -0 succeeds on a zombie that nobody reaped)."""
    result = await transport.run(["ps", "-o", "stat=", "-p", str(pid)], timeout=30)
    return result.exit_status == 0 and bool(result.stdout.strip()) and not result.stdout.strip().startswith("Z")


async def stop_process(transport: Transport, pid: int, grace_s: float = 10.0) -> bool:
    """SIGTERM, wait, SIGKILL; True when the process is gone."""
    await transport.run(["kill", "-TERM", str(pid)], timeout=30)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not await process_alive(transport, pid):
            return True
        await asyncio.sleep(0.2)
    await transport.run(["kill", "-KILL", str(pid)], timeout=30)
    await asyncio.sleep(0.2)
    return not await process_alive(transport, pid)


async def start_detached(transport: Transport, argv: list[str], log: str, cwd: str | None, env: dict[str, str] | None,
                         marker: str) -> tuple[int | None, str]:
    """(pid, "") once started, or (None, what went wrong)."""
    result = await transport.run(detached_argv(argv, log, cwd, env, marker), timeout=30)
    pid_text = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.exit_status != 0 or not pid_text.isdigit():
        return None, f"could not start: {result.output.strip()[:300]}"
    return int(pid_text), ""
