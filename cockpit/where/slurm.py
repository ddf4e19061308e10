"""A Slurm job, asked of Slurm: `scontrol -o show job` while slurmctld holds it, `sacct` after (a finished job
leaves scontrol after MinJobAge, 300 s by default).  Facts of Slurm 22.05 seen on a real cluster
(../shared/docs/where-work-runs): scontrol and sacct write ExitCode as `exit:signal` (`1:0`, `0:15`, `0:125`
for an OOM kill); sacct's text columns are cut unless -P; `squeue --json` ignores -j and sacct's --json exit
code is wrong for FAILED jobs, so text is read here; sacct has no StdOut field before 23.02, so the job's
StdOut file is remembered while scontrol still shows it."""

from __future__ import annotations

import posixpath
import re
import time

from cockpit.hosts.transport import Transport, TransportError
from cockpit.where.placement import Placement
from cockpit.where.state import FAILED, FINISHED, GONE, PENDING, RUNNING, ManagerState, command_problem, parse_time, unknown

_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z/:]*)=")

RUNNING_STATES = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
PENDING_STATES = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
REASONS = {
    "OUT_OF_MEMORY": "the job exceeded its memory (--mem): the cgroup's OOM killer ended it",
    "TIMEOUT": "the job reached its time limit (--time)",
    "CANCELLED": "the job was cancelled (scancel, or an administrator)",
    "NODE_FAIL": "its node failed",
    "BOOT_FAIL": "its node failed to boot",
    "DEADLINE": "the job reached its deadline",
    "PREEMPTED": "the job was preempted",
}


def fields(line: str) -> dict[str, str]:
    """`scontrol -o show job`'s one line as KEY=VALUE pairs (a value may hold spaces: a key starts each field)."""
    found = list(_FIELD.finditer(line))
    out = {}
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(line)
        out[match.group(1)] = line[match.end():end].strip()
    return out


def _exit_words(code: str | None) -> str:
    """`1:0` -> 'exited with code 1'; `0:9` -> 'killed by signal 9'."""
    if not code or ":" not in code:
        return ""
    status, _, signal = code.partition(":")
    if signal not in ("", "0"):
        return f"killed by signal {signal}"
    return f"exited with code {status}" if status not in ("", "0") else ""


def state_of(job: str, label: str, slurm_state: str, exit_code: str | None, node: str | None, reason: str = "",
             log: str | None = None, started: str | None = None, ended: str | None = None, restarts: int = 0) -> ManagerState:
    word = slurm_state.split()[0] if slurm_state else ""
    by = slurm_state[len(word):].strip()  # sacct: "CANCELLED by 0"
    base = word.rstrip("+")
    if base in RUNNING_STATES:
        phase, said = RUNNING, ""
    elif base in PENDING_STATES:
        phase, said = PENDING, f"waiting ({reason})" if reason and reason != "None" else "waiting in the queue"
    elif base == "COMPLETED":
        ok = exit_code in (None, "0:0", "0")
        phase, said = (FINISHED, "") if ok else (FAILED, _exit_words(exit_code))
    elif base == "FAILED":
        phase, said = FAILED, _exit_words(exit_code) or (reason if reason and reason != "None" else "")
    elif base in REASONS:
        phase, said = FAILED, REASONS[base] + (f" ({by})" if by else "")
    else:
        phase, said = FAILED, (reason if reason and reason != "None" else "")
    if base == "FAILED" and reason not in ("", "None", "NonZeroExitCode") and reason not in said:
        said = f"{said}; {reason}" if said else reason
    return ManagerState("Slurm", label, phase, base, exit_code, said, node if node not in ("", "None", "(null)") else None, log,
                        restarts, parse_time(started), parse_time(ended), at=time.time(),
                        cgroup_mark=f"/job_{job}/" if job and job.isdigit() else "")  # slurmd's cgroup: .../job_N/step_...


class SlurmJob:
    def __init__(self, placement: Placement):
        self.placement = placement
        self.job_id: str | None = None if placement.by_name else placement.name
        self.stdout: str | None = None  # remembered while scontrol shows it (sacct 22.05 has no StdOut)
        self.seen = False  # Slurm has answered for this job once

    def log_argv(self, since: str | None = None) -> list[str] | None:
        return None  # Slurm names a file: it is followed as one (StdOut)

    async def _find_by_name(self, transport: Transport) -> str | None:
        """The newest job of the placement's name: squeue while slurmctld holds it, else sacct's last week."""
        name = self.placement.name
        result = await transport.run(["squeue", "-h", "-t", "all", "-n", name, "-o", "%i"], timeout=30)
        ids = [line.strip() for line in result.stdout.splitlines() if line.strip()] if result.exit_status == 0 else []
        if not ids:
            result = await transport.run(["sacct", "-n", "-P", "-X", "--name", name, "-S", "now-7days", "-o", "JobID"], timeout=30)
            ids = [line.strip() for line in result.stdout.splitlines() if line.strip()] if result.exit_status == 0 else []
        if not ids:
            return None
        return max(ids, key=lambda i: [int(p) for p in re.findall(r"\d+", i)])

    async def look(self, transport: Transport) -> ManagerState:
        label = self.placement.label
        try:
            if self.job_id is None or self.placement.by_name:
                found = await self._find_by_name(transport)
                if found is None:
                    if self.seen:
                        return ManagerState("Slurm", label, GONE, at=time.time(),
                                            why=f"Slurm no longer knows a job named {self.placement.name} (purged from accounting?)")
                    return unknown("Slurm", label, f"no job named {self.placement.name} in squeue or sacct's last 7 days "
                                                   "(not submitted yet?)")
                if found != self.job_id:
                    self.job_id, self.stdout = found, None
                label = f"Slurm job {self.job_id} ({self.placement.name})"
            result = await transport.run(["scontrol", "-o", "show", "job", self.job_id], timeout=30)
            problem = command_problem("Slurm", label, "scontrol", transport.name, result.output, result.exit_status)
            if problem is not None:
                return problem
            if result.exit_status == 0 and "JobState=" in result.stdout:
                line = next(l for l in result.stdout.splitlines() if "JobState=" in l)
                job = fields(line)
                self.stdout = job.get("StdOut") or self.stdout
                self.seen = True
                try:
                    restarts = int(job.get("Restarts", "0") or 0)
                except ValueError:
                    restarts = 0
                return state_of(self.job_id, label, job.get("JobState", ""), job.get("ExitCode"), job.get("NodeList"),
                                job.get("Reason", ""), self.stdout, job.get("StartTime"), job.get("EndTime"), restarts)
            # purged from slurmctld (MinJobAge), or slurmctld down: accounting still knows
            said = result.output.strip().splitlines()[-1][:200] if result.output.strip() else f"exit {result.exit_status}"
            acct = await transport.run(["sacct", "-n", "-P", "-X", "-j", self.job_id, "-o",
                                        "JobID,JobName,State,ExitCode,NodeList,Start,End,Reason,WorkDir"], timeout=30)
            rows = [r.split("|") for r in acct.stdout.splitlines() if r.strip()] if acct.exit_status == 0 else []
            rows = [r for r in rows if len(r) >= 9 and r[0] == self.job_id] or [r for r in rows if len(r) >= 9]
            if rows:
                row = rows[-1]
                self.seen = True
                if self.stdout is None and row[8].startswith("/"):
                    # dropped by slurmctld before this cockpit saw it (MinJobAge): sacct 22.05 has no StdOut, but its
                    # WorkDir is where sbatch's default output, slurm-%j.out, was written
                    self.stdout = posixpath.join(row[8], f"slurm-{self.job_id}.out")
                return state_of(self.job_id, label, row[2], row[3], row[4], row[7], self.stdout, row[5], row[6])
            why = f"scontrol: {said}"
            if acct.output.strip():
                why += f"; sacct: {acct.output.strip().splitlines()[-1][:160]}"
            if "Invalid job id" in said and not acct.output.strip():
                why = f"Slurm knows no job {self.job_id} (scontrol: invalid job id; sacct: nothing)"
            return unknown("Slurm", label, why)
        except TransportError as exc:
            return unknown("Slurm", label, f"cannot ask Slurm on {transport.name}: {exc}")
