"""64 hosts, a third of them dead: the live ones keep their rate, the dead ones come back by
themselves when their sshd starts, and the UI keeps answering."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from faultrig import cockpit_running, combined_known_hosts
from harness.faultreport import FaultRow, report
from harness.sshd import SshdHarness

pytestmark = pytest.mark.usefixtures("needs_sshd")

LIVE = [f"127.0.1.{n}" for n in range(1, 44)]    # 43 hosts up
DEAD = [f"127.0.2.{n}" for n in range(1, 22)]    # 21 hosts down (a third), back later
INTERVAL_MS = 1000


@pytest.fixture
def fleet(tmp_path):
    live = SshdHarness(tmp_path / "live", addresses=LIVE).start()
    dead = SshdHarness(tmp_path / "dead", addresses=DEAD)  # not started: connections refused
    live.scenario({"gpus": 8})
    dead.scenario({"gpus": 8})
    yield live, dead
    dead.stop()
    live.stop()


async def test_64_hosts_a_third_dead(fleet, tmp_path):
    live, dead = fleet
    known = combined_known_hosts(tmp_path / "known_hosts", live, dead)
    hosts = "".join(live.host_toml(f"live-{n}", a) for n, a in enumerate(LIVE))
    hosts += "".join(dead.host_toml(f"dead-{n}", a, connect_timeout=2) for n, a in enumerate(DEAD))
    config = parse_config(live.config_toml(hosts, interval_ms=INTERVAL_MS, known_hosts=known))
    live_names = [f"live-{n}" for n in range(len(LIVE))]
    dead_names = [f"dead-{n}" for n in range(len(DEAD))]
    async with cockpit_running(config, size=(200, 60)) as run:
        for name in live_names:
            await run.watch.fresh_after(name, 0.0, 60)
        for name in dead_names:
            await run.watch.state_in(run.hub, name, {HostState.UNREACHABLE}, 20)
        await asyncio.sleep(2.0)  # start-up settles: 43 panes fill and lay out once (0.2-0.3 s here)
        start = time.monotonic()
        run.probe.reset()  # the fault window, not the start-up
        for _ in range(3):
            await asyncio.sleep(2.0)
            await run.probe.key_roundtrip()
        assert all(run.hub.latest[n].state is HostState.UNREACHABLE for n in dead_names)
        await asyncio.to_thread(dead.start)  # blocking test plumbing stays off the cockpit's loop
        revived = time.monotonic()
        recoveries = [await run.watch.fresh_after(name, revived, 30) for name in dead_names]
        await run.probe.key_roundtrip()
        end = time.monotonic()
        gap = run.watch.max_gap(live_names, start, end)
        missed = run.watch.missed_ticks(live_names, start, end, INTERVAL_MS / 1000)
        row = report(FaultRow("64 hosts, 21 dead then revived", len(DEAD), run.probe.verdict(), missed,
                              recoveries, gap, note="1 Hz; others = the 43 live hosts"))
        assert missed == 0 and gap < 2.5, f"live hosts stalled: {gap:.2f} s"
        assert run.probe.answered, row.ui
    assert max(recoveries) < 10
