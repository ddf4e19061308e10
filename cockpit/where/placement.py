"""Where a run or a server lives, as the config says it: the one reader every table that takes these keys uses
(`[runs.NAME]`, a launch step, `cockpit server`), so `config check` refuses exactly what the commands would.

    slurm_job = "12345"            # a Slurm job by id (on the host that has squeue/scontrol/sacct)
    slurm_job_name = "eagle3"      # ... or by --job-name: the newest job of that name
    container = "eagle3-train"     # a Docker container by name or id
    container_engine = "podman"    # ... or a Podman one
    pod = "ml/eagle3-train-0"      # a Kubernetes pod, NAMESPACE/NAME (or NAME: the context's namespace)
    pod_container = "trainer"      # ... its container (default: its first)
    kube_context = "prod"          # ... through this kubectl context
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cockpit.config import Checker

PLACEMENT_KEYS = {"slurm_job", "slurm_job_name", "container", "container_engine", "pod", "pod_container", "kube_context"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:+-]*$")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_JOB = re.compile(r"^\d+(?:_\d+)?(?:\+\d+)?$")


@dataclass(frozen=True)
class Placement:
    kind: str  # "slurm", "docker", "podman", "pod"
    name: str  # the job id or name, the container's name or id, the pod's name
    by_name: bool = False  # slurm: `name` is a --job-name (the newest job of that name)
    namespace: str | None = None  # pod
    container: str | None = None  # pod: the container (None: the first)
    context: str | None = None  # pod: kubectl --context

    @property
    def manager(self) -> str:
        return {"slurm": "Slurm", "docker": "Docker", "podman": "Podman", "pod": "Kubernetes"}[self.kind]

    @property
    def label(self) -> str:
        if self.kind == "slurm":
            return f"Slurm job named {self.name}" if self.by_name else f"Slurm job {self.name}"
        if self.kind == "pod":
            where = f"{self.namespace}/{self.name}" if self.namespace else self.name
            return f"pod {where}" + (f" (container {self.container})" if self.container else "")
        return f"{self.kind} container {self.name}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "by_name": self.by_name, "namespace": self.namespace,
                "container": self.container, "context": self.context, "label": self.label}


def parse_placement(check: Checker, table: tuple[str, ...], data: dict[str, Any]) -> Placement | None:
    """The placement a table names, checked (file, line and key in every message); None for a bare process."""
    given = [k for k in ("slurm_job", "slurm_job_name", "container", "pod") if k in data]
    if len(given) > 1:
        raise check.fail(table, given[1], f"'{given[0]}' and '{given[1]}' both say where it runs: give one")
    for key, needs in (("container_engine", "container"), ("pod_container", "pod"), ("kube_context", "pod")):
        if key in data and needs not in data:
            raise check.fail(table, key, f"'{key}' goes with '{needs}'")
    if not given:
        return None
    key = given[0]
    value = check.get(table, data, key, str, None)
    assert value is not None
    value = value.strip()
    if key == "slurm_job":
        if not _JOB.match(value):
            raise check.fail(table, key, f"'{value}' is not a Slurm job id (digits, e.g. \"12345\" or \"12345_7\" for an array task); "
                             "a job's name goes in slurm_job_name")
        return Placement("slurm", value)
    if key == "slurm_job_name":
        if not _NAME.match(value) or len(value) > 200:
            raise check.fail(table, key, f"'{value}' is not a job name: letters, digits and ._@:+- , no spaces")
        return Placement("slurm", value, by_name=True)
    if key == "container":
        engine = check.get(table, data, "container_engine", str, "docker")
        if engine not in ("docker", "podman"):
            raise check.fail(table, "container_engine", f"must be 'docker' or 'podman', got '{engine}'")
        if not _NAME.match(value) or len(value) > 200:
            raise check.fail(table, key, f"'{value}' is not a container name or id")
        return Placement(engine, value)
    namespace, _, name = value.rpartition("/")
    for part, what in ((name, "name"), (namespace, "namespace")):
        if part and (not _DNS.match(part) or len(part) > 253):
            raise check.fail(table, key, f"'{value}': '{part}' is not a pod {what} (lower-case letters, digits, '-' and '.')")
    if not name:
        raise check.fail(table, key, f"'{value}' names no pod: NAMESPACE/NAME or NAME")
    container = check.get(table, data, "pod_container", str, None)
    if container is not None and not _DNS.match(container):
        raise check.fail(table, "pod_container", f"'{container}' is not a container name")
    context = check.get(table, data, "kube_context", str, None)
    if context is not None and (context.startswith("-") or any(c.isspace() for c in context)):
        raise check.fail(table, "kube_context", f"'{context}' is not a kubectl context name")
    return Placement("pod", name, namespace=namespace or None, container=container, context=context)
