"""Follow a growing log file on a host by offset (SFTP on the host's existing SSH connection, or
the local disk): each poll costs a stat and the new bytes, never the file's size.

Lines end at `\\n` *or* `\\r` (tqdm redraws its bar with `\\r` in a redirected file).  The text after
the last separator is the line being written (tqdm's current bar): handed out as `partial`, never
as a line.  A file that shrinks (truncated), whose first bytes change (rotated, or a restarted run
that rewrote it) or that disappears is read again from the start; the follower says which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cockpit.hosts.transport import MAX_LINE, Transport
from cockpit.intake import Intake
from cockpit.intake import clean as clean_text

TAIL_BYTES = 8 * 1024 * 1024  # a log first seen is read from its last 8 MiB
MAX_READ = 4 * 1024 * 1024  # at most this much per poll: a huge backlog is read over several polls
MAX_PARTIAL = MAX_LINE  # a "line" longer than this (binary junk) is cut into pieces
HEAD_BYTES = 64  # the file's first bytes: changed means a new file under the same name
_SEPARATOR = re.compile(rb"\r\n|\r|\n")  # a training log's progress bar: each redraw is a record (its step, its rate)
_NEWLINE = re.compile(rb"\r?\n")  # a server's log: a line as an editor numbers it, a CR inside one (a progress bar) inside


@dataclass
class Update:
    lines: list[str] = field(default_factory=list)
    partial: str = ""  # the line being written (no separator yet): tqdm's bar
    event: str | None = None  # "missing", "truncated", "rotated" or "appeared" when the file changed under us
    size: int | None = None
    mtime: float | None = None
    bytes_read: int = 0


def clean(raw: bytes) -> str:
    """One line as text: invalid UTF-8 replaced, terminal escapes and other control bytes dropped (the
    intake's one cleaner, which knows OSC and the other escape forms too)."""
    return clean_text(raw.decode("utf-8", errors="replace"))


class LogFollower:
    split_cr = True  # a carriage return ends a record (a trainer's progress bar); a server's log says otherwise

    def __init__(self, transport: Transport, path: str, tail_bytes: int = TAIL_BYTES, max_read: int = MAX_READ):
        self.transport = transport
        self.path = path
        self.tail_bytes = tail_bytes
        self.max_read = max_read
        self.offset: int | None = None  # None: not opened yet
        self._head = b""
        self._pending = b""
        self.skipped = 0  # bytes never read because the log was first seen large (the tail only)
        self.intake = Intake()

    def _restart(self, offset: int) -> None:
        self.offset = offset
        self._pending = b""
        self.intake = Intake()  # a new file: its collector's prefixes are learnt again

    async def poll(self) -> Update:
        """The lines written since the last poll.  Raises TransportError when the host cannot be read."""
        info = await self.transport.stat(self.path)
        if info is None or info.is_dir:
            self.offset, self._pending, self._head = None, b"", b""  # read from the start once it is back
            return Update(event="missing")
        update = Update(size=info.size, mtime=info.mtime)
        cut_first = False
        if self.offset is None:
            start = max(0, info.size - self.tail_bytes)
            self.skipped = start
            self._restart(start)
            self._head = await self._read_head(info.size)
            update.event = "appeared"
            cut_first = start > 0  # begun mid-file: the first (partial) line is not a line
        elif info.size < self.offset:
            self._restart(0)
            self._head = await self._read_head(info.size)
            update.event = "truncated"
        elif info.size > self.offset and self._head:
            head = await self._read_head(info.size)
            if head[: len(self._head)] != self._head:
                self._restart(0)
                update.event = "rotated"
            self._head = head
        elif not self._head and info.size:
            self._head = await self._read_head(info.size)
        offset = self.offset if self.offset is not None else 0  # set above in every branch
        want = min(info.size - offset, self.max_read)
        if want > 0:
            data = await self.transport.read_range(self.path, offset, want)
            self.offset = offset + len(data)
            update.bytes_read = len(data)
            update.lines = self._split(data)
            if cut_first and update.lines:
                update.lines.pop(0)
        update.partial = self.intake.strip(clean(self._pending))[0] if self._pending else ""
        return update

    async def _read_head(self, size: int) -> bytes:
        if size <= 0:
            return b""
        return await self.transport.read_range(self.path, 0, min(HEAD_BYTES, size))

    def _split(self, data: bytes) -> list[str]:
        buffer = self._pending + data
        parts = (_SEPARATOR if self.split_cr else _NEWLINE).split(buffer)
        self._pending = parts.pop()
        if self.split_cr:
            parts = [p for p in parts if p]  # "\r" and "\n" split over two reads leave an empty part
        lines = [clean(p[:MAX_LINE]) for p in parts]
        while len(self._pending) > MAX_PARTIAL:
            lines.append(clean(self._pending[:MAX_PARTIAL]))
            self._pending = self._pending[MAX_PARTIAL:]
        # as users have them: docker's, kubectl's, journald's and Slurm's prefixes off (cockpit/intake.py)
        return self.intake.texts(lines)


async def read_all(follower: LogFollower, max_polls: int = 10_000) -> Update:
    """Poll until the follower has caught up with the file (for one-shot commands)."""
    total = Update()
    for _ in range(max_polls):
        update = await follower.poll()
        total.lines.extend(update.lines)
        total.partial, total.size, total.mtime = update.partial, update.size, update.mtime
        total.event = total.event or update.event
        total.bytes_read += update.bytes_read
        if update.size is None or follower.offset is None or follower.offset >= update.size:
            return total
    return total


