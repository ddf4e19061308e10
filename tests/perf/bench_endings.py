"""Time to truth for every ending (issue 46): how long after a trainer's end the cockpit tells it true, every ending x
every source, read locally and over SSH (the loopback sshd), as root and as an ordinary user, side by side in one run.

Run on demand (as root: the ordinary user is made with useradd):
    python tests/perf/bench_endings.py [--rounds 1] [--no-user] [--no-ssh] [--no-docker]
The cells and their truths are the matrix's (tests/harness/endings.py, asserted by tests/test_endings_matrix.py); this
prints, for each, the seconds from the event to the first look of the watching loop (the TUI's) that told the truth and
held it.  Targets: <= 2 s locally, <= 3 s over SSH, where the cockpit can see the process (a writer, a pid file, a
pattern); where a manager runs it (a Docker container, a Slurm job) <= the manager's own delay + 1 s (the delay: from
the event to the end the manager records, Docker's FinishedAt, Slurm's End rounded up to its second); where it cannot see
it (a log written per record, another user's descriptors) the truth waits for the log's cadence, and the figure says how
long that is.  A Slurm job over its time limit counts from Slurm's end (60-90 s after its start).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from harness import endings  # noqa: E402
from harness.managers import python_for, runs_as, unprivileged  # noqa: E402

TARGET = {"local": 2.0, "ssh": 3.0}
SEEN = ("writer", "pid_file", "pattern")  # sources whose process the viewer sees (as root): the targets apply


def one(kind: str, viewer: str, rounds: int, engine, cluster) -> tuple[dict, dict]:
    """(cell -> seconds to truth of each round, cell -> the manager's own delay of each round)."""
    times: dict[tuple[str, str], list[float | None]] = {}
    delays: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="cockpit-bench-endings-"))
        os.chmod(folder, 0o755)
        sshd = None
        try:
            if viewer == "root":
                as_viewer, python = (lambda argv: argv), ([sys.executable], dict(os.environ))
            else:
                user = unprivileged()
                found = python_for(user)
                if found is None:
                    raise SystemExit(f"{user} cannot run this checkout's cockpit: run with --no-user")
                as_viewer, python = (lambda argv, u=user: runs_as(u, argv)), found
            host, hosts = "here", None
            if kind == "ssh":
                from harness.sshd import SshdHarness

                sshd = SshdHarness(folder / "sshd").start()
                host, hosts = "box", sshd.config_toml(sshd.host_toml("box"))
            # the bare processes and Docker's in one matrix, Slurm's jobs in another after it: each cell measured beside the
            # load it had before Slurm's cells came (36 trainers at once on a 2-core machine slow every look)
            bare = tuple(s for s in endings.SOURCES if s != "slurm")
            cells = list(endings.run(folder, viewer, as_viewer, python, host=host, hosts_toml=hosts, docker=engine, sources=bare).cells.values())
            if cluster is not None:
                slurm_dir = folder / "slurm"
                slurm_dir.mkdir()
                os.chmod(slurm_dir, 0o755)
                cells += endings.run(slurm_dir, viewer, as_viewer, python, host=host, hosts_toml=hosts, cluster=cluster,
                                     sources=("slurm",)).cells.values()
            for cell in cells:
                times.setdefault((cell.ending, cell.source), []).append(endings.time_to_truth(cell, viewer))
                if cell.manager_at is not None:
                    delays.setdefault((cell.ending, cell.source), []).append(max(0.0, cell.manager_at - cell.event_at))
        finally:
            if sshd is not None:
                sshd.stop()
            shutil.rmtree(folder, ignore_errors=True)
    return times, delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-user", action="store_true", help="root only")
    parser.add_argument("--no-ssh", action="store_true", help="locally only")
    parser.add_argument("--no-docker", action="store_true", help="leave the container source out")
    parser.add_argument("--no-slurm", action="store_true", help="leave the Slurm source out (its time limit adds 90 s a run)")
    args = parser.parse_args()
    runs = [("local", "root")] + ([] if args.no_ssh else [("ssh", "root")]) + ([] if args.no_user else [("local", "user")])
    engine = None
    if not args.no_docker:
        from harness.managers import docker

        engine = docker()  # the container source: a real Docker (started as the tests start it)
    cluster = None
    if not args.no_slurm:
        from harness.managers import slurm

        cluster = slurm()  # the slurm source: a real Slurm (started as the tests start it)
    results = {run: one(*run, args.rounds, engine, cluster) for run in runs}
    print(f"{'ending':<8} {'source':<9} " + " ".join(f"{k + '/' + v:>14}" for k, v in runs) + "   manager   truth (root / user)")
    missed = 0
    for ending, source in endings.cells("root"):
        cells = []
        for kind, viewer in runs:
            got = results[(kind, viewer)][0].get((ending, source))
            if got is None:
                cells.append(f"{'-':>14}")
                continue
            known = [t for t in got if t is not None]
            if len(known) < len(got):
                cells.append(f"{'never':>14}")
                missed += 1
                continue
            median = statistics.median(known)
            delay = results[(kind, viewer)][1].get((ending, source))
            target = None
            if viewer == "root" and source in SEEN:
                target = TARGET[kind]
            elif source in endings.MANAGED and delay and (viewer == "root" or source == "slurm"):  # Slurm answers every user
                target = statistics.median(delay) + 1.0 + (TARGET[kind] - TARGET["local"])  # SSH's second, as for the rest
            mark = "" if target is None else (" ok" if median <= target else " OVER")
            missed += mark == " OVER"
            cells.append(f"{median:>11.2f} s{mark:>3}" if mark else f"{median:>12.2f} s")
        truths = f"{endings.expected(ending, source, 'root')} / {endings.expected(ending, source, 'user') if ending != 'stop' else '-'}"
        delays = [d for run in runs for d in results[run][1].get((ending, source), [])]
        manager = f"{statistics.median(delays):>6.2f} s" if delays else f"{'-':>8}"
        print(f"{ending:<8} {source:<9} " + " ".join(cells) + f"   {manager}   {truths}")
    print(f"targets: <= {TARGET['local']:g} s local, <= {TARGET['ssh']:g} s over SSH where the process is seen, <= the "
          f"manager's delay + 1 s where a manager runs it; {missed} cell(s) over or never")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
