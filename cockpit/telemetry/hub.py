"""The telemetry hub: one collector per host, the latest snapshot and a bounded history of each,
and a topic (`snapshots`) that tells subscribers (the runbook's gates, the UI) of every new one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cockpit.aio import cancel_and_wait
from cockpit.config import Config, HostConfig
from cockpit.events import Topic
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.pool import TransportPool
from cockpit.hosts.state import HostState
from cockpit.telemetry.history import HostHistory
from cockpit.telemetry.model import HostSnapshot
from cockpit.telemetry.monitor import HostMonitor, NvmlMonitor, SmiMonitor

Subscriber = Callable[[HostSnapshot], None]


def make_monitor(host: HostConfig, config: Config, pool: TransportPool, publish) -> HostMonitor:
    transport = pool.get(host)
    if host.local and host.telemetry in ("auto", "nvml"):
        nvml = NvmlMonitor.load()
        if nvml is not None:
            return NvmlMonitor(host, transport, config.telemetry, publish, config.ssh, nvml=nvml)
    return SmiMonitor(host, transport, config.telemetry, publish, config.ssh)


class TelemetryHub:
    def __init__(self, config: Config, pool: TransportPool | None = None, log: CommandLog | None = None,
                 monitor_factory=make_monitor):
        self.config = config
        self.pool = pool or TransportPool(config, log)
        self.log = self.pool.log
        self.latest: dict[str, HostSnapshot] = {
            h.name: HostSnapshot(name=h.name, state=HostState.CONNECTING, roles=h.roles) for h in config.hosts
        }
        self.history: dict[str, HostHistory] = {h.name: HostHistory(config.telemetry.history) for h in config.hosts}
        self.monitors: dict[str, HostMonitor] = {}
        self._factory = monitor_factory
        self.snapshots: Topic[HostSnapshot] = Topic()
        self._tasks: list[asyncio.Task] = []
        self.published = 0
        watched = [h for h in config.hosts if h.telemetry == "prometheus"]
        self.prometheus = None
        if watched and config.prometheus is not None:
            from cockpit.telemetry.prometheus import PrometheusFleet

            self.prometheus = PrometheusFleet(config.prometheus, watched)  # one query per interval for all of them

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        return self.snapshots.subscribe(subscriber)

    def publish(self, snapshot: HostSnapshot) -> None:
        self.published += 1
        self.latest[snapshot.name] = snapshot
        self.history[snapshot.name].add(snapshot)
        self.snapshots.publish(snapshot)

    def monitor_for(self, host: HostConfig) -> HostMonitor:
        monitor: HostMonitor | None = self.monitors.get(host.name)
        if monitor is None:
            if host.telemetry == "prometheus" and self.prometheus is not None:
                from cockpit.telemetry.prometheus import PrometheusMonitor

                monitor = PrometheusMonitor(host, self.prometheus, self.publish)
            else:
                monitor = self._factory(host, self.config, self.pool, self.publish)
            self.monitors[host.name] = monitor
        return monitor

    async def gate_sample(self, host: HostConfig, timeout: float | None = None) -> HostSnapshot:
        """A sample a GPU gate can rely on: GPUs *and* the processes on them.  A host read through
        Prometheus has no process list there (DCGM exports none): it is asked over SSH, or the
        sample says plainly that its processes could not be checked."""
        if host.telemetry != "prometheus":
            return await self.monitor_for(host).sample_once(timeout)
        if not host.ssh_reachable:
            return HostSnapshot(name=host.name, state=HostState.DRIVER_ERROR, roles=host.roles, source="prometheus",
                                error=f"its processes could not be checked: {host.name} is read through Prometheus only (no address "
                                "to reach it by SSH), and Prometheus has no process list; a GPU gate needs one")
        return await SmiMonitor(host, self.pool.get(host), self.config.telemetry, lambda _s: None, self.config.ssh).sample_once(timeout)

    def retry_now(self, names=None) -> list[str]:
        """Reconnect these hosts (all that are waiting, when None) now instead of after their backoff."""
        woken = []
        for name, monitor in self.monitors.items():
            if (names is None or name in names) and monitor.retry_at is not None:
                monitor.retry_now()
                woken.append(name)
        return woken

    def start(self) -> None:
        """Start every host's collector, connects staggered so a big fleet does not hit MaxStartups."""
        stagger = self.config.ssh.stagger_ms / 1000.0
        for position, host in enumerate(self.config.hosts):
            self._tasks.append(asyncio.ensure_future(self._run_later(host, position * stagger)))

    async def _run_later(self, host: HostConfig, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await self.monitor_for(host).run()

    async def sample_once(self, timeout: float | None = None) -> list[HostSnapshot]:
        """Every host once, concurrently: what `cockpit status --once` prints."""
        async def one(host: HostConfig) -> HostSnapshot:
            snapshot = await self.monitor_for(host).sample_once(timeout)
            self.publish(snapshot)
            return snapshot

        return list(await asyncio.gather(*(one(h) for h in self.config.hosts)))

    async def ticks(self, stop: asyncio.Event):
        """The latest snapshot of every host once per telemetry interval (ages grow on a host that
        went quiet), until `stop` is set: what `status --watch` prints."""
        interval = self.config.telemetry.interval_ms / 1000.0
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                return
            yield [self.latest[h.name] for h in self.config.hosts]

    async def stop(self) -> None:
        for monitor in self.monitors.values():
            monitor.stop_requested = True
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        await self.pool.close()
