"""One vLLM model over a Ray cluster the cockpit starts (`parallel = "ray"`): vLLM's older way to spread tensor and
pipeline parallel over nodes (before `--nnodes`, 0.11), still taken by every recorded version.

    node 0:  ray start --head --port GCS --num-gpus G --include-dashboard=false --disable-usage-stats --block
    node r:  ray start --address HEAD:GCS --num-gpus G --disable-usage-stats --block
    then, node 0:  vllm serve M --tensor-parallel-size T [--pipeline-parallel-size P] --distributed-executor-backend ray
                   (RAY_ADDRESS=HEAD:GCS)

Before anything starts (plan): every node's vLLM and Ray answer with their versions (each the same on every node: Ray
refuses a cluster of mixed versions), the GPUs the gate's samples found hold the model (T x P at most their sum), the
server's line is linted against that vLLM's flags, the head's GCS port is free.  Run: the Ray head, then every worker;
the cluster is asked (through the head's own Python and Ray) until it has every node and their GPUs; then every
node's GPUs are verified again (Ray's daemons hold none: this is the last moment before vLLM places its workers) and
vLLM starts on the head.  Every process is one member of the group (the server first), so a dead Ray worker fails the
group and `plan stop` stops the cluster too."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import time
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
from cockpit.serving.steps import Refused, ServeLaunch
from cockpit.vllm.group import HEAD, MODEL, RAY_MODULE, _q, _task, head_address, sbatch_opening, sbatch_ready, world_size

RAY_VERSION = ["-c", "import ray; print(ray.__version__)"]
# the cluster as Ray itself says it: its live nodes and GPUs (a driver joins for a moment: no GPU touched)
CLUSTER = ("import json, sys, ray\n"
           "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
           "alive = [n for n in ray.nodes() if n.get('Alive')]\n"
           "print(json.dumps({'nodes': len(alive), 'gpus': ray.cluster_resources().get('GPU', 0)}))\n")
BACKEND = "--distributed-executor-backend"


@dataclass
class RayPlan:
    hosts: list[str]
    head: str  # the head's address as the others reach it
    port: int  # its GCS port
    server: list[str]  # vLLM's line on the head
    ray_argvs: list[list[str]]  # `ray start` per node, the head first
    world: int
    gpus: list[int]
    lint: LintReport
    old: list[LaunchedProcess]
    version: str | None
    ray_version: str | None


def ray_start(python: str, head: str, port: int, gpus: int, is_head: bool, node_ip: str | None, extra: list[str]) -> list[str]:
    argv = [python, "-m", RAY_MODULE, "start"]
    argv += ["--head", "--port", str(port), "--include-dashboard=false"] if is_head else ["--address", f"{head}:{port}"]
    argv += ["--num-gpus", str(gpus), "--disable-usage-stats", "--block"]
    if node_ip:
        argv += ["--node-ip-address", node_ip]
    return argv + list(extra)


def server_argv(base: list[str]) -> list[str]:
    from cockpit.serving.lint import without_flags

    return without_flags(base, {BACKEND}) + [BACKEND, "ray"]


def _ip(address: str | None) -> str | None:
    """The node's address for Ray's --node-ip-address when the config gives an IP (several nodes on one machine need
    it; a name is left to Ray to resolve)."""
    try:
        return str(ipaddress.ip_address(address or ""))
    except ValueError:
        return None


async def plan(kind, ctx: RunContext, spec: StepSpec, ask_vllm, ask_gpus) -> tuple[str | None, Any]:
    hosts = list(kind.hosts(spec))
    base = kind.argv(ctx, spec)
    asked = kind.request(spec)

    def refuse(message: str) -> tuple[None, Refused]:
        return None, Refused(LintReport(), base, message)

    schemas, why = await core.every_node(hosts, ask_vllm)
    why = why or core.one_version("vLLM", hosts, [s.version for s in schemas])
    if why:
        return refuse(why)
    schema: FlagSchema = schemas[0]

    async def ray_version(host: str) -> str:
        from cockpit.errors import CockpitError

        python = asked.python_on(ctx.hub.config.host(host).python)
        done = await ctx.transport(host).run([python, *RAY_VERSION], timeout=120)
        lines = done.stdout.strip().splitlines()
        if done.exit_status != 0 or not lines:
            raise CockpitError(f"Ray is not importable by {python}: install it there (pip install ray: vLLM's ray extra)")
        return lines[-1].strip()

    rays, why = await core.every_node(hosts, ray_version)
    why = why or core.one_version("Ray", hosts, rays)
    if why:
        return refuse(why)
    counts, why = await core.every_node(hosts, ask_gpus)
    if why:
        return refuse(why)
    server = server_argv(base)
    world = world_size(server)
    if world > sum(counts):
        return refuse(f"tensor x pipeline parallel is {world}, more than the {sum(counts)} GPUs of the {len(hosts)} nodes")
    lint = LintReport()
    if asked.lint:
        lint = kind.lint(server, spec, schema)
        if not lint.ok:
            return None, Refused(lint, server)
    head, port = head_address(ctx, spec, hosts)
    python0 = asked.python_on(ctx.hub.config.host(hosts[0]).python)
    why = await core.rank0_port_problem(ctx, spec, hosts[0], python0, port, "Ray GCS port")
    if why:
        return refuse(why)
    extra = [str(w) for w in asked.param("ray_args") or []]
    ray_argvs = [ray_start(asked.python_on(ctx.hub.config.host(h).python), head, port, gpus, rank == 0,
                           _ip(ctx.hub.config.host(h).address), extra) for rank, (h, gpus) in enumerate(zip(hosts, counts))]
    old = core.previous(ctx, spec)
    lines = []
    if old:
        lines.append("Stop the group this step started before, if it still runs: " + ", ".join(f"pid {o.pid} on {o.host}" for o in old) + ".")
    lines.append(f"Start a Ray cluster ({rays[0]}) over {len(hosts)} nodes, the head on {hosts[0]} (GCS at {head}:{port}):")
    for host, argv in zip(hosts, ray_argvs):
        lines.append(f"  on {host}: " + quote_argv(argv))
    lines.append(f"then, once Ray has every node and {world} GPUs, and every node's GPUs are verified again, vLLM {schema.version} "
                 f"on {hosts[0]} (RAY_ADDRESS={head}:{port}):")
    lines.append("  " + quote_argv(server))
    lines += [f"  {d.severity}: {d.message}" for d in lint.diagnoses if d.severity != "info"]
    return "\n".join(lines), RayPlan(hosts, head, port, server, ray_argvs, world, counts, lint, old, schema.version, rays[0])


def _ray_log(path: str) -> str:
    """Where a node's `ray start` writes: the step's log with -ray before its extension (each node's own: -rankN)."""
    head, dot, ext = path.rpartition(".")
    return f"{head}-ray.{ext}" if dot and "/" not in ext else f"{path}-ray"


async def _cluster(ctx: RunContext, spec: StepSpec, planned: RayPlan) -> dict | None:
    python = ServeLaunch.request(spec).python_on(ctx.hub.config.host(planned.hosts[0]).python)
    done = await ctx.transport(planned.hosts[0]).run([python, "-c", CLUSTER, f"{planned.head}:{planned.port}"], timeout=120)
    try:
        found = json.loads((done.stdout.strip().splitlines() or ["null"])[-1])
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


async def run(kind, ctx: RunContext, spec: StepSpec, planned: RayPlan) -> StepResult:
    started = _now()
    await core.stop_all(ctx, spec, planned.old, "relaunch")
    asked = kind.request(spec)
    port = asked.port
    log_path = kind.log_path(spec)
    ray_processes: list[LaunchedProcess] = []
    evidence: dict = {}

    def failed(why: str, members: list[LaunchedProcess]) -> StepResult:
        evidence.update(core.evidence(members, [p.host for p in members], "vllm", planned.version, planned.lint))
        evidence["ray"] = planned.ray_version
        return StepResult(StepState.FAILED, started, _now(), why, evidence)

    for rank, (host, argv) in enumerate(zip(planned.hosts, planned.ray_argvs)):
        role = "the Ray head" if rank == 0 else "a Ray worker"
        process, error = await core.start_one(ctx, spec, host, argv, core.node_log(_ray_log(log_path), rank), rank, None, started)
        if process is None:
            await core.stop_all(ctx, spec, ray_processes, "a Ray node could not start")
            return failed(f"{role} on {host} could not start: {error}", ray_processes)
        ray_processes.append(process)
    # the cluster, as Ray says it: every node and their GPUs (a worker that died or never reached the head fails it)
    deadline = time.monotonic() + asked.join_timeout_s
    followers: dict = {}
    cluster: dict | None = None
    while True:
        group = await core.states(ctx.transport, ray_processes, followers, MODEL)
        if group.state == "failed":
            await core.stop_all(ctx, spec, ray_processes, "the Ray cluster failed")
            evidence["group_state"] = group.to_json()
            return failed(f"the Ray cluster failed: {group.cause}", ray_processes)
        if group.state == "ready":
            cluster = await _cluster(ctx, spec, planned)
            if cluster and cluster.get("nodes", 0) >= len(planned.hosts) and cluster.get("gpus", 0) >= planned.world:
                break
        if time.monotonic() > deadline:
            await core.stop_all(ctx, spec, ray_processes, "the Ray cluster did not form")
            said = f"Ray has {cluster.get('nodes')} nodes and {cluster.get('gpus'):g} GPUs" if cluster else "Ray did not answer"
            return failed(f"the Ray cluster did not form in {asked.join_timeout_s:g} s: {said}, the model needs "
                          f"{len(planned.hosts)} nodes and {planned.world} GPUs", ray_processes)
        await asyncio.sleep(1.0)
    evidence["cluster"] = cluster
    # the last moment before vLLM places its workers: every node's GPUs verified again (Ray's daemons hold none)
    for rank, host in enumerate(planned.hosts):
        unclean = await core.gpus_unclean(ctx, host)
        if unclean:
            ctx.audit("refused", step=spec.name, host=host, rank=rank, why=unclean)
            await core.stop_all(ctx, spec, ray_processes, "a node was not clean before vLLM started")
            return failed(f"{host} is not clean before vLLM's start: {unclean}; the Ray cluster was stopped", ray_processes)
    server, error = await core.start_one(ctx, spec, planned.hosts[0], planned.server, core.node_log(log_path, 0), 0, port, started,
                                         {"RAY_ADDRESS": f"{planned.head}:{planned.port}"})
    if server is None:
        await core.stop_all(ctx, spec, ray_processes, "vLLM could not start")
        return failed(f"vLLM on {planned.hosts[0]} could not start: {error}; the Ray cluster was stopped", ray_processes)
    members = [server, *ray_processes[1:], ray_processes[0]]  # the server is rank 0; the Ray head last
    evidence.update(core.evidence(members, [p.host for p in members], "vllm", planned.version, planned.lint))
    evidence.update({"ray": planned.ray_version, "cluster": cluster})
    return await core.settled(ctx, spec, members, MODEL, evidence, started,
                              f"a Ray cluster of {len(planned.hosts)} nodes ({cluster.get('gpus', 0):g} GPUs) and vLLM on it")


# --- the hand-off to a scheduler (plan emit STEP --format slurm|lws) --------------------------------------------------

# the batch shell's wait for the cluster: exits 0 once Ray has N live nodes and W GPUs (argv: address, N, W)
CLUSTER_READY = ("import sys, ray\n"
                 "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
                 "alive = [n for n in ray.nodes() if n.get('Alive')]\n"
                 "sys.exit(0 if len(alive) >= int(sys.argv[2]) and ray.cluster_resources().get('GPU', 0) >= int(sys.argv[3]) else 1)\n")


def _hand_off(kind, spec, python: str, gpus_per_node: int | None):
    from cockpit.errors import CockpitError

    asked = kind.request(spec)
    nodes = asked.nodes
    gpus = gpus_per_node or 8
    base = kind.base_argv(None, spec, python)
    server = server_argv([python if i == 0 else w for i, w in enumerate(base)])
    world = world_size(server)
    if world > nodes * gpus:
        raise CockpitError(f"'{spec.name}': tensor x pipeline parallel is {world}, more than {nodes} nodes x {gpus} GPUs (--gpus-per-node)")
    extra = [str(w) for w in asked.param("ray_args") or []]
    return nodes, gpus, world, asked.dist_init_port, server, extra, asked.port


def emit_slurm(kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
    nodes, gpus, world, port, server, extra, http_port = _hand_off(kind, spec, python, gpus_per_node)
    head = ray_start(python, HEAD, port, gpus, True, None, extra)
    worker = ray_start(python, HEAD, port, gpus, False, None, extra)
    check = _q([python, "-c", CLUSTER_READY])
    lines = [
        *sbatch_opening(spec.name, f"vLLM over a Ray cluster of {nodes} nodes (tensor x pipeline parallel {world}), the commands "
                        "the cockpit runs", nodes, gpus),
        "# the Ray head on the first node, a worker on every other (each task's own $SLURM_PROCID)",
        f"srun --ntasks={nodes} --nodes={nodes} --output=\"vllm-%x-%j-ray-node%n.log\" \\",
        "  bash -c 'if [ \"$SLURM_PROCID\" = 0 ]; then exec " + _task(head) + "; else exec " + _task(worker) + "; fi' &",
        f"# vLLM on the head once Ray has every node and {world} GPUs (for at most 10 minutes)",
        "for _ in $(seq 1 120); do",
        f"  if {check} \"$HEAD_NODE:{port}\" {nodes} {world}; then break; fi",
        "  sleep 5",
        "done",
        f"RAY_ADDRESS=\"$HEAD_NODE:{port}\" srun --overlap --nodes=1 --ntasks=1 --nodelist=\"$HEAD_NODE\" --output=\"vllm-%x-%j-server.log\" \\",
        "  " + " ".join(_q([w]) for w in server) + " &",
        *sbatch_ready(http_port),
        "",
        "# What the cockpit can still watch from outside: the server's log (vllm-<job>-<id>-server.log) and each node's Ray log",
        f"# (`cockpit server --log FILE --host LOGIN-NODE`), the live figures (`cockpit server --url http://HEAD:{http_port}`).",
    ]
    return "\n".join(lines) + "\n"


def emit_lws(kind, spec, python: str = "python3", image: str = "vllm/vllm-openai:latest", gpus_per_node: int | None = None) -> str:
    from cockpit.serving.emit import lws_manifest

    nodes, gpus, world, port, server, extra, http_port = _hand_off(kind, spec, python, gpus_per_node)
    head = [w for w in ray_start(python, "", port, gpus, True, None, extra) if w != "--block"]
    worker = ray_start(python, "$(LWS_LEADER_ADDRESS)", port, gpus, False, None, extra)
    leader = (_q(head) + f" && until {_q([python, '-c', CLUSTER_READY])} \"127.0.0.1:{port}\" {nodes} {world}; do sleep 5; done"
              f" && RAY_ADDRESS=127.0.0.1:{port} exec " + _q(server))
    name = f"cockpit-{spec.name}".lower().replace("_", "-")
    header = (f"# cockpit plan emit {spec.name} --format lws: vLLM over a Ray cluster of {nodes} nodes (tensor x pipeline parallel "
              f"{world}) as a LeaderWorkerSet.\n# The leader starts the Ray head, waits for every worker's GPUs, then serves; "
              "each worker joins the head's Ray.")
    return lws_manifest(name, nodes, image, gpus, http_port, "/health", "vllm", ["bash", "-c", leader], worker, header)
