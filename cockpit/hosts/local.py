"""The machine the cockpit runs on: commands as asyncio subprocesses, no shell in between."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import time
from collections.abc import Sequence

import stat as stat_module

from cockpit.hosts.transport import CHUNK, MAX_LINE, CommandResult, FileStat, LineStream, Transport, quote_argv


def _not_found(argv: Sequence[str], start: float) -> CommandResult:
    return CommandResult(tuple(argv), 127, "", f"{argv[0]}: command not found", time.monotonic() - start)


class LocalLineStream(LineStream):
    def __init__(self, log, record, proc: asyncio.subprocess.Process):
        super().__init__(log, record)
        self._proc = proc
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a chunk may end inside a character
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        self._eof = False  # its output closed: it is ending by itself

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while True:
            try:
                line = await self._proc.stderr.readline()
            except ValueError:
                continue
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip("\r\n"))

    async def _read_chunk(self) -> str | None:
        assert self._proc.stdout is not None
        while True:
            data = await self._proc.stdout.read(CHUNK)
            if not data:
                self._eof = True
            text = self._decoder.decode(data, final=not data)
            if text or not data:
                return text or None

    async def _stop(self) -> None:
        if self._proc.returncode is None and self._eof:
            # it closed its output: it is ending by itself.  A signal now would find it exited and not yet reaped, and
            # Popen reaps it before signalling, under asyncio's child watcher ("Unknown child process pid N" on stderr)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 3)
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), 3)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()
                await self._proc.wait()
        await asyncio.wait([self._stderr_task], timeout=1)  # never swallows our own cancellation
        self._stderr_task.cancel()
        self.exit_status = self._proc.returncode


class LocalTransport(Transport):
    async def connect(self) -> None:
        return None

    @property
    def connected(self) -> bool:
        return True

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: str | None = None) -> CommandResult:
        record = self.log.start(self.name, quote_argv(argv))
        start = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            result = _not_found(argv, start)
            self.log.finish(record, 127, result.stderr)
            return result
        try:
            out, err = await asyncio.wait_for(proc.communicate(input.encode() if input is not None else None), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            out, err = await proc.communicate()
            result = CommandResult(tuple(argv), None, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - start, timed_out=True)
            self.log.finish(record, None, f"timed out after {timeout} s")
            return result
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            # reaped here, its pipes read to their end, before the cancellation goes on: a child left to the loop's
            # shutdown is reaped twice ("Unknown child process pid N" on stderr at a watching command's Ctrl-C), and a
            # transport left open is closed after its loop ("Event loop is closed", seen once at a TUI's exit)
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError, ProcessLookupError, RuntimeError):
                await asyncio.wait_for(proc.communicate(), 2)
            self.log.finish(record, None, "cancelled")
            raise
        result = CommandResult(tuple(argv), proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - start)
        self.log.finish(record, proc.returncode)
        return result

    async def stream(self, argv: Sequence[str]) -> LineStream:
        record = self.log.start(self.name, quote_argv(argv), kind="stream")
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=MAX_LINE,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            proc = await asyncio.create_subprocess_exec(
                "sh", "-c", 'echo "$1: command not found" >&2; exit 127', "sh", str(argv[0]),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
        return LocalLineStream(self.log, record, proc)

    async def close(self) -> None:
        return None

    async def open_tcp(self, host: str, port: int):
        return await asyncio.open_connection(host, port)

    async def stat(self, path: str) -> FileStat | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(os.path.basename(path), st.st_size, st.st_mtime, stat_module.S_ISDIR(st.st_mode))

    async def list_dir(self, path: str) -> list[FileStat] | None:
        def scan() -> list[FileStat] | None:
            try:
                entries = list(os.scandir(path))
            except (FileNotFoundError, NotADirectoryError):
                return None
            found = []
            for entry in entries:
                try:
                    st = entry.stat()  # follows symlinks
                except OSError:
                    continue  # a dangling link, or gone since the listing
                found.append(FileStat(entry.name, st.st_size, st.st_mtime, stat_module.S_ISDIR(st.st_mode)))
            return found

        return await asyncio.to_thread(scan)

    async def read_range(self, path: str, offset: int, size: int) -> bytes:
        def read() -> bytes:
            with open(path, "rb") as handle:
                handle.seek(offset)
                return handle.read(size)

        return await asyncio.to_thread(read)
