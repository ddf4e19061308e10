"""The kernel's word that it killed a process for memory.  A SIGKILL alone is no OOM; these are:

- the process's memory cgroup counted one more OOM kill between the last look that saw the process alive and the look
  that found it gone (cgroup v1 `memory.oom_control`, v2 `memory.events`: `oom_kill N`).  Read from /proc/PID/cgroup
  while the process lives: both files are world-readable, so an ordinary user sees another user's process's group too;
- the kernel's log names the pid (`Killed process PID (NAME)`, `oom-kill:...,pid=PID,`): `dmesg`, which only root may
  read where `kernel.dmesg_restrict` is set (Debian's default).

Every command is an argument list; the paths are built from what /proc says, never from the user's input."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from cockpit.hosts.transport import Transport, TransportError

# where a cgroup hierarchy is mounted: v1's memory controller, v2 (unified), v2 beside v1 (hybrid)
V1_ROOT = "/sys/fs/cgroup/memory"
V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
_COUNT = re.compile(r"^oom_kill (\d+)$", re.M)
_KILLED = (re.compile(r"Killed process (\d+) \(([^)]*)\)"), re.compile(r"oom-kill:.*?[,:]pid=(\d+)"))
_STAMP = re.compile(r"^\[\s*(\d+\.\d+)\]")
# the host's uptime, then its kernel log (stamped in seconds since boot): how long ago each line was written
KERNEL_LOG_SCRIPT = "cat /proc/uptime && dmesg"


@dataclass(frozen=True)
class MemoryGroup:
    """A process's memory cgroup as seen while it lived: the counter file and its OOM kills then."""

    pid: int
    group: str  # the cgroup path /proc/PID/cgroup gives ("/cockpit/train", "/system.slice/x.scope")
    counter: str  # the file that counts its OOM kills
    kills: int


def candidates(cgroup_text: str) -> list[tuple[str, str]]:
    """(group, counter file) to try, from /proc/PID/cgroup: v1's memory line first, then v2's.  A process in the root
    group has no counter of its own (the root's counts the whole machine's): none."""
    found: list[tuple[str, str]] = []
    for line in cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        path = path.strip()
        if not path.startswith("/") or path == "/" or ".." in path.split("/"):
            continue
        if "memory" in controllers.split(","):
            found.insert(0, (path, posixpath.join(V1_ROOT, path.lstrip("/"), "memory.oom_control")))
        elif controllers == "":
            found.extend((path, posixpath.join(root, path.lstrip("/"), "memory.events")) for root in V2_ROOTS)
    return found


def oom_kills(text: str) -> int | None:
    m = _COUNT.search(text)
    return int(m.group(1)) if m else None


async def _cat(transport: Transport, path: str) -> str | None:
    try:
        result = await transport.run(["cat", path], timeout=15)
    except (TransportError, OSError):
        return None
    return result.stdout if result.exit_status == 0 else None


async def memory_group(transport: Transport, pid: int) -> MemoryGroup | None:
    """The memory cgroup of a living process and its OOM kills now; None where the host does not say (no cgroup
    counter, the process gone, /proc hidden)."""
    text = await _cat(transport, f"/proc/{int(pid)}/cgroup")
    if not text:
        return None
    for group, counter in candidates(text):
        count = oom_kills(await _cat(transport, counter) or "")
        if count is not None:
            return MemoryGroup(int(pid), group, counter, count)
    return None


def killed_in_log(text: str, pids: set[int] | frozenset[int], within_s: float) -> str | None:
    """The kernel log's line that killed one of `pids` for memory, written at most `within_s` seconds ago (an old
    line for a pid since reused is not this process's); `text` is KERNEL_LOG_SCRIPT's output."""
    first, _, log = text.partition("\n")
    try:
        uptime = float(first.split()[0])
    except (IndexError, ValueError):
        return None
    for line in reversed(log.splitlines()[-20000:]):
        stamp = _STAMP.match(line)
        if stamp is None:
            continue
        if uptime - float(stamp.group(1)) > within_s:
            return None  # older lines are older still
        for regex in _KILLED:
            m = regex.search(line)
            if m and int(m.group(1)) in pids:
                return line.strip()[:240]
    return None


async def kernel_oom(transport: Transport, pids: set[int] | frozenset[int], group: MemoryGroup | None,
                     within_s: float) -> str | None:
    """The kernel's word that one of `pids` (the processes seen as the run's) was killed for memory in the last
    `within_s` seconds (since it was last seen alive): the words to show, or None.  Its log first (it names the pid),
    then the counter of the group the process was seen in."""
    if pids:
        try:
            result = await transport.run(["sh", "-c", KERNEL_LOG_SCRIPT], timeout=15)
        except (TransportError, OSError):
            result = None
        if result is not None and result.exit_status == 0:
            line = killed_in_log(result.stdout, pids, within_s)
            if line is not None:
                return f"the kernel's OOM killer: {line}"
    if group is not None:
        count = oom_kills(await _cat(transport, group.counter) or "")
        if count is not None and count > group.kills:
            return (f"the kernel's OOM killer: memory cgroup {group.group} counted {count - group.kills} OOM kill"
                    f"{'s' if count - group.kills > 1 else ''} since pid {group.pid} was seen alive ({group.counter}: "
                    f"oom_kill {group.kills} -> {count})")
    return None
