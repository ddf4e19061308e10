"""A launch group: one SGLang server over several nodes (scale-facts §1).  Every node runs the same
command; only `--node-rank` differs; `--dist-init-addr` is rank 0's address.  Only rank 0 serves
HTTP (the others answer /health with 200 from a stub), so readiness is rank 0's alone.

Per node, its log says how far it got: starting, waiting for peers (torch's rendezvous), joined,
gated (0.5.23's `--gated-launch-port`: joined, waiting for activation before any GPU memory),
loading, ready; or failed, with the line that says why (a rendezvous that timed out with N/M clients,
a peer it could not reach, an NCCL watchdog timeout, out of memory, a dead process).  The group is
ready when every node is, and failed as soon as one node is: rank 0 does not exit when a peer dies,
so a group with one dead rank is failed, never half-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT, PEER_UNREACHABLE, RENDEZVOUS_TIMEOUT, SCHEDULER_DIED

from cockpit.serving.group import GroupState, NodeState, describe_common, summarize
from cockpit.serving.steps import DEFAULT_DIST_PORT, Refused  # noqa: F401 - the group's, the step's words

GROUP_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr", "--gated-launch-port")  # set per node

STATES = ("starting", "waiting for peers", "joined", "gated", "loading", "ready")

_PROGRESS = [
    ("waiting for peers", re.compile(r"Init torch distributed begin|Init parallel begin")),
    ("joined", re.compile(r"Init torch distributed ends|Init parallel ends|Custom allreduce is disabled because this process group spans")),
    ("gated", re.compile(r"Gated launch waiting for activation")),
    ("loading", re.compile(r"Gated launch activated|Load weight begin")),
]
_READY_RANK0 = re.compile(r"The server is fired up and ready to roll!")
_READY_PEER = re.compile(r"Dummy health check server started")
_FAILURES = [
    ("rendezvous_timeout", re.compile(RENDEZVOUS_TIMEOUT)),
    ("peer_unreachable", re.compile(PEER_UNREACHABLE)),
    ("nccl_timeout", re.compile(NCCL_TIMEOUT)),
    ("oom", re.compile(CUDA_OOM)),
    ("scheduler_died", re.compile(SCHEDULER_DIED)),
    ("port_in_use", re.compile(r"Address already in use|Port is already in use")),
]
_RETRYING = re.compile(r"TCP client failed to connect/validate to host (?P<host>\S+):(?P<port>\d+)|client socket has failed to connect to")


@dataclass(frozen=True)
class Member:
    rank: int
    host: str  # the config's host name
    address: str  # where the others reach it (rank 0's is the dist-init address)


def validate(params: dict, nodes: int) -> str | None:
    """A group's own rules, before anything runs."""
    if params.get("parallel") is not None:
        return "parallel is vLLM's (its two multi-node forms); SGLang's group is one model over the nodes (tp over all of them)"
    if nodes < 2:
        return None
    if any(str(w).split("=", 1)[0] in GROUP_FLAGS for w in params.get("extra_args") or []):
        return "extra_args must not set --nnodes, --node-rank or --dist-init-addr: the group sets them per node"
    tp = params.get("tp")
    if tp is not None and tp % nodes:
        return f"tp {tp} must be divisible by the {nodes} nodes (SGLang: tp_size must be divisible by number of nodes)"
    return None


def group_argv(base: list[str], nnodes: int, rank: int, dist_init: str, gated_port: int | None = None,
               dist_timeout: int | None = None) -> list[str]:
    """One node's command: the group's command with its rank (any group flags in `base` replaced)."""
    from cockpit.serving.lint import without_flags

    argv = without_flags(base, {*GROUP_FLAGS, *(["--dist-timeout"] if dist_timeout is not None else [])})
    argv += ["--nnodes", str(nnodes), "--node-rank", str(rank), "--dist-init-addr", dist_init]
    if dist_timeout is not None:
        argv += ["--dist-timeout", str(dist_timeout)]
    if gated_port is not None:
        argv += ["--gated-launch-port", str(gated_port)]
    return argv


def node_state(rank: int, host: str, lines: list[str], alive: bool) -> NodeState:
    node = NodeState(rank, host, alive=alive, lines_seen=len(lines))
    order = {name: i for i, name in enumerate(STATES)}
    for line in lines:
        for kind, pattern in _FAILURES:
            if pattern.search(line):
                if node.failure is None:
                    node.failure, node.line = kind, line.strip()
                break
        else:
            ready = _READY_RANK0 if rank == 0 else _READY_PEER
            if ready.search(line):
                node.state, node.line = "ready", line.strip()
                continue
            for state, pattern in _PROGRESS:
                if pattern.search(line) and order[state] >= order.get(node.state, 0):
                    node.state, node.line = state, line.strip()
    if not alive and node.failure is None:
        node.failure = "exited"
    return node


def describe(node: NodeState, nodes: list[NodeState]) -> str:
    """Why a node failed, naming the node(s) to look at."""
    name = f"rank {node.rank} ({node.host})"
    if node.failure == "rendezvous_timeout":
        m = _FAILURES[0][1].search(node.line)
        missing = [f"rank {n.rank} ({n.host})" for n in nodes if n.rank != node.rank and n.state in ("starting", "waiting for peers")]
        joined = f"{m.group('n')}/{m.group('m')} clients joined" if m else "not every peer joined"
        who = ", ".join(missing) if missing else "a peer"
        return f"{who} never joined: {name} timed out waiting for them ({joined})"
    if node.failure == "peer_unreachable":
        m = _FAILURES[1][1].search(node.line)
        where = f"{m.group('host')}:{m.group('port')}" if m else "rank 0"
        return f"{name} could not reach rank 0 at {where} (is rank 0 up, the port open, the address right?)"
    if node.failure == "oom":
        return f"{name} ran out of GPU memory"
    return describe_common(name, node, nodes)


_PRIORITY = {"exited": 0, "oom": 1, "scheduler_died": 1, "port_in_use": 1, "peer_unreachable": 2, "rendezvous_timeout": 3,
             "nccl_timeout": 4}


def group_state(nodes: list[NodeState]) -> GroupState:
    return summarize(nodes, STATES, _PRIORITY, describe)


class _Model:
    """SGLang's reading of a group's nodes (serving/group.py's GroupModel)."""

    states: tuple[str, ...] = STATES

    def node_state(self, rank: int, process, lines: list[str], alive: bool) -> NodeState:
        return node_state(rank, process.host, lines, alive)

    def group_state(self, nodes: list[NodeState]) -> GroupState:
        return group_state(nodes)


MODEL = _Model()


def retrying(lines: list[str]) -> str | None:
    """The last 'failed to connect ... retrying' warning: a node still trying to reach rank 0."""
    for line in reversed(lines):
        if _RETRYING.search(line):
            return line.strip()
    return None
