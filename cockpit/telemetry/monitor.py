"""Per-host telemetry collectors.

`SmiMonitor` keeps one `nvidia-smi --query-gpu ... -lms N` process streaming over the host's one
connection and polls compute processes on a slower clock; `NvmlMonitor` reads a local GPU through
NVML.  Both publish immutable `HostSnapshot`s through a callback and never raise out of `run()`:
every failure becomes a host state, followed by a reconnect with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from cockpit.aio import cancel_and_wait
from cockpit.config import HostConfig, SshSettings, TelemetrySettings
from cockpit.hosts.backoff import Backoff
from cockpit.hosts.state import HostState
from cockpit.hosts.transport import Transport, TransportError
from cockpit.telemetry.model import ComputeProcess, GpuSample, HostSnapshot
from cockpit.telemetry.ticker import ticker
from cockpit.telemetry.smi import (
    FailureKind,
    GpuStreamAssembler,
    LostGpu,
    apps_query_argv,
    classify_failure,
    gpu_query_argv,
    parse_apps,
    parse_gpu_table,
)

Publish = Callable[[HostSnapshot], None]


class GpuTableBuilder:
    """Remembers each GPU's identity so a GPU that falls off the bus keeps its row, marked lost."""

    def __init__(self) -> None:
        self._by_bus: dict[str, GpuSample] = {}

    def build(self, gpus: list[GpuSample], lost: list[LostGpu]) -> tuple[GpuSample, ...]:
        for gpu in gpus:
            if gpu.bus_id:
                self._by_bus[_norm_bus(gpu.bus_id)] = gpu
        rows = list(gpus)
        present = {g.index for g in gpus}
        for item in lost:
            known = self._by_bus.get(_norm_bus(item.bus_id or ""))
            if known is not None and known.index in present:
                continue
            index = known.index if known is not None else -1 - len(rows)
            rows.append(
                GpuSample(
                    index=index,
                    uuid=known.uuid if known else None,
                    name=known.name if known else None,
                    bus_id=item.bus_id,
                    memory_total_mib=known.memory_total_mib if known else None,
                    problems=(item.message,),
                    lost=True,
                )
            )
        return tuple(sorted(rows, key=lambda g: g.index))


def _norm_bus(bus: str) -> str:
    bus = bus.lower()
    # nvidia-smi writes 00000000:3B:00.0 in tables and 0000:3b:00.0 in some messages.
    return bus[-7:] if len(bus) >= 7 else bus


class HostMonitor(Protocol):
    """What the hub asks of a host's collector, whichever way it reads the GPUs (nvidia-smi over the
    host's transport, NVML in this process, the shared Prometheus query)."""

    retry_at: float | None
    stop_requested: bool

    async def run(self) -> None: ...

    async def sample_once(self, timeout: float | None = None) -> HostSnapshot: ...

    def snapshot(self) -> HostSnapshot: ...

    def retry_now(self) -> None: ...


class _MonitorBase:
    async def sample_once(self, timeout: float | None = None) -> HostSnapshot:
        """One sample now (each monitor's own way: nvidia-smi once, NVML, Prometheus)."""
        raise NotImplementedError

    def __init__(self, host: HostConfig, transport: Transport, telemetry: TelemetrySettings, publish: Publish,
                 ssh: SshSettings | None = None, clock: Callable[[], float] = time.time):
        self.host = host
        self.transport = transport
        self.telemetry = telemetry
        self._publish = publish
        self._clock = clock
        ssh = ssh or SshSettings()
        self.backoff = Backoff(ssh.backoff_initial_s, ssh.backoff_max_s)
        self.state = HostState.CONNECTING
        self.error: str | None = None
        self.gpus: tuple[GpuSample, ...] = ()
        self.processes: tuple[ComputeProcess, ...] = ()
        self.sampled_at: float | None = None
        self.source: str | None = None
        self.samples = 0
        self.stop_requested = False  # checked by the loops too: Python 3.11's wait_for can lose a cancellation
        self.retry_at: float | None = None
        self._wake = asyncio.Event()
        self._table = GpuTableBuilder()

    def snapshot(self) -> HostSnapshot:
        return HostSnapshot(
            name=self.host.name, state=self.state, error=self.error, gpus=self.gpus, processes=self.processes,
            sampled_at=self.sampled_at, source=self.source, roles=self.host.roles, retry_at=self.retry_at,
        )

    def retry_now(self) -> None:
        """Cut the reconnect wait short (the operator knows the host is back)."""
        self.backoff.reset()
        self._wake.set()

    async def _pause(self, seconds: float) -> bool:
        """Wait before the next attempt, shown as a countdown; True when retry_now() cut it short."""
        self._wake.clear()
        self.retry_at = self._clock() + seconds
        self._emit()
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self.retry_at = None

    def _emit(self) -> None:
        self._publish(self.snapshot())

    def _set_state(self, state: HostState, error: str | None = None) -> None:
        if state != self.state or error != self.error:
            self.state, self.error = state, error
            self._emit()

    def _set_processes(self, processes: list[ComputeProcess]) -> None:
        by_uuid = {g.uuid: g.index for g in self.gpus if g.uuid}
        fixed = tuple(
            p if p.gpu_index is not None or p.gpu_uuid not in by_uuid
            else ComputeProcess(p.pid, p.name, p.used_memory_mib, p.gpu_uuid, by_uuid[p.gpu_uuid])
            for p in processes
        )
        if fixed != self.processes:
            self.processes = fixed
            self._emit()

    def _set_gpus(self, gpus: list[GpuSample], lost: list[LostGpu], source: str) -> None:
        self.gpus = self._table.build(gpus, lost)
        self.sampled_at = self._clock()
        self.source = source
        self.samples += 1
        self.backoff.reset()
        if not self.gpus:
            self.state, self.error = HostState.UP, "nvidia-smi: No devices were found"
        else:
            self.state, self.error = HostState.UP, None
        self._emit()

    async def _wait_for_user_fix(self, longest: float) -> None:
        def signature() -> list[tuple[str, int | None, int | None]]:
            out: list[tuple[str, int | None, int | None]] = []
            for path in self.transport.user_files():
                try:
                    stat = os.stat(path)
                    out.append((path, stat.st_mtime_ns, stat.st_size))
                except OSError:
                    out.append((path, None, None))
            return out

        before = signature()
        deadline = time.monotonic() + longest
        self._wake.clear()
        self.retry_at = self._clock() + longest
        self._emit()
        try:
            while not self.stop_requested and time.monotonic() < deadline and not self._wake.is_set():
                await asyncio.sleep(0.5)
                if signature() != before:
                    return
        finally:
            self.retry_at = None

    def _watch_staleness(self) -> Callable[[], None]:
        """Mark the host stale when samples stop arriving (the age is shown with it), checked on the
        loop's shared ticker; returns the function that stops the checks."""
        stale_after = self.telemetry.stale_after

        def check() -> None:
            if self.stop_requested or self.sampled_at is None or self.state not in (HostState.UP, HostState.STALE):
                return
            age = self._clock() - self.sampled_at
            if age > stale_after:
                self._set_state(HostState.STALE, f"no sample for {age:.0f} s")

        return ticker().every(max(0.5, stale_after / 2), check)


class SmiMonitor(_MonitorBase):
    """Telemetry through nvidia-smi over any transport (SSH or local)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.restart_after = max(30.0, 6 * self.telemetry.stale_after)
        self.streams_started = 0
        self.ticks_skipped = 0
        self._short_ticks = 0
        self._last_line = 0.0
        self._silenced = False

    def _tick_is_short(self, gpus: list[GpuSample], lost: list[LostGpu]) -> bool:
        """A streamed tick missing a GPU the last one had, with no line saying a GPU was lost, had a
        row garbled on the way: it is skipped (the previous sample stands one interval longer)
        rather than shown with a GPU gone.  Three such ticks in a row mean the GPU really went."""
        had = {g.index for g in self.gpus if not g.lost}
        if lost or not had - {g.index for g in gpus}:
            self._short_ticks = 0
            return False
        self._short_ticks += 1
        if self._short_ticks >= 3:
            self._short_ticks = 0
            return False
        self.ticks_skipped += 1
        return True

    def _restart_when_silent(self, stream, helpers: list[asyncio.Future]) -> Callable[[], None]:
        """A stream with no output for restart_after seconds is stuck (link or driver): close it,
        and the run loop reconnects.  Checked on the shared ticker, not once per line; returns the
        function that stops the checks."""
        def check() -> None:
            if not self._silenced and time.monotonic() - self._last_line > self.restart_after:
                self._silenced = True
                helpers.append(asyncio.ensure_future(stream.close()))

        return ticker().every(self.restart_after / 4, check)

    async def sample_once(self, timeout: float | None = None) -> HostSnapshot:
        """Connect, read every GPU and the compute processes once, and return the snapshot."""
        timeout = timeout or (self.host.connect_timeout + 15.0)
        try:
            await asyncio.wait_for(self._sample_once(), timeout)
        except asyncio.TimeoutError:
            if self.state in (HostState.CONNECTING,):
                self.state, self.error = HostState.UNREACHABLE, f"no answer within {timeout:g} s"
            else:
                self.state, self.error = HostState.DRIVER_ERROR, f"nvidia-smi gave no answer within {timeout:g} s"
        except TransportError as exc:
            self.state, self.error = exc.state, str(exc)
        except Exception as exc:  # noqa: BLE001 - one host's surprise must not sink the others
            self.state, self.error = HostState.DRIVER_ERROR, f"internal error: {type(exc).__name__}: {exc}"
        return self.snapshot()

    async def _sample_once(self) -> None:
        await self.transport.connect()
        if await self._query_gpus():
            await self._poll_processes_once()

    async def _query_gpus(self) -> bool:
        result = await self.transport.run(gpu_query_argv(self.host.nvidia_smi), timeout=30)
        failure = classify_failure(result.output, result.exit_status)
        if failure is not None and failure.kind is FailureKind.NO_DEVICES:
            self._set_gpus([], [], "nvidia-smi")
            return True
        if failure is not None:
            self._set_state(HostState.DRIVER_ERROR, self._failure_text(failure.message))
            return False
        if result.timed_out:
            self._set_state(HostState.DRIVER_ERROR, "nvidia-smi did not answer within 30 s (driver hung?)")
            return False
        gpus, lost = parse_gpu_table(result.stdout)
        if not gpus and not lost:
            detail = (result.stdout + result.stderr).strip().splitlines()
            text = detail[-1][:200] if detail else f"exit status {result.exit_status}"
            self._set_state(HostState.DRIVER_ERROR, f"nvidia-smi gave no GPU rows: {text}")
            return False
        self._set_gpus(gpus, lost, "nvidia-smi")
        return True

    def _failure_text(self, message: str) -> str:
        if self.host.local and "not found" in message:
            return "this machine has no NVIDIA GPU driver (nvidia-smi not found)"
        return message

    async def _poll_processes_once(self) -> None:
        result = await self.transport.run(apps_query_argv(self.host.nvidia_smi), timeout=30)
        if result.exit_status == 0:
            self._set_processes(parse_apps(result.stdout, self.gpus))

    def _poll_processes(self, helpers: list[asyncio.Future]) -> Callable[[], None]:
        """Compute processes come and go with GPU memory: poll now, then when memory moved (checked
        every processes_interval_s on the shared ticker), and every processes_max_age_s regardless;
        one poll at a time.  nvidia-smi cannot stream them (a compute-apps loop prints nothing per
        tick when there is no process).  Returns the function that stops the checks."""
        polled_memory: tuple | None = None
        polled_at = 0.0
        running: asyncio.Future | None = None

        async def poll() -> None:
            with contextlib.suppress(TransportError):
                await self._poll_processes_once()

        def check() -> None:
            nonlocal polled_memory, polled_at, running
            if running is not None and not running.done():
                return
            memory = tuple(g.memory_used_mib for g in self.gpus)
            if memory != polled_memory or time.monotonic() - polled_at >= self.telemetry.processes_max_age_s:
                polled_memory, polled_at = memory, time.monotonic()
                running = asyncio.ensure_future(poll())
                helpers[:] = [h for h in helpers if not h.done()] + [running]

        check()
        return ticker().every(self.telemetry.processes_interval_s, check)

    async def run(self) -> None:
        """Monitor forever (until cancelled): connect, stream, and reconnect after any failure."""
        self._emit()
        while not self.stop_requested:
            try:
                await self.transport.connect()
                if await self._query_gpus():
                    await self._stream()
            except TransportError as exc:
                self._set_state(exc.state, str(exc))
                if exc.state.needs_user:
                    # Retrying cannot fix keys: try again when the user edits known_hosts or the
                    # key (`cockpit trust`, ssh-keygen -R), or slowly in case the host changed back.
                    await self._wait_for_user_fix(max(30.0, self.backoff.maximum))
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a collector must never die silently
                self._set_state(HostState.DRIVER_ERROR, f"internal error: {type(exc).__name__}: {exc}")
            await self._pause(self.backoff.next_delay())

    async def _stream(self) -> None:
        assembler = GpuStreamAssembler(expected_max_index=max((g.index for g in self.gpus if not g.lost), default=None))
        recent_text: deque[str] = deque(maxlen=20)
        stream = await self.transport.stream(gpu_query_argv(self.host.nvidia_smi, self.telemetry.interval_ms))
        self.streams_started += 1
        helpers: list[asyncio.Future] = []  # the tasks the checks start (a processes poll, a close)
        self._last_line = time.monotonic()
        stop_checks = [self._poll_processes(helpers), self._watch_staleness(), self._restart_when_silent(stream, helpers)]
        try:
            async with stream:
                async for lines in stream.batches():  # a tick arrives as one write: one wake-up
                    self._last_line = time.monotonic()
                    for line in lines:
                        tick = assembler.feed(line)
                        if tick is None:
                            if line.strip() and not line[:1].isdigit():
                                recent_text.append(line.strip())
                            continue
                        if not self._tick_is_short(*tick):
                            self._set_gpus(*tick, source="nvidia-smi")
        finally:
            for stop in stop_checks:
                stop()
            for helper in helpers:
                helper.cancel()
            # never swallows a cancellation of this task, and re-cancels a helper that lost its own
            await cancel_and_wait(helpers)
        # The stream ended: say why.
        if self._silenced:
            self._silenced = False
            raise TransportError(f"no output from nvidia-smi for {self.restart_after:g} s; reconnecting", HostState.STALE)
        text = "\n".join(recent_text) + "\n" + stream.stderr_text
        failure = classify_failure(text, stream.exit_status)
        if failure is not None:
            self._set_state(HostState.DRIVER_ERROR, self._failure_text(failure.message))
        elif not self.transport.connected:
            self._set_state(HostState.UNREACHABLE, "connection lost")
        else:
            tail = text.strip().splitlines()
            why = tail[-1][:200] if tail else f"exit status {stream.exit_status}"
            self._set_state(HostState.STALE if self.sampled_at else HostState.DRIVER_ERROR, f"nvidia-smi stream ended ({why}); restarting")


class NvmlMonitor(_MonitorBase):
    """Telemetry of the machine the cockpit runs on, through NVML (nvidia-ml-py): no process per sample."""

    def __init__(self, *args, nvml=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.nvml = nvml

    @staticmethod
    def load():
        """Initialise NVML, or return None where it is not available (no driver, no GPU)."""
        from cockpit.telemetry.nvml import nvml_disabled

        if nvml_disabled():
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            return pynvml
        except Exception:  # noqa: BLE001 - any failure means: use nvidia-smi instead
            return None

    def read(self, with_processes: bool = True) -> tuple[list[GpuSample], list[ComputeProcess]]:
        from cockpit.telemetry.nvml import read_all

        return read_all(self.nvml, with_processes)

    async def sample_once(self, timeout: float | None = None) -> HostSnapshot:
        gpus, procs = await asyncio.to_thread(self.read)
        self._set_gpus(gpus, [], "nvml")
        self._set_processes(procs)
        return self.snapshot()

    async def run(self) -> None:
        self._emit()
        interval = self.telemetry.interval_ms / 1000.0
        every = max(1, round(self.telemetry.processes_interval_s / interval))
        stop_watching = self._watch_staleness()
        tick = 0
        try:
            while not self.stop_requested:
                started = time.monotonic()
                try:
                    want_processes = tick % every == 0
                    gpus, procs = await asyncio.to_thread(self.read, want_processes)
                    self._set_gpus(gpus, [], "nvml")
                    if want_processes:
                        self._set_processes(procs)
                except Exception as exc:  # noqa: BLE001
                    self._set_state(HostState.DRIVER_ERROR, f"NVML: {exc}")
                tick += 1
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            stop_watching()
