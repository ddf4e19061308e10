"""The owners of processes named by their managers (issue 51 item 5): a Slurm job's name and user (`scontrol -o show
job`, else `sacct` once slurmctld has let it go), a container's name and image (`docker`/`podman inspect`).  A manager
this user may not ask (Docker's socket is root's) or that has no word leaves the owner as its cgroup said it: the id,
never a guess.  A kill is offered through the owner's manager: scancel, docker stop, podman stop (a pod's: kubectl
delete pod, shown, its namespace unknown from the cgroup)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cockpit.hosts.owner import Owner, owners_of
from cockpit.hosts.proctable import ProcRow
from cockpit.hosts.transport import Transport, TransportError
from cockpit.where.slurm import fields


@dataclass(frozen=True)
class Named:
    owner: Owner
    name: str = ""  # the manager's words: "train-eagle (alice)", "trainer (image nvcr.io/...)"
    why_not: str = ""  # why the manager gave none

    @property
    def words(self) -> str:
        return self.owner.describe(self.name)

    def stop_argv(self) -> list[str]:
        """How its manager stops it (shown with the kill plan; the cockpit runs it only after the same confirmation)."""
        if self.owner.kind == "slurm":
            return ["scancel", self.owner.ident]
        if self.owner.kind in ("docker", "podman"):
            return [self.owner.kind, "stop", self.owner.short]
        return ["kubectl", "delete", "pod", "--field-selector", f"metadata.uid={self.owner.ident}", "-A"]

    def to_json(self) -> dict[str, str]:
        return {**self.owner.to_json(), "name": self.name, "words": self.words, "stop": " ".join(self.stop_argv()),
                **({"why_not": self.why_not} if self.why_not else {})}


async def _ask(transport: Transport, argv: list[str]) -> tuple[int | None, str]:
    try:
        done = await transport.run(argv, timeout=20)
    except (TransportError, OSError) as exc:
        return None, str(exc)
    return done.exit_status, done.stdout if done.exit_status == 0 else done.output


async def name_owner(transport: Transport, owner: Owner) -> Named:
    if owner.kind == "slurm":
        code, out = await _ask(transport, ["scontrol", "-o", "show", "job", owner.ident])
        if code == 0 and out.strip():
            job = fields(out.strip().splitlines()[0])
            user = job.get("UserId", "").split("(", 1)[0]
            return Named(owner, f"{job.get('JobName', '')} ({user})".strip() if user else job.get("JobName", ""))
        code, out = await _ask(transport, ["sacct", "-n", "-X", "-P", "-j", owner.ident, "-o", "JobName,User"])
        if code == 0 and out.strip():
            name, _, user = out.strip().splitlines()[0].partition("|")
            return Named(owner, f"{name} ({user})" if user else name)
        return Named(owner, why_not=f"Slurm has no word on job {owner.ident}: {out.strip()[:120]}")
    if owner.kind in ("docker", "podman"):
        code, out = await _ask(transport, [owner.kind, "inspect", "--type", "container", "--format", "{{json .}}", owner.ident])
        if code == 0:
            try:
                info = json.loads(out.strip().splitlines()[0])
            except (ValueError, IndexError):
                info = {}
            name = str(info.get("Name", "")).lstrip("/")
            image = str((info.get("Config") or {}).get("Image", "")) if isinstance(info.get("Config"), dict) else ""
            if name:
                return Named(owner, f"{name} (image {image})" if image else name)
        return Named(owner, why_not=f"{owner.kind} inspect cannot say (its socket may be root's): {out.strip()[:120]}")
    return Named(owner, why_not="a pod's name and namespace are the API server's (kubectl), not its cgroup's")


async def name_owners(transport: Transport, owners: dict[int, Owner]) -> dict[int, Named]:
    """Each pid's owner named (each owner asked once)."""
    named: dict[Owner, Named] = {}
    for owner in dict.fromkeys(owners.values()):
        named[owner] = await name_owner(transport, owner)
    return {pid: named[owner] for pid, owner in owners.items()}


async def with_owners(transport: Transport, rows: list[ProcRow], known: dict[int, str | None] | None = None) -> list[ProcRow]:
    """Each process-table row with who holds it: its cgroup's owner (a Slurm job, a container, a pod), named by its
    manager; a bare process's row unchanged.  `known` (a resident table's): the pids already asked, kept to the pids of
    `rows` (an owner does not change while its process lives)."""
    from dataclasses import replace

    known = {} if known is None else known
    fresh = [r.pid for r in rows if r.pid not in known]
    if fresh:
        named = await name_owners(transport, await owners_of(transport, fresh))
        known.update({pid: named[pid].words if pid in named else None for pid in fresh})
    for pid in set(known) - {r.pid for r in rows}:
        del known[pid]  # bounded by the processes on the GPUs now
    return [replace(r, owner=known[r.pid]) if known.get(r.pid) else r for r in rows]
