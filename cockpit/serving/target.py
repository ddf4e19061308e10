"""Which server to watch, and one look at it: the server a launch step started (its host, log, port,
and every node of a launch group) or one named by hand (a log on a host, a URL).  `cockpit server`
and the TUI's server pane both ask here, so they watch the same server the same way."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.errors import CockpitError
from cockpit.hosts.procs import group_of
from cockpit.where.placement import Placement


@dataclass
class ServerTarget:
    step: str | None
    host: str | None
    log: str | None
    url: str | None
    pid: int | None = None
    port: int | None = None
    members: list = field(default_factory=list)  # a launch group's nodes (rank 0 first); [] for one server
    placement: Placement | None = None  # where it runs, when a manager runs it (a container, a Slurm job, a pod)
    engine: str | None = None  # the launch step's engine (None: a server named by hand, its log says whose it is)
    stopped: Callable[[], dict | None] | None = None  # the cockpit's record of stopping it, read at each look (a launch step's)

    def group_watcher(self, get_transport):
        """Every node of a launch group, watched as its engine watches a group; None for one server."""
        if len(self.members) < 2:
            return None
        from cockpit.serving.engines import engine
        from cockpit.serving.group import watcher

        group = engine(self.engine).group
        return watcher(group, get_transport, self.members) if group is not None else None


def launched_server(runbook, step: str | None = None) -> ServerTarget:
    """The server `step` started (None: the last launch step that started one); a clear error if none."""
    if step is None:
        started = [s.name for s in runbook.spec.steps if runbook.kind(s).launch and runbook.launched(s.name)]
        if not started:
            raise CockpitError("no launch step has started a server: name a step, or give --log FILE / --url URL")
        step = started[-1]
    spec = runbook.spec.step(step)
    if not runbook.kind(spec).launch:
        raise CockpitError(f"'{step}' is a {spec.kind} step: it starts no server")
    server = runbook.launched(step)
    if server is None:
        raise CockpitError(f"'{step}' has not started a server: run it first (cockpit plan run {step})")
    evidence = runbook.result(step).evidence
    box = evidence.get("container") if isinstance(evidence.get("container"), dict) else None
    placement = Placement(box["engine"], box["name"]) if box and box.get("engine") in ("docker", "podman") and box.get("name") else None
    return ServerTarget(step, spec.host, server.log, f"http://127.0.0.1:{server.port}" if server.port else None,
                        server.pid, server.port, group_of(evidence), placement, getattr(runbook.kind(spec), "engine", lambda _s: None)(spec),
                        stopped=lambda: runbook.stop_record(step))


def named_server(config, host: str | None, log: str | None, url: str | None, placement: Placement | None = None) -> ServerTarget:
    """A server given by hand: a log on a host (the local one when none is named) and/or a URL, and/or where it
    runs (its manager is asked on that host)."""
    host = host or next((h.name for h in config.hosts if h.local), None)
    if host is None and (log is not None or placement is not None):
        flag = "--log" if log or placement is None else "--" + (placement.kind if placement.kind != "slurm" else "slurm-job")
        raise CockpitError(f"{flag} needs --host: "
                           "the config has no local host")
    if log is not None and not os.path.isabs(log):
        if host and config.host(host).local:
            log = os.path.abspath(log)
        else:
            raise CockpitError(f"--log {log}: give an absolute path on {host}")
    return ServerTarget(None, host, log, url, placement=placement)


def prometheus_source(config) -> tuple | None:
    """(settings, selector) when a server's series (any engine's) are read through the config's Prometheus."""
    settings = config.prometheus
    return (settings, settings.server_selector) if settings is not None and settings.server_selector else None


def server_watcher(target: ServerTarget, get_transport, config):
    """The watcher the server pane polls: log, health, liveness, figures; every node of a group."""
    from cockpit.serving.server import ServerWatcher

    group = target.group_watcher(get_transport)
    return ServerWatcher(get_transport(target.host), target.pid, target.port, target.log, group=group,
                         prometheus=prometheus_source(config), placement=target.placement, engine=target.engine, stopped=target.stopped)


async def read_server(target: ServerTarget, get_transport, opener=None, prometheus=None, selector: str | None = None):
    """One look at the server, caught up from its log: (LiveServer, figures as JSON), with the
    Prometheus series matching `selector` and, for a group, every node's state (a failed node is a flag)."""
    from cockpit.serving.live import LiveServer
    from cockpit.serving.server import server_end

    transport = get_transport(target.host) if target.host else None
    live = LiveServer(transport, target.log, target.url, opener=opener)
    manager = None
    if target.placement is not None and transport is not None:
        # its manager's log first: a start line in it begins the figures afresh, before /metrics and /server_info
        manager, lines = await manager_look(transport, target.placement, target.log is None)
        live.figures.feed(lines)
        live.lines.extend(lines)
    figures = await live.poll(catch_up=True)
    if selector is not None:
        from cockpit.serving.engines import prefixes
        from cockpit.telemetry.prometheus import PrometheusError, serving_samples

        try:
            figures.feed_samples(await serving_samples(prometheus, selector, prefixes()))
        except PrometheusError as exc:
            live.unreachable = str(exc)
        if "prometheus" not in figures.sources and live.unreachable is None:
            live.unreachable = f"no serving engine's series ({', '.join(p + '*' for p in prefixes())}) in Prometheus match {selector}"
    alive, found_gone_at = None, None
    if target.pid and transport is not None:
        alive, found_gone_at = await _alive_in_two_looks(transport, target.pid)
    if manager is not None and target.placement is not None:
        if manager.phase in ("failed", "finished", "gone"):
            alive = False
        elif manager.phase == "running":
            alive = True
    if alive is False:
        # its last words, read once it is known gone: what it wrote while this look began is in its log now (a real
        # SGLang wrote its watchdog's crash line and ended between the log's read and the liveness look: "died")
        await live.read_log()
    errors = []
    if live.lines:
        # a crash in the log (the last run in it) is the server's state, whatever its figures were
        from cockpit.serving.logread import diagnose_lines

        report = diagnose_lines(list(live.lines))
        errors = [d for d in report.diagnoses if d.severity == "error"]
    stop = target.stopped() if target.stopped is not None else None
    if alive is False:
        # its end, from the evidence read now: the cockpit's own stop, its manager's word, its log's crash, or died
        figures.ended = server_end(stop, target.pid, target.host, manager, errors, found_gone_at, figures.shutdown)
    data = figures.to_json()
    if live.lines:
        data["diagnoses"] = [d.to_json() for d in report.diagnoses]
        if errors and not any(f["kind"] in ("crashed", "oom") for f in data["flags"]) and not (figures.ended and figures.ended["state"] == "stopped"):
            data["flags"].append({"kind": "crashed", "line": "", "message": errors[0].message})
    if alive is not None:
        data["alive"] = alive
    ended = figures.ended
    if ended is not None and ended["state"] != "stopped" and not any(f["kind"] in ("crashed", "oom") for f in data["flags"]):
        data["flags"].append({"kind": {"oom": "oom", "ended": "ended"}.get(ended["state"], "crashed"), "line": "",
                              "message": ("not serving: " if manager is not None else "") + ended["why"]})
    if manager is not None and target.placement is not None:
        data["where"] = {**target.placement.to_json(), "manager": manager.to_json()}
    group = target.group_watcher(get_transport)
    if group is not None:
        state = await group.poll()
        data["group"] = state.to_json()
        if state.state == "failed":
            data["flags"].append({"kind": "group_failed", "line": "", "message": state.cause})
    return live, data


async def _alive_in_two_looks(transport, pid: int) -> tuple[bool | None, float | None]:
    """Whether a server's process lives, as a terminal answer needs it: a look that finds it gone is confirmed by a
    second one (CONFIRM_AFTER_S later).  (alive, when it was first found gone); None: it could not be asked."""
    import asyncio

    from cockpit.hosts.procs import process_alive
    from cockpit.hosts.transport import TransportError
    from cockpit.serving.server import CONFIRM_AFTER_S

    try:
        if await process_alive(transport, pid):
            return True, None
        found = time.time()
        await asyncio.sleep(CONFIRM_AFTER_S)
        return (True, None) if await process_alive(transport, pid) else (False, found)
    except TransportError:
        return None, None


async def manager_look(transport, placement: Placement, read_log: bool, wait_s: float = 5.0):
    """One look through a server's manager: (its state, its log's lines when `read_log`: Slurm's StdOut, or the
    stream a container's or a pod's manager gives, read until it has given what it has)."""
    import asyncio

    from cockpit.hosts.follow import LogFollower
    from cockpit.where.adapters import adapter_for
    from cockpit.where.follow import StreamFollower

    adapter = adapter_for(placement)
    state = await adapter.look(transport)
    lines: list[str] = []
    if not read_log or state.phase == "unknown":
        return state, lines
    if state.log:
        follower = LogFollower(transport, state.log, tail_bytes=256 * 1024)
        while True:
            update = await follower.poll()
            lines += update.lines
            if update.size is None or follower.offset is None or follower.offset >= update.size:
                return state, lines
    argv = adapter.log_argv(None)
    if argv is None:
        return state, lines
    stream = StreamFollower(transport, lambda since: [*argv[:-1], "--tail", "4000", argv[-1]] if placement.kind != "pod" else argv)
    try:
        lines += await stream.poll()
        deadline = asyncio.get_running_loop().time() + wait_s
        quiet = 0
        while stream.running and asyncio.get_running_loop().time() < deadline and quiet < 5:
            await asyncio.sleep(0.1)
            more = await stream.poll(restart=False)
            quiet = 0 if more else quiet + 1
            lines += more
    finally:
        await stream.close()
    return state, lines
