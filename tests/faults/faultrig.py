"""The fault suite's rig: the cockpit running for real (Textual app headless, telemetry hub, real
loopback sshds), a watch on every snapshot it receives, a probe of the UI's responsiveness, and the
report table.

What the columns mean:
- injected: how many times the fault was caused (counted where it happened, not planned);
- UI responsive: the longest event-loop stall seen while the faults ran (from the moment every host
  was up, so start-up is not counted), and the slowest round trip of two keys (open help with `?`,
  close it) pressed after each injection; "yes" when both stay under STALL_LIMIT_S and KEY_LIMIT_S (the figures
  are the report's: the suite asserts only that every key was answered, on a loaded machine too);
- data lost: samples the other hosts missed (each gap over 3 intervals counts its missing ticks),
  history the faulted host lost, snapshots that showed wrong values, or records torn or missing after
  a crash; must be 0;
- recovery: from the end of the fault (or the restart) to the first fresh sample (or resumed run).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.telemetry.model import HostSnapshot

STALL_LIMIT_S = 0.5
KEY_LIMIT_S = 1.5  # two keys, two screen changes


class Watch:
    """Every snapshot the hub publishes, kept per host with the monotonic time it arrived."""

    def __init__(self, hub: TelemetryHub, check: Callable[[HostSnapshot], str | None] | None = None):
        self.fresh: dict[str, list[float]] = defaultdict(list)
        self.states: dict[str, list[tuple[float, HostState]]] = defaultdict(list)
        self.wrong: list[str] = []
        self._sampled: dict[str, float | None] = {}
        self._check = check
        hub.subscribe(self._on_snapshot)

    def _on_snapshot(self, snap: HostSnapshot) -> None:
        now = time.monotonic()
        if snap.state is HostState.UP and snap.sampled_at is not None and snap.sampled_at != self._sampled.get(snap.name):
            self._sampled[snap.name] = snap.sampled_at
            self.fresh[snap.name].append(now)
            if self._check is not None:
                problem = self._check(snap)
                if problem:
                    self.wrong.append(f"{snap.name}: {problem}")
        states = self.states[snap.name]
        if not states or states[-1][1] is not snap.state:
            states.append((now, snap.state))

    def gaps(self, names, start: float, end: float) -> list[float]:
        out = []
        for name in names:
            times = [start, *[t for t in self.fresh[name] if start < t < end], end]
            out.extend(b - a for a, b in zip(times, times[1:]))
        return out

    def max_gap(self, names, start: float, end: float) -> float:
        return max(self.gaps(names, start, end), default=0.0)

    def missed_ticks(self, names, start: float, end: float, interval: float) -> int:
        """Ticks the hosts missed: a gap over three intervals counts every tick it swallowed."""
        return sum(round(gap / interval) - 1 for gap in self.gaps(names, start, end) if gap > 3 * interval)

    async def fresh_after(self, name: str, since: float, timeout: float) -> float:
        """Wait for a fresh sample of `name` after `since`; seconds from `since` to it."""
        deadline = time.monotonic() + timeout
        while True:
            later = [t for t in self.fresh[name] if t > since]
            if later:
                return later[0] - since
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}: no fresh sample within {timeout} s (states {self.states[name][-4:]})")
            await asyncio.sleep(0.02)

    async def state_in(self, hub: TelemetryHub, name: str, states, timeout: float) -> HostState:
        deadline = time.monotonic() + timeout
        while hub.latest[name].state not in states:
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}: state {hub.latest[name].state} not in {states} after {timeout} s")
            await asyncio.sleep(0.02)
        return hub.latest[name].state


class UiProbe:
    """Is the UI still answering?  The longest event-loop stall, and a key's round trip."""

    def __init__(self, app, pilot):
        self.app = app
        self.pilot = pilot
        self.max_stall = 0.0
        self.key_times: list[float] = []
        self.stalls: list[tuple[float, float]] = []  # (when, how long) of each stall over 100 ms
        self._task: asyncio.Task | None = None

    def reset(self) -> None:
        """Measure from here on (the fault window), not the start-up before it."""
        self.max_stall = 0.0
        self.stalls = []

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._measure())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _measure(self) -> None:
        step = 0.02
        while True:
            started = time.monotonic()
            await asyncio.sleep(step)
            stall = time.monotonic() - started - step
            self.max_stall = max(self.max_stall, stall)
            if stall > 0.1:
                self.stalls.append((time.monotonic(), stall))

    async def key_roundtrip(self) -> float:
        from cockpit.ui.screens.help import HelpScreen

        started = time.monotonic()
        await self.pilot.press("question_mark")
        while not isinstance(self.app.screen, HelpScreen):
            if time.monotonic() - started > 10:
                raise AssertionError("help never opened: the UI is not answering keys")
            await asyncio.sleep(0.01)
        await self.pilot.press("escape")
        while isinstance(self.app.screen, HelpScreen):
            if time.monotonic() - started > 10:
                raise AssertionError("help never closed: the UI is not answering keys")
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - started
        self.key_times.append(elapsed)
        return elapsed

    @property
    def answered(self) -> bool:
        """Every key pressed made its round trip (key_roundtrip raises when the UI never answers): what the suite asserts;
        how fast is the report's figure, never a test's threshold (a loaded 2-core machine runs the suite)."""
        return bool(self.key_times)

    @property
    def responsive(self) -> bool:
        return self.max_stall < STALL_LIMIT_S and bool(self.key_times) and max(self.key_times) < KEY_LIMIT_S

    def verdict(self) -> str:
        keys = f"{max(self.key_times) * 1000:.0f} ms" if self.key_times else "none pressed"
        return f"{'yes' if self.responsive else 'NO'} (stall {self.max_stall * 1000:.0f} ms, key {keys})"


@dataclass
class Running:
    app: object
    pilot: object
    hub: TelemetryHub
    watch: Watch
    probe: UiProbe
    baseline_rate: float = 0.0  # the steady hosts' samples a second with no fault, measured in this run before the fault


@contextlib.asynccontextmanager
async def cockpit_running(config, check=None, size=(160, 48)):
    """The cockpit as an operator runs it: the Textual app (headless) over a live telemetry hub."""
    from cockpit.ui.app import CockpitApp

    hub = TelemetryHub(config)
    watch = Watch(hub, check)
    app = CockpitApp(config, hub=hub)
    async with app.run_test(size=size) as pilot:
        hub.start()
        probe = UiProbe(app, pilot)
        probe.start()
        try:
            yield Running(app, pilot, hub, watch, probe)
        finally:
            await probe.stop()
            await hub.stop()


def combined_known_hosts(path, *harnesses):
    """One known_hosts file trusting several loopback sshds (each has its own host key)."""
    path.write_text("".join(h.known_hosts.read_text() for h in harnesses))
    return path


def stream_processes(harness):
    """The stand-in `nvidia-smi ... -lms` processes that a harness's sessions are running."""
    import psutil

    found = []
    for proc in harness.procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    cmdline = child.cmdline()
                    if any(part.endswith("nvidia-smi") for part in cmdline) and "-lms" in cmdline:
                        found.append(child)
    return found


def history_length(hub: TelemetryHub, name: str) -> int:
    """Samples the host's bounded history holds (its longest GPU series)."""
    return max((len(h.memory_used_mib) for h in hub.history[name].gpus.values()), default=0)
