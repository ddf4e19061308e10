"""Faults of hosts and links, through real loopback sshds, while the cockpit runs (app and hub).

Each test keeps two steady hosts (8 GPUs each) on one sshd and faults a third host on another
sshd: the steady hosts must keep their rate, the faulted host must recover by itself, the UI
must keep answering keys, and no snapshot may show wrong data.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from faultrig import (
    cockpit_running,
    combined_known_hosts,
    history_length,
    stream_processes,
)
from harness.faultreport import FaultRow, report
from harness.sshd import SshdHarness, keygen

INTERVAL_MS = 200
INTERVAL = INTERVAL_MS / 1000.0
STEADY = ("steady-a", "steady-b")
EIGHT = {"gpus": 8}
# The steady hosts must keep their rate through the fault: at least RATE_SHARE of the samples a second they delivered in
# the same run just before it (BASELINE_S with no fault), counted side by side, not held to the clock.  A fault that holds
# the cockpit up (a connect or a frozen host waited on in the loop) stops them for its timeouts, seconds at a time; a
# loaded machine delays a tick now and then (the longest gap, reported in the row, was 1.30 s and 1.73 s once each in a
# loaded suite where 0.26 s is usual: a fixed 1 s bar on it failed runs the fault had not slowed).
BASELINE_S, RATE_SHARE = 2.0, 0.5

pytestmark = pytest.mark.usefixtures("needs_sshd")


def eight_whole_gpus(snap) -> str | None:
    """What every snapshot of these hosts must show: GPUs 0-7, each with the H200's real totals."""
    indices = [g.index for g in snap.gpus]
    if indices != list(range(8)):
        return f"GPUs {indices}"
    wrong = [g.index for g in snap.gpus if g.memory_total_mib != 143771 or g.name != "NVIDIA H200" or g.problems]
    return f"wrong values on GPUs {wrong}" if wrong else None


@pytest.fixture
def hosts(tmp_path):
    steady = SshdHarness(tmp_path / "steady", addresses=["127.0.0.1", "127.0.0.2"]).start()
    faulty = SshdHarness(tmp_path / "faulty").start()
    steady.scenario(EIGHT)
    faulty.scenario(EIGHT)
    yield steady, faulty
    faulty.stop()
    steady.stop()


def fleet_config(tmp_path, steady, faulty, faulty_extra=None, backoff_max_s=1.0, **telemetry):
    known = combined_known_hosts(tmp_path / "known_hosts", steady, faulty)
    text = steady.config_toml(
        steady.host_toml("steady-a", "127.0.0.1") + steady.host_toml("steady-b", "127.0.0.2")
        + faulty.host_toml("faulty", **(faulty_extra or {})),
        interval_ms=INTERVAL_MS, known_hosts=known, **telemetry,
    ).replace("backoff_max_s = 1.0", f"backoff_max_s = {backoff_max_s}")
    path = tmp_path / "cockpit.toml"
    path.write_text(text)
    return parse_config(text, str(path)), path


async def fault_window(run, names=(*STEADY, "faulty"), timeout=20.0) -> float:
    """Wait until every host sent a sample; the window measured (UI stalls, gaps) starts then, after start-up."""
    for name in names:
        await run.watch.fresh_after(name, 0.0, timeout)
    quiet = time.monotonic()  # the same hosts with no fault yet, side by side with what follows
    await asyncio.sleep(BASELINE_S)
    run.baseline_rate = steady_rate(run, quiet, time.monotonic())
    run.probe.reset()
    return time.monotonic()


async def outage(run, down, up, hold_s: float) -> tuple[float, int]:
    """One outage of the faulted host: down(), seen down, a key pressed, hold_s, up().  Returns the
    seconds from up() to its next fresh sample, and the samples its history lost meanwhile."""
    await asyncio.sleep(0.6)
    kept = history_length(run.hub, "faulty")
    await asyncio.to_thread(down)  # blocking test plumbing stays off the cockpit's loop
    await run.watch.state_in(run.hub, "faulty", {HostState.UNREACHABLE, HostState.STALE}, 10)
    await run.probe.key_roundtrip()
    await asyncio.sleep(hold_s)
    await asyncio.to_thread(up)
    back = time.monotonic()
    recovery = await run.watch.fresh_after("faulty", back, 20)
    return recovery, max(0, kept - history_length(run.hub, "faulty"))


def steady_rate(run, start: float, end: float) -> float:
    """Fresh samples a second, per steady host, between start and end."""
    count = sum(1 for name in STEADY for t in run.watch.fresh[name] if start < t < end)
    return count / (len(STEADY) * max(end - start, 1e-9))


def finish(run, fault, injected, recoveries, start, lost_history=0, note=""):
    """Report the row, then hold the cockpit to the suite's bar."""
    end = time.monotonic()
    missed = run.watch.missed_ticks(STEADY, start, end, INTERVAL)
    gap = run.watch.max_gap(STEADY, start, end)
    row = report(FaultRow(fault, injected, run.probe.verdict(), missed + lost_history + len(run.watch.wrong),
                          recoveries, gap, note))
    assert not run.watch.wrong, run.watch.wrong[:5]
    assert lost_history == 0, "the faulted host's history lost samples"
    rate = steady_rate(run, start, end)
    assert rate >= RATE_SHARE * run.baseline_rate, (f"steady hosts slowed by the fault: {rate:.2f} samples/s each, "
                                                    f"{run.baseline_rate:.2f} with no fault (longest gap {gap:.2f} s)")
    assert run.probe.answered, run.probe.verdict()
    return row


async def test_sshd_killed_and_restarted(hosts, tmp_path):
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty)
    recoveries, lost = [], 0
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        for _ in range(3):
            recovery, history_lost = await outage(run, faulty.stop, faulty.start, 0.5)
            recoveries.append(recovery)
            lost += history_lost
        finish(run, "sshd killed, then restarted", 3, recoveries, start, lost)
    assert max(recoveries) < 5


async def test_sshd_frozen_then_resumed(hosts, tmp_path):
    """SIGSTOP on sshd and its sessions: keepalives (1 s x 3) notice, reconnects time out, and after
    SIGCONT the host comes back by itself."""
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty, {"keepalive_interval": 1, "connect_timeout": 2}, stale_after_s=1.0)
    recoveries, lost = [], 0
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        for _ in range(2):
            # held past the keepalive limit: the connection is given up
            recovery, history_lost = await outage(run, faulty.freeze, faulty.thaw, 4.5)
            recoveries.append(recovery)
            lost += history_lost
        finish(run, "sshd frozen 4.5 s (SIGSTOP), resumed", 2, recoveries, start, lost)
    assert max(recoveries) < 8


async def test_remote_stream_killed(hosts, tmp_path):
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty)
    recoveries, killed = [], 0
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        for _ in range(3):
            await asyncio.sleep(0.6)
            streams = stream_processes(faulty)
            assert len(streams) == 1, streams
            streams[0].kill()
            killed += 1
            gone = time.monotonic()
            await run.probe.key_roundtrip()
            recoveries.append(await run.watch.fresh_after("faulty", gone + INTERVAL, 15))
        monitor = run.hub.monitors["faulty"]
        assert monitor.streams_started == 4
        finish(run, "remote nvidia-smi stream killed", killed, recoveries, start)
    assert max(recoveries) < 3


async def test_truncated_and_garbage_lines(hosts, tmp_path):
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty)
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        faulty.scenario({**EIGHT, "garbage_every": 2, "truncate_every": 3})
        for _ in range(4):
            await asyncio.sleep(1.5)
            await run.probe.key_roundtrip()
        faulty.scenario(EIGHT)
        await asyncio.sleep(0.5)
        injected = (faulty.scenario_dir / "injected.127.0.0.1.log").read_text().split()
        skipped = run.hub.monitors["faulty"].ticks_skipped
        # the faulted host kept its rate apart from the ticks whose row was garbled: counted side by side with the steady
        # hosts in the same window (a loaded machine slows all three alike), not against the clock
        end = time.monotonic()
        counts = {name: sum(1 for t in run.watch.fresh[name] if start < t < end) for name in (*STEADY, "faulty")}
        assert 4 * (counts["faulty"] + skipped) >= 3 * min(counts[name] for name in STEADY), (counts, skipped)
        finish(run, "truncated and garbage lines", len(injected), [], start,
               note=f"{injected.count('truncated')} rows cut, {injected.count('garbage')} garbage lines; "
                    f"{skipped} ticks with a cut row skipped, none shown")
    assert injected.count("truncated") >= 6 and injected.count("garbage") >= 10
    assert skipped == injected.count("truncated")


async def test_flapping_host(hosts, tmp_path):
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty, {"connect_timeout": 2})
    recoveries, lost = [], 0
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        for _ in range(5):
            recovery, history_lost = await outage(run, faulty.stop, faulty.start, 1.0)
            recoveries.append(recovery)
            lost += history_lost
        finish(run, "host flapping (5 outages of ~1.5 s, ~1 s apart)", 5, recoveries, start, lost)
    # the backoff is reset by each good sample, so the fifth recovery is no slower than the first
    assert max(recoveries) < 3


async def test_host_key_changes(hosts, tmp_path):
    """The host comes back with another key: refused (never shown as up) until the operator trusts
    the new key; then it recovers by itself within a second of known_hosts changing."""
    steady, faulty = hosts
    config, path = fleet_config(tmp_path, steady, faulty, {"connect_timeout": 2})
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        await asyncio.to_thread(faulty.stop)
        for suffix in ("", ".pub"):
            os.remove(str(faulty.host_key) + suffix)
        await asyncio.to_thread(keygen, faulty.host_key, "rotated")
        await asyncio.to_thread(faulty.start)
        rotated = time.monotonic()
        await run.watch.state_in(run.hub, "faulty", {HostState.HOST_KEY_CHANGED}, 10)
        assert "HOST KEY CHANGED" in run.hub.latest["faulty"].error
        await asyncio.sleep(2.0)
        await run.probe.key_roundtrip()
        assert [t for t in run.watch.fresh["faulty"] if t > rotated] == [], "a changed key was accepted"
        # the operator's fix: drop the old entry, trust the new key (both real commands)
        entry = f"[127.0.0.1]:{faulty.port}"
        await asyncio.to_thread(subprocess.run, ["ssh-keygen", "-R", entry, "-f", str(tmp_path / "known_hosts")],
                                check=True, capture_output=True)
        trust = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "cockpit", "trust", "faulty", "--yes", "--config", str(path)],
                               capture_output=True, text=True, timeout=60)
        assert trust.returncode == 0, trust.stderr
        trusted = time.monotonic()
        recovery = await run.watch.fresh_after("faulty", trusted, 10)
        finish(run, "host key changed, then trusted", 1, [recovery], start,
               note="refused until trusted; recovery counted from `cockpit trust`")
    assert recovery < 3


async def test_slow_host(hosts, tmp_path):
    """Two seconds per reply: the slow host shows what it has, the others keep their rate."""
    steady, faulty = hosts
    faulty.scenario({**EIGHT, "delay_s": 2.0})
    config, _ = fleet_config(tmp_path, steady, faulty, stale_after_s=3.0)
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run, STEADY)
        await run.watch.fresh_after("faulty", 0.0, 20)
        for _ in range(3):
            await asyncio.sleep(1.5)
            await run.probe.key_roundtrip()
        slow_samples = len(run.watch.fresh["faulty"])
        assert run.hub.latest["faulty"].state is HostState.UP
        faulty.scenario(EIGHT)
        fast = time.monotonic()
        # recovered: back at its own rate (three samples within four intervals)
        while True:
            recent = [t for t in run.watch.fresh["faulty"] if t > fast]
            if len(recent) >= 3 and recent[-1] - recent[-3] < 4 * INTERVAL:
                break
            assert time.monotonic() - fast < 10, "the host did not get its rate back"
            await asyncio.sleep(0.02)
        finish(run, "slow host (2 s per reply)", slow_samples, [recent[-3] - fast], start,
               note="recovery: back at its rate after the delay ended")


async def test_reconnect_now_after_a_long_outage(hosts, tmp_path):
    """Down long enough for the backoff to grow: the pane counts down to the next attempt, and R
    (reconnect now) on the host brings it back at once instead of after the wait."""
    steady, faulty = hosts
    config, _ = fleet_config(tmp_path, steady, faulty, {"connect_timeout": 2}, backoff_max_s=60.0)
    async with cockpit_running(config, check=eight_whole_gpus) as run:
        start = await fault_window(run)
        await asyncio.to_thread(faulty.stop)
        while not (run.hub.latest["faulty"].retry_at and run.hub.latest["faulty"].retry_at - time.time() > 3.0):
            assert time.monotonic() - start < 30, "the backoff never grew"
            await asyncio.sleep(0.05)
        waiting = run.hub.latest["faulty"].retry_at - time.time()
        await asyncio.sleep(0.6)  # a repaint of the title
        assert "retry in" in str(run.app.panes["faulty"].border_title)
        await asyncio.to_thread(faulty.start)
        back = time.monotonic()
        run.app.panes["faulty"].focus()
        await run.pilot.press("R")
        recovery = await run.watch.fresh_after("faulty", back, 10)
        await run.probe.key_roundtrip()
        finish(run, "long outage, then R (reconnect now)", 1, [recovery], start,
               note=f"the next attempt was {waiting:.1f} s away when the host came back")
    assert recovery < 2.0 < waiting
