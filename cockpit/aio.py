"""asyncio helpers shared by the collectors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Future], rounds: int = 10, wait_s: float = 2.0) -> set[asyncio.Future]:
    """Cancel tasks and wait for them, cancelling again those still running.

    Python 3.11's asyncio.wait_for can swallow a cancellation that races with the completion of
    what it waits for; a task hit by that runs on, and a plain `await task` would hang.  This
    never swallows the caller's own cancellation.  Returns the tasks still running (normally none).
    """
    pending = {t for t in tasks if not t.done()}
    for _ in range(rounds):
        if not pending:
            break
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=wait_s)
    return pending
