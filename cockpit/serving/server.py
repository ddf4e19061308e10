"""A server on a host, whatever its engine: its log followed from the end, its readiness, its watch.

Readiness is asked from the host's side (a direct-tcpip channel on the existing SSH connection,
or a local socket): connection refused = still loading, 503 = warming up, 200 = ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from cockpit.hosts.follow import LogFollower as FileFollower
from cockpit.hosts.procs import process_alive
from cockpit.hosts.transport import Transport, TransportError
from cockpit.diagnosis import Diagnosis
from cockpit.format import clock as _clock
from cockpit.serving.logread import LogReport, diagnose_lines

DEFAULT_PORT = 30000


# --- health ---------------------------------------------------------------------------------------


async def probe_health(transport: Transport, port: int, host: str = "127.0.0.1", timeout: float = 5.0, path: str = "/health") -> str:
    """'loading' (nothing listens), 'warming' (503), 'ready' (200), or 'http NNN' / 'error: ...'.
    A launch group's readiness is rank 0's, on its engine's path (SGLang's /health_generate: its other nodes' /health is
    a stub; vLLM's /health)."""
    try:
        reader, writer = await asyncio.wait_for(transport.open_tcp(host, port), timeout)
    except (ConnectionRefusedError, ConnectionResetError):
        return "loading"
    except (OSError, asyncio.TimeoutError, TransportError) as exc:
        text = str(exc)
        if "refused" in text.lower() or "Connect failed" in text:
            return "loading"
        return f"error: {text or type(exc).__name__}"
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        status = await asyncio.wait_for(reader.readline(), timeout)
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
        return f"error: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - asyncssh channel errors
        return f"error: {exc}"
    finally:
        with contextlib.suppress(Exception):
            writer.close()
    line = status.decode("latin-1") if isinstance(status, bytes) else status
    parts = line.split()
    if len(parts) >= 2 and parts[1].isdigit():
        code = int(parts[1])
        return {200: "ready", 503: "warming"}.get(code, f"http {code}")
    return "loading" if not line else f"error: bad reply {line[:40]!r}"


# --- following a log ------------------------------------------------------------------------------


class LogFollower(FileFollower):
    """New lines of a server's log (hosts/follow.py: by offset, from near the end, a truncated or
    rotated file read again from its start; the line being written waits for its newline).  Its lines are counted
    as an editor counts them: a progress bar redrawn with carriage returns is one line, shown as the terminal shows it."""

    split_cr = False

    def __init__(self, transport: Transport, path: str, backlog_bytes: int = 64 * 1024, chunk: int = 1024 * 1024):
        super().__init__(transport, path, tail_bytes=backlog_bytes, max_read=chunk)
        self.rotations = 0

    async def poll(self) -> list[str]:  # type: ignore[override]
        update = await super().poll()
        if update.event in ("truncated", "rotated"):
            self.rotations += 1
        return update.lines


# --- waiting for ready ----------------------------------------------------------------------------


@dataclass
class ReadyResult:
    state: str  # "ready", "dead", "timeout"
    health: str = ""
    seconds: float = 0.0
    report: LogReport = field(default_factory=LogReport)
    lines: list[str] = field(default_factory=list)

    @property
    def diagnoses(self) -> list[Diagnosis]:
        return self.report.diagnoses


async def wait_ready(transport: Transport, pid: int, port: int, log: str, timeout: float = 1800.0, poll_s: float = 1.0,
                     on_progress=None, keep_lines: int = 4000) -> ReadyResult:
    """Until /health says 200 (ready), the process dies (dead, with its diagnosis) or time runs out."""
    follower = LogFollower(transport, log)
    lines: list[str] = []
    started = time.monotonic()
    health = ""
    while True:
        with contextlib.suppress(TransportError):
            lines.extend(await follower.poll())
            del lines[:-keep_lines]
        report = diagnose_lines(lines)
        health = await probe_health(transport, port)
        elapsed = time.monotonic() - started
        if on_progress is not None:
            on_progress(health, report, elapsed)
        if health == "ready":
            return ReadyResult("ready", health, elapsed, report, lines)
        if not await process_alive(transport, pid):
            with contextlib.suppress(TransportError):
                lines.extend(await follower.poll())
            return ReadyResult("dead", health, elapsed, diagnose_lines(lines), lines)
        if elapsed > timeout:
            return ReadyResult("timeout", health, elapsed, report, lines)
        await asyncio.sleep(poll_s)


@dataclass
class ServerStatus:
    health: str
    alive: bool  # False once two looks found it gone (or the cockpit stopped it); True while the second look is to come
    report: LogReport
    new_lines: list[str]
    figures: dict = field(default_factory=dict)  # live serving figures (serving/live.py to_json): throughput, acceptance, flags
    group: dict | None = None  # a launch group's state (sglang/group.py GroupState.to_json): every node
    ended: dict | None = None  # how it ended, when it has (server_end): stopped by you, crashed, oom, ended, died
    confirming: bool = False  # one look found it gone: the next, soon, decides


CONFIRM_AFTER_S = 0.25  # a look that found the server gone is followed this soon by the one that confirms it


def server_end(stop: dict | None, pid: int | None, host: str | None, manager_state=None, errors: list[Diagnosis] | None = None,
               found_gone_at: float | None = None, shutdown: dict | None = None) -> dict:
    """How a server that is no longer alive ended, from the evidence read now, in one place for the TUI and the CLI:
    the cockpit's own stop first (stopped by you: no alarm), then its manager's word (OOM only where the manager says
    OOM), then its log's crash, else died with no last word.  {state, why, at, by?}: `at` is the event's time where
    it is known (the stop, the manager's finish), else None and the words say when it was found gone."""
    if stop is not None and (pid is None or pid in (stop.get("pids") or [])):
        at = stop.get("at")
        pids = ", ".join(f"pid {p}" for p in stop.get("pids") or [])
        return {"state": "stopped", "by": stop.get("by") or "you",
                "why": f"stopped by {stop.get('by') or 'you'}" + (f" at {_clock(at)}" if at else "")
                       + f" ({stop.get('action') or 'plan stop'}" + (f": {pids}" if pids else "") + ")",
                "at": at}
    found = f" (found gone at {_clock(found_gone_at)})" if found_gone_at else ""
    mgr = manager_state
    if mgr is not None and mgr.phase in ("finished", "failed", "gone"):
        at = mgr.finished_at
        if mgr.oom:
            return {"state": "oom", "why": f"out of memory, as {mgr.manager} says: {mgr.describe()}", "at": at}
        if errors:
            return {"state": "crashed", "why": f"{errors[0].message} ({mgr.describe()})", "at": at}
        if mgr.phase == "finished":
            return {"state": "ended", "why": f"it exited (code 0): {mgr.describe()}", "at": at}
        if mgr.phase == "gone":
            return {"state": "ended", "why": f"{mgr.describe()}{found}: how it ended is not known", "at": at}
        return {"state": "died", "why": f"{mgr.describe()}", "at": at}
    if errors:
        return {"state": "crashed", "why": errors[0].message + found, "at": None}
    if shutdown is not None:  # its own words of a graceful stop (a Ctrl-C, a SIGTERM) and no crash: stopped, not by us
        return {"state": "stopped", "by": None, "at": shutdown.get("at"),
                "why": f"it shut down cleanly (its log at {_clock(shutdown['at'])}: '{str(shutdown.get('line', ''))[-80:]}'), "
                       "not by the cockpit: who stopped it, the log does not say"}
    where = f"pid {pid} on {host}" if pid else "its process"
    return {"state": "died", "why": f"{where} is gone, with no crash in its log (killed: the OOM killer, a scheduler, "
                                    f"kill -9?){found}", "at": None}


class ServerWatcher:
    """One poll at a time: new log lines, health and liveness of a launched server, diagnosed.
    The log pane runs it in a worker and posts what it returns."""

    def __init__(self, transport: Transport, pid: int | None, port: int | None, log: str | None, keep_lines: int = 2000, group=None,
                 prometheus=None, placement=None, engine: str | None = None, stopped=None):
        from cockpit.serving.live import LiveServer
        from cockpit.serving.engines import engine as engine_named, known

        # whose log it is: the launch step's engine, asked once (None: a server named by hand, its log says whose)
        self.engine = engine_named(engine) if engine is not None and known(engine) else None
        self.prometheus = prometheus  # (PrometheusSettings, selector): the engine's series as Prometheus scraped them
        self.group = group  # a GroupWatcher over every node of a launch group (rank 0 is this server)
        self.transport = transport
        self.pid = pid
        self.port = port
        self.follower = LogFollower(transport, log) if log else None
        self.placement = placement  # where it runs (a container, a Slurm job, a pod): its manager says whether it lives
        self.manager: Any = None  # its workload manager's adapter (where/adapters.py), when a placement is given
        self.manager_state: Any = None
        self.stream: Any = None  # the manager's log stream, when no log file is named
        if placement is not None:
            from cockpit.where.adapters import adapter_for

            self.manager = adapter_for(placement)
        self.lines: list[str] = []
        self.keep_lines = keep_lines
        self._dropped = 0  # lines read and no longer kept: the kept ones keep the numbers they were read with
        self._report: LogReport | None = None  # the diagnosis of self.lines, made again only when it can change
        self.live = LiveServer(transport, None, f"http://127.0.0.1:{port}")  # the log's lines are fed from here
        self.ask_every_s = 5.0
        self._asked = float("-inf")
        self.stopped = stopped  # () -> the cockpit's record of stopping this server, read at each look (None: it did not)
        self._gone_looks = 0
        self._found_gone_at: float | None = None

    async def poll(self) -> ServerStatus:
        from cockpit.serving.live import routine_line

        new: list[str] = []
        if self.manager is not None:
            self.manager_state = state = await self.manager.look(self.transport)
            if self.follower is None and state.log:
                self.follower = LogFollower(self.transport, state.log)  # Slurm's StdOut
            elif self.follower is None and state.phase != "unknown" and self.manager.log_argv(None) is not None:
                if self.stream is None:
                    from cockpit.where.follow import StreamFollower

                    self.stream = StreamFollower(self.transport, self.manager.log_argv)
                new += await self.stream.poll(restart=state.phase in ("running", "pending"))
        if self.follower is not None:
            with contextlib.suppress(TransportError, OSError):
                new += await self.follower.poll()
        self._take(new)
        health = await probe_health(self.transport, self.port) if self.port else "no port"
        if self.manager_state is not None and self.manager_state.phase != "unknown":
            alive = self.manager_state.phase in ("running", "pending")  # its manager says (a container's pid is not ours)
        else:
            alive = health == "ready" or (self.pid is not None and await process_alive(self.transport, self.pid))
        if health == "ready" and time.monotonic() - self._asked >= self.ask_every_s:
            # /metrics, /server_info (and Prometheus) every few seconds, not every poll: the log's decode
            # lines come every poll already, and /server_info goes through the scheduler
            self._asked = time.monotonic()
            await self.live.poll()
            if self.prometheus is not None:
                from cockpit.serving.engines import prefixes
                from cockpit.telemetry.prometheus import PrometheusError, serving_samples

                with contextlib.suppress(PrometheusError):
                    settings, selector = self.prometheus
                    self.live.figures.feed_samples(await serving_samples(settings, selector, prefixes()))
        group = None
        if self.group is not None:
            state = await self.group.poll()
            group = state.to_json()
            alive = alive and state.state != "failed"  # one dead rank: the group is failed, never half-up
        stop, confirming = None, False
        if alive:
            self._gone_looks, self._found_gone_at = 0, None
        else:
            stop = self.stopped() if self.stopped is not None else None  # read only once it is gone: not every poll
            self._gone_looks += 1
            self._found_gone_at = self._found_gone_at or time.time()
            # a terminal state rests on two looks; the cockpit's own stop is evidence enough by itself
            confirming = self._gone_looks < 2 and stop is None and not (self.manager_state is not None and self.manager_state.terminal)
        if not alive and not confirming and self.follower is not None:
            # its last words, read once it is known gone (what it wrote as the look began is in its log by now)
            with contextlib.suppress(TransportError, OSError):
                last = await self.follower.poll()
                self._take(last)
                new += last
        if self._report is None or not all(map(routine_line, new)) or (
                new and any(d.kind == "draft_weights_not_loaded" for d in self._report.diagnoses)):
            # ~70 ms for 2000 lines: made again when a line came that can change it, not for each second's
            # decode line of a server serving well (that was most of the cockpit's CPU with a server up)
            self._report = diagnose_lines(self.lines, first_line=self._dropped + 1, engine=self.engine)
        else:
            self._report.lines = len(self.lines)
        mgr = self.manager_state
        if mgr is not None and mgr.terminal and not any(d.kind == "manager" for d in self._report.diagnoses) and not any(
                d.severity == "error" for d in self._report.diagnoses):
            # nothing in its log says why it ended: its manager does (an OOM kill by a cgroup leaves no line)
            self._report.diagnoses.append(Diagnosis("manager", f"not serving: {mgr.describe()}", severity="error"))
        ended = None
        if not alive and not confirming:
            errors = [d for d in self._report.diagnoses if d.severity == "error" and d.kind != "manager"]
            ended = server_end(stop, self.pid, self.transport.name, mgr, errors, self._found_gone_at, self.live.figures.shutdown)
        self.live.figures.ended = ended
        return ServerStatus(health, alive or confirming, self._report, new, self.live.figures.to_json(history=60), group, ended, confirming)


    def _take(self, lines: list[str]) -> None:
        """New lines of its log: kept (the last keep_lines) and read into the live figures."""
        self.lines.extend(lines)
        if len(self.lines) > self.keep_lines:
            self._dropped += len(self.lines) - self.keep_lines
            del self.lines[:-self.keep_lines]
        self.live.figures.feed(lines)


def death_alert(step: str, result, was_alive: bool, status: "ServerStatus"):
    """The alert for a server that was alive and is not, while its launch step stands passed (a stop
    that was asked for, as a sweep's relaunch, first changes the step): its first error diagnosis."""
    from cockpit.alerts import Alert
    from cockpit.runbook.model import StepState

    if not was_alive or status.alive or result is None or result.state is not StepState.PASSED:
        return None
    if status.ended is not None and status.ended.get("state") == "stopped":
        return None  # the cockpit's own stop: no alarm
    errors = [d for d in status.report.diagnoses if d.severity == "error"]
    text = errors[0].message if errors else "no diagnosis in its log"
    return Alert("server_crashed", f"server_crashed:{step}", f"{step}: the server died", text, "error")


async def watch_server(watcher: ServerWatcher, publish, interval: float = 1.0) -> None:
    """Poll a launched server until it dies, publishing every status (a poll that fails is
    published as an error status and tried again)."""
    while True:
        try:
            status = await watcher.poll()
        except Exception as exc:  # noqa: BLE001 - shown, and tried again
            status = ServerStatus(f"error: {exc}", True, LogReport(), [])
        publish(status)
        if not status.alive:
            return
        await asyncio.sleep(CONFIRM_AFTER_S if status.confirming else interval)

