"""A manager's log stream (`docker logs --follow --timestamps`, `kubectl logs --follow --timestamps`) read the
way a log file is: each poll returns the lines that came since the last one.

The stream runs in a task of its own on the host's transport (stdout and stderr together: Docker sends a
container's stderr to its own stderr).  Its lines wait in a bounded buffer (when a poll is later than that,
the oldest are dropped and counted).  Each line's time is taken off and the last one kept, so a stream that
ended (the container exited, the connection dropped) is started again from where it was (`--since`), and
what was already read is not read twice."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import deque
from collections.abc import Callable

from cockpit.hosts.transport import Transport, TransportError

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) ?(.*)$")
BOTH_STREAMS = 'exec "$@" 2>&1'  # a constant script: the command travels as its positional parameters


class StreamFollower:
    def __init__(self, transport: Transport, argv_since: Callable[[str | None], list[str] | None], max_lines: int = 20_000,
                 restart_after_s: float = 5.0):
        self.transport = transport
        self.argv_since = argv_since
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.dropped = 0
        self.last_stamp: str | None = None
        self.restart_after_s = restart_after_s
        self.ended_at: float | None = None  # when the stream last ended by itself
        self.error: str | None = None
        self.started = 0
        self._task: asyncio.Task | None = None

    def _take(self, raw: str) -> None:
        m = STAMP.match(raw)
        if m:
            stamp, text = m.group(1), m.group(2)
            if self.last_stamp is not None and stamp <= self.last_stamp:
                return  # already read before a restart (--since is inclusive)
            self.last_stamp = stamp
        else:
            text = raw
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append(text)

    async def _run(self) -> None:
        argv = self.argv_since(self.last_stamp) or []
        try:
            stream = await self.transport.stream(["sh", "-c", BOTH_STREAMS, "sh", *argv])
            async with stream:
                async for batch in stream.batches():
                    for raw in batch:
                        self._take(raw)
            self.error = None if stream.exit_status in (0, None) else (stream.stderr_text or f"exit {stream.exit_status}")[-300:]
        except (TransportError, OSError) as exc:
            self.error = str(exc)
        finally:
            self.ended_at = time.monotonic()

    def _start(self) -> None:
        self.started += 1
        self._task = asyncio.ensure_future(self._run())

    async def poll(self, restart: bool = True) -> list[str]:
        """What came since the last poll.  `restart`: start the stream again if it ended (the manager says the
        workload runs again, or it may have lines to give); never more often than restart_after_s."""
        if self._task is None:
            self._start()
            await asyncio.sleep(0)
        elif self._task.done() and restart and (self.ended_at is None or time.monotonic() - self.ended_at >= self.restart_after_s):
            self._start()
            await asyncio.sleep(0)
        out = list(self.lines)
        self.lines.clear()
        return out

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
