"""What a workload manager said of a job, a container or a pod, in its own words and in the cockpit's."""

from __future__ import annotations

import time
from dataclasses import dataclass

# the cockpit's reading of a manager's state
PENDING, RUNNING, FINISHED, FAILED, GONE, UNKNOWN = "pending", "running", "finished", "failed", "gone", "unknown"


@dataclass(frozen=True)
class ManagerState:
    manager: str  # "Slurm", "Docker", "Podman", "Kubernetes"
    what: str  # the placement's label: "Slurm job 123", "docker container eagle3", "pod ml/eagle3-0"
    phase: str  # pending | running | finished | failed | gone (the manager no longer knows it) | unknown (could not ask)
    state: str = ""  # the manager's own word: RUNNING, OUT_OF_MEMORY, exited, Running, Failed ...
    exit_code: str | None = None  # as the manager writes it: "0:125" (Slurm), "137", "1"
    reason: str = ""  # the manager's reason, in words
    node: str | None = None  # where it runs (or ran)
    log: str | None = None  # a log file the manager names (Slurm's StdOut)
    restarts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    why: str = ""  # unknown or gone: why
    at: float = 0.0
    cgroup_mark: str = ""  # what the cgroup path of its processes holds (a container's id, /job_N/, a pod's uid): ties a
    #                        process the cockpit killed to this workload

    @property
    def oom(self) -> bool:
        """Out of memory, as the manager says it (Docker's OOMKilled, Slurm's OUT_OF_MEMORY, a pod's OOMKilled): a SIGKILL
        alone, or a "probably", is not."""
        return self.state.upper() in ("OUT_OF_MEMORY", "OOMKILLED") or self.reason.startswith("OOMKilled")

    @property
    def terminal(self) -> bool:
        return self.phase in (FINISHED, FAILED)

    def describe(self) -> str:
        """One line, the manager's words first: 'Slurm job 17: TIMEOUT (exit 0:15) on vm: it reached its --time limit'."""
        if self.phase == UNKNOWN:
            return f"{self.what}: unknown ({self.why})"
        if self.phase == GONE:
            return f"{self.what}: {self.why}"
        parts = [f"{self.what}: {self.state or self.phase}"]
        if self.exit_code is not None and self.terminal:
            parts.append(f"(exit {self.exit_code})")
        if self.node:
            parts.append(f"on {self.node}")
        text = " ".join(parts)
        if self.restarts:
            text += f", restarted {self.restarts} time" + ("s" if self.restarts > 1 else "")
        return text + (f": {self.reason}" if self.reason else "")

    def to_json(self) -> dict:
        return {"manager": self.manager, "what": self.what, "phase": self.phase, "state": self.state, "exit_code": self.exit_code,
                "reason": self.reason or None, "node": self.node, "log": self.log, "restarts": self.restarts,
                "started_at": self.started_at, "finished_at": self.finished_at, "why": self.why or None,
                "cgroup_mark": self.cgroup_mark or None,
                "text": self.describe()}


def unknown(manager: str, what: str, why: str) -> ManagerState:
    return ManagerState(manager, what, UNKNOWN, why=why, at=time.time())


def command_problem(manager: str, what: str, command: str, host: str, output: str, status: int | None) -> ManagerState | None:
    """A manager's command that could not run at all on the host, as one clear line (None: it ran)."""
    text = output.strip()
    if status == 127 or "command not found" in text or "No such file or directory" in text and command in text:
        return unknown(manager, what, f"`{command}` is not installed on {host} (or not on its PATH for this user)")
    if status == 126 or "Permission denied" in text and "docker.sock" not in text:
        return unknown(manager, what, f"`{command}` may not be run by this user on {host}: {text.splitlines()[-1][:160] if text else ''}")
    return None


def parse_time(text: str | None) -> float | None:
    """An RFC 3339 / ISO 8601 time (Docker's nanoseconds, Kubernetes' Z, Slurm's local 2026-12-06T02:28:11) as epoch seconds."""
    if not text or text in ("Unknown", "None", "N/A") or text.startswith("0001-01-01"):
        return None
    from datetime import datetime, timezone

    cleaned = text.strip().replace("Z", "+00:00")
    if "." in cleaned:  # Docker's nanoseconds: Python takes microseconds
        head, _, rest = cleaned.partition(".")
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        cleaned = f"{head}.{digits[:6]}{zone}"
    try:
        when = datetime.fromisoformat(cleaned)
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.timestamp()  # Slurm writes the cluster's local time
    return when.astimezone(timezone.utc).timestamp()
