"""A Docker or Podman container, asked of its engine: `docker inspect --type container NAME` (its State:
Status, ExitCode, OOMKilled, Restarting, StartedAt, FinishedAt; RestartCount).  Facts seen on real engines
(../shared/docs/where-work-runs): exit 137 is SIGKILL (docker kill, a stop's timeout, the OOM killer), 143
SIGTERM; Docker 20.10 sets OOMKilled; Podman 4.3 does not (its conmon writes the marker elsewhere), so a
Podman exit of 137 under a memory limit is said to be probably OOM, not OOM.  `inspect` of a missing
container prints `[]` and an error, exit 1 (Docker) or 125 (Podman)."""

from __future__ import annotations

import json
import time

from cockpit.hosts.transport import Transport, TransportError
from cockpit.where.placement import Placement
from cockpit.where.state import FAILED, FINISHED, GONE, PENDING, RUNNING, ManagerState, command_problem, parse_time, unknown

SIGNALS = {137: "killed (SIGKILL: `{engine} kill`, a stop that timed out, or the OOM killer)", 143: "stopped (SIGTERM)",
           139: "crashed (SIGSEGV)", 134: "aborted (SIGABRT)"}


def read_inspect(text: str) -> dict | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, list):
        data = data[0] if data else None
    return data if isinstance(data, dict) else None


def state_of(engine: str, label: str, info: dict, host: str) -> ManagerState:
    manager = "Podman" if engine == "podman" else "Docker"
    raw = info.get("State")
    state: dict = raw if isinstance(raw, dict) else {}
    status = str(state.get("Status") or "").lower()
    code = state.get("ExitCode")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    counted = info.get("RestartCount")
    restarts = counted if isinstance(counted, int) else 0
    started, finished = parse_time(state.get("StartedAt")), parse_time(state.get("FinishedAt"))
    limit = ((info.get("HostConfig") or {}).get("Memory") or 0) if isinstance(info.get("HostConfig"), dict) else 0
    reason = ""
    if status in ("running", "paused") or state.get("Running"):
        phase = RUNNING
        if status == "paused":
            reason = "paused"
    elif status == "restarting" or state.get("Restarting"):
        phase, reason = RUNNING, "restarting after an exit" + (f" (exit {code})" if code else "")
    elif status in ("created", "configured", "initialized"):
        phase, reason = PENDING, "created, not started"
    elif status in ("exited", "stopped", "dead") or (status == "removing" and started is not None):
        # Docker says `removing` for a container that has stopped and is being removed (`--rm` after its exit, or
        # `docker rm -f`): its exit code and FinishedAt are still there (seen on Docker 28: removing, Running
        # false, ExitCode 0, FinishedAt set), so it is read as the exit it is
        if state.get("OOMKilled"):
            phase, reason = FAILED, "OOMKilled: the container exceeded its memory limit (--memory)"
        elif code == 0:
            phase = FINISHED
        else:
            phase = FAILED
            reason = SIGNALS.get(code or -1, f"exited with code {code}").replace("{engine}", engine)  # Podman's words are Podman's
            if engine == "podman" and code == 137 and limit:
                reason = (f"killed (SIGKILL) under a memory limit of {limit // (1 << 20)} MiB: probably OOM "
                          "(Podman 4 does not report OOMKilled reliably)")
        if state.get("Error"):
            reason = f"{reason}; {state['Error']}" if reason else str(state["Error"])
        if status == "removing":
            reason = f"{reason}; being removed" if reason else "being removed"
    elif status == "removing":
        return ManagerState(manager, label, GONE, status, at=time.time(),
                            why=f"the container is being removed by {manager} before it ever started")
    else:
        phase, reason = RUNNING if state.get("Running") else FAILED, status
    ident = info.get("Id")
    if status == "stopped":
        # Podman's word for an exit whose cleanup has not run yet (it turns `exited` a moment later, sooner on an idle
        # machine): an exit, said as one, never "stopped" beside the cockpit's own "stopped by you"
        status = "exited"
    return ManagerState(manager, label, phase, status, None if code is None else str(code), reason, host, None, restarts,
                        started, finished, at=time.time(), cgroup_mark=ident if isinstance(ident, str) and len(ident) >= 12 else "")


class Container:
    def __init__(self, placement: Placement):
        self.placement = placement
        self.engine = placement.kind  # docker | podman
        self.seen = False

    def log_argv(self, since: str | None = None) -> list[str]:
        """Its log, streamed with each line's time (the stream ends by itself when the container exits)."""
        return [self.engine, "logs", "--timestamps", "--follow", *(["--since", since] if since else []), self.placement.name]

    async def look(self, transport: Transport) -> ManagerState:
        manager = "Podman" if self.engine == "podman" else "Docker"
        label = self.placement.label
        try:
            result = await transport.run([self.engine, "inspect", "--type", "container", self.placement.name], timeout=30)
        except TransportError as exc:
            return unknown(manager, label, f"cannot ask {manager} on {transport.name}: {exc}")
        text = result.output
        problem = command_problem(manager, label, self.engine, transport.name, text if result.exit_status != 0 else "",
                                  result.exit_status)
        if problem is not None:
            return problem
        if "permission denied" in text.lower() and ("docker.sock" in text or "daemon socket" in text):
            return unknown(manager, label, f"this user may not use Docker on {transport.name} (permission denied on its socket: "
                                           "not in the docker group?)")
        if "Cannot connect to the Docker daemon" in text or "Is the docker daemon running" in text:
            return unknown(manager, label, f"no Docker daemon answers on {transport.name}")
        info = read_inspect(result.stdout) if result.exit_status == 0 else None
        if info is None:
            if "no such" in text.lower():
                if self.seen:
                    return ManagerState(manager, label, GONE, at=time.time(),
                                        why=f"the container is gone from {manager} (removed: `--rm`, or `{self.engine} rm`)")
                return unknown(manager, label, f"no container {self.placement.name} on {transport.name} (not started yet?)")
            return unknown(manager, label, f"`{self.engine} inspect` said: {text.strip().splitlines()[-1][:200] if text.strip() else 'nothing'}")
        self.seen = True
        return state_of(self.engine, label, info, transport.name)
