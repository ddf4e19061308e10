"""The built-in step kinds: gpu_clean, command, kill_stale and launch (one class each).  The kinds
of SGLang, the drafter and the benchmarks live in their own packages; the composition root
registers them all (cockpit/context.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shlex
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from cockpit.hosts.procs import (NEVER_KILL, LaunchedProcess, ProcessRow, acting_user, ancestors, launch_marker, list_processes,
                                 process_alive, start_detached, stop_process)
from cockpit.hosts.transport import Transport, TransportError, quote_argv
from cockpit.runbook.checks import DEFAULT_MAX_USED_MIB, dirty_reasons, judge
from cockpit.format import age, plural, shell_words
from cockpit.runbook.kind import Param, RunContext, StepKind, command_line
from cockpit.runbook.kind import now as _now
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.telemetry.model import HostSnapshot


# --- gpu_clean ---------------------------------------------------------------------------------------


class GpuClean(StepKind):
    name = "gpu_clean"
    gate = True
    params = {
        "max_used_mib": Param(int, DEFAULT_MAX_USED_MIB, help="used memory allowed per GPU"),
        "gpus": Param(list, None, help="only these GPU indices (default: every GPU)"),
        "expect_gpus": Param(int, None, help="fail unless the host reports this many GPUs (each node, in a group)"),
        "hosts": Param(list, None, help="instead of host: every node of a launch group, each verified"),
    }

    def title(self, spec: StepSpec) -> str:
        which = "every GPU" if not spec.params.get("gpus") else "GPUs " + ",".join(map(str, spec.params["gpus"]))
        nodes = self.hosts(spec)
        return spec.title or f"{which} of {spec.host if len(nodes) == 1 else ', '.join(nodes)} clean"

    def why(self, spec: StepSpec) -> str:
        limit = spec.params.get("max_used_mib", DEFAULT_MAX_USED_MIB)
        return f"at most {limit} MiB used and no compute process on each GPU, or a server started there fails on memory held by another"

    def validate(self, spec: StepSpec) -> str | None:
        gpus = spec.params.get("gpus")
        if gpus is not None and not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in gpus):
            return "gpus must be a list of GPU indices (integers >= 0)"
        return None

    async def _judge(self, ctx: RunContext, spec: StepSpec, host: str):
        snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(host))  # with its processes (over SSH for a Prometheus host)
        ctx.hub.publish(snapshot)
        report = judge(snapshot, spec.params.get("max_used_mib", DEFAULT_MAX_USED_MIB), spec.params.get("gpus"),
                       spec.params.get("expect_gpus"))
        pids = sorted({p.pid for p in snapshot.processes})
        if report.clean or not pids:
            return report
        # who holds each GPU (issue 51 item 5): its cgroup's owner, named by its manager, and how that manager stops it
        from cockpit.hosts.owner import owners_of
        from cockpit.where.owners import name_owners

        with contextlib.suppress(TransportError, OSError):
            transport = ctx.transport(host)
            named = await name_owners(transport, await owners_of(transport, pids))
            if named:
                held = [f"GPU {p.gpu_index} held by {named[p.pid].words} (pid {p.pid}; stop it with `{' '.join(named[p.pid].stop_argv())}`)"
                        for p in snapshot.processes if p.pid in named]
                report = dataclasses.replace(report, reasons=(*report.reasons, *dict.fromkeys(held)),
                                             evidence={**report.evidence, "owners": {str(pid): n.to_json() for pid, n in named.items()}})
        return report

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        nodes = self.hosts(spec)
        reports = await asyncio.gather(*(self._judge(ctx, spec, host) for host in nodes))  # every node at once
        if len(nodes) == 1:
            report = reports[0]
            if report.error:
                return StepResult(StepState.FAILED, started, _now(), f"could not verify {spec.host}: {report.error}")
            if report.clean:
                count = len(report.evidence["gpus"])
                return StepResult(StepState.PASSED, started, _now(), f"{spec.host}: {plural(count, 'GPU')} clean, no compute processes",
                                  evidence=report.evidence)
            return StepResult(StepState.FAILED, started, _now(), "; ".join(report.reasons), evidence=report.evidence)
        evidence = {"nodes": {host: report.evidence for host, report in zip(nodes, reports)}}
        problems = []
        for host, report in zip(nodes, reports):
            if report.error:
                problems.append(f"could not verify {host}: {report.error}")
            elif not report.clean:
                problems.append(f"{host}: " + "; ".join(report.reasons))
        if problems:
            return StepResult(StepState.FAILED, started, _now(), "; ".join(problems), evidence=evidence)
        count = sum(len(r.evidence["gpus"]) for r in reports)
        return StepResult(StepState.PASSED, started, _now(), f"{len(nodes)} nodes, {plural(count, 'GPU')} clean, no compute processes",
                          evidence=evidence)

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        nodes = result.evidence.get("nodes")
        if isinstance(nodes, dict):
            return [line for evidence in nodes.values() if isinstance(evidence, dict) for line in self._explain_one(evidence)]
        return self._explain_one(result.evidence)

    def _explain_one(self, evidence: dict) -> list[str]:
        gpus = evidence.get("gpus") or []
        if not gpus:
            return []
        used = [g for g in gpus if (g.get("memory_used_mib") or 0) > 0]
        memory = ", ".join(f"GPU {g['index']} {g['memory_used_mib']} MiB" for g in used) or "every one at 0 MiB"
        lines = [f"{plural(len(gpus), 'GPU')} of {evidence.get('host')} sampled {age(evidence.get('time'))}: {memory}"]
        procs = evidence.get("processes") or []
        owners = evidence.get("owners") if isinstance(evidence.get("owners"), dict) else {}

        def whose(pid) -> str:
            owner = owners.get(str(pid)) if isinstance(owners, dict) else None
            return f", {owner.get('words')}" if isinstance(owner, dict) and owner.get("words") else ""

        lines.append("no compute process" if not procs else "compute processes: " + "; ".join(
            f"pid {p.get('pid')} ({p.get('name') or '?'}, {p.get('used_memory_mib')} MiB, GPU {p.get('gpu_index')}{whose(p.get('pid'))})"
            for p in procs))
        return lines

    def contradicted_by(self, spec: StepSpec, snapshot: HostSnapshot) -> list[str]:
        """Reasons a later telemetry snapshot (of one of its hosts) contradicts a pass (empty: it still holds)."""
        reasons = dirty_reasons(snapshot, spec.params.get("max_used_mib", DEFAULT_MAX_USED_MIB), spec.params.get("gpus"),
                                spec.params.get("expect_gpus"))
        return [f"{snapshot.name}: {r}" for r in reasons] if len(self.hosts(spec)) > 1 else reasons


# --- command -----------------------------------------------------------------------------------------


class Command(StepKind):
    name = "command"
    params = {
        "argv": Param(list, None, required=True, help="the command as a list of words (no shell)"),
        "expect_exit": Param(int, 0),
        "expect_output": Param(str, None, help="a regular expression the output must match"),
        "timeout_s": Param((int, float), 60.0),
        "why": Param(str, None),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"run {shell_words(spec.params['argv'])[:50]} on {spec.host}"

    def why(self, spec: StepSpec) -> str:
        return spec.params.get("why") or f"passes on exit status {spec.params.get('expect_exit', 0)}"

    def validate(self, spec: StepSpec) -> str | None:
        argv = spec.params.get("argv")
        if not argv or not all(isinstance(a, str) for a in argv):
            return "argv must be a non-empty list of strings"
        pattern = spec.params.get("expect_output")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                return f"expect_output is not a valid regular expression: {exc}"
        return None

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        if "exit_status" not in evidence:
            return []
        ran = f"exit status {evidence['exit_status']} (expected {spec.params.get('expect_exit', 0)})"
        return [ran + (", timed out" if evidence.get("timed_out") else ""), "command: " + command_line(evidence.get("argv"))]

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        result = await ctx.transport(spec.host).run(spec.params["argv"], timeout=float(spec.params.get("timeout_s", 60.0)))
        output = result.output[-4000:]
        evidence = {"exit_status": result.exit_status, "timed_out": result.timed_out, "argv": spec.params["argv"]}
        expected = spec.params.get("expect_exit", 0)
        if result.timed_out:
            return StepResult(StepState.FAILED, started, _now(), f"timed out after {spec.params.get('timeout_s', 60.0)} s", evidence, output)
        if result.exit_status != expected:
            return StepResult(StepState.FAILED, started, _now(), f"exit status {result.exit_status}, expected {expected}", evidence, output)
        pattern = spec.params.get("expect_output")
        if pattern and not re.search(pattern, result.output, re.MULTILINE):
            return StepResult(StepState.FAILED, started, _now(), f"output does not match /{pattern}/", evidence, output)
        return StepResult(StepState.PASSED, started, _now(), f"exit status {result.exit_status}", evidence, output)


# --- kill_stale --------------------------------------------------------------------------------------

# $@ are pids: for each, the files it holds open ("PID /path") and its cgroups on one line ("PID cgroup ..."): what
# ties a process to a container (docker's /docker/ID), a Slurm job (/job_N/) or a pod (its uid)
PROCESS_FACTS_SCRIPT = ('for p in "$@"; do for f in /proc/$p/fd/*; do t=$(readlink "$f" 2>/dev/null) && printf "%s %s\\n" "$p" "$t"; '
                        'done; printf "%s cgroup %s\\n" "$p" "$(tr "\\n" " " < /proc/$p/cgroup 2>/dev/null | head -c 1000)"; done')


async def process_facts(transport: Transport, pids: list[int], per_pid: int = 64) -> tuple[dict[str, list[str]], dict[str, str]]:
    """What each process is, read on its host from /proc (the pids travel as arguments): ({pid: [the files it holds open,
    the first `per_pid`]}, {pid: its cgroups on one line}).  Empty where /proc cannot tell."""
    if not pids:
        return {}, {}
    try:
        result = await transport.run(["sh", "-c", PROCESS_FACTS_SCRIPT, "sh", *map(str, pids)], timeout=30)
    except (TransportError, OSError):
        return {}, {}
    held: dict[str, list[str]] = {}
    groups: dict[str, str] = {}
    for line in result.stdout.splitlines():
        pid, _, rest = line.partition(" ")
        if not pid.isdigit():
            continue
        if rest.startswith("cgroup "):
            groups[pid] = rest[len("cgroup "):].strip()[:1000]
        elif rest.startswith("/") and len(held.setdefault(pid, [])) < per_pid and rest not in held[pid]:
            held[pid].append(rest)
    return held, groups


class KillStale(StepKind):
    name = "kill_stale"
    destructive = True
    params = {
        "pattern": Param(str, None, help="regular expression matched against full command lines"),
        "pids": Param(list, None, help="exactly these process ids (the process table's kill)"),
        "gpu_processes": Param(bool, False, help="also every compute process on the host's GPUs"),
        "user": Param(str, None, help="only processes of this user (default: the user the cockpit acts as on the host)"),
        "any_user": Param(bool, False, help="also other users' processes (shown as such in the confirmation)"),
        "grace_s": Param((int, float), 10.0, help="seconds between SIGTERM and SIGKILL"),
    }

    def title(self, spec: StepSpec) -> str:
        what = []
        if spec.params.get("pattern"):
            what.append(f"/{spec.params['pattern']}/")
        if spec.params.get("gpu_processes"):
            what.append("GPU processes")
        if spec.params.get("pids"):
            what.append("pid " + ", ".join(map(str, spec.params["pids"])))
        return spec.title or f"kill stale {' and '.join(what)} on {spec.host}"

    def why(self, spec: StepSpec) -> str:
        return "leftover processes hold GPU memory and ports; they must be gone before a launch"

    def validate(self, spec: StepSpec) -> str | None:
        if not spec.params.get("pattern") and not spec.params.get("gpu_processes") and not spec.params.get("pids"):
            return "kill_stale needs 'pattern', 'gpu_processes = true' or 'pids'"
        pids = spec.params.get("pids")
        if pids is not None and (not pids or not all(isinstance(p, int) and not isinstance(p, bool) and p > 1 for p in pids)):
            return "pids must be a list of process ids (integers above 1)"
        if spec.params.get("pattern"):
            try:
                re.compile(spec.params["pattern"])
            except re.error as exc:
                return f"pattern is not a valid regular expression: {exc}"
        if spec.params.get("user") and spec.params.get("any_user"):
            return "give 'user' (only that user's processes) or 'any_user = true', not both"
        return None

    async def scope(self, ctx: RunContext, spec: StepSpec) -> str | None:
        """Whose processes may be killed: the `user` given, else the user the cockpit acts as on the
        host; None with `any_user` (everyone's)."""
        if spec.params.get("any_user"):
            return None
        return spec.params.get("user") or await acting_user(ctx.transport(spec.host))

    async def find(self, ctx: RunContext, spec: StepSpec) -> tuple[list[ProcessRow], list[ProcessRow]]:
        """(the processes to kill, the matching ones of other users that are left alone).  Every
        process is shown with its memory on each GPU (the host's compute processes, sampled now)."""
        rows = await list_processes(ctx.transport(spec.host))
        held: dict[int, list[tuple[int | None, int | None]]] = {}
        with contextlib.suppress(TransportError, OSError, asyncio.TimeoutError):
            snapshot = await ctx.hub.gate_sample(ctx.hub.config.host(spec.host))
            ctx.hub.publish(snapshot)
            for proc in snapshot.processes:
                held.setdefault(proc.pid, []).append((proc.gpu_index, proc.used_memory_mib))
        pattern = re.compile(spec.params["pattern"]) if spec.params.get("pattern") else None
        user = await self.scope(ctx, spec)
        protected = {1}
        if ctx.hub.config.host(spec.host).local:
            protected |= ancestors(rows, os.getpid())
        # the cockpit's own commands on that host (its telemetry stream), as ps shows them
        running_commands = set()
        for record in ctx.hub.log.records():
            if record.running and record.host == spec.host:
                with contextlib.suppress(ValueError):
                    running_commands.add(" ".join(shlex.split(record.command)))
        chosen: list = []
        others: list = []
        for row in rows:
            if row.pid in protected or NEVER_KILL.match(row.args) or row.args.startswith("ps -") or row.args in running_commands:
                continue
            gpus = tuple(sorted(held.get(row.pid, ()), key=lambda g: (g[0] is None, g[0] or 0)))
            hit = ((pattern is not None and pattern.search(row.args)) or (spec.params.get("gpu_processes") and row.pid in held)
                   or row.pid in (spec.params.get("pids") or ()))
            if not hit:
                continue
            mib = sum(m or 0 for _, m in gpus) if gpus else None
            found = ProcessRow(row.pid, row.ppid, row.user, row.args, mib, gpus)
            (chosen if user is None or row.user == user else others).append(found)
        return chosen, others

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        evidence = result.evidence
        lines = []
        for row in evidence.get("found") or []:
            gpus = " ".join(f"{g.get('index')}:{g.get('mib')}" for g in row.get("gpus") or [])
            memory = f", {row.get('gpu_mib')} MiB on GPUs {gpus}" if row.get("gpu_mib") else ""
            lines.append(f"pid {row.get('pid')} ({row.get('user')}{memory}): {str(row.get('args'))[:160]}")
        for sent in evidence.get("signals") or []:
            lines.append(f"SIG{sent.get('signal')} to {', '.join(map(str, sent.get('pids') or []))} {age(sent.get('time'))}")
        for row in evidence.get("left_alone") or []:
            lines.append(f"left alone: pid {row.get('pid')} of {row.get('user')} (another user)")
        return lines

    async def plan(self, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
        found, others = await self.find(ctx, spec)
        if not found:
            return None, (found, others)
        grace = spec.params.get("grace_s", 10.0)
        me = await self.scope(ctx, spec)
        acting = await acting_user(ctx.transport(spec.host))
        lines = [f"On {spec.host}, send SIGTERM, wait up to {grace:g} s, then SIGKILL what is left"
                 + (f" (processes of {me} only):" if me else " (ANY user's processes):")]
        where = {row.pid: " ".join(f"{'?' if i is None else i}:{'?' if m is None else m}" for i, m in row.gpus) or "-" for row in found}
        wide = max(len("ON GPUS (INDEX:MiB)"), *map(len, where.values()))  # the column holds its widest cell: nothing runs into COMMAND
        lines.append(f"  {'PID':>8}  {'USER':<10} {'GPU MiB':>8}  {'ON GPUS (INDEX:MiB)':<{wide}}  COMMAND")
        for row in found:
            mib = "-" if row.gpu_mib is None else str(row.gpu_mib)
            mark = "  <- another user" if row.user != acting else ""
            lines.append(f"  {row.pid:>8}  {row.user[:10]:<10} {mib:>8}  {where[row.pid]:<{wide}}  {row.args[:500]}{mark}")
        for row in others:
            lines.append(f"  left alone: pid {row.pid} of user {row.user} also matches ({row.args[:120]}); "
                         "any_user = true would include it")
        lines += await self._owners_said(ctx.transport(spec.host), found)
        return "\n".join(lines), (found, others)

    @staticmethod
    async def _owners_said(transport: Transport, found: list[ProcessRow]) -> list[str]:
        """A process that a manager holds (a Slurm job, a container): said, with the manager's own way to stop it (a job's
        step or a container with a restart policy may start it again after a kill)."""
        from cockpit.hosts.owner import owners_of
        from cockpit.where.owners import name_owners

        try:
            named = await name_owners(transport, await owners_of(transport, [row.pid for row in found]))
        except (TransportError, OSError):
            return []
        said = []
        for pid, owner in sorted(named.items()):
            said.append(f"  pid {pid} is in {owner.words}: its manager stops it with `{' '.join(owner.stop_argv())}` "
                        "(the kill here goes to the process only)")
        return said

    async def _alive(self, transport: Transport, pids: list[int], found: list[ProcessRow]) -> list[int]:
        if not pids:
            return []
        by_pid = {r.pid: r for r in await list_processes(transport)}
        wanted = {r.pid: r.args for r in found}
        # a PID counts as the same process only while its command line is the same
        return [pid for pid in pids if pid in by_pid and by_pid[pid].args == wanted.get(pid)]

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        found, others = planned if planned is not None else await self.find(ctx, spec)
        evidence: dict[str, Any] = {"host": spec.host, "found": [r.to_json() for r in found],
                                    "left_alone": [r.to_json() for r in others], "signals": []}
        if not found:
            extra = f"; {len(others)} of other users left alone" if others else ""
            return StepResult(StepState.PASSED, started, _now(), f"no matching process on {spec.host}{extra}", evidence)
        transport = ctx.transport(spec.host)
        pids = await self._alive(transport, [r.pid for r in found], found)
        grace = float(spec.params.get("grace_s", 10.0))
        # what each process was, recorded with the kill: its command line, the files it held open and its cgroups, so that a watcher
        # that never saw its pid (a one-shot look, a run found by its log) can still tie the run it ends to this kill
        commands = {str(r.pid): r.args[:500] for r in found if r.pid in pids}
        files, cgroups = await process_facts(transport, pids)
        for signal_name in ("TERM", "KILL"):
            if not pids:
                break
            # recorded before the signal goes: a watcher that finds these processes gone finds the cockpit's own kill
            ctx.audit("kill", host=spec.host, step=spec.name, signal=signal_name, pids=pids, commands=commands, files=files,
                      cgroups=cgroups)
            await transport.run(["kill", f"-{signal_name}", *map(str, pids)], timeout=30)
            evidence["signals"].append({"signal": signal_name, "pids": pids, "time": _now()})
            deadline = time.monotonic() + (grace if signal_name == "TERM" else 5.0)
            while pids and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                pids = await self._alive(transport, pids, found)
        if pids:
            return StepResult(StepState.FAILED, started, _now(), f"still running after SIGKILL: {', '.join(map(str, pids))}", evidence)
        return StepResult(StepState.PASSED, started, _now(), f"{plural(len(found), 'process', 'processes')} gone from {spec.host}", evidence)


# --- launch ------------------------------------------------------------------------------------------

class Launch(StepKind):
    name = "launch"
    destructive = True
    launch = True
    params: ClassVar[Mapping[str, Param]] = {
        "argv": Param(list, None, required=True, help="the server command as a list of words"),
        "log": Param(str, None, help="log file on the host (default /tmp/cockpit-STEP.log)"),
        "cwd": Param(str, None),
        "env": Param(dict, None),
        "settle_s": Param((int, float), 2.0, help="the process must still run after this many seconds"),
    }

    def title(self, spec: StepSpec) -> str:
        return spec.title or f"launch {spec.params['argv'][0]} on {spec.host}"

    def why(self, spec: StepSpec) -> str:
        return "starts the server detached; runs only when every check before it passed, with fresh GPU evidence"

    def validate(self, spec: StepSpec) -> str | None:
        argv = spec.params.get("argv")
        if not argv or not all(isinstance(a, str) for a in argv):
            return "argv must be a non-empty list of strings"
        env = spec.params.get("env") or {}
        if not all(isinstance(k, str) and isinstance(v, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k) for k, v in env.items()):
            return "env must map variable names to strings"
        return None

    def explain(self, spec: StepSpec, result: StepResult) -> list[str]:
        server = LaunchedProcess.from_evidence(result.evidence, spec.host)
        lines = []
        if server is not None:
            port = f" on port {server.port}" if server.port else ""
            lines.append(f"pid {server.pid} on {server.host}{port}, started {age(server.started_at or result.started_at)}")
            lines.append(f"log: {server.log}")
        argv = result.evidence.get("argv")
        if argv:
            lines.append("command: " + command_line(argv))
        for diagnosis in result.evidence.get("diagnoses") or []:
            if isinstance(diagnosis, dict) and diagnosis.get("severity", "error") == "error":
                lines.append(f"diagnosis: [{diagnosis.get('kind')}] {diagnosis.get('message')}")
        return lines

    def log_path(self, spec: StepSpec) -> str:
        return spec.params.get("log") or f"/tmp/cockpit-{spec.name}.log"

    async def start(self, ctx: RunContext, spec: StepSpec, argv: list[str], old_pid) -> tuple[int | None, str]:
        """Stop what this step started before (if it still runs), then start argv detached, with a
        run marker in its log; waits settle_s and says whether it still runs."""
        transport = ctx.transport(spec.host)
        if old_pid and await process_alive(transport, int(old_pid)):
            gone = await stop_process(transport, int(old_pid))
            ctx.audit("kill", host=spec.host, step=spec.name, signal="TERM", pids=[old_pid], why="relaunch", gone=gone)
        log = self.log_path(spec)
        pid, error = await start_detached(transport, argv, log, spec.params.get("cwd"), spec.params.get("env"),
                                          launch_marker(spec.name, spec.host))
        if pid is None:
            return None, error
        ctx.audit("launch", host=spec.host, step=spec.name, pid=pid, argv=argv, log=log)
        await asyncio.sleep(float(spec.params.get("settle_s", 2.0)))
        return pid, "" if await process_alive(transport, pid) else "exited"

    def previous(self, ctx: RunContext, spec: StepSpec) -> LaunchedProcess | None:
        """The process this step started the last time, as its evidence recorded it."""
        result = ctx.runbook.result(spec.name)
        return LaunchedProcess.from_evidence(result.evidence, spec.host) if result is not None else None

    async def plan(self, ctx: RunContext, spec: StepSpec) -> tuple[str | None, Any]:
        old = self.previous(ctx, spec)
        lines = [f"On {spec.host}, start (detached, output to {self.log_path(spec)}):", "  " + quote_argv(spec.params["argv"])]
        if old:
            lines.insert(0, f"On {spec.host}, stop the server this step started before (pid {old.pid}) if it still runs.")
        return "\n".join(lines), old.pid if old else None

    async def run(self, ctx: RunContext, spec: StepSpec, planned: Any) -> StepResult:
        started = _now()
        pid, problem = await self.start(ctx, spec, spec.params["argv"], planned)
        if pid is None:
            return StepResult(StepState.FAILED, started, _now(), problem)
        log = self.log_path(spec)
        tail = await ctx.transport(spec.host).run(["tail", "-n", "40", log], timeout=30)
        evidence = LaunchedProcess(spec.host, pid, log, tuple(spec.params["argv"]), started_at=started).to_evidence()
        if problem:
            return StepResult(StepState.FAILED, started, _now(), f"pid {pid} exited within {spec.params.get('settle_s', 2.0)} s; see {log}",
                              evidence, tail.stdout[-4000:])
        return StepResult(StepState.PASSED, started, _now(), f"running as pid {pid}, log {log}", evidence, tail.stdout[-4000:])


BUILTIN_KINDS = (GpuClean, Command, KillStale, Launch)

