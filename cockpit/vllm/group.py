"""vLLM over several nodes, handed to a cluster scheduler (issue 39, class 6; scale-facts §4): data parallel over the
nodes, vLLM's own multi-node form.  Node 0 serves (the API server, its local engines), every other node runs
`--headless` engines that join it:

    node 0:  vllm serve M --data-parallel-size N*L --data-parallel-size-local L
                          --data-parallel-address HEAD --data-parallel-rpc-port P
    node r:  vllm serve M --headless --data-parallel-size N*L --data-parallel-size-local L
                          --data-parallel-start-rank r*L --data-parallel-address HEAD --data-parallel-rpc-port P

L (data-parallel ranks per node) is the node's GPUs over --tensor-parallel-size.  The flags are checked against the
step's vLLM version's own recorded parser (cockpit/vllm/data/versions.json: --headless and
--data-parallel-start-rank arrived in 0.9).  What is built: the Slurm sbatch script and the LeaderWorkerSet manifest
(`cockpit plan emit STEP --format slurm|lws`).  Not built: the cockpit's own launch of such a group over SSH (gated
per node, as SGLang's); `plan run` on the step says so and names the hand-off."""

from __future__ import annotations

import shlex

from cockpit.errors import CockpitError
from cockpit.serving.emit import lws_manifest

DP_FLAGS = ("--data-parallel-size", "--data-parallel-size-local", "--data-parallel-address", "--data-parallel-rpc-port",
            "--data-parallel-start-rank", "--headless")
RPC_PORT = 13345  # vLLM's documented example


def group_argv(base: list[str], nodes: int, rank: int, head: str, rpc_port: int, local: int) -> list[str]:
    """One node's command line: the step's own, less any data-parallel flags it had, with the group's."""
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
    group = ["--data-parallel-size", str(nodes * local), "--data-parallel-size-local", str(local),
             "--data-parallel-address", head, "--data-parallel-rpc-port", str(rpc_port)]
    if rank > 0:
        group = ["--headless", *group, "--data-parallel-start-rank", str(rank * local)]
    return out + group


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


async def plan_group(kind, ctx, spec):
    """The cockpit does not launch a vLLM group over SSH yet: refused, naming the hand-off that is built."""
    raise CockpitError(f"'{spec.name}' runs vLLM on {len(kind.hosts(spec))} nodes: the cockpit hands that to a scheduler "
                       f"(`cockpit plan emit {spec.name} --format slurm|lws`); its own launch of a vLLM group over SSH is not "
                       "built (SGLang's is)")


__all__ = ["group_argv", "emit", "plan_group", "DP_FLAGS"]
