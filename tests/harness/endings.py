"""Every ending x every source x a viewer, with real processes: the matrix of issue 46, shared by its test
(tests/test_endings_matrix.py: the states and their order) and its benchmark (tests/perf/bench_endings.py: the time
each took to be told true).

A STAND-IN trainer (it writes SpecForge's E4 records, `step N: {...}`, of a 1,000-step run: no GPU here) is started
for every case, root's (a bare process, a real Docker container, or a real Slurm job whose StdOut is its log), and ended
the case's way all at once; the watching CLI (`cockpit runs --watch --json`: the loop the TUI runs, with the cockpit's
own kills as evidence, as the TUI has them) runs as each viewer and prints every change; the one-shot CLI (`cockpit runs
--json`) is asked as each viewer right after the endings and once every truth is due.  Lists, not examples: every pair
of ENDINGS x SOURCES is a cell unless `left_out` says why not, so a new ending or source is in every cell it can be."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.managers import MemoryCgroup, memory_cgroup

# killed; killed by the kernel's OOM killer (it outgrows its memory cgroup's limit, its container's --memory, its job's --mem);
# finished (its completion line); crashed (a traceback); the cockpit's kill (the process table's); a container removed under
# its run (`docker rm -f`); Slurm's own endings: scancel, the job's time limit, a job that waits, a finished job slurmctld
# has dropped (MinJobAge)
ENDINGS = ("sigkill", "oom", "exit0", "exit1", "stop", "removed", "cancel", "timeout", "pending", "dropped")
# how the run's process is found (log_only: it opens its log per record; container: it runs in a real Docker container, its
# log `docker logs`, its end Docker's word; slurm: a real Slurm job, its log the job's StdOut, its end Slurm's word)
SOURCES = ("writer", "pid_file", "pattern", "log_only", "container", "slurm")
VIEWERS = ("root", "user")  # the cockpit run as root, or as an ordinary user (the trainer is root's: another user's)
MANAGED = {"container": "docker", "slurm": "slurm"}  # the sources a manager runs: its own endings need it
OWN = {"removed": "container", "cancel": "slurm", "timeout": "slurm", "pending": "slurm", "dropped": "slurm"}


def left_out(ending: str, source: str, viewer: str) -> str | None:
    """Why a cell is not asked (None: it is).  Every pair of the lists is a cell unless a reason is given here."""
    if ending in OWN and OWN[ending] != source:
        return f"{ending} is an ending of {OWN[ending]} only"
    if viewer == "user" and ending == "stop":
        return "an ordinary user may kill only their own processes (the trainer is root's)"
    return None
POLL_S = 0.5

TRAINER = r'''
import os, signal, sys, time
log, mode, pid_file = sys.argv[1], sys.argv[2], sys.argv[3]
if pid_file != "-":
    with open(pid_file, "w") as handle:
        handle.write(f"{os.getpid()}\n")
held = open(log, "a") if mode == "held" else None

def write(text):
    if held is not None:
        held.write(text); held.flush()
    else:
        with open(log, "a") as handle:
            handle.write(text)

def finish(*_):
    write("step 1000: {'loss': 1.2, 'acc': 0.7}\nTraining completed at step 1000, saving final checkpoint...\n")
    os._exit(0)

def hog(*_):
    blocks = []
    while True:  # written, not only reserved: the pages count against the cgroup's limit until the kernel kills it
        blocks.append(b"x" * (8 << 20))

def crash(*_):
    write('Traceback (most recent call last):\n  File "/opt/specforge/scripts/train_eagle3.py", line 812, in <module>\n'
          '    main()\nRuntimeError: CUDA error: an illegal memory access was encountered\n')
    os._exit(1)

signal.signal(signal.SIGUSR1, finish)
signal.signal(signal.SIGUSR2, crash)
signal.signal(signal.SIGHUP, hog)
step = 0
while True:
    step += 10
    write("step %d: {'loss': %.3f, 'acc': 0.5}\n" % (step, 3.0 - step / 1000))
    time.sleep(0.3)
'''

SHELLS = ("watch", "oneshot")  # the watching loop (the TUI's, `runs --watch`); the one-shot command asked after the event


# what each cell is told at last: (ending, source, viewer, shell) -> state; the root rows by the evidence root sees, the user
# rows by what an ordinary user can see of root's trainer (its descriptors are hidden; `ps` shows every user's pids)
def expected(ending: str, source: str, viewer: str, shell: str = "watch") -> str:
    if source == "slurm":
        # Slurm's word, which every user may ask (squeue, scontrol, sacct), and the job's StdOut, readable by all
        return {"exit0": "finished", "exit1": "crashed", "stop": "stopped", "oom": "oom", "cancel": "cancelled",
                "pending": "pending", "dropped": "finished"}.get(ending, "died")  # sigkill, timeout: a non-zero end
    if viewer == "user" and source == "container":
        return "unknown"  # an ordinary user may not ask Docker (its socket is root's): nothing of it can be read, said so
    if ending == "oom":
        if source == "container":
            return "oom"  # Docker's OOMKilled
        if viewer == "user" and source in ("writer", "log_only"):
            return "unknown"  # as for any SIGKILL: its end cannot be seen
        # the kernel's word needs the pid: its memory cgroup, read while the watching loop saw it alive (world-readable),
        # or the kernel log naming the pid its pid file gives (root only: dmesg_restrict).  A trainer that holds nothing
        # (log_only), or a one-shot look that never saw it alive, cannot ask: died, killed, cause not known
        if source == "log_only":
            return "died"
        if shell == "oneshot":
            return "oom" if (viewer == "root" and source == "pid_file") else "died"
        return "oom"
    if ending == "removed":
        # gone from Docker, and its log with it: how it ended cannot be told (never died without evidence); a one-shot
        # that never saw it has nothing at all
        return "ended" if shell == "watch" else "unknown"
    if ending == "exit0":
        return "finished"  # its own completion line, whoever looks
    if ending == "exit1":
        return "crashed"  # its traceback, whoever looks
    if viewer == "user" and source in ("writer", "log_only"):
        return "unknown"  # root's descriptors cannot be read: gone or alive cannot be seen, and it says so
    if ending == "stop":
        # the cockpit's own kill, tied to the run by what it recorded of the process it killed: its pid, the files it held,
        # its command line (this trainer's names its log, as a `--log-file` does), its cgroup (its container's id)
        return "stopped"
    return "died"  # killed mid-run, its end seen: a pid gone, or a log silent past its cadence mid-run


def cells(viewer: str, sources: tuple[str, ...] = SOURCES) -> list[tuple[str, str]]:
    """The cases a viewer is asked about: the lists' product, less what left_out gives a reason for."""
    return [(e, s) for e, s in itertools.product(ENDINGS, sources) if left_out(e, s, viewer) is None]


@dataclass
class Cell:
    ending: str
    source: str
    proc: subprocess.Popen | None  # the trainer (a container's: `docker wait`, which ends with it; a Slurm job's: none here)
    event_at: float = 0.0
    container: str | None = None  # the container it runs in
    job: str | None = None  # the Slurm job it is
    cgroup: MemoryCgroup | None = None  # the memory cgroup it runs in (harness.managers.MemoryCgroup), for the oom ending
    pid: int = 0  # the trainer's pid on this machine
    manager_at: float | None = None  # when its manager says it ended (Slurm's End, whole seconds, +1: an upper bound; Docker's FinishedAt)
    looks: list = field(default_factory=list)  # (time, state, eta, why) of every change the watching CLI printed

    @property
    def name(self) -> str:
        return f"{self.ending}-{self.source}"


@dataclass
class Matrix:
    viewer: str
    cells: dict
    early: dict  # name -> the one-shot CLI's run, asked right after the endings
    final: dict  # name -> the one-shot CLI's run, asked once every truth is due
    cli_early_rc: int = 0
    cli_final_rc: int = 0


@dataclass
class Viewer:
    name: str  # one of VIEWERS
    as_viewer: Callable[[list[str]], list[str]]  # argv as the viewer
    python: tuple[list[str], dict]  # (interpreter argv, env) the viewer runs the cockpit with


def _config(folder: Path, cases: list[tuple[str, str]], marker: str, host: str = "here", hosts_toml: str | None = None,
            jobs: dict | None = None) -> str:
    hosts = hosts_toml or '[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'
    text = f'{hosts}\n[storage]\ndir = "{folder}/state"\n'
    for ending, source in cases:
        name = f"{ending}-{source}"
        text += f'\n[runs.{name}]\nhost = "{host}"\ntotal_steps = 1000\npoll_s = {POLL_S}\n'
        if source == "container":
            text += f'container = "{marker}-{name}"\n'
        elif source == "slurm":
            text += f'slurm_job = "{(jobs or {})[name]}"\n'  # its log: the job's StdOut, read from Slurm
        else:
            text += f'log = "{folder}/{name}.log"\n'
        if source == "pid_file":
            text += f'pid_file = "{folder}/{name}.pid"\n'
        elif source == "pattern":
            text += f'process = "{marker}-{name}( |$)"\n'
    return text


def _cli(argv: list[str], env: dict, config: Path) -> tuple[int, dict]:
    done = subprocess.run([*argv, "-m", "cockpit", "runs", "--json", "-c", str(config)], capture_output=True, text=True,
                          timeout=120, cwd="/", env=env)
    if not done.stdout:
        raise AssertionError(f"cockpit runs said nothing: {done.stderr[-2000:]}")
    return done.returncode, {r["name"]: r for r in json.loads(done.stdout)["runs"]}


# scontrol once slurmctld has dropped a finished job (MinJobAge, 300 s: too long to wait out in CI, and lowering it would
# change the tests' cluster): a STAND-IN wrapper that answers scontrol's own words for the jobs listed in `dropped` and runs
# the real scontrol for everything else (sacct, squeue and the jobs themselves are Slurm's)
SCONTROL_AFTER_MIN_JOB_AGE = """#!/bin/sh
# STAND-IN: the real scontrol, except for the jobs slurmctld has dropped (listed in {dropped})
for word in "$@"; do
    if grep -qxF -- "$word" {dropped} 2>/dev/null; then
        echo "slurm_load_jobs error: Invalid job id specified" >&2
        exit 1
    fi
done
exec {scontrol} "$@"
"""
SLURM_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL"}


def _submit(folder: Path, script: Path, ending: str, name: str) -> str:
    """A job of the stand-in trainer, its stdout Slurm's default (slurm-%j.out in its --chdir: what a dropped job's WorkDir
    finds), sharing the node's CPUs with the matrix's other jobs."""
    options = {"oom": ("--mem=64M",), "timeout": ("--time=1",), "pending": ("--begin=now+3600",)}.get(ending, ())
    argv = ["sbatch", "--parsable", "--oversubscribe", "--mem=64M", "--chdir", str(folder), "-J", name, *options,
            "--wrap", f"exec python3 {script} /dev/stdout held - {name}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().split(";")[0]


def _job_pid(name: str) -> int:
    """The pid of a job's trainer on this (the job's) node: by its command line, which names it."""
    deadline = time.monotonic() + 20  # RUNNING comes a moment before slurmstepd has started the job's program
    while True:
        found = subprocess.run(["pgrep", "-f", f"{name}$"], capture_output=True, text=True, timeout=30).stdout.split()
        if len(found) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(found) == 1, f"{name}: {found}"
    return int(found[0])


def _sacct_whole(job: str) -> bool:
    """slurmdbd's record of an ended job is whole (right after the end it is partial on 22.05: no WorkDir)."""
    row = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "JobName,WorkDir"], capture_output=True, text=True,
                         timeout=30).stdout.strip()
    return bool(row) and not row.endswith("|")


def run(folder: Path, viewer: str | list[Viewer], as_viewer=None, python: tuple[list[str], dict] | None = None,
        settle_s: float = 2.5, truth_s: float = 13.0, host: str = "here", hosts_toml: str | None = None, docker=None,
        cluster=None, sources: tuple[str, ...] = SOURCES) -> Matrix | dict[str, Matrix]:
    """The matrix for one viewer (`viewer`, `as_viewer(argv)`: argv as the viewer; `python`: (interpreter argv, env) the
    viewer runs the cockpit with), or for several at once watching the same trainers (`viewer`: a list of Viewer; a dict
    of Matrix by viewer back).  `folder` must be readable by the viewers.  `host`/`hosts_toml`: the runs read through
    another host of the config (this machine over the loopback sshd) instead of locally.  `docker`: the tests' Docker
    (harness/managers.py) for the container source, `cluster` their Slurm for the slurm source; without one its source
    is left out, as is every source not in `sources`."""
    import asyncio

    viewers = viewer if isinstance(viewer, list) else [Viewer(viewer, as_viewer, python)]
    marker = f"cockpit-matrix-{os.getpid()}"
    sources = tuple(s for s in sources if (s != "container" or docker is not None) and (s != "slurm" or cluster is not None))
    cases = sorted({c for v in viewers for c in cells(v.name, sources)}, key=lambda c: (ENDINGS.index(c[0]), SOURCES.index(c[1])))
    (folder / "state").mkdir(exist_ok=True)
    os.chmod(folder / "state", 0o755)
    config = folder / "c.toml"
    script = folder / "trainer.py"
    script.write_text(TRAINER)
    os.chmod(script, 0o644)
    dropped = folder / "dropped-jobs"
    dropped.write_text("")
    os.chmod(dropped, 0o644)
    env_path = None
    if cluster is not None:  # the viewers' scontrol: the real one, but for the jobs listed as dropped
        bin_dir = folder / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "scontrol").write_text(SCONTROL_AFTER_MIN_JOB_AGE.format(dropped=dropped, scontrol=shutil.which("scontrol")))
        os.chmod(bin_dir, 0o755)
        os.chmod(bin_dir / "scontrol", 0o755)
        env_path = f"{bin_dir}{os.pathsep}"
    running: dict[str, Cell] = {}
    watchers: dict[str, subprocess.Popen] = {}
    began = time.monotonic()

    def phase(what: str) -> None:  # where the time went, in the output a failing test shows
        print(f"[endings] +{time.monotonic() - began:6.1f} s {what}", flush=True)

    def env_of(v: Viewer) -> dict:
        env = dict(v.python[1])
        if env_path:
            env["PATH"] = env_path + env.get("PATH", os.defpath)
        return env

    def argv_of(v: Viewer, *argv: str) -> list[str]:
        return v.as_viewer(["env", f"PATH={env_of(v)['PATH']}", *argv]) if env_path else v.as_viewer(list(argv))

    try:
        jobs: dict[str, str] = {}
        for ending, source in cases:
            name = f"{ending}-{source}"
            if source == "slurm":
                jobs[name] = _submit(folder, script, ending, f"{marker}-{name}")
                running[name] = Cell(ending, source, None, job=jobs[name])
                continue
            if source == "container":
                box = f"{marker}-{name}"
                memory = ("--memory", "96m", "--memory-swap", "96m") if ending == "oom" else ()
                docker.run(box, "python3", str(script), "/dev/stdout", "held", "-", box, image=docker.HOSTUSR,
                           options=("-v", "/usr:/usr:ro", "-v", f"{folder}:{folder}:ro", *memory))
                pid = int(subprocess.run(["docker", "inspect", "--format", "{{.State.Pid}}", box], capture_output=True, text=True,
                                         timeout=30).stdout.strip() or 0)
                waiter = subprocess.Popen(["docker", "wait", box], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                running[name] = Cell(ending, source, waiter, container=box, pid=pid)
                continue
            log = folder / f"{name}.log"
            log.touch()
            os.chmod(log, 0o644)
            mode = "per-record" if source == "log_only" else "held"
            pid_file = str(folder / f"{name}.pid") if source == "pid_file" else "-"
            out = open(log, "a") if source != "log_only" else subprocess.DEVNULL  # noqa: SIM115 - the trainer's stdout
            group = memory_cgroup(f"{marker}-{name}") if ending == "oom" else None
            proc = subprocess.Popen([sys.executable, str(script), str(log), mode, pid_file, f"{marker}-{name}"],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=group.join if group is not None else None)
            if out is not subprocess.DEVNULL:
                out.close()
            running[name] = Cell(ending, source, proc, pid=proc.pid, cgroup=group)
        phase(f"{len(running)} trainers started")
        for cell in running.values():  # every job but the one that waits runs before anyone looks
            if cell.job is not None and cell.ending != "pending":
                cluster.wait(cell.job, {"RUNNING"}, timeout=60)
                if cell.ending == "stop":  # the cockpit kills its process by pid, as the process table does
                    cell.pid = _job_pid(f"{marker}-{cell.name}")
        config.write_text(_config(folder, cases, marker, host, hosts_toml, jobs))
        os.chmod(config, 0o644)
        lifetime = settle_s + truth_s + 2 + (150 if any(c.ending == "timeout" for c in running.values()) else 0)
        for v in viewers:
            watchers[v.name] = subprocess.Popen(argv_of(v, "timeout", "-s", "TERM", str(lifetime), *v.python[0], "-m", "cockpit",
                                                        "runs", "--watch", "--json", "-c", str(config)),
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", env=env_of(v))
        phase("every job runs; the watchers started")
        time.sleep(settle_s)  # the watching loops have seen each run running (and each writer)
        stops = [c for c in running.values() if c.ending == "stop"]

        async def kill_them() -> None:
            from cockpit.config import load_config
            from cockpit.context import Context

            ctx = Context.of(load_config(str(config)))

            async def yes(_text: str) -> bool:
                return True

            try:
                for cell in stops:
                    cell.event_at = time.time()
                    result = await ctx.actions.kill_processes(host, [cell.pid], yes)
                    assert result.state.value == "passed", result.message
                    # its end: the last signal the kill sent (SIGTERM, or SIGKILL after the grace when SIGTERM is
                    # ignored, as a container's pid 1 ignores it): the time to truth counts from there
                    cell.event_at = max(cell.event_at, *(float(s["time"]) for s in result.evidence.get("signals") or []))
            finally:
                await ctx.close()

        signals = {"sigkill": signal.SIGKILL, "oom": signal.SIGHUP, "exit0": signal.SIGUSR1, "exit1": signal.SIGUSR2,
                   "dropped": signal.SIGUSR1}
        for cell in running.values():
            if cell.ending in ("stop", "timeout"):
                continue  # the cockpit's kill, below; Slurm's own, at the job's limit
            cell.event_at = time.time()
            if cell.ending == "pending":
                continue  # waiting all along: its truth is due from the first look
            if cell.ending == "removed":
                subprocess.run(["docker", "rm", "-f", cell.container], capture_output=True, timeout=30)
            elif cell.ending == "cancel":
                subprocess.run(["scancel", cell.job], capture_output=True, timeout=30)
            elif cell.job is not None:  # as a user signals a job's program: scancel --batch
                subprocess.run(["scancel", "--batch", f"--signal={signals[cell.ending].name[3:]}", cell.job], capture_output=True,
                               timeout=30)
            elif cell.container is not None:  # as a user ends a container: through Docker
                subprocess.run(["docker", "kill", "--signal", signals[cell.ending].name, cell.container], capture_output=True,
                               timeout=30)
            else:
                os.kill(cell.pid, signals[cell.ending])
        if stops:
            asyncio.run(kill_them())
        for cell in running.values():
            if cell.proc is not None:
                cell.proc.wait(15)
            elif cell.ending not in ("timeout", "pending"):
                cluster.wait(cell.job, SLURM_ENDED, timeout=30)
        phase("every ending caused")
        early = {v.name: _cli(argv_of(v, *v.python[0]), env_of(v), config) for v in viewers}
        phase("the early one-shot looks taken")
        for cell in running.values():
            if cell.ending == "timeout":  # Slurm checks limits every 30 s: its end 60-90 s after the start
                cluster.wait(cell.job, {"TIMEOUT"}, timeout=150)
                cell.event_at = time.time()
            if cell.ending == "dropped":  # slurmctld drops it once its record is whole (MinJobAge later, really)
                deadline = time.monotonic() + 60
                while not _sacct_whole(cell.job) and time.monotonic() < deadline:
                    time.sleep(0.5)
                with open(dropped, "a") as handle:
                    handle.write(f"{cell.job}\n")
        phase("Slurm's time limit and dropped jobs waited for")
        last = max(c.event_at for c in running.values())
        time.sleep(max(0.0, last + truth_s - time.time()))
        final = {v.name: _cli(argv_of(v, *v.python[0]), env_of(v), config) for v in viewers}
        phase("the final one-shot looks taken")
        for cell in running.values():
            cell.manager_at = _manager_end(cell)
            if cell.ending == "timeout" and cell.manager_at is not None:
                cell.event_at = cell.manager_at - 1.0  # the event is Slurm's own end (whole seconds: from the start of its second)
        out: dict[str, Matrix] = {}
        for v in viewers:
            watcher = watchers[v.name]
            _end_watch(watcher)
            said_out, err = watcher.communicate(timeout=60)
            said = [line for line in err.splitlines() if not _system_python_noise(line)]
            if watcher.returncode not in (0, 124, 143) or said:  # 143: SIGTERM ended it (124: timeout), as Ctrl-C would; nothing on stderr
                raise AssertionError(f"the watching CLI ({v.name}) failed (exit {watcher.returncode}): {err[-3000:]}")
            mine = {n: replace(c, looks=[]) for n, c in running.items() if (c.ending, c.source) in cells(v.name, sources)}
            for line in said_out.splitlines():
                look = json.loads(line)
                if look["name"] in mine:
                    mine[look["name"]].looks.append((look["time"], look["state"], look["eta_s"], look["evidence"]))
            out[v.name] = Matrix(v.name, mine, early[v.name][1], final[v.name][1], early[v.name][0], final[v.name][0])
        phase("the watchers ended")
        return out if isinstance(viewer, list) else out[viewers[0].name]
    finally:
        for cell in running.values():
            if cell.container is not None:
                docker.remove(cell.container)
            if cell.job is not None:
                subprocess.run(["scancel", cell.job], capture_output=True, timeout=30)
            if cell.proc is not None and cell.proc.poll() is None:
                cell.proc.kill()
                cell.proc.wait()
            if cell.cgroup is not None:
                cell.cgroup.remove()
        for watcher in watchers.values():
            if watcher.poll() is None:
                watcher.kill()
                watcher.communicate()


def _manager_end(cell: Cell) -> float | None:
    """When the manager says the cell's trainer ended (None: it does not, or no manager runs it)."""
    from datetime import datetime

    if cell.job is not None:
        end = subprocess.run(["sacct", "-n", "-P", "-X", "-j", cell.job, "-o", "End"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(end).timestamp() + 1.0  # local time, whole seconds: the end is before this
    if cell.container is not None:
        at = subprocess.run(["docker", "inspect", "--format", "{{.State.FinishedAt}}", cell.container], capture_output=True,
                            text=True, timeout=30).stdout.strip()
        if at and not at.startswith("0001"):
            return datetime.fromisoformat(at[:26].rstrip("Z") + "+00:00").timestamp()
    return None


def _end_watch(watcher: subprocess.Popen) -> None:
    """End a watching CLI as Ctrl-C would: SIGTERM to its `timeout` (which passes it on), the innermost of runuser's."""
    pid = watcher.pid
    for _ in range(3):
        if Path(f"/proc/{pid}/comm").exists() and Path(f"/proc/{pid}/comm").read_text().strip() == "timeout":
            break
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return
        if not children:
            return
        pid = int(children[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def _system_python_noise(line: str) -> bool:
    """Debian's pyOpenSSL warning at import, printed where the ordinary user runs the system's Python with this run's
    packages on its path (managers.python_for's fallback when the venv is not readable: not the cockpit's words)."""
    return "/usr/lib/python3/dist-packages/OpenSSL/" in line or line.strip().startswith("dsa.DSAPrivateKey")


TERMINAL = ("finished", "stopped", "crashed", "oom", "died", "cancelled", "ended")


def false_looks(cell: Cell, viewer: str) -> list[tuple]:
    """The looks between the event and the truth that said something not so: a terminal state other than the truth, or
    an ETA promised once the trainer is gone.  A look that began before the event (within one poll of it) may say what
    was so when it began."""
    truth = expected(cell.ending, cell.source, viewer)
    wrong = []
    for when, state, eta, why in cell.looks:
        if when < cell.event_at + POLL_S + 0.3:
            continue  # in flight at the event
        if state in TERMINAL and state != truth:
            wrong.append((round(when - cell.event_at, 2), state, why))
        elif eta is not None and truth != "finished" and when > cell.event_at + 12.0:
            wrong.append((round(when - cell.event_at, 2), f"{state} with an ETA", why))
    return wrong


def time_to_truth(cell: Cell, viewer: str) -> float | None:
    """Seconds from the event to the first look that told the truth and held it to the end (None: never)."""
    truth = expected(cell.ending, cell.source, viewer)
    before = [state for when, state, _eta, _why in cell.looks if when < cell.event_at]
    told = cell.event_at if before and before[-1] == truth else None  # said before the event (unknown all along): at once
    for when, state, _eta, _why in cell.looks:
        if when < cell.event_at:
            continue
        if state == truth:
            told = told if told is not None else when
        else:
            told = None
    return None if told is None else told - cell.event_at
