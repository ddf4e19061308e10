"""One timer for many checks.

Each host's monitor checks a few things now and then: whether its samples went stale, whether its
stream went silent, whether its compute processes should be polled.  As a sleeping task per check per
host, 8 hosts woke the event loop about six times a second for them (64 hosts: fifty), each wake-up
costing a system call and a loop turn for a check of a few attribute reads.  Here every check that
wants the same period shares one sleeping task on the running loop: one wake-up per period, whatever
the number of hosts.  A check is a plain function; one that needs to wait starts its own task.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable

from cockpit.runtime import record_internal_error

Check = Callable[[], None]


class Ticker:
    def __init__(self) -> None:
        self._groups: dict[float, dict[int, Check]] = {}
        self._tasks: dict[float, asyncio.Task] = {}
        self._next_key = 0
        self.failures = 0  # checks that raised (each is the monitor's own bug: counted, never fatal to the others)

    def every(self, period: float, check: Check) -> Callable[[], None]:
        """Call `check` every `period` seconds (first after one period) until the returned function is called."""
        group = self._groups.setdefault(period, {})
        key = self._next_key
        self._next_key += 1
        group[key] = check
        task = self._tasks.get(period)
        if task is None or task.done() or task.cancelling():
            self._tasks[period] = asyncio.ensure_future(self._run(period))

        def cancel() -> None:
            checks = self._groups.get(period)
            if checks is None or checks.pop(key, None) is None or checks:
                return
            running = self._tasks.pop(period, None)
            if running is not None and not running.done():
                running.cancel()  # nothing left at this period: no wake-up for nobody

        return cancel

    async def _run(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            for check in list(self._groups.get(period, {}).values()):
                try:
                    check()
                except Exception as exc:  # noqa: BLE001 - one host's check must not stop every host's
                    self.failures += 1
                    if self.failures == 1 or self.failures % 100 == 0:  # found in errors.log, not a flood
                        record_internal_error(f"telemetry check (failure {self.failures})", exc)


_TICKERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Ticker] = weakref.WeakKeyDictionary()


def ticker() -> Ticker:
    """The running loop's ticker."""
    loop = asyncio.get_running_loop()
    found = _TICKERS.get(loop)
    if found is None:
        found = _TICKERS[loop] = Ticker()
    return found
