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
from typing import Any

from cockpit.hosts.http import request
from cockpit.hosts.procs import LaunchedProcess
from cockpit.hosts.transport import TransportError, quote_argv
from cockpit.runbook.kind import RunContext
from cockpit.runbook.model import StepResult, StepSpec
from cockpit.sglang import emit  # noqa: F401 - the group's Slurm and LeaderWorkerSet hand-off (plan emit)
from cockpit.sglang.group import MODEL, Member, Refused as _Refused, group_argv
from cockpit.serving import group as core
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport
from cockpit.serving.request import LaunchRequest
from cockpit.sglang.lint import lint as sglang_lint


version_key = "sglang"
model = MODEL
health_path = "/health_generate"  # rank 0's: up once every node serves
default_port = 30000


def members(kind, ctx: RunContext, spec: StepSpec) -> tuple[list[Member], str]:
    """The nodes, rank 0 first, and the dist-init address (rank 0's, as the others reach it)."""
    nodes = kind.hosts(spec)
    config = ctx.hub.config
    asked = kind.request(spec)
    addr = asked.dist_init_addr or f"{config.host(nodes[0]).address or '127.0.0.1'}:{asked.dist_init_port}"
    found = [Member(rank, host, config.host(host).address or "127.0.0.1") for rank, host in enumerate(nodes)]
    return found, addr


async def _version(ctx: RunContext, kind, spec: StepSpec, host: str):
    from cockpit.sglang.hostschema import host_schema
    from cockpit.serving.helpschema import load_schema

    asked = kind.request(spec)
    if asked.help_text:
        return load_schema(asked.help_text)
    return await host_schema(ctx.transport(host), asked.python_on(ctx.hub.config.host(host).python))


async def plan_group(kind, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
    group, dist_init = members(kind, ctx, spec)
    base = kind.argv(ctx, spec)
    asked = kind.request(spec)

    def refuse(message: str) -> tuple[None, _Refused]:
        return None, _Refused(LintReport(), base, message)

    hosts = [m.host for m in group]
    # every node's SGLang, asked at once: one version for the whole group
    schemas, why = await core.every_node(hosts, lambda host: _version(ctx, kind, spec, host))
    why = why or core.one_version("SGLang", hosts, [s.version for s in schemas])
    if why:
        return refuse(why)
    schema: FlagSchema = schemas[0]
    use_gate = bool(asked.param("gated")) and schema.get("--gated-launch-port") is not None
    gated_port = (asked.param("gated_port") or asked.dist_init_port + 1000) if use_gate else None
    argvs = [group_argv(base, len(group), m.rank, dist_init, gated_port, asked.param("dist_timeout")) for m in group]
    lint = LintReport()
    if asked.lint:
        lint = sglang_lint(argvs[0], schema)
        if not lint.ok:
            return None, _Refused(lint, argvs[0])
    # the draft on every node, header-only, judged for the group's version; rank 0's rendezvous port free
    draft = asked.draft_path
    python = asked.python_on(ctx.hub.config.host(group[0].host).python)
    why = ((draft and await core.draft_problem(ctx, hosts, draft, schema.version, "sglang", "SGLang"))
           or await core.rank0_port_problem(ctx, spec, hosts[0], python, dist_init.rpartition(":")[2], "rendezvous port"))
    if why:
        return refuse(why)
    old = core.previous(ctx, spec)
    lines = []
    if old:
        lines.append("Stop the group this step started before, if it still runs: "
                     + ", ".join(f"pid {o.pid} on {o.host}" for o in old) + ".")
    lines.append(f"Start SGLang on {len(group)} nodes, rank 0 first (rendezvous at {dist_init}"
                 + ("; gated: activated after every node joined and its GPUs are verified again" if gated_port else "") + "):")
    for member, argv in zip(group, argvs):
        lines.append(f"  rank {member.rank} on {member.host}: " + quote_argv(argv))
    lines += [f"  {d.severity}: {d.message}" for d in lint.diagnoses if d.severity != "info"]
    activate = None
    if gated_port:
        async def activate(ctx: RunContext, spec: StepSpec, processes: list[LaunchedProcess], followers: dict):
            return await _activate(ctx, spec, asked, group, gated_port, processes, followers)
    return "\n".join(lines), core.NodePlan(hosts, argvs, lint, schema.version, old, activate=activate)


async def run_form(kind, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
    raise TypeError(f"SGLang's group plans are NodePlans, not {type(planned).__name__}")


async def _activate(ctx: RunContext, spec: StepSpec, asked: LaunchRequest, members: list[Member], gated_port: int, processes,
                    followers) -> tuple[str, dict] | None:
    """Wait until every node joined and waits for activation; verify every node's GPUs now (nothing
    is allocated yet); activate.  Returns (why it failed, group state) or None when activated."""
    deadline = time.monotonic() + asked.join_timeout_s
    while True:
        group = await core.states(ctx.transport, processes, followers, MODEL)
        if group.state == "failed":
            return f"the group failed before activation: {group.cause}", group.to_json()
        if all(n.state in ("gated", "loading", "ready") for n in group.nodes):
            break
        if time.monotonic() > deadline:
            waiting = [f"rank {n.rank} ({n.host}): {n.state}" for n in group.nodes if n.state not in ("gated",)]
            return f"not every node joined in {asked.join_timeout_s:g} s: {', '.join(waiting)}", group.to_json()
        await asyncio.sleep(0.5)
    # every rank joined and holds no model memory yet: the GPU gate, now, on every node
    for member in members:
        unclean = await core.gpus_unclean(ctx, member.host, {p.pid for p in processes if p.host == member.host})
        if unclean:
            return f"rank {member.rank} ({member.host}) is not clean at activation: {unclean}", group.to_json()
    rank0 = members[0]
    host = (asked.dist_init_addr or "").rpartition(":")[0].strip("[]") or rank0.address

    async def opener(h: str, p: int):
        return await ctx.transport(rank0.host).open_tcp(h, p)

    try:
        status, body = await request(opener, "POST", f"http://{host}:{gated_port}/gate/activate", timeout=10)
    except (OSError, asyncio.TimeoutError, TransportError, ConnectionError) as exc:
        return f"could not activate the group at {host}:{gated_port} on {rank0.host}: {exc}", group.to_json()
    if status != 200:
        return f"the gate on rank 0 answered HTTP {status}: {body[:120]!r}", group.to_json()
    ctx.audit("activate", step=spec.name, host=rank0.host, port=gated_port)
    return None


without = core.without
node_log = core.node_log
