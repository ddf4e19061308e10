"""The shared ticker: every host's periodic checks on one sleeping task per period."""

from __future__ import annotations

import asyncio

from cockpit.telemetry.ticker import Ticker, ticker


def sleeping_tasks() -> int:
    return sum(1 for task in asyncio.all_tasks() if "Ticker._run" in repr(task.get_coro()))


async def test_many_checks_at_one_period_share_one_task_and_all_run():
    clock = Ticker()
    calls = {n: 0 for n in range(64)}
    stops = [clock.every(0.05, lambda n=n: calls.__setitem__(n, calls[n] + 1)) for n in range(64)]
    assert sleeping_tasks() == 1
    await asyncio.sleep(0.18)
    assert min(calls.values()) >= 2, calls
    for stop in stops:
        stop()
    await asyncio.sleep(0)
    assert sleeping_tasks() == 0, "nothing left to check, yet a task still wakes"


async def test_a_failing_check_is_counted_and_the_others_go_on():
    clock = Ticker()
    seen = []

    def broken():
        raise RuntimeError("a monitor's bug")

    stops = [clock.every(0.03, broken), clock.every(0.03, lambda: seen.append(1))]
    await asyncio.sleep(0.1)
    assert clock.failures >= 2 and len(seen) >= 2
    for stop in stops:
        stop()
    # where a user finds it: the first failure (then every 100th), in the state folder's errors.log
    import os
    from pathlib import Path

    logged = (Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "errors.log").read_text().splitlines()
    assert len(logged) == 1 and "telemetry check (failure 1): RuntimeError: a monitor's bug" in logged[0]


async def test_a_check_that_stops_itself_then_a_new_one_at_that_period_still_runs():
    """The silent-stream check stops itself when it closes the stream; the next stream's check
    registers at the same period and must be called (not left behind a cancelled task)."""
    clock = Ticker()
    fired = []
    stop_first = None

    def once():
        fired.append("first")
        stop_first()
        fired.append(("second", clock.every(0.03, lambda: fired.append("second"))))

    stop_first = clock.every(0.03, once)
    await asyncio.sleep(0.15)
    assert fired.count("first") == 1 and "second" in fired, fired


async def test_one_ticker_per_running_loop():
    assert ticker() is ticker()
