"""vLLM's launch group over SSH: data parallel over the nodes (vllm/group.py has the command lines and the node model),
planned, started node by node with each node's GPUs verified just before its own start, waited for and watched as a
group (serving/group.py).

Before anything starts (plan): every node's vLLM answers with its version and `vllm serve --help` (all the same, else
refused naming the nodes that differ; a version without `--headless` is refused); each node's GPU count (from the
gate's sample, just taken) over --tensor-parallel-size is its data-parallel ranks; the head's and a headless node's
command lines are linted against that vLLM's own flags; the draft is read header-only on every node and judged by
vLLM's loader for that version; the head's --data-parallel-rpc-port must be free.

Start (run): the head (rank 0) first, then every headless node, each detached with the step's marker and its own log.
vLLM has no gate of its own to hold a node before it allocates (SGLang 0.5.23's --gated-launch-port); the cockpit
gates per node instead: right before a node starts, its GPUs are sampled again and must be clean, else the nodes
already started are stopped and the launch fails naming the node.  A node that fails stops the whole group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cockpit.hosts.procs import LaunchedProcess
from cockpit.hosts.transport import quote_argv
from cockpit.runbook.kind import RunContext
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.serving import group as core
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport
from cockpit.serving.steps import Refused
from cockpit.vllm import group as forms
from cockpit.vllm import raygroup
from cockpit.vllm.group import DP_FLAGS, MODEL, MODEL_FLAGS, form, group_argv, head_address, model_argv, world_size

HEALTH = "/health"
DEFAULT_PORT = 8000


@dataclass
class GroupPlan:
    hosts: list[str]
    argvs: list[list[str]]
    ranks: list[int]  # each node's data-parallel ranks (its engines)
    lint: LintReport
    old: list[LaunchedProcess]
    version: str | None


async def _vllm(ctx: RunContext, spec: StepSpec, host: str) -> FlagSchema:
    from cockpit.serving.helpschema import load_schema
    from cockpit.vllm.hostschema import host_vllm

    if spec.params.get("help_text"):
        schema = load_schema(spec.params["help_text"])
        schema.version = spec.params.get("vllm_version") or schema.version
        return schema
    python = spec.params.get("python") or ctx.hub.config.host(host).python
    return (await host_vllm(ctx.transport(host), python))[1]


async def _gpus(ctx: RunContext, host: str) -> int:
    snapshot = ctx.hub.latest.get(host)
    if snapshot is None or not snapshot.gpus:
        snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(host))
        ctx.hub.publish(snapshot)
    return len(snapshot.gpus)


async def plan_group(kind, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
    if form(spec.params) == "ray":
        return await raygroup.plan(kind, ctx, spec, lambda host: _vllm(ctx, spec, host), lambda host: _gpus(ctx, host))
    hosts = list(kind.hosts(spec))
    base = kind.argv(ctx, spec)

    def refuse(message: str) -> tuple[None, Refused]:
        return None, Refused(LintReport(), base, message)

    schemas, why = await core.every_node(hosts, lambda host: _vllm(ctx, spec, host))
    why = why or core.one_version("vLLM", hosts, [s.version for s in schemas])
    if why:
        return refuse(why)
    schema: FlagSchema = schemas[0]
    shape = form(spec.params)
    needed = DP_FLAGS if shape == "data" else tuple(f for f in MODEL_FLAGS if f.startswith("--"))
    missing = [f for f in needed if schema.get(f) is None]
    if missing:
        return refuse(f"vLLM {schema.version} on {hosts[0]} has no {', '.join(missing)}: " + (
            "data parallel over nodes needs a newer vLLM (0.9.2 has them)" if shape == "data" else
            "one model over several nodes without Ray needs vLLM 0.11 on (Ray's form, older vLLMs' only one, is not built)"))
    tp = int(spec.params.get("tp") or 1)
    counts, why = await core.every_node(hosts, lambda host: _gpus(ctx, host))
    if why:
        return refuse(why)
    head, rpc_port = head_address(ctx, spec, hosts)
    if shape == "model":
        world = world_size(base)
        share = world // len(hosts)
        for rank, (host, gpus) in enumerate(zip(hosts, counts)):
            if share > gpus:
                return refuse(f"rank {rank} ({host}) has {gpus} GPUs, fewer than its share of the model ({share}: tensor x pipeline "
                              f"parallel {world} over {len(hosts)} nodes)")
        ranks = [share] * len(hosts)
        argvs = [model_argv(base, len(hosts), rank, head, rpc_port) for rank in range(len(hosts))]
    else:
        for rank, (host, gpus) in enumerate(zip(hosts, counts)):
            if gpus == 0 or gpus % tp:
                return refuse(f"rank {rank} ({host}) has {gpus} GPUs: they do not split into tensor-parallel groups of {tp} (tp)")
        ranks = [gpus // tp for gpus in counts]
        argvs = [group_argv(base, len(hosts), rank, head, rpc_port, 0, ranks) for rank in range(len(hosts))]
    lint = LintReport()
    if spec.params.get("lint", True):
        reports = [kind.lint(argv, spec, schema) for argv in argvs[:2]]  # the head's and a headless node's (the rest differ in numbers)
        bad = next(((r, a) for r, a in zip(reports, argvs) if not r.ok), None)
        if bad is not None:
            return None, Refused(*bad)
        lint = reports[0]
    draft = spec.params.get("draft_path")
    python = spec.params.get("python") or ctx.hub.config.host(hosts[0]).python
    port_flag = "--data-parallel-rpc-port" if shape == "data" else "--master-port"
    why = ((draft and await core.draft_problem(ctx, hosts, draft, schema.version, "vllm", "vLLM"))
           or await core.rank0_port_problem(ctx, spec, hosts[0], python, rpc_port, port_flag))
    if why:
        return refuse(why)
    old = core.previous(ctx, spec)
    lines = []
    if old:
        lines.append("Stop the group this step started before, if it still runs: " + ", ".join(f"pid {o.pid} on {o.host}" for o in old) + ".")
    if shape == "data":
        lines.append(f"Start vLLM {schema.version} as data parallel over {len(hosts)} nodes ({sum(ranks)} ranks: "
                     + ", ".join(str(r) for r in ranks) + f"), the head first (handshake at {head}:{rpc_port}), each node's GPUs "
                     "verified again right before its own start:")
    else:
        lines.append(f"Start vLLM {schema.version} as one model over {len(hosts)} nodes (tensor x pipeline parallel {sum(ranks)}, "
                     f"{ranks[0]} GPUs a node), the head first (torch.distributed at {head}:{rpc_port}), each node's GPUs verified "
                     "again right before its own start:")
    for rank, (host, argv) in enumerate(zip(hosts, argvs)):
        lines.append(f"  rank {rank} on {host}{' (head, serves)' if rank == 0 else ' (headless)'}: " + quote_argv(argv))
    lines += [f"  {d.severity}: {d.message}" for d in lint.diagnoses if d.severity != "info"]
    return "\n".join(lines), GroupPlan(hosts, argvs, ranks, lint, old, schema.version)


async def run_group(kind, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
    if not isinstance(planned, GroupPlan):  # a Ray cluster's (vllm/raygroup.py)
        return await raygroup.run(kind, ctx, spec, planned)
    started = _now()
    await core.stop_all(ctx, spec, planned.old, "relaunch")
    port = int(spec.params.get("port") or DEFAULT_PORT)

    async def gate(rank: int) -> str | None:
        unclean = await core.gpus_unclean(ctx, planned.hosts[rank])
        if unclean is None:
            return None
        ctx.audit("refused", step=spec.name, host=planned.hosts[rank], rank=rank, why=unclean)
        return f"rank {rank} ({planned.hosts[rank]}) is not clean at its start: {unclean}"

    processes, why = await core.start_nodes(ctx, spec, kind.log_path(spec), planned.hosts, planned.argvs, port, gate)
    evidence = core.evidence(processes, planned.hosts, "vllm", planned.version, planned.lint)
    evidence["dp_ranks" if "--nnodes" not in planned.argvs[0] else "gpus_per_node"] = planned.ranks
    if why:
        return StepResult(StepState.FAILED, started, _now(), why + ("; the nodes started before it were stopped" if processes else ""),
                          evidence)
    return await core.settled(ctx, spec, processes, MODEL, evidence, started, f"{len(processes)} nodes")


class GroupWatcher(core.GroupWatcher):
    """vLLM's group, watched as serving/group.py watches every engine's."""

    def __init__(self, transport_of, processes: list[LaunchedProcess]):
        super().__init__(transport_of, processes, MODEL)


async def wait_group_ready(ctx: RunContext, spec: StepSpec, launch: StepSpec, processes: list[LaunchedProcess],
                           timeout: float, poll_s: float) -> StepResult:
    """Ready when the head's /health answers 200 (its API server starts only once every node's engines shook hands with
    it) and every headless node's engines are up."""
    return await core.wait_group_ready(ctx, spec, launch, processes, timeout, poll_s, MODEL, HEALTH, DEFAULT_PORT)


class emit:  # noqa: N801 - the module-like face the CLI asks of every engine's group (engine.group.emit.slurm / .lws)
    """The hand-off of the step's form: data parallel and the model form (vllm/group.py), Ray's (vllm/raygroup.py)."""

    @staticmethod
    def slurm(kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
        if form(spec.params) == "ray":
            return raygroup.emit_slurm(kind, spec, python, gpus_per_node)
        return forms.emit.slurm(kind, spec, python, gpus_per_node)

    @staticmethod
    def lws(kind, spec, python: str = "python3", image: str = "vllm/vllm-openai:latest", gpus_per_node: int | None = None) -> str:
        if form(spec.params) == "ray":
            return raygroup.emit_lws(kind, spec, python, image, gpus_per_node)
        return forms.emit.lws(kind, spec, python, image, gpus_per_node)
