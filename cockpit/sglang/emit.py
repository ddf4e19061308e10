"""A launch group handed to a cluster scheduler, for nodes the cockpit cannot reach by SSH (scale-facts
§4): an sbatch script for Slurm, or a LeaderWorkerSet manifest for Kubernetes, with the same command
the cockpit would run (built from the step, linted the same way when a --help is at hand).

Slurm: one task per node; each task's rank is `$SLURM_PROCID`, evaluated *inside* the task (SGLang's
own example expands `$SLURM_NODEID` in the batch shell, so every task gets rank 0: a known bug);
per-node logs with `%n`; readiness is rank 0's `/health_generate`, bounded.
LWS: leader and workers run the same command; rank from `$(LWS_WORKER_INDEX)`, rendezvous at
`$(LWS_LEADER_ADDRESS)`; the leader's readiness probe is `/health_generate`.
"""

from __future__ import annotations

import shlex

from cockpit.serving.emit import lws_manifest
from cockpit.sglang.group import group_argv


def _command(kind, spec, python: str) -> list[str]:
    base = kind.base_argv(None, spec, python)
    return [python if i == 0 else word for i, word in enumerate(base)]


def _parts(kind, spec, python: str, gpus_per_node: int | None):
    """(nodes, rendezvous port, HTTP port, GPUs per node, the command before the group flags, after them)."""
    asked = kind.request(spec)
    nodes, tp = asked.nodes, asked.tp
    argv = group_argv(_command(kind, spec, python), nodes, 0, "HEAD:0", dist_timeout=asked.param("dist_timeout"))
    cut = argv.index("--nnodes")  # the group flags are filled in by the scheduler: drop group_argv's placeholders
    return (nodes, asked.dist_init_port, asked.port, gpus_per_node or (tp // nodes if tp else 8), argv[:cut], argv[cut + 6:])


def slurm(kind, spec, python: str = "python3", gpus_per_node: int | None = None) -> str:
    nodes, port, http_port, gpus, fixed, tail = _parts(kind, spec, python, gpus_per_node)
    lines = [
        "#!/bin/bash",
        f"# cockpit plan emit {spec.name} --format slurm: SGLang on {nodes} nodes, the command the cockpit would run.",
        f"#SBATCH --job-name=cockpit-{spec.name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks={nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gres=gpu:{gpus}",
        "#SBATCH --output=sglang-%x-%j.out",
        "set -euo pipefail",
        'HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "# each task's rank is $SLURM_PROCID, read by the task's own shell (not this batch shell)",
        f"srun --ntasks={nodes} --nodes={nodes} --output=\"sglang-%x-%j-node%n.log\" \\",
        "  bash -c 'exec \"$@\" --node-rank \"$SLURM_PROCID\"' sglang-node \\",
        "  " + " ".join(shlex.quote(w) for w in fixed) + " \\",
        f"  --nnodes {nodes} --dist-init-addr \"$HEAD_NODE:{port}\"" + (" " + " ".join(shlex.quote(w) for w in tail) if tail else "") + " &",
        "# ready: rank 0's /health_generate (the other nodes' /health is a stub), for at most 30 minutes",
        "for _ in $(seq 1 360); do",
        f"  if curl -sf --max-time 25 \"http://$HEAD_NODE:{http_port}/health_generate\" > /dev/null; then echo \"ready on $HEAD_NODE:{http_port}\"; break; fi",
        "  sleep 5",
        "done",
        "wait",
        "",
        "# What the cockpit can still watch from outside: each node's log (sglang-<job>-<id>-node<N>.log, e.g. through",
        f"# `cockpit server --log FILE --host LOGIN-NODE`) and rank 0's live figures (`cockpit server --url http://HEAD:{http_port}`",
        "# from a host that reaches it). The GPU gate and the per-node diagnosis need SSH to the nodes.",
    ]
    return "\n".join(lines) + "\n"


def lws(kind, spec, python: str = "python3", image: str = "lmsysorg/sglang:latest", gpus_per_node: int | None = None) -> str:
    nodes, port, http_port, gpus, fixed, tail = _parts(kind, spec, python, gpus_per_node)
    command = fixed + ["--nnodes", "$(LWS_GROUP_SIZE)", "--node-rank", "$(LWS_WORKER_INDEX)",
                       "--dist-init-addr", f"$(LWS_LEADER_ADDRESS):{port}"] + tail
    leader = list(command)
    if "--host" not in leader:
        leader += ["--host", "0.0.0.0"]
    name = f"cockpit-{spec.name}".lower().replace("_", "-")
    header = (f"# cockpit plan emit {spec.name} --format lws: SGLang on {nodes} nodes as a LeaderWorkerSet, the command the cockpit would run.\n"
              f"# What the cockpit can still watch from outside: rank 0's live figures through `kubectl port-forward svc/{name} {http_port}`\n"
              f"# then `cockpit server --url http://127.0.0.1:{http_port}`; the logs are `kubectl logs {name}-0` (leader) and `{name}-0-1` ...")
    return lws_manifest(name, nodes, image, gpus, http_port, "/health_generate", "sglang", leader, command, header, probe_timeout_s=25)
