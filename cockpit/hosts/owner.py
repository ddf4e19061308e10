"""Who holds a process, from its cgroup (/proc/PID/cgroup, world-readable): a Slurm job (slurmd's `.../job_N/step_...`),
a Docker or Podman container (`docker-ID.scope`, `/docker/ID`, `libpod-ID.scope`), a Kubernetes pod (`kubepods...
pod<uid>`), else nothing said (a bare process: its user is ps's).  Naming the owner (the job's name and user, the
container's name and image) is its manager's word: cockpit/where/owners.py.  One constant script reads the cgroups of
many pids at once; the pids travel as its arguments."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.hosts.transport import Transport, TransportError

# $@ are pids: one line each, "PID<TAB>its cgroup lines joined by spaces" (empty where /proc hides it or it is gone)
CGROUPS_SCRIPT = 'for p in "$@"; do printf "%s\\t" "$p"; tr "\\n" " " < "/proc/$p/cgroup" 2>/dev/null | head -c 2000; echo; done'
_SLURM = re.compile(r"/job_(\d+)(?:/|\s|$)")
_DOCKER = re.compile(r"(?:/docker/|docker-)([0-9a-f]{64})")
_PODMAN = re.compile(r"libpod-(?:conmon-)?([0-9a-f]{64})")
_POD = re.compile(r"kubepods[^ ]*?pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")


@dataclass(frozen=True)
class Owner:
    kind: str  # "slurm", "docker", "podman", "pod"
    ident: str  # the job id, the container's full id, the pod's uid

    @property
    def short(self) -> str:
        return self.ident[:12] if self.kind in ("docker", "podman") else self.ident

    def describe(self, name: str = "") -> str:
        """'Slurm job 4412 train-eagle (alice)', 'docker container trainer (image ...)', given the manager's words."""
        what = {"slurm": f"Slurm job {self.ident}", "docker": f"docker container {self.short}",
                "podman": f"podman container {self.short}", "pod": f"Kubernetes pod {self.ident}"}[self.kind]
        if name and self.kind in ("docker", "podman"):
            return f"{self.kind} container {name}"
        return f"{what} {name}" if name else what

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.ident}


def owner_of(cgroups: str) -> Owner | None:
    """The owner a process's cgroup lines name (a pod before its container: the pod is what a user knows)."""
    if (m := _POD.search(cgroups)):
        return Owner("pod", m.group(1).replace("_", "-"))
    if (m := _SLURM.search(cgroups)):
        return Owner("slurm", m.group(1))
    if (m := _PODMAN.search(cgroups)):
        return Owner("podman", m.group(1))
    if (m := _DOCKER.search(cgroups)):
        return Owner("docker", m.group(1))
    return None


def parse_cgroups(text: str) -> dict[int, str]:
    found: dict[int, str] = {}
    for line in text.splitlines():
        pid, _, groups = line.partition("\t")
        if pid.isdigit() and groups.strip():
            found[int(pid)] = groups.strip()
    return found


async def owners_of(transport: Transport, pids: list[int]) -> dict[int, Owner]:
    """The owner of each pid whose cgroup names one (read over the host's connection, one command for all)."""
    if not pids:
        return {}
    try:
        done = await transport.run(["sh", "-c", CGROUPS_SCRIPT, "sh", *(str(int(p)) for p in pids[:256])], timeout=30)
    except (TransportError, OSError):
        return {}
    return {pid: owner for pid, groups in parse_cgroups(done.stdout).items() if (owner := owner_of(groups)) is not None}
