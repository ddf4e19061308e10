"""Small helpers shared by tests."""

from __future__ import annotations

import asyncio
import time


async def eventually(predicate, timeout: float = 10.0, interval: float = 0.05, what: str = "condition"):
    """Wait until predicate() is truthy; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


class LogWriter:
    """A real process that holds a log open for writing, as `nohup trainer > train.log 2>&1 &` leaves
    the trainer (a STAND-IN for the trainer: no GPU here).  What it writes is the test's to choose:
    by default nothing (the test appends the recorded lines itself); `argv` runs a replaying script."""

    def __init__(self, log, argv=None, append: bool = True):
        import subprocess

        with open(log, "ab" if append else "wb") as handle:
            self.proc = subprocess.Popen(argv or ["sleep", "600"], stdout=handle, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self, sig: int = 9) -> None:
        import os

        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        self.proc.wait(10)

    def __enter__(self) -> "LogWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()
