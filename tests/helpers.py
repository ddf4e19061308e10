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
