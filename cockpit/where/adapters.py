"""The manager adapter of a placement (one module that knows every adapter; each adapter knows only its own)."""

from __future__ import annotations

from cockpit.where.container import Container
from cockpit.where.placement import Placement
from cockpit.where.pod import Pod
from cockpit.where.slurm import SlurmJob


def adapter_for(placement: Placement) -> SlurmJob | Container | Pod:
    """`await adapter.look(transport)` -> ManagerState; `adapter.log_argv(since)`: the command that follows its log
    (None where the manager names a file instead: Slurm's StdOut)."""
    if placement.kind == "slurm":
        return SlurmJob(placement)
    if placement.kind == "pod":
        return Pod(placement)
    return Container(placement)
