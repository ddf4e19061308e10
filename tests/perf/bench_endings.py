"""Time to truth for every ending (issue 46): how long after a trainer's end the cockpit tells it true, every ending x
every source, read locally and over SSH (the loopback sshd), as root and as an ordinary user, side by side in one run.

Run on demand (as root: the ordinary user is made with useradd):
    python tests/perf/bench_endings.py [--rounds 1] [--no-user] [--no-ssh] [--no-docker]
The cells and their truths are the matrix's (tests/harness/endings.py, asserted by tests/test_endings_matrix.py); this
prints, for each, the seconds from the event to the first look of the watching loop (the TUI's) that told the truth and
held it.  Targets: <= 2 s locally, <= 3 s over SSH, where the cockpit can see the process (a writer, a pid file, a
pattern); where it cannot (a log written per record, another user's descriptors) the truth waits for the log's cadence,
and the figure says how long that is (a run with a manager: tests/test_where.py, the manager's delay + 1 s).
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
MANAGED = ("container",)  # sources whose end the manager says: the target is its delay + 1 s (Docker's is immediate: 1 s + a poll)


def one(kind: str, viewer: str, rounds: int, engine) -> dict[tuple[str, str], list[float | None]]:
    times: dict[tuple[str, str], list[float | None]] = {}
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
            matrix = endings.run(folder, viewer, as_viewer, python, host=host, hosts_toml=hosts, docker=engine)
            for cell in matrix.cells.values():
                times.setdefault((cell.ending, cell.source), []).append(endings.time_to_truth(cell, viewer))
        finally:
            if sshd is not None:
                sshd.stop()
            shutil.rmtree(folder, ignore_errors=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-user", action="store_true", help="root only")
    parser.add_argument("--no-ssh", action="store_true", help="locally only")
    parser.add_argument("--no-docker", action="store_true", help="leave the container source out")
    args = parser.parse_args()
    runs = [("local", "root")] + ([] if args.no_ssh else [("ssh", "root")]) + ([] if args.no_user else [("local", "user")])
    engine = None
    if not args.no_docker:
        from harness.managers import docker

        engine = docker()  # the container source: a real Docker (started as the tests start it)
    results = {run: one(*run, args.rounds, engine) for run in runs}
    print(f"{'ending':<8} {'source':<9} " + " ".join(f"{k + '/' + v:>14}" for k, v in runs) + "   truth (root / user)")
    missed = 0
    for ending, source in endings.cells("root"):
        cells = []
        for kind, viewer in runs:
            got = results[(kind, viewer)].get((ending, source))
            if got is None:
                cells.append(f"{'-':>14}")
                continue
            known = [t for t in got if t is not None]
            if len(known) < len(got):
                cells.append(f"{'never':>14}")
                missed += 1
                continue
            median = statistics.median(known)
            target = (TARGET[kind] if source in SEEN else TARGET[kind] + 1.0 if source in MANAGED else None) if viewer == "root" else None
            mark = "" if target is None else (" ok" if median <= target else " OVER")
            missed += mark == " OVER"
            cells.append(f"{median:>11.2f} s{mark:>3}" if mark else f"{median:>12.2f} s")
        truths = f"{endings.expected(ending, source, 'root')} / {endings.expected(ending, source, 'user') if ending != 'stop' else '-'}"
        print(f"{ending:<8} {source:<9} " + " ".join(cells) + f"   {truths}")
    print(f"targets: <= {TARGET['local']:g} s local, <= {TARGET['ssh']:g} s over SSH where the process is seen; "
          f"{missed} cell(s) over or never")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
