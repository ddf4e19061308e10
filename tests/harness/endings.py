"""Every ending x every source x a viewer, with real processes: the matrix of issue 46, shared by its test
(tests/test_endings_matrix.py: the states and their order) and its benchmark (tests/perf/bench_endings.py: the time
each took to be told true).

A STAND-IN trainer (it writes SpecForge's E4 records, `step N: {...}`, of a 1,000-step run: no GPU here) is started
for every case, root's, and ended the case's way all at once; the watching CLI (`cockpit runs --watch --json`: the loop
the TUI runs, with the cockpit's own kills as evidence, as the TUI has them) runs as the viewer and prints every change;
the one-shot CLI (`cockpit runs --json`) is asked as the viewer right after the endings and once every truth is due.  Lists, not examples: a new ending or source added here is in every cell."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.managers import MemoryCgroup, memory_cgroup

# killed; killed by the kernel's OOM killer (it outgrows its memory cgroup's limit, or its container's --memory); finished
# (its completion line); crashed (a traceback); the cockpit's kill
ENDINGS = ("sigkill", "oom", "exit0", "exit1", "stop")
# how the run's process is found (log_only: it opens its log per record; container: it runs in a real Docker container, its
# log `docker logs`, its end Docker's word)
SOURCES = ("writer", "pid_file", "pattern", "log_only", "container")
VIEWERS = ("root", "user")  # the cockpit run as root, or as an ordinary user (the trainer is root's: another user's)
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


def cells(viewer: str) -> list[tuple[str, str]]:
    """The cases a viewer is asked about: an ordinary user cannot stop root's trainer (it may touch its own only)."""
    return [(e, s) for e, s in itertools.product(ENDINGS, SOURCES) if not (viewer == "user" and e == "stop")]


@dataclass
class Cell:
    ending: str
    source: str
    proc: subprocess.Popen  # the trainer (a container's: `docker wait`, which ends with it)
    event_at: float = 0.0
    container: str | None = None  # the container it runs in
    cgroup: MemoryCgroup | None = None  # the memory cgroup it runs in (harness.managers.MemoryCgroup), for the oom ending
    pid: int = 0  # the trainer's pid on this machine
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


def _config(folder: Path, cases: list[tuple[str, str]], marker: str, host: str = "here", hosts_toml: str | None = None) -> str:
    hosts = hosts_toml or '[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'
    text = f'{hosts}\n[storage]\ndir = "{folder}/state"\n'
    for ending, source in cases:
        name = f"{ending}-{source}"
        if source == "container":
            text += f'\n[runs.{name}]\nhost = "{host}"\ncontainer = "{marker}-{name}"\ntotal_steps = 1000\npoll_s = {POLL_S}\n'
            continue
        text += f'\n[runs.{name}]\nhost = "{host}"\nlog = "{folder}/{name}.log"\ntotal_steps = 1000\npoll_s = {POLL_S}\n'
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


def run(folder: Path, viewer: str, as_viewer, python: tuple[list[str], dict], settle_s: float = 2.5, truth_s: float = 13.0,
        host: str = "here", hosts_toml: str | None = None, docker=None) -> Matrix:
    """The matrix for one viewer.  `as_viewer(argv)`: argv as the viewer; `python`: (interpreter argv, env) the viewer
    runs the cockpit with.  `folder` must be readable by the viewer.  `host`/`hosts_toml`: the runs read through
    another host of the config (this machine over the loopback sshd) instead of locally.  `docker`: the tests' Docker
    (harness/managers.py) for the container source; without it that source is left out."""
    import asyncio

    marker = f"cockpit-matrix-{os.getpid()}"
    cases = [c for c in cells(viewer) if docker is not None or c[1] != "container"]
    (folder / "state").mkdir(exist_ok=True)
    os.chmod(folder / "state", 0o755)
    config = folder / "c.toml"
    config.write_text(_config(folder, cases, marker, host, hosts_toml))
    os.chmod(config, 0o644)
    script = folder / "trainer.py"
    script.write_text(TRAINER)
    os.chmod(script, 0o644)
    running: dict[str, Cell] = {}
    watcher = None
    try:
        for ending, source in cases:
            name = f"{ending}-{source}"
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
        watcher = subprocess.Popen(as_viewer(["timeout", "-s", "TERM", str(settle_s + truth_s + 2), *python[0], "-m", "cockpit",
                                              "runs", "--watch", "--json", "-c", str(config)]),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/", env=python[1])
        time.sleep(settle_s)  # the watching loop has seen each run running (and each writer)
        stops = [c for c in running.values() if c.ending == "stop"]
        if stops:
            from cockpit.config import load_config
            from cockpit.context import Context

            async def kill_them() -> None:
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

        for cell in running.values():
            if cell.ending == "stop":
                continue
            cell.event_at = time.time()
            sig = {"sigkill": signal.SIGKILL, "oom": signal.SIGHUP, "exit0": signal.SIGUSR1, "exit1": signal.SIGUSR2}[cell.ending]
            if cell.container is not None:  # as a user ends a container: through Docker
                subprocess.run(["docker", "kill", "--signal", sig.name, cell.container], capture_output=True, timeout=30)
            else:
                os.kill(cell.pid, sig)
        if stops:
            asyncio.run(kill_them())
        for cell in running.values():
            cell.proc.wait(15)
        early_rc, early = _cli(as_viewer(python[0]), python[1], config)
        first = min(c.event_at for c in running.values())
        time.sleep(max(0.0, first + truth_s - time.time()))
        final_rc, final = _cli(as_viewer(python[0]), python[1], config)
        out, err = watcher.communicate(timeout=60)
        said = [line for line in err.splitlines() if not _system_python_noise(line)]
        if watcher.returncode not in (0, 124) or said:  # 124: timeout ended it, as Ctrl-C would; nothing on stderr
            raise AssertionError(f"the watching CLI failed (exit {watcher.returncode}): {err[-3000:]}")
        for line in out.splitlines():
            look = json.loads(line)
            if look["name"] in running:
                running[look["name"]].looks.append((look["time"], look["state"], look["eta_s"], look["evidence"]))
        return Matrix(viewer, running, early, final, early_rc, final_rc)
    finally:
        for cell in running.values():
            if cell.container is not None:
                docker.remove(cell.container)
            if cell.proc.poll() is None:
                cell.proc.kill()
                cell.proc.wait()
            if cell.cgroup is not None:
                cell.cgroup.remove()
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.communicate()


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
