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

from typing import Any

from cockpit.hosts.transport import quote_argv
from cockpit.runbook.kind import RunContext
from cockpit.runbook.model import StepResult, StepSpec
from cockpit.serving import group as core
from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.lint import LintReport
from cockpit.serving.steps import Refused, ServeLaunch
from cockpit.vllm import group as forms
from cockpit.vllm import raygroup
from cockpit.vllm.group import DP_FLAGS, MODEL, MODEL_FLAGS, form, group_argv, head_address, model_argv, world_size

HEALTH = "/health"
DEFAULT_PORT = 8000


version_key = "vllm"
model = MODEL
health_path = HEALTH  # the head's: its API server starts only once every node's engines shook hands with it
default_port = DEFAULT_PORT


async def _vllm(ctx: RunContext, spec: StepSpec, host: str) -> FlagSchema:
    from cockpit.serving.helpschema import load_schema
    from cockpit.vllm.hostschema import host_vllm

    asked = ServeLaunch.request(spec)
    if asked.help_text:
        schema = load_schema(asked.help_text)
        schema.version = asked.param("vllm_version") or schema.version
        return schema
    return (await host_vllm(ctx.transport(host), asked.python_on(ctx.hub.config.host(host).python)))[1]


async def _gpus(ctx: RunContext, host: str) -> int:
    snapshot = ctx.hub.latest.get(host)
    if snapshot is None or not snapshot.gpus:
        snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(host))
        ctx.hub.publish(snapshot)
    return len(snapshot.gpus)


async def plan_group(kind, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
    if form(kind.request(spec).engine_params) == "ray":
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
    shape = form(ServeLaunch.request(spec).engine_params)
    needed = DP_FLAGS if shape == "data" else tuple(f for f in MODEL_FLAGS if f.startswith("--"))
    missing = [f for f in needed if schema.get(f) is None]
    if missing:
        return refuse(f"vLLM {schema.version} on {hosts[0]} has no {', '.join(missing)}: " + (
            "data parallel over nodes needs a newer vLLM (0.9.2 has them)" if shape == "data" else
            "one model over several nodes without Ray needs vLLM 0.11 on (Ray's form, older vLLMs' only one, is not built)"))
    asked = kind.request(spec)
    tp = asked.tp or 1
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
    if asked.lint:
        reports = [kind.lint(argv, spec, schema) for argv in argvs[:2]]  # the head's and a headless node's (the rest differ in numbers)
        bad = next(((r, a) for r, a in zip(reports, argvs) if not r.ok), None)
        if bad is not None:
            return None, Refused(*bad)
        lint = reports[0]
    draft = asked.draft_path
    python = asked.python_on(ctx.hub.config.host(hosts[0]).python)
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
    ranks_key = "dp_ranks" if shape == "data" else "gpus_per_node"
    return "\n".join(lines), core.NodePlan(hosts, argvs, lint, schema.version, old, {ranks_key: ranks}, gate_each_node=True)


async def run_form(kind, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
    """A Ray cluster's launch (vllm/raygroup.py): its head and workers first, then the server on the head."""
    return await raygroup.run(kind, ctx, spec, planned)


class Emit:
    """The hand-off of the step's form (core.GroupEmit): data parallel and the model form (vllm/group.py), Ray's
    (vllm/raygroup.py)."""

    def slurm(self, kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
        if form(kind.request(spec).engine_params) == "ray":
            return raygroup.emit_slurm(kind, spec, python, gpus_per_node)
        return forms.emit.slurm(kind, spec, python, gpus_per_node)

    def lws(self, kind, spec, python: str = "python3", image: str = "vllm/vllm-openai:latest", gpus_per_node: int | None = None) -> str:
        if form(kind.request(spec).engine_params) == "ray":
            return raygroup.emit_lws(kind, spec, python, image, gpus_per_node)
        return forms.emit.lws(kind, spec, python, image, gpus_per_node)


emit = Emit()
