"""vLLM over several nodes (issue 39, class 6; scale-facts §4): data parallel over the nodes, vLLM's own multi-node
form.  Node 0 serves (the API server, its local engines), every other node runs `--headless` engines that join it:

    node 0:  vllm serve M --data-parallel-size D --data-parallel-size-local L0
                          --data-parallel-address HEAD --data-parallel-rpc-port P
    node r:  vllm serve M --headless --data-parallel-size D --data-parallel-size-local Lr
                          --data-parallel-start-rank L0+...+L(r-1) --data-parallel-address HEAD --data-parallel-rpc-port P

Lr (data-parallel ranks on node r) is the node's GPUs over --tensor-parallel-size; D is their sum.  The flags are
checked against the step's vLLM version's own recorded parser (cockpit/vllm/data/versions.json: --headless and
--data-parallel-start-rank arrived in 0.9).  Launched by the cockpit over SSH (vllm/grouplaunch.py) or handed to
Slurm or a LeaderWorkerSet (`cockpit plan emit STEP --format slurm|lws`, here).

A node's log says how far it got (vLLM's own lines, 0.9 to 0.34): a headless node `Launching N data parallel
engine(s) in headless mode, with head node address tcp://HEAD:P` (then it waits for the head's handshake), loading
(`Loading weights took` / `Model loading took`), and its engines up (`init engine (profile, create kv cache, warmup
model) took`, once per engine: ready when all of its engines said so); the head is ready at `Application startup
complete` — its API server starts only once every engine of every node has shaken hands with it, so the head's
/health 200 is the whole group's.  Failed: a headless node that never heard from the head (`Did not receive response
from front-end process within N minutes`), an engine that failed to start, out of memory (the KV cache too), an NCCL
timeout, a port in use, a dead process.  The head waits for a missing node forever, saying nothing at INFO: the
cockpit's readiness timeout names the nodes that are behind."""

from __future__ import annotations

import re
import shlex

from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT
from cockpit.errors import CockpitError
from cockpit.serving.emit import lws_manifest
from cockpit.serving.group import GroupState, NodeState, summarize

DP_FLAGS = ("--data-parallel-size", "--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
            "--data-parallel-start-rank", "--headless")
RPC_PORT = 13345  # vLLM's documented example


def group_argv(base: list[str], nodes: int, rank: int, head: str, rpc_port: int, local: int,
               locals_: list[int] | None = None) -> list[str]:
    """One node's command line: the step's own, less any data-parallel flags it had, with the group's.  `locals_`: each
    node's data-parallel ranks when they differ (else `local` on every node)."""
    per_node = locals_ or [local] * nodes
    out: list[str] = []
    skip = False
    for word in base:
        if skip:
            skip = False
            continue
        head_word = word.split("=", 1)[0]
        if head_word in DP_FLAGS:
            skip = "=" not in word and head_word != "--headless"
            continue
        out.append(word)
    group = ["--data-parallel-size", str(sum(per_node)), "--data-parallel-size-local", str(per_node[rank]),
             "--data-parallel-address", head, "--data-parallel-rpc-port", str(rpc_port)]
    if rank > 0:
        group = ["--headless", *group, "--data-parallel-start-rank", str(sum(per_node[:rank]))]
    return out + group


def validate(params: dict, nodes: int) -> str | None:
    """A group's own rules, before anything runs."""
    if nodes < 2:
        return None
    extra = [str(w).split("=", 1)[0] for w in params.get("extra_args") or []]
    set_here = [f for f in DP_FLAGS if f in extra]
    if set_here:
        return f"extra_args must not set {', '.join(set_here)}: the group sets the data-parallel flags per node"
    return None


# --- a node's log ----------------------------------------------------------------------------------------------------

STATES: tuple[str, ...] = ("starting", "waiting for head", "loading", "engines up", "ready")
_HEADLESS = re.compile(r"Launching (?P<n>\d+) data parallel engine\(s\) in headless mode, with head node address (?P<addr>\S+?)\.?$")
_LOADING = re.compile(r"Loading weights took|Model loading took|Starting to load model")
_ENGINE_UP = re.compile(r"init engine \(profile, create kv cache, warmup model\) took")
_READY_HEAD = re.compile(r"Application startup complete\.")
_FAILURES = [
    ("head_unreachable", re.compile(r"Did not receive response from front-end process within (?P<m>\d+) minutes")),
    ("oom", re.compile(CUDA_OOM)),
    ("kv_cache", re.compile(r"To serve at least one request with the models?'s max seq len|No available memory for the cache blocks")),
    ("nccl_timeout", re.compile(NCCL_TIMEOUT)),
    ("engine_failed", re.compile(r"Engine core initialization failed|EngineCore failed to start")),
    ("port_in_use", re.compile(r"Address already in use")),
]
_PRIORITY = {"exited": 0, "oom": 1, "kv_cache": 1, "port_in_use": 1, "engine_failed": 2, "head_unreachable": 3, "nccl_timeout": 4}


def _local_engines(argv: tuple[str, ...] | list[str]) -> int:
    words = list(argv)
    for i, word in enumerate(words):
        if word == "--data-parallel-size-local" and i + 1 < len(words) and words[i + 1].isdigit():
            return int(words[i + 1])
        if word.startswith("--data-parallel-size-local=") and word.split("=", 1)[1].isdigit():
            return int(word.split("=", 1)[1])
    return 1


def node_state(rank: int, host: str, lines: list[str], alive: bool, engines: int = 1) -> NodeState:
    """One node's state from its log: the head (rank 0) or a headless node with `engines` local engines."""
    node = NodeState(rank, host, alive=alive, lines_seen=len(lines))
    order = {name: i for i, name in enumerate(STATES)}
    up = 0

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
        elif rank > 0 and _HEADLESS.search(line):
            advance("waiting for head", line)
        elif _LOADING.search(line):
            advance("loading", line)
        elif _ENGINE_UP.search(line):
            up += 1
            advance("ready" if rank > 0 and up >= engines else "engines up", line)
    if not alive and node.failure is None:
        node.failure = "exited"
    return node


def describe(node: NodeState, nodes: list[NodeState]) -> str:
    """Why a node failed, naming the node(s) to look at."""
    name = f"rank {node.rank} ({node.host})" if node.rank else f"the head, rank 0 ({node.host})"
    if node.failure == "head_unreachable":
        m = _FAILURES[0][1].search(node.line)
        waited = f" within {m.group('m')} minutes" if m else ""
        head = nodes[0] if nodes else None
        where = f" ({head.host}: {head.state if not head.failed else 'failed'})" if head is not None else ""
        return f"{name} never heard from the head{where}{waited}: is rank 0 up, its --data-parallel-rpc-port open, the address right?"
    if node.failure in ("oom", "kv_cache"):
        fix = ("; lower --max-model-len or raise --gpu-memory-utilization" if node.failure == "kv_cache"
               else "; lower --gpu-memory-utilization, --max-num-seqs or --max-model-len")
        return f"{name} ran out of GPU memory ({node.line[:120]}){fix}"
    if node.failure == "nccl_timeout":
        dead = [f"rank {n.rank} ({n.host})" for n in nodes if not n.alive]
        return f"{name}: an NCCL collective timed out" + (f"; {', '.join(dead)} is gone" if dead else " (a peer died or hangs)")
    if node.failure == "engine_failed":
        return f"{name}: an engine failed to start ({node.line[:160]}); its log above that line tells why"
    if node.failure == "exited":
        return f"{name}: its process exited while {node.state}" + ("" if node.state == "ready" else "; its log tells why")
    if node.failure == "port_in_use":
        return f"{name}: a port it needs is in use ({node.line[:120]})"
    return f"{name}: {node.failure} ({node.line[:160]})"


def group_state(nodes: list[NodeState]) -> GroupState:
    return summarize(nodes, STATES, _PRIORITY, describe)


class _Model:
    """vLLM's reading of a data-parallel group's nodes (serving/group.py's GroupModel)."""

    states: tuple[str, ...] = STATES

    def node_state(self, rank: int, process, lines: list[str], alive: bool) -> NodeState:
        return node_state(rank, process.host, lines, alive, _local_engines(process.argv))

    def group_state(self, nodes: list[NodeState]) -> GroupState:
        return group_state(nodes)


MODEL = _Model()


# --- the hand-off to a scheduler -------------------------------------------------------------------------------------

def _missing_flags(version: str | None) -> list[str]:
    from cockpit.vllm.lint import shipped_schema

    schema = shipped_schema(version)
    if schema is None:
        return []  # older than every recording: said by the version checks, not here
    return [f for f in DP_FLAGS if schema.get(f) is None]


def _parts(kind, spec, python: str, gpus_per_node: int | None) -> tuple[int, int, int, int, list[str]]:
    nodes = len(kind.hosts(spec))
    tp = int(spec.params.get("tp") or 1)
    gpus = gpus_per_node or 8
    if gpus % tp:
        raise CockpitError(f"'{spec.name}': {gpus} GPUs per node do not split into tensor-parallel groups of {tp} (--gpus-per-node)")
    missing = _missing_flags(spec.params.get("vllm_version"))
    if missing:
        raise CockpitError(f"vLLM {spec.params.get('vllm_version')} has no {', '.join(missing)}: data parallel over nodes needs a "
                           "newer vLLM (0.9 on)")
    base = kind.base_argv(None, spec, python)
    return nodes, gpus // tp, int(spec.params.get("port", 8000)), gpus, [python if i == 0 else w for i, w in enumerate(base)]


HEAD = "__COCKPIT_HEAD_NODE__"  # the head node's address: filled in by each task's shell ($HEAD_NODE, exported)


def _q(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def _task(words: list[str]) -> str:
    """A command for the task's `bash -c '...'`: each word quoted for that shell, the whole inside single quotes."""
    return _q(words).replace(HEAD, '"$HEAD_NODE"').replace("'", "'\"'\"'")


class emit:  # noqa: N801 - the module-like face the CLI asks of every engine's group (engine.group.emit.slurm / .lws)
    @staticmethod
    def slurm(kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
        nodes, local, http_port, gpus, base = _parts(kind, spec, python, gpus_per_node)
        head_cmd = group_argv(base, nodes, 0, HEAD, RPC_PORT, local)
        worker = group_argv(base, nodes, 1, HEAD, RPC_PORT, local)
        cut = worker.index("--data-parallel-start-rank")
        worker_fixed = worker[:cut]
        lines = [
            "#!/bin/bash",
            f"# cockpit plan emit {spec.name} --format slurm: vLLM data parallel over {nodes} nodes ({local} ranks each), "
            "the command the cockpit builds.",
            f"#SBATCH --job-name=cockpit-{spec.name}",
            f"#SBATCH --nodes={nodes}",
            f"#SBATCH --ntasks={nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gres=gpu:{gpus}",
            "#SBATCH --output=vllm-%x-%j.out",
            "set -euo pipefail",
            'export HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
            "# node 0 serves; every other node runs headless engines starting at its own data-parallel rank",
            "# ($SLURM_PROCID, read by each task's own shell, not this batch shell)",
            f"srun --ntasks={nodes} --nodes={nodes} --output=\"vllm-%x-%j-node%n.log\" \\",
            "  bash -c 'if [ \"$SLURM_PROCID\" = 0 ]; then exec " + _task(head_cmd) + "; "
            "else exec " + _task(worker_fixed) + f" --data-parallel-start-rank $((SLURM_PROCID * {local})); fi' &",
            "# ready: node 0's /health, for at most 30 minutes",
            "for _ in $(seq 1 360); do",
            f"  if curl -sf --max-time 25 \"http://$HEAD_NODE:{http_port}/health\" > /dev/null; then echo \"ready on $HEAD_NODE:{http_port}\"; break; fi",
            "  sleep 5",
            "done",
            "wait",
            "",
            "# What the cockpit can still watch from outside: each node's log (vllm-<job>-<id>-node<N>.log, e.g. through",
            f"# `cockpit server --log FILE --host LOGIN-NODE`) and node 0's live figures (`cockpit server --url http://HEAD:{http_port}`).",
        ]
        return "\n".join(lines) + "\n"

    @staticmethod
    def lws(kind, spec, python: str = "python3", image: str = "vllm/vllm-openai:latest", gpus_per_node: int | None = None) -> str:
        nodes, local, http_port, gpus, base = _parts(kind, spec, python, gpus_per_node)
        if image == "lmsysorg/sglang:latest":  # the CLI's default is SGLang's image
            image = "vllm/vllm-openai:latest"
        leader = group_argv(base, nodes, 0, "$(LWS_LEADER_ADDRESS)", RPC_PORT, local)
        worker = group_argv(base, nodes, 1, "$(LWS_LEADER_ADDRESS)", RPC_PORT, local)
        cut = worker.index("--data-parallel-start-rank")
        worker_sh = _q(worker[:cut]) + f" --data-parallel-start-rank $(( LWS_WORKER_INDEX * {local} ))"
        name = f"cockpit-{spec.name}".lower().replace("_", "-")
        header = (f"# cockpit plan emit {spec.name} --format lws: vLLM data parallel over {nodes} nodes ({local} ranks each) as a "
                  f"LeaderWorkerSet.\n# The leader serves; each worker runs headless engines from its own data-parallel rank "
                  f"(LWS_WORKER_INDEX x {local}).")
        return lws_manifest(name, nodes, image, gpus, http_port, "/health", "vllm", leader, ["bash", "-c", "exec " + worker_sh], header)
