"""What every transport offers: run a command (argv, never a shell string) or stream its output lines."""

from __future__ import annotations

import abc
import shlex
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from cockpit.config import HostConfig
from cockpit.hosts.commandlog import CommandLog, CommandRecord
from cockpit.hosts.state import HostState

MAX_LINE = 64 * 1024  # a longer line is cut: garbage on a stream must not exhaust memory
CHUNK = 64 * 1024  # a stream is read in what has arrived, up to this much at a time


def quote_argv(argv: Sequence[str]) -> str:
    """The one place a command line becomes a string for a remote shell: every word quoted."""
    if not argv:
        raise ValueError("empty command")
    return shlex.join(str(a) for a in argv)


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    exit_status: int | None  # None: killed by a signal or timed out
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class FileStat:
    """What a follower needs of a file on a host: its size, when it last changed, whether it is a
    directory (symlinks followed)."""

    name: str
    size: int
    mtime: float
    is_dir: bool = False


class TransportError(Exception):
    """A host could not be used; ``state`` says how the UI should show it."""

    state: HostState = HostState.UNREACHABLE

    def __init__(self, message: str, state: HostState | None = None):
        super().__init__(message)
        if state is not None:
            self.state = state


class Unreachable(TransportError):
    state = HostState.UNREACHABLE


class AuthFailed(TransportError):
    state = HostState.AUTH_FAILED


class HostKeyRejected(TransportError):
    """Unknown or changed host key; ``offered`` is the fingerprint the server showed, when known."""

    def __init__(self, message: str, state: HostState, offered: str | None = None, known_hosts: str | None = None):
        super().__init__(message, state)
        self.offered = offered
        self.known_hosts = known_hosts


class LineStream(abc.ABC):
    """The output lines of a long-running command.  Closing it stops the command on the host."""

    def __init__(self, log: CommandLog, record: CommandRecord):
        self._log = log
        self._record = record
        self.exit_status: int | None = None
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self._finished = False

    @abc.abstractmethod
    async def _read_chunk(self) -> str | None:
        """Whatever output has arrived (at least one character), or None at the end."""

    @abc.abstractmethod
    async def _stop(self) -> None:
        """Stop the command if it still runs, and collect its exit status."""

    async def __aenter__(self) -> "LineStream":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for batch in self.batches():
            for line in batch:
                yield line

    async def batches(self) -> AsyncIterator[list[str]]:
        """The lines, in the groups they arrived in (newline, CR and cut parts removed; a line longer
        than MAX_LINE is cut there and its rest skipped).  A command that writes a tick of eight
        lines at once costs one wake-up here, not eight."""
        partial = ""
        skipping = False  # inside the rest of an over-long line
        while True:
            chunk = await self._read_chunk()
            if chunk is None:
                if partial and not skipping:
                    yield [partial.rstrip("\r")]
                return
            pieces = chunk.split("\n")
            pieces[0] = partial + pieces[0]
            partial = pieces.pop()
            lines = []
            for piece in pieces:
                if skipping:
                    skipping = False  # this piece ends the over-long line already given
                    continue
                lines.append(piece[:MAX_LINE].rstrip("\r"))
            if len(partial) > MAX_LINE and not skipping:
                lines.append(partial[:MAX_LINE])
                partial, skipping = "", True
            elif skipping:
                partial = ""
            if lines:
                yield lines

    async def close(self) -> None:
        if self._finished:
            return
        self._finished = True
        error = None
        try:
            await self._stop()
        except Exception as exc:  # noqa: BLE001 - closing must never raise into the collector
            error = f"{type(exc).__name__}: {exc}"
        self._log.finish(self._record, self.exit_status, error)

    @property
    def stderr_text(self) -> str:
        return "\n".join(self.stderr_tail)


class Transport(abc.ABC):
    """A way to run commands on one host.  Implementations: local subprocess, SSH."""

    def __init__(self, host: HostConfig, log: CommandLog):
        self.host = host
        self.log = log

    @property
    def name(self) -> str:
        return self.host.name

    @abc.abstractmethod
    async def connect(self) -> None: ...

    @property
    @abc.abstractmethod
    def connected(self) -> bool: ...

    @abc.abstractmethod
    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult: ...

    @abc.abstractmethod
    async def stream(self, argv: Sequence[str]) -> LineStream: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def open_tcp(self, host: str, port: int) -> tuple[Any, Any]:
        """A TCP connection made from the host's side (through SSH: a direct-tcpip channel):
        (reader, writer) with asyncio stream semantics.  Raises OSError/TransportError."""

    def user_files(self) -> list[str]:
        """Files the user edits to fix a refused connection (known_hosts, keys): a change to one of
        them is worth an immediate retry."""
        return []

    @abc.abstractmethod
    async def read_range(self, path: str, offset: int, size: int) -> bytes:
        """Bytes [offset, offset+size) of a file on the host (no process started for it)."""

    @abc.abstractmethod
    async def stat(self, path: str) -> FileStat | None:
        """Size, mtime and kind of a path on the host (symlinks followed); None if it does not exist."""

    @abc.abstractmethod
    async def list_dir(self, path: str) -> list[FileStat] | None:
        """The entries of a directory on the host (not . and ..; symlinks followed, a dangling one
        left out); None if the directory does not exist."""
