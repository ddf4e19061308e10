"""vLLM over several nodes (issue 39, class 6; scale-facts §4): data parallel over the nodes, vLLM's own multi-node
form.  Node 0 serves (the API server, its local engines), every other node runs `--headless` engines that join it:

    node 0:  vllm serve M --data-parallel-size D --data-parallel-size-local L0
                          --data-parallel-address HEAD --data-parallel-rpc-port P
    node r:  vllm serve M --headless --data-parallel-size D --data-parallel-size-local Lr
                          --data-parallel-start-rank L0+...+L(r-1) --data-parallel-address HEAD --data-parallel-rpc-port P

Lr (data-parallel ranks on node r) is the node's GPUs over --tensor-parallel-size; D is their sum.

With `parallel = "model"` the nodes hold one model between them (tensor and/or pipeline parallel, vLLM 0.11 on, no Ray):

    node r:  vllm serve M --tensor-parallel-size T --pipeline-parallel-size P --nnodes N --node-rank r
                          --master-addr HEAD --master-port PORT          (--headless on every node but 0)

T x P must split evenly over the nodes (vLLM: `--nnodes` must evenly divide the world size), each node's share at most its
GPUs.  Ray's form (older vLLMs' only multi-node tensor/pipeline parallel) is not built.  The flags are
checked against the step's vLLM version's own recorded parser (cockpit/vllm/data/versions.json: --headless and
--data-parallel-start-rank are in 0.9.2, the oldest recorded that has them).  Launched by the cockpit over SSH (vllm/grouplaunch.py) or handed to
Slurm or a LeaderWorkerSet (`cockpit plan emit STEP --format slurm|lws`, here).

A node's log says how far it got (vLLM's own lines, 0.9 to 0.34): a headless node `Launching N data parallel
engine(s) in headless mode, with head node address tcp://HEAD:P` (then it waits for the head's handshake), loading
(`Loading weights took` / `Model loading took`), and its engines up (`init engine (profile, create kv cache, warmup
model) took`: logged once per node from 0.11, so the first says it); the head is ready at `Application startup
complete` — its API server starts only once every engine of every node has shaken hands with it, so the head's
/health 200 is the whole group's.  Failed: a headless node that never heard from the head (`Did not receive response
from front-end process within N minutes`), an engine that failed to start, out of memory (the KV cache too), an NCCL
timeout, a port in use, a dead process.  The head waits for a missing node forever, saying nothing at INFO: the
cockpit's readiness timeout names the nodes that are behind."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT, PEER_UNREACHABLE, RENDEZVOUS_TIMEOUT
from cockpit.errors import CockpitError
from cockpit.serving.emit import lws_manifest
from cockpit.serving.group import GroupState, NodeState, describe_common, summarize
from cockpit.serving.lint import without_flags

MODEL_FLAGS = ("--nnodes", "-n", "--node-rank", "-r", "--master-addr", "--master-port", "--headless")
PARALLEL = ("data", "model", "ray")
DP_FLAGS = ("--data-parallel-size", "--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
            "--data-parallel-start-rank", "--headless")
DP_ALIASES = ("-dp", "-dpl", "-dpa", "-dpp", "-dpr")  # their short names (0.9.2 on: -dp, -dpl, -dpr; 0.34 all five)
RPC_PORT = 13345  # vLLM's documented example


def group_argv(base: list[str], nodes: int, rank: int, head: str, rpc_port: int, local: int,
               locals_: list[int] | None = None) -> list[str]:
    """One node's command line: the step's own, less any data-parallel flags it had, with the group's.  `locals_`: each
    node's data-parallel ranks when they differ (else `local` on every node)."""
    per_node = locals_ or [local] * nodes
    out = without_flags(base, DP_FLAGS + DP_ALIASES, ("--headless",))
    group = ["--data-parallel-size", str(sum(per_node)), "--data-parallel-size-local", str(per_node[rank]),
             "--data-parallel-address", head, "--data-parallel-rpc-port", str(rpc_port)]
    if rank > 0:
        group = ["--headless", *group, "--data-parallel-start-rank", str(sum(per_node[:rank]))]
    return out + group


def word_value(words, *names: str) -> str | None:
    """The value a command line gives a flag (`--flag V` or `--flag=V`, any of its `names`), the last one; None: not given."""
    found = None
    words = list(words)
    for i, word in enumerate(words):
        head, sep, value = word.partition("=")
        if head in names:
            found = value if sep else (words[i + 1] if i + 1 < len(words) else None)
    return found


def world_size(words) -> int:
    """Tensor x pipeline parallel of a command line (1 where it gives none)."""
    sizes = [word_value(words, "--tensor-parallel-size", "-tp"), word_value(words, "--pipeline-parallel-size", "-pp")]
    product = 1
    for size in sizes:
        product *= int(size) if size and size.isdigit() and int(size) > 0 else 1
    return product


def model_argv(base: list[str], nodes: int, rank: int, addr: str, port: int) -> list[str]:
    """One node's command line when the nodes hold one model between them: the step's own, less any node flags, with
    the group's (`--headless` on every node but 0)."""
    return without_flags(base, MODEL_FLAGS, ("--headless",)) + ["--nnodes", str(nodes), "--node-rank", str(rank), "--master-addr", addr, "--master-port", str(port)] + (
        ["--headless"] if rank else [])


def form(params: Mapping[str, object]) -> str:
    return str(params.get("parallel") or "data")


def validate(params: dict, nodes: int) -> str | None:
    """A group's own rules, before anything runs."""
    if params.get("parallel") is not None and params["parallel"] not in PARALLEL:
        return f"parallel must be 'data', 'model' or 'ray', got {params['parallel']!r}"
    if nodes < 2:
        return "parallel goes with several hosts (hosts = [...])" if params.get("parallel") else None
    extra = [str(w) for w in params.get("extra_args") or []]
    named = [w.split("=", 1)[0] for w in extra]
    owned = {"data": DP_FLAGS + DP_ALIASES, "model": MODEL_FLAGS, "ray": ("--distributed-executor-backend",)}[form(params)]
    set_here = [f for f in owned if f in named]
    if set_here:
        return f"extra_args must not set {', '.join(set_here)}: the group sets them per node"
    if not all(isinstance(w, str) for w in params.get("ray_args") or []):
        return "ray_args must be a list of strings (more `ray start` arguments)"
    if params.get("ray_args") is not None and form(params) != "ray":
        return "ray_args go with parallel = 'ray'"
    if form(params) == "model":
        size = world_size([*(["--tensor-parallel-size", str(params["tp"])] if params.get("tp") else []), *extra])
        if size % nodes:
            return (f"tensor x pipeline parallel is {size}, which the {nodes} nodes cannot share evenly (vLLM: --nnodes must "
                    "evenly divide the world size)")
    return None


# --- a node's log ----------------------------------------------------------------------------------------------------

STATES: tuple[str, ...] = ("starting", "waiting for head", "loading", "engines up", "ready")
_HEADLESS_MODEL = re.compile(r"Launching vLLM \(v\S+\) headless multiproc executor, with head node address (?P<addr>\S+)")
_HEADLESS = re.compile(r"Launching (?P<n>\d+) data parallel engine\(s\) in headless mode, with head node address (?P<addr>\S+?)\.?$")
_LOADING = re.compile(r"Loading weights took|Model loading took|Starting to load model")
_ENGINE_UP = re.compile(r"init engine \(profile, create kv cache, warmup model\) took")
_READY_HEAD = re.compile(r"Application startup complete\.")
_FAILURES = [
    ("head_unreachable", re.compile(r"Did not receive response from front-end process within (?P<m>\d+) minutes")),
    ("head_unreachable", re.compile(PEER_UNREACHABLE)),
    ("rendezvous_timeout", re.compile(RENDEZVOUS_TIMEOUT)),
    ("oom", re.compile(CUDA_OOM)),
    ("kv_cache", re.compile(r"To serve at least one request with the models?'s max seq len|No available memory for the cache blocks")),
    ("nccl_timeout", re.compile(NCCL_TIMEOUT)),
    ("engine_failed", re.compile(r"Engine core initialization failed|EngineCore failed to start")),
    ("port_in_use", re.compile(r"Address already in use")),
]
_PRIORITY = {"exited": 0, "oom": 1, "kv_cache": 1, "port_in_use": 1, "ray_died": 1, "ray_gpus": 2, "engine_failed": 2, "head_unreachable": 3,
             "rendezvous_timeout": 4, "nccl_timeout": 5}


def _form_of(argv) -> str:
    """The form a node's command line runs: "model" with --nnodes over 1, else "data"."""
    nodes = word_value(argv, "--nnodes", "-n")
    return "model" if nodes and nodes.isdigit() and int(nodes) > 1 else "data"


def node_state(rank: int, host: str, lines: list[str], alive: bool, form: str = "data") -> NodeState:
    """One node's state from its log: the head (rank 0) or a headless node (data parallel: its engines; the model form:
    its workers, holding a share of the one model).  vLLM logs `Loading weights took` and (0.11 on) `init engine ...
    took` once per node (`info_once`, scope local: its first rank), not once per engine or worker, so a headless node
    is ready at the first of them (data parallel: its engines up; the model form: its share loaded); the group's
    readiness is the head's /health, which its API server answers only once every engine or worker joined."""
    node = NodeState(rank, host, alive=alive, lines_seen=len(lines))
    order = {name: i for i, name in enumerate(STATES)}

    def advance(state: str, line: str) -> None:
        if order[state] >= order[node.state]:
            node.state, node.line = state, line.strip()

    for line in lines:
        failure = next((kind for kind, pattern in _FAILURES if pattern.search(line)), None)
        if failure is not None:
            # the first cause, but a specific one beats "an engine failed to start" (vLLM logs that before the traceback)
            if node.failure is None or (node.failure == "engine_failed" and failure != "engine_failed"):
                node.failure, node.line = failure, line.strip()
            continue
        if rank == 0 and _READY_HEAD.search(line):
            advance("ready", line)
        elif rank > 0 and (_HEADLESS.search(line) or _HEADLESS_MODEL.search(line)):
            advance("waiting for head", line)
        elif _LOADING.search(line):
            advance("ready" if rank > 0 and form == "model" and "took" in line else "loading", line)
        elif _ENGINE_UP.search(line):
            advance("ready" if rank > 0 else "engines up", line)
    if not alive and node.failure is None:
        node.failure = "exited"
    return node


def describe(node: NodeState, nodes: list[NodeState]) -> str:
    """Why a node failed, naming the node(s) to look at."""
    name = node.name if node.role else (f"rank {node.rank} ({node.host})" if node.rank else f"the head, rank 0 ({node.host})")
    if node.failure == "ray_died":
        return f"{name}: some of its Ray processes exited unexpectedly ({node.line[:120]}); its log names them"
    if node.failure == "ray_gpus":
        return (f"{name}: the Ray cluster has fewer GPUs than the model needs ({node.line[:160]}); every node's "
                "`ray start` must give its GPUs (--num-gpus), and tensor x pipeline parallel at most their sum")
    if node.failure == "head_unreachable":
        m = _FAILURES[0][1].search(node.line)
        waited = f" within {m.group('m')} minutes" if m else ""
        head = next((n for n in nodes if n.role == "the Ray head"), nodes[0] if nodes else None) if node.role else (nodes[0] if nodes else None)
        where = f" ({head.host}: {head.state if not head.failed else 'failed'})" if head is not None else ""
        port = "--master-port" if "client socket" in node.line else ("GCS port (ray start --port)" if node.role else "--data-parallel-rpc-port")
        return f"{name} never heard from the head{where}{waited}: is rank 0 up, its {port} open, the address right?"
    if node.failure == "rendezvous_timeout":
        behind = [f"rank {n.rank} ({n.host})" for n in nodes if n.rank != node.rank and n.state in ("starting", "waiting for head")]
        return f"{', '.join(behind) or 'a node'} never joined: {name} timed out waiting for the others ({node.line[-80:]})"
    if node.failure in ("oom", "kv_cache"):
        fix = ("; lower --max-model-len or raise --gpu-memory-utilization" if node.failure == "kv_cache"
               else "; lower --gpu-memory-utilization, --max-num-seqs or --max-model-len")
        return f"{name} ran out of GPU memory ({node.line[:120]}){fix}"
    if node.failure == "engine_failed":
        return f"{name}: an engine failed to start ({node.line[:160]}); its log above that line tells why"
    return describe_common(name, node, nodes)


def group_state(nodes: list[NodeState]) -> GroupState:
    return summarize(nodes, STATES, _PRIORITY, describe)


# a Ray cluster's processes (parallel = "ray", vllm/raygroup.py): `ray start --block` on every node, vLLM on the head
RAY_MODULE = "ray.scripts.scripts"
_RAY_STARTED = re.compile(r"Ray runtime started\.")
_RAY_FAILURES = [
    ("ray_died", re.compile(r"Some Ray subprocesses exited unexpectedly")),
    ("head_unreachable", re.compile(r"Failed to connect to GCS|Unable to connect to GCS|Could not read '\w+' from GCS|"
                                    r"ConnectionError: .*GCS")),
    ("port_in_use", re.compile(r"Address already in use|is already in use|Failed to bind")),
]
_RAY_GPUS = re.compile(r"Cannot provide a placement group|The number of required GPUs exceeds the total number of available GPUs")


def ray_role(argv) -> str:
    """'the Ray head' / 'a Ray worker' for a `ray start` process, '' for anything else."""
    words = list(argv)
    if RAY_MODULE not in words:
        return ""
    return "the Ray head" if "--head" in words else "a Ray worker"


def ray_node_state(rank: int, host: str, lines: list[str], alive: bool, role: str) -> NodeState:
    """A `ray start --block` process: ready once its runtime started; failed when its subprocesses died, it could not
    reach the head's GCS, or a port it needs is taken; an exit is a failure (with --block it runs until stopped)."""
    node = NodeState(rank, host, alive=alive, lines_seen=len(lines), role=role)
    for line in lines:
        failure = next((kind for kind, pattern in _RAY_FAILURES if pattern.search(line)), None)
        if failure is not None:
            if node.failure is None:
                node.failure, node.line = failure, line.strip()
        elif _RAY_STARTED.search(line) and node.state != "ready":
            node.state, node.line = "ready", line.strip()
    if not alive and node.failure is None:
        node.failure = "exited"
    return node


class _Model:
    """vLLM's reading of a data-parallel group's nodes (serving/group.py's GroupModel)."""

    states: tuple[str, ...] = STATES

    def node_state(self, rank: int, process, lines: list[str], alive: bool) -> NodeState:
        role = ray_role(process.argv)
        if role:
            return ray_node_state(rank, process.host, lines, alive, role)
        node = node_state(rank, process.host, lines, alive, _form_of(process.argv))
        if "--distributed-executor-backend" in process.argv and rank == 0:
            node.role = "vLLM"  # the server on the Ray head's node; the cluster's other members are Ray's processes
            gpus = next((line.strip() for line in lines if _RAY_GPUS.search(line)), None)
            if gpus is not None and node.failure in (None, "engine_failed"):
                node.failure, node.line = "ray_gpus", gpus
        return node

    def group_state(self, nodes: list[NodeState]) -> GroupState:
        return group_state(nodes)


MODEL = _Model()


# --- the hand-off to a scheduler -------------------------------------------------------------------------------------

def _missing_flags(version: str | None, flags: tuple[str, ...]) -> list[str]:
    from cockpit.vllm.lint import shipped_schema

    schema = shipped_schema(version)
    if schema is None:
        return []  # older than every recording: said by the version checks, not here
    return [f for f in flags if schema.get(f) is None]


def _parts(kind, spec, python: str, gpus_per_node: int | None) -> tuple[int, int, int, int, list[str]]:
    """(nodes, each node's data-parallel ranks or share of the model, the HTTP port, GPUs per node, the step's command)."""
    asked = kind.request(spec)
    nodes, tp = asked.nodes, asked.tp or 1
    gpus = gpus_per_node or 8
    version = asked.param("vllm_version")
    model = form(asked.engine_params) == "model"
    missing = _missing_flags(version, tuple(f for f in MODEL_FLAGS if f.startswith("--")) if model else DP_FLAGS)
    if missing:
        raise CockpitError(f"vLLM {version} has no {', '.join(missing)}: " + (
            "one model over several nodes without Ray needs vLLM 0.11 on" if model else "data parallel over nodes needs a newer vLLM (0.9.2 has them)"))
    base = kind.base_argv(None, spec, python)
    base = [python if i == 0 else w for i, w in enumerate(base)]
    if model:
        share = world_size(base) // nodes
        if share > gpus:
            raise CockpitError(f"'{spec.name}': each node's share of the model ({share} GPUs) is more than its {gpus} GPUs (--gpus-per-node)")
        return nodes, share, asked.port, gpus, base
    if gpus % tp:
        raise CockpitError(f"'{spec.name}': {gpus} GPUs per node do not split into tensor-parallel groups of {tp} (--gpus-per-node)")
    return nodes, gpus // tp, asked.port, gpus, base


def _commands(spec, base: list[str], nodes: int, local: int, head: str, rank_expr: str) -> tuple[list[str], str, str]:
    """(node 0's command, every other node's as a shell line with its node rank the shell's `rank_expr`, what the group is
    in words)."""
    from cockpit.serving.steps import ServeLaunch

    if form(ServeLaunch.request(spec).engine_params) == "model":
        head_cmd = model_argv(base, nodes, 0, head, RPC_PORT)
        worker = model_argv(base, nodes, 1, head, RPC_PORT)
        cut = worker.index("--node-rank")
        rest = worker[cut + 2:]
        return head_cmd, _q(worker[:cut]) + f" --node-rank {rank_expr} " + _q(rest), (
            f"one model over {nodes} nodes (tensor x pipeline parallel, {local} GPUs a node)")
    head_cmd = group_argv(base, nodes, 0, head, RPC_PORT, local)
    worker = group_argv(base, nodes, 1, head, RPC_PORT, local)
    cut = worker.index("--data-parallel-start-rank")
    return head_cmd, _q(worker[:cut]) + f" --data-parallel-start-rank $(( {rank_expr} * {local} ))", (
        f"data parallel over {nodes} nodes ({local} ranks each)")


HEAD = "__COCKPIT_HEAD_NODE__"  # the head node's address: filled in by each task's shell ($HEAD_NODE, exported)


def _q(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _task(words: list[str]) -> str:
    """A command for the task's `bash -c '...'`: each word quoted for that shell, the whole inside single quotes."""
    return _shell_task(_q(words))


def _shell_task(line: str) -> str:
    """A shell line (its words quoted already) for the task's `bash -c '...'`: inside single quotes, $HEAD_NODE its own."""
    return line.replace(HEAD, '"$HEAD_NODE"').replace("'", "'\"'\"'")


def sbatch_opening(name: str, what: str, nodes: int, gpus: int) -> list[str]:
    """An sbatch script's first lines: one task a node with its GPUs, the head node's name exported ($HEAD_NODE)."""
    return ["#!/bin/bash", f"# cockpit plan emit {name} --format slurm: {what}.", f"#SBATCH --job-name=cockpit-{name}",
            f"#SBATCH --nodes={nodes}", f"#SBATCH --ntasks={nodes}", "#SBATCH --ntasks-per-node=1", f"#SBATCH --gres=gpu:{gpus}",
            "#SBATCH --output=vllm-%x-%j.out", "set -euo pipefail",
            'export HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)']


def sbatch_ready(http_port: int) -> list[str]:
    """Its last lines: the server's /health on the head node waited for (30 minutes at most), then the job waits."""
    return ["# ready: the server's /health on the head node, for at most 30 minutes", "for _ in $(seq 1 360); do",
            f"  if curl -sf --max-time 25 \"http://$HEAD_NODE:{http_port}/health\" > /dev/null; then echo \"ready on "
            f"$HEAD_NODE:{http_port}\"; break; fi", "  sleep 5", "done", "wait"]


def head_address(ctx, spec, hosts: list[str]) -> tuple[str, int]:
    """The head's address as the others reach it and its port (data parallel: --data-parallel-rpc-port; the model form:
    --master-port; Ray: its GCS port): `dist_init_addr`, else node 0's configured address and `dist_init_port`."""
    from cockpit.serving.steps import ServeLaunch

    asked = ServeLaunch.request(spec)
    if asked.dist_init_addr:
        host, _, port = asked.dist_init_addr.rpartition(":")
        return host.strip("[]"), int(port)
    return ctx.hub.config.host(hosts[0]).address or "127.0.0.1", asked.dist_init_port


class FormsEmit:
    """The data-parallel and model forms' hand-off (vllm/grouplaunch.py's emit picks the form's)."""

    def slurm(self, kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
        nodes, local, http_port, gpus, base = _parts(kind, spec, python, gpus_per_node)
        head_cmd, worker_sh, what = _commands(spec, base, nodes, local, HEAD, "$SLURM_PROCID")
        lines = [
            *sbatch_opening(spec.name, f"vLLM {what}, the command the cockpit builds", nodes, gpus),
            "# node 0 serves; every other node runs headless, its rank from its own $SLURM_PROCID",
            "# (read by each task's own shell, not this batch shell)",
            f"srun --ntasks={nodes} --nodes={nodes} --output=\"vllm-%x-%j-node%n.log\" \\",
            "  bash -c 'if [ \"$SLURM_PROCID\" = 0 ]; then exec " + _task(head_cmd) + "; "
            "else exec " + _shell_task(worker_sh) + "; fi' &",
            *sbatch_ready(http_port),
            "",
            "# What the cockpit can still watch from outside: each node's log (vllm-<job>-<id>-node<N>.log, e.g. through",
            f"# `cockpit server --log FILE --host LOGIN-NODE`) and node 0's live figures (`cockpit server --url http://HEAD:{http_port}`).",
        ]
        return "\n".join(lines) + "\n"

    def lws(self, kind, spec, python: str = "python3", image: str = "vllm/vllm-openai:latest", gpus_per_node: int | None = None) -> str:
        nodes, local, http_port, gpus, base = _parts(kind, spec, python, gpus_per_node)
        leader, worker_sh, what = _commands(spec, base, nodes, local, "$(LWS_LEADER_ADDRESS)", "$LWS_WORKER_INDEX")
        name = f"cockpit-{spec.name}".lower().replace("_", "-")
        header = (f"# cockpit plan emit {spec.name} --format lws: vLLM {what} as a LeaderWorkerSet.\n"
                  "# The leader serves; each worker runs headless, its rank from its own LWS_WORKER_INDEX.")
        return lws_manifest(name, nodes, image, gpus, http_port, "/health", "vllm", leader, ["bash", "-c", "exec " + worker_sh], header)


emit = FormsEmit()
