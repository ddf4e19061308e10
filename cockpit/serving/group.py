"""A launch over several nodes, driven by the core for every engine: one server over several nodes, started detached
on each over its own connection (run_group), watched node by node from each node's log and process (watcher), ready
only when every node is (group_ready), failed as soon as one node is (then every node is stopped: a half-up group is
never left running).

An engine brings what serving/groupmodel.py types: its plan of the nodes (a NodePlan: each node's command line, a GPU
gate before each start, an activation once all joined), its `GroupModel` (its node states in order, how a node's log
lines read, why a failed group failed, in a sentence naming the node), rank 0's health path, and its hand-off to Slurm
and LeaderWorkerSet.  This module never names an engine.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Awaitable, Callable

from cockpit.hosts.follow import LogFollower
from cockpit.hosts.procs import LaunchedProcess, process_alive, stop_process
from cockpit.hosts.transport import TransportError
from cockpit.runbook.kind import RunContext
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.serving.groupmodel import (GroupEmit, GroupLauncher, GroupModel, GroupState, NodePlan,  # noqa: F401 - the group's types
                                       NodeState)

PORT_FREE = ("import socket, sys\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "try:\n    s.bind((sys.argv[1], int(sys.argv[2])))\nexcept OSError as e:\n    print(e); sys.exit(1)")


def summarize(nodes: list[NodeState], states: tuple[str, ...], priority: dict[str, int],
              describe: Callable[[NodeState, list[NodeState]], str]) -> GroupState:
    """The group's state: failed when a node is (the root cause first: a node that died beats the peers that then
    timed out waiting for it, by `priority`), else the least advanced node's."""
    failed = [n for n in nodes if n.failed]
    if failed:
        first = min(failed, key=lambda n: (priority.get(n.failure or "", len(priority) + 1), n.rank))
        return GroupState("failed", nodes, describe(first, nodes))
    order = {name: i for i, name in enumerate(states)}
    least = min(nodes, key=lambda n: order.get(n.state, 0)) if nodes else None
    return GroupState(least.state if least else states[0], nodes)


def describe_common(name: str, node: NodeState, nodes: list[NodeState]) -> str:
    """Why a node failed, for the failures every engine's group has (an NCCL timeout, a dead process, a port in use);
    anything else by its kind and line.  `name`: how the engine names the node."""
    if node.failure == "nccl_timeout":
        dead = [n.name for n in nodes if not n.alive]
        return f"{name}: an NCCL collective timed out" + (f"; {', '.join(dead)} is gone" if dead else " (a peer died or hangs)")
    if node.failure == "exited":
        return f"{name}: its process exited while {node.state}" + ("" if node.state == "ready" else "; its log tells why")
    if node.failure == "port_in_use":
        return f"{name}: a port it needs is in use ({node.line[:120]})"
    return f"{name}: {node.failure} ({node.line[:160]})"


def node_log(path: str, rank: int) -> str:
    """Each node's own log: `{rank}` in the step's log path, else `-rankN` before its extension (a
    home or /tmp shared over NFS must not interleave the nodes' logs)."""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    head, dot, ext = path.rpartition(".")
    if dot and "/" not in ext:
        return f"{head}-rank{rank}.{ext}"
    return f"{path}-rank{rank}"


def previous(ctx: RunContext, spec: StepSpec) -> list[LaunchedProcess]:
    """The group (or the one server) this step started before."""
    from cockpit.hosts.procs import group_of

    result = ctx.runbook.result(spec.name)
    return group_of(result.evidence) if result is not None else []


async def stop_all(ctx: RunContext, spec: StepSpec, processes: list[LaunchedProcess], why: str) -> None:
    for process in processes:
        transport = ctx.transport(process.host)
        if await process_alive(transport, process.pid):
            gone = await stop_process(transport, process.pid)
            ctx.audit("kill", host=process.host, step=spec.name, signal="TERM", pids=[process.pid], why=why, gone=gone)


async def port_in_use(ctx: RunContext, host: str, python: str, port: int | str) -> str | None:
    """Why `port` cannot be bound on `host` (its own Python binds it for a moment); None when it is free."""
    bound = await ctx.transport(host).run([python, "-c", PORT_FREE, "0.0.0.0", str(port)], timeout=30)
    return None if bound.exit_status == 0 else (bound.output.strip()[:120] or f"exit {bound.exit_status}")


async def every_node(hosts: list[str], ask: Callable[[str], Awaitable[Any]]) -> tuple[list[Any], str | None]:
    """`ask(host)` of every node at once: (the answers, rank 0's first; None) or ([], why one node could not answer,
    naming it)."""
    from cockpit.errors import CockpitError

    answers = await asyncio.gather(*(ask(h) for h in hosts), return_exceptions=True)
    for rank, (host, answer) in enumerate(zip(hosts, answers)):
        if isinstance(answer, (CockpitError, TransportError, OSError)):
            return [], f"rank {rank} ({host}): {answer}"
        if isinstance(answer, BaseException):
            raise answer
    return list(answers), None


def one_version(label: str, hosts: list[str], versions: list[str | None]) -> str | None:
    """Why the group cannot run (its nodes run different versions of the engine), or None."""
    if len(set(versions)) < 2:
        return None
    differ = [f"{host} runs {v}" for host, v in zip(hosts, versions) if v != versions[0]]
    return (f"{label} differs across the group: rank 0 ({hosts[0]}) runs {versions[0]}, {', '.join(differ)}; every node "
            "must run the same version")


async def draft_problem(ctx: RunContext, hosts: list[str], draft: str, version: str | None, loader: str, label: str) -> str | None:
    """The draft read header-only on every node and judged for the group's version by the engine's loader: why it is
    not ready on a node (naming it), or None."""
    from cockpit.drafter.steps import inspect_on

    reports, why = await every_node(hosts, lambda host: inspect_on(ctx.hub, host, draft))
    if why:
        return f"the draft {draft} on {why}"
    for rank, (host, report) in enumerate(zip(hosts, reports)):
        problems = [p for ps in report.verdicts(version, loader).values() for p in ps]
        if problems:
            return f"the draft {draft} on rank {rank} ({host}) is not ready for {label} {version}: {problems[0].message}"
    return None


async def rank0_port_problem(ctx: RunContext, spec: StepSpec, host: str, python: str, port: int | str, what: str) -> str | None:
    """Rank 0's `port` (its `what`) must be free, unless this step's own group, still running, holds it (the relaunch
    stops it first)."""
    busy = await port_in_use(ctx, host, python, port)
    if not busy:
        return None
    old_rank0 = next((o for o in previous(ctx, spec) if o.host == host), None)
    if old_rank0 and await process_alive(ctx.transport(host), old_rank0.pid):
        return None
    return f"rank 0's {what} {port} on {host} is in use ({busy}): another server or group holds it; stop it or choose dist_init_port"


async def gpus_unclean(ctx: RunContext, host: str, own: set[int] | None = None) -> str | None:
    """The host's GPUs sampled now and judged by the gate's limit (its gate step's, else the default), its own
    processes (`own`: the group's pids there, before they allocate) left out; why they are not clean, or None."""
    from cockpit.runbook.checks import DEFAULT_MAX_USED_MIB, judge

    gate = next((s for s in ctx.runbook.gates() if host in ctx.runbook.kind(s).hosts(s)), None)
    limit = gate.params.get("max_used_mib", DEFAULT_MAX_USED_MIB) if gate is not None else DEFAULT_MAX_USED_MIB
    snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(host))
    ctx.hub.publish(snapshot)
    report = judge(without(snapshot, own or set()), limit)
    if report.error or not report.clean:
        return report.error or "; ".join(report.reasons)
    return None


def without(snapshot, pids: set[int]):
    """The snapshot as if the group's own processes (their CUDA contexts, before activation) were not
    there: anything else on the GPUs is what the gate is for."""
    own = [p for p in snapshot.processes if p.pid in pids]
    if not own:
        return snapshot
    freed: dict[int | None, int] = {}
    for process in own:
        freed[process.gpu_index] = freed.get(process.gpu_index, 0) + (process.used_memory_mib or 0)
    gpus = tuple(replace(g, memory_used_mib=max(0, (g.memory_used_mib or 0) - freed.get(g.index, 0))) for g in snapshot.gpus)
    return replace(snapshot, gpus=gpus, processes=tuple(p for p in snapshot.processes if p.pid not in pids))


async def start_one(ctx: RunContext, spec: StepSpec, host: str, argv: list[str], log: str, rank: int, port: int | None,
                    started: float, env: dict[str, str] | None = None) -> tuple[LaunchedProcess | None, str]:
    """One process of a group started detached on `host` (the step's env, with `env` over it), audited: (it, "") or
    (None, why not)."""
    from cockpit.hosts.procs import launch_marker, start_detached

    pid, error = await start_detached(ctx.transport(host), argv, log, spec.params.get("cwd"),
                                      {**(spec.params.get("env") or {}), **(env or {})} or None,
                                      launch_marker(spec.name, host) + f" rank={rank}")
    if pid is None:
        return None, error
    ctx.audit("launch", host=host, step=spec.name, pid=pid, argv=argv, log=log, rank=rank)
    return LaunchedProcess(host, pid, log, tuple(argv), port, started), ""


async def start_nodes(ctx: RunContext, spec: StepSpec, log_path: str, hosts: list[str], argvs: list[list[str]], port: int,
                      before_each: Callable[[int], Any] | None = None) -> tuple[list[LaunchedProcess], str | None]:
    """Every node started detached, rank 0 first, each with the step's marker and its own log; `before_each(rank)`
    (awaited) may refuse a node with a reason.  On the first node that cannot start, the ones started are stopped:
    (what started, why not)."""
    started = _now()
    processes: list[LaunchedProcess] = []
    for rank, (host, argv) in enumerate(zip(hosts, argvs)):
        if before_each is not None:
            refused = await before_each(rank)
            if refused:
                await stop_all(ctx, spec, processes, "a node was refused before its start")
                return processes, refused
        process, error = await start_one(ctx, spec, host, argv, node_log(log_path, rank), rank, port if rank == 0 else None, started)
        if process is None:
            await stop_all(ctx, spec, processes, "a node could not start")
            return processes, f"rank {rank} ({host}) could not start: {error}"
        processes.append(process)
    return processes, None


async def node_lines(transport_of, process: LaunchedProcess, followers: dict) -> list[str]:
    follower = followers.setdefault((process.host, process.log),
                                    (LogFollower(transport_of(process.host), process.log, tail_bytes=1 << 20), []))
    try:
        update = await follower[0].poll()
        follower[1].extend(update.lines)
        del follower[1][:-4000]
    except (TransportError, OSError):
        pass
    return follower[1]


async def states(transport_of, processes: list[LaunchedProcess], followers: dict, model: GroupModel) -> GroupState:
    """Every node's state from its log and its process (`transport_of(host)`: that host's transport)."""
    nodes = []
    for rank, process in enumerate(processes):
        lines = await node_lines(transport_of, process, followers)
        try:
            alive = await process_alive(transport_of(process.host), process.pid)
        except (TransportError, OSError):
            alive = True  # unreachable is not dead: the next poll says
        nodes.append(model.node_state(rank, process, lines, alive))
    return model.group_state(nodes)


class GroupWatcher:
    """Every node of a running group, polled together: their logs and processes, the group's state
    (the TUI and `cockpit server` show it; a group with one dead rank is failed, never half-up)."""

    def __init__(self, transport_of, processes: list[LaunchedProcess], model: GroupModel):
        self.transport_of = transport_of  # host name -> Transport
        self.processes = processes
        self.model = model
        self.followers: dict = {}

    async def poll(self) -> GroupState:
        return await states(self.transport_of, self.processes, self.followers, self.model)


async def settle(ctx: RunContext, spec: StepSpec, processes: list[LaunchedProcess], model: GroupModel,
                 followers: dict | None = None) -> GroupState:
    """The group's state a moment after its start (settle_s): a node that fails at once fails the launch."""
    await asyncio.sleep(float(spec.params.get("settle_s", 3.0)))
    return await states(ctx.transport, processes, followers if followers is not None else {}, model)


async def settled(ctx: RunContext, spec: StepSpec, processes: list[LaunchedProcess], model: GroupModel, evidence: dict,
                  started: float, what: str, followers: dict | None = None) -> StepResult:
    """The launch's result a moment after every node started: failed (and every process stopped) when a node failed
    at once, else passed saying `what` started and where rank 0 runs."""
    group = await settle(ctx, spec, processes, model, followers)
    evidence["group_state"] = group.to_json()
    if group.state == "failed":
        await stop_all(ctx, spec, processes, "a node failed")
        return StepResult(StepState.FAILED, started, _now(), f"the group failed: {group.cause}; every process was stopped", evidence)
    rank0 = processes[0]
    return StepResult(StepState.PASSED, started, _now(), f"{what} started ({group.state}): rank 0 pid {rank0.pid} on {rank0.host}, "
                      f"port {rank0.port}, log {rank0.log}", evidence)


async def wait_group_ready(ctx: RunContext, spec: StepSpec, launch: StepSpec, processes: list[LaunchedProcess],
                           timeout: float, poll_s: float, model: GroupModel, health_path: str, default_port: int) -> StepResult:
    """Ready when rank 0's `health_path` answers 200 and every node is ready by its own log; failed as soon as one
    node fails or dies, and then the whole group is stopped."""
    from cockpit.serving.server import probe_health

    started = _now()
    rank0 = processes[0]
    followers: dict = {}
    deadline = time.monotonic() + timeout
    while True:
        group = await states(ctx.transport, processes, followers, model)
        facts = {"pid": rank0.pid, "port": rank0.port, "log": rank0.log, "group_state": group.to_json()}
        if group.state == "failed":
            await stop_all(ctx, launch, processes, "a node failed")
            facts["stopped"] = True
            return StepResult(StepState.FAILED, started, _now(), f"the group failed: {group.cause}; every rank was stopped", facts)
        health = await probe_health(ctx.transport(rank0.host), rank0.port or default_port, path=health_path)
        facts["health"] = health
        if health == "ready" and all(n.state == "ready" for n in group.nodes):
            return StepResult(StepState.PASSED, started, _now(), f"the group is ready: {len(processes)} nodes, rank 0 "
                              f"{health_path} 200 on port {rank0.port}", facts)
        if time.monotonic() > deadline:
            behind = ", ".join(f"rank {n.rank} ({n.host}): {n.state}" for n in group.nodes if n.state != "ready")
            return StepResult(StepState.FAILED, started, _now(), f"not ready after {timeout:g} s (rank 0 health: {health}; {behind})",
                              facts)
        await asyncio.sleep(poll_s)


def evidence(processes: list[LaunchedProcess], hosts: list[str], engine_key: str, version: str | None, lint) -> dict:
    """A group launch's evidence: rank 0's keys (what one server records), every node (`group`), the version and lint."""
    rank0 = processes[0].to_evidence() if processes else {}
    return {**rank0, "group": [p.to_evidence() for p in processes], "nodes": list(hosts), engine_key: version,
            "lint": [d.to_json() for d in lint.diagnoses]}


# --- the flow the core drives, and what an engine brings to it -----------------------------------------------------


async def run_group(launcher: GroupLauncher, kind: Any, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
    """Start a planned group: the group this step started before stopped, every node started (each gated where the
    engine asks), activated where it asks, then settled: a node that fails at once stops them all."""
    if not isinstance(planned, NodePlan):
        return await launcher.run_form(kind, ctx, spec, planned)
    started = _now()
    await stop_all(ctx, spec, planned.old, "relaunch")
    port = int(spec.params.get("port") or launcher.default_port)

    async def gate(rank: int) -> str | None:
        unclean = await gpus_unclean(ctx, planned.hosts[rank])
        if unclean is None:
            return None
        ctx.audit("refused", step=spec.name, host=planned.hosts[rank], rank=rank, why=unclean)
        return f"rank {rank} ({planned.hosts[rank]}) is not clean at its start: {unclean}"

    processes, why = await start_nodes(ctx, spec, kind.log_path(spec), planned.hosts, planned.argvs, port,
                                       gate if planned.gate_each_node else None)
    facts = {**evidence(processes, planned.hosts, launcher.version_key, planned.version, planned.lint), **planned.evidence}
    if why:
        return StepResult(StepState.FAILED, started, _now(), why + ("; the nodes started before it were stopped" if processes else ""),
                          facts)
    followers: dict = {}
    if planned.activate is not None:
        outcome = await planned.activate(ctx, spec, processes, followers)
        if outcome is not None:
            await stop_all(ctx, spec, processes, "the group failed before activation")
            facts["group_state"] = outcome[1]
            return StepResult(StepState.FAILED, started, _now(), outcome[0], facts)
        facts["activated"] = True
    return await settled(ctx, spec, processes, launcher.model, facts, started, f"{len(processes)} nodes", followers)


async def group_ready(launcher: GroupLauncher, ctx: RunContext, spec: StepSpec, launch: StepSpec, processes: list[LaunchedProcess],
                      timeout: float, poll_s: float) -> StepResult:
    """Ready when rank 0's health answers 200 and every node is ready by the engine's reading of its log."""
    return await wait_group_ready(ctx, spec, launch, processes, timeout, poll_s, launcher.model, launcher.health_path,
                                  launcher.default_port)


def watcher(launcher: GroupLauncher, transport_of, processes: list[LaunchedProcess]) -> GroupWatcher:
    """Every node of a running group, read by the engine's model (the TUI's and `cockpit server`'s)."""
    return GroupWatcher(transport_of, processes, launcher.model)
