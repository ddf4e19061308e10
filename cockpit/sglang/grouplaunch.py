"""A launch group's plan, start, readiness and watch (the model and the log states are group.py).

Before anything starts (plan): every node's SGLang answers with its version (all the same, else the
launch is refused naming the nodes that differ); the command is linted once, against rank 0's
SGLang; the draft is read header-only on every node (missing, or keyed wrong for that version:
refused naming the node); rank 0's rendezvous port must be free.

Start (run): rank 0, then every other node, detached, each with the step's marker and log.  With
SGLang's `--gated-launch-port` (0.5.23+) the cockpit waits until every node has joined and is
waiting for activation, verifies every node's GPUs again right then (nothing has allocated memory
yet), and only then activates the group.  A node that fails stops the whole group: a half-up group
is never left running.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from cockpit.hosts.follow import LogFollower
from cockpit.hosts.http import request
from cockpit.hosts.procs import LaunchedProcess, process_alive, stop_process
from cockpit.hosts.transport import TransportError, quote_argv
from cockpit.runbook.kind import RunContext
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.sglang import emit  # noqa: F401 - the group's Slurm and LeaderWorkerSet hand-off (plan emit)
from cockpit.sglang.group import Member, Refused as _Refused, group_argv, group_state, node_state
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport
from cockpit.sglang.lint import lint as sglang_lint

PORT_FREE = ("import socket, sys\ns = socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "try:\n    s.bind((sys.argv[1], int(sys.argv[2])))\nexcept OSError as e:\n    print(e); sys.exit(1)")


@dataclass
class GroupPlan:
    members: list[Member]
    argvs: list[list[str]]
    lint: LintReport
    gated_port: int | None
    old: list[LaunchedProcess]
    version: str | None


def members(kind, ctx: RunContext, spec: StepSpec) -> tuple[list[Member], str]:
    """The nodes, rank 0 first, and the dist-init address (rank 0's, as the others reach it)."""
    nodes = kind.hosts(spec)
    config = ctx.hub.config
    port = spec.params.get("dist_init_port") or 20000
    addr = spec.params.get("dist_init_addr") or f"{config.host(nodes[0]).address or '127.0.0.1'}:{port}"
    found = [Member(rank, host, config.host(host).address or "127.0.0.1") for rank, host in enumerate(nodes)]
    return found, addr


async def _version(ctx: RunContext, kind, spec: StepSpec, host: str):
    from cockpit.sglang.hostschema import host_schema
    from cockpit.serving.helpschema import load_schema

    if spec.params.get("help_text"):
        return load_schema(spec.params["help_text"])
    python = spec.params.get("python") or ctx.hub.config.host(host).python
    return await host_schema(ctx.transport(host), python)


async def plan_group(kind, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
    from cockpit.errors import CockpitError

    group, dist_init = members(kind, ctx, spec)
    base = kind.argv(ctx, spec)

    def refuse(message: str) -> tuple[None, _Refused]:
        return None, _Refused(LintReport(), base, message)

    # every node's SGLang, asked at once: one version for the whole group
    results = await asyncio.gather(*(_version(ctx, kind, spec, m.host) for m in group), return_exceptions=True)
    for member, result in zip(group, results):
        if isinstance(result, (CockpitError, TransportError, OSError)):
            return refuse(f"rank {member.rank} ({member.host}): {result}")
        if isinstance(result, BaseException):
            raise result
    schemas: list[FlagSchema] = [r for r in results if not isinstance(r, BaseException)]
    versions = {m.host: r.version for m, r in zip(group, schemas)}
    if len(set(versions.values())) > 1:
        rank0 = versions[group[0].host]
        differ = [f"{host} runs {v}" for host, v in versions.items() if v != rank0]
        return refuse(f"SGLang differs across the group: rank 0 ({group[0].host}) runs {rank0}, {', '.join(differ)}; every node "
                      "must run the same version")
    schema = schemas[0]
    use_gate = bool(spec.params.get("gated", True)) and schema.get("--gated-launch-port") is not None
    gated_port = (spec.params.get("gated_port") or (spec.params.get("dist_init_port") or 20000) + 1000) if use_gate else None
    argvs = [group_argv(base, len(group), m.rank, dist_init, gated_port, spec.params.get("dist_timeout")) for m in group]
    lint = LintReport()
    if spec.params.get("lint", True):
        lint = sglang_lint(argvs[0], schema)
        if not lint.ok:
            return None, _Refused(lint, argvs[0])
    # the draft on every node, header-only, judged for the group's version
    draft = spec.params.get("draft_path")
    if draft:
        from cockpit.drafter.steps import inspect_on

        reports = await asyncio.gather(*(inspect_on(ctx.hub, m.host, draft) for m in group), return_exceptions=True)
        for member, report in zip(group, reports):
            if isinstance(report, BaseException):
                if isinstance(report, (CockpitError, TransportError, OSError)):
                    return refuse(f"the draft {draft} on rank {member.rank} ({member.host}): {report}")
                raise report
            problems = [p for ps in report.verdicts(schema.version).values() for p in ps]
            if problems:
                return refuse(f"the draft {draft} on rank {member.rank} ({member.host}) is not ready for SGLang {schema.version}: "
                              f"{problems[0].message}")
    # rank 0's rendezvous port free
    port = dist_init.rpartition(":")[2]
    python = spec.params.get("python") or ctx.hub.config.host(group[0].host).python
    bound = await ctx.transport(group[0].host).run([python, "-c", PORT_FREE, "0.0.0.0", port], timeout=30)
    old = _previous(ctx, spec)
    old_rank0 = next((o for o in old if o.host == group[0].host), None)
    if bound.exit_status != 0 and not (old_rank0 and await process_alive(ctx.transport(group[0].host), old_rank0.pid)):
        return refuse(f"rank 0's rendezvous port {port} on {group[0].host} is in use ({bound.output.strip()[:120]}): another "
                      "server or group holds it; stop it or choose dist_init_port")
    lines = []
    if old:
        lines.append("Stop the group this step started before, if it still runs: "
                     + ", ".join(f"pid {o.pid} on {o.host}" for o in old) + ".")
    lines.append(f"Start SGLang on {len(group)} nodes, rank 0 first (rendezvous at {dist_init}"
                 + ("; gated: activated after every node joined and its GPUs are verified again" if gated_port else "") + "):")
    for member, argv in zip(group, argvs):
        lines.append(f"  rank {member.rank} on {member.host}: " + quote_argv(argv))
    lines += [f"  {d.severity}: {d.message}" for d in lint.diagnoses if d.severity != "info"]
    return "\n".join(lines), GroupPlan(group, argvs, lint, gated_port, old, schema.version)


def _previous(ctx: RunContext, spec: StepSpec) -> list[LaunchedProcess]:
    from cockpit.hosts.procs import group_of

    result = ctx.runbook.result(spec.name)
    return group_of(result.evidence) if result is not None else []


async def _stop_all(ctx: RunContext, spec: StepSpec, processes: list[LaunchedProcess], why: str) -> None:
    for process in processes:
        transport = ctx.transport(process.host)
        with_alive = await process_alive(transport, process.pid)
        if with_alive:
            gone = await stop_process(transport, process.pid)
            ctx.audit("kill", host=process.host, step=spec.name, signal="TERM", pids=[process.pid], why=why, gone=gone)


async def node_lines(transport_of, process: LaunchedProcess, followers: dict) -> list[str]:
    follower = followers.setdefault(process.host, (LogFollower(transport_of(process.host), process.log, tail_bytes=1 << 20), []))
    try:
        update = await follower[0].poll()
        follower[1].extend(update.lines)
        del follower[1][:-4000]
    except (TransportError, OSError):
        pass
    return follower[1]


async def states(transport_of, processes: list[LaunchedProcess], followers: dict):
    """Every node's state from its log and its process (`transport_of(host)`: that host's transport)."""
    nodes = []
    for rank, process in enumerate(processes):
        lines = await node_lines(transport_of, process, followers)
        try:
            alive = await process_alive(transport_of(process.host), process.pid)
        except (TransportError, OSError):
            alive = True  # unreachable is not dead: the next poll says
        nodes.append(node_state(rank, process.host, lines, alive))
    return group_state(nodes)


async def run_group(kind, ctx: RunContext, spec: StepSpec, planned: GroupPlan) -> StepResult:
    started = _now()
    await _stop_all(ctx, spec, planned.old, "relaunch")
    processes: list[LaunchedProcess] = []
    port = spec.params.get("port", 30000)
    for member, argv in zip(planned.members, planned.argvs):
        from cockpit.hosts.procs import launch_marker, start_detached

        log = node_log(kind.log_path(spec), member.rank)
        pid, error = await start_detached(ctx.transport(member.host), argv, log, spec.params.get("cwd"), spec.params.get("env"),
                                          launch_marker(spec.name, member.host) + f" rank={member.rank}")
        if pid is None:
            await _stop_all(ctx, spec, processes, "a node could not start")
            return StepResult(StepState.FAILED, started, _now(), f"rank {member.rank} ({member.host}) could not start: {error}",
                              _evidence(processes, planned, port, started))
        ctx.audit("launch", host=member.host, step=spec.name, pid=pid, argv=argv, log=log, rank=member.rank)
        processes.append(LaunchedProcess(member.host, pid, log, tuple(argv), port if member.rank == 0 else None, started))
    evidence = _evidence(processes, planned, port, started)
    followers: dict = {}
    if planned.gated_port:
        outcome = await _activate(ctx, spec, planned, processes, followers)
        if outcome is not None:
            await _stop_all(ctx, spec, processes, "the group failed before activation")
            evidence["group_state"] = outcome[1]
            return StepResult(StepState.FAILED, started, _now(), outcome[0], evidence)
        evidence["activated"] = True
    await asyncio.sleep(float(spec.params.get("settle_s", 3.0)))
    group = await states(ctx.transport, processes, followers)
    evidence["group_state"] = group.to_json()
    if group.state == "failed":
        await _stop_all(ctx, spec, processes, "a node failed")
        return StepResult(StepState.FAILED, started, _now(), f"the group failed: {group.cause}", evidence)
    return StepResult(StepState.PASSED, started, _now(), f"{len(processes)} nodes started ({group.state}); rank 0 pid "
                      f"{processes[0].pid} on {processes[0].host}, port {port}, log {processes[0].log}", evidence)


def node_log(path: str, rank: int) -> str:
    """Each node's own log: `{rank}` in the step's log path, else `-rankN` before its extension (a
    home or /tmp shared over NFS must not interleave the nodes' logs)."""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    head, dot, ext = path.rpartition(".")
    if dot and "/" not in ext:
        return f"{head}-rank{rank}.{ext}"
    return f"{path}-rank{rank}"


def _evidence(processes: list[LaunchedProcess], planned: GroupPlan, port: int, started: float) -> dict:
    rank0 = processes[0].to_evidence() if processes else {}
    return {**rank0, "group": [p.to_evidence() for p in processes], "nodes": [m.host for m in planned.members],
            "sglang": planned.version, "lint": [d.to_json() for d in planned.lint.diagnoses]}


async def _activate(ctx: RunContext, spec: StepSpec, planned: GroupPlan, processes, followers) -> tuple[str, dict] | None:
    """Wait until every node joined and waits for activation; verify every node's GPUs now (nothing
    is allocated yet); activate.  Returns (why it failed, group state) or None when activated."""
    from cockpit.runbook.checks import DEFAULT_MAX_USED_MIB, judge

    deadline = time.monotonic() + float(spec.params.get("join_timeout_s", 600.0))
    while True:
        group = await states(ctx.transport, processes, followers)
        if group.state == "failed":
            return f"the group failed before activation: {group.cause}", group.to_json()
        if all(n.state in ("gated", "loading", "ready") for n in group.nodes):
            break
        if time.monotonic() > deadline:
            waiting = [f"rank {n.rank} ({n.host}): {n.state}" for n in group.nodes if n.state not in ("gated",)]
            return f"not every node joined in {spec.params.get('join_timeout_s', 600.0):g} s: {', '.join(waiting)}", group.to_json()
        await asyncio.sleep(0.5)
    # every rank joined and holds no model memory yet: the GPU gate, now, on every node
    gate = next((s for s in ctx.runbook.gates() if set(ctx.runbook.kind(s).hosts(s)) & set(m.host for m in planned.members)), None)
    limit = gate.params.get("max_used_mib", DEFAULT_MAX_USED_MIB) if gate is not None else DEFAULT_MAX_USED_MIB
    for member in planned.members:
        snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(member.host))
        ctx.hub.publish(snapshot)
        report = judge(without(snapshot, {p.pid for p in processes if p.host == member.host}), limit)
        if report.error or not report.clean:
            return (f"rank {member.rank} ({member.host}) is not clean at activation: {report.error or '; '.join(report.reasons)}",
                    group.to_json())
    rank0 = planned.members[0]
    host = spec.params.get("dist_init_addr", "").rpartition(":")[0].strip("[]") or rank0.address

    async def opener(h: str, p: int):
        return await ctx.transport(rank0.host).open_tcp(h, p)

    try:
        status, body = await request(opener, "POST", f"http://{host}:{planned.gated_port}/gate/activate", timeout=10)
    except (OSError, asyncio.TimeoutError, TransportError, ConnectionError) as exc:
        return f"could not activate the group at {host}:{planned.gated_port} on {rank0.host}: {exc}", group.to_json()
    if status != 200:
        return f"the gate on rank 0 answered HTTP {status}: {body[:120]!r}", group.to_json()
    ctx.audit("activate", step=spec.name, host=rank0.host, port=planned.gated_port)
    return None


def without(snapshot, pids: set[int]):
    """The snapshot as if the group's own processes (their CUDA contexts, before activation) were not
    there: anything else on the GPUs is what the gate is for."""
    from dataclasses import replace

    own = [p for p in snapshot.processes if p.pid in pids]
    if not own:
        return snapshot
    freed: dict[int | None, int] = {}
    for process in own:
        freed[process.gpu_index] = freed.get(process.gpu_index, 0) + (process.used_memory_mib or 0)
    gpus = tuple(replace(g, memory_used_mib=max(0, (g.memory_used_mib or 0) - freed.get(g.index, 0))) for g in snapshot.gpus)
    return replace(snapshot, gpus=gpus, processes=tuple(p for p in snapshot.processes if p.pid not in pids))


class GroupWatcher:
    """Every node of a running group, polled together: their logs and processes, the group's state
    (the TUI and `cockpit server` show it; a group with one dead rank is failed, never half-up)."""

    def __init__(self, transport_of, processes: list[LaunchedProcess]):
        self.transport_of = transport_of  # host name -> Transport
        self.processes = processes
        self.followers: dict = {}

    async def poll(self):
        return await states(self.transport_of, self.processes, self.followers)


async def wait_group_ready(ctx: RunContext, spec: StepSpec, launch: StepSpec, processes: list[LaunchedProcess],
                           timeout: float, poll_s: float) -> StepResult:
    """Ready when rank 0's /health_generate answers 200 and every other node is up (its stub
    started); failed as soon as one node fails or dies, and then the whole group is stopped."""
    from cockpit.serving.server import probe_health

    started = _now()
    rank0 = processes[0]
    followers: dict = {}
    deadline = time.monotonic() + timeout
    while True:
        group = await states(ctx.transport, processes, followers)
        facts = {"pid": rank0.pid, "port": rank0.port, "log": rank0.log, "group_state": group.to_json()}
        if group.state == "failed":
            await _stop_all(ctx, launch, processes, "a node failed")
            facts["stopped"] = True
            return StepResult(StepState.FAILED, started, _now(), f"the group failed: {group.cause}; every rank was stopped", facts)
        health = await probe_health(ctx.transport(rank0.host), rank0.port or 30000, path="/health_generate")
        facts["health"] = health
        if health == "ready" and all(n.state == "ready" for n in group.nodes):
            return StepResult(StepState.PASSED, started, _now(), f"the group is ready: {len(processes)} nodes, rank 0 "
                              f"/health_generate 200 on port {rank0.port}", facts)
        if time.monotonic() > deadline:
            behind = ", ".join(f"rank {n.rank} ({n.host}): {n.state}" for n in group.nodes if n.state != "ready")
            return StepResult(StepState.FAILED, started, _now(), f"not ready after {timeout:g} s (rank 0 health: {health}; {behind})",
                              facts)
        await asyncio.sleep(poll_s)
