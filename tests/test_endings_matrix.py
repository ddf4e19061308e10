"""Issue 46's matrix: every ending x every source x viewer x shell, with real processes (tests/harness/endings.py says
how).  For every cell: the state told at last (by the watching CLI, `cockpit runs --watch`, the loop the TUI runs, and by the
one-shot CLI), never a
terminal state that is not so at any look between the event and the truth, and the one-shot asked right after the
event saying the truth or that it cannot tell yet.  The cells come from the lists, so a new ending or source is in
every one of them.  Times to truth are the benchmark's (tests/perf/bench_endings.py), never asserted here."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness import endings
from harness.managers import docker, ordinary_cockpit, runs_as


@pytest.fixture
def readable_dir():
    folder = Path(tempfile.mkdtemp(prefix="cockpit-matrix-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _viewer(viewer: str):
    if viewer == "root":
        if os.geteuid() != 0:
            pytest.skip("the root viewer needs root")
        return (lambda argv: argv), ([sys.executable], dict(os.environ))
    user, python = ordinary_cockpit()
    return (lambda argv: runs_as(user, argv)), python


def test_the_matrix_covers_every_ending_source_and_viewer():
    """The cells are the lists' product, less only what left_out gives a reason for; each has a truth."""
    for viewer in endings.VIEWERS:
        cells = endings.cells(viewer)
        for ending, source in itertools.product(endings.ENDINGS, endings.SOURCES):
            assert ((ending, source) in cells) == (endings.left_out(ending, source, viewer) is None), (ending, source, viewer)
        assert {s for _, s in cells} == set(endings.SOURCES)
        assert {e for e, _ in cells} == set(endings.ENDINGS) - ({"stop"} if viewer == "user" else set())
        assert all(endings.expected(e, s, viewer, shell) in endings.TERMINAL + ("unknown", "pending") for e, s in cells
                   for shell in endings.SHELLS)
    # what one look of the one-shot cannot know it says less of, never otherwise: the watching loop's truth, died, unknown
    assert all(endings.expected(e, s, v, "oneshot") in (endings.expected(e, s, v), "died", "unknown") for v in endings.VIEWERS
               for e, s in endings.cells(v))


def _problems(matrix: endings.Matrix, viewer: str) -> list[str]:
    problems = []
    for name, cell in matrix.cells.items():
        truth = endings.expected(cell.ending, cell.source, viewer)
        last = cell.looks[-1][1] if cell.looks else None
        if last != truth:
            problems.append(f"{name}: the watching CLI's last line said {last}, not {truth}: {cell.looks[-1][3] if cell.looks else ''}")
        wrong = endings.false_looks(cell, viewer)
        if wrong:
            problems.append(f"{name}: false looks between the event and the truth: {wrong[:3]}")
        final, once = matrix.final[name], endings.expected(cell.ending, cell.source, viewer, "oneshot")
        if final["state"] != once:
            problems.append(f"{name}: the one-shot CLI said {final['state']}, not {once}: {final['evidence'][:300]}")
        early = matrix.early[name]
        if early["state"] in endings.TERMINAL and early["state"] != once and cell.ending != "timeout":  # its end comes later
            problems.append(f"{name}: the one-shot CLI right after the event said {early['state']}, not {once}: "
                            f"{early['evidence'][:300]}")
        if truth == "stopped" and "stopped by you" not in final["evidence"]:
            problems.append(f"{name}: stopped, but not said to be by you: {final['evidence'][:200]}")
    # the one-shot's exit code says the same: 2 while a cell is unknown, else 1 for the alarms and ends it cannot confirm
    states = {r["state"] for r in matrix.final.values()}
    rc = 2 if "unknown" in states else 1 if states & {"died", "crashed", "oom", "ended", "cancelled"} else 0
    if matrix.cli_final_rc != rc:
        problems.append(f"the one-shot CLI exited {matrix.cli_final_rc}, not {rc}, on {sorted(states)}")
    return problems


@pytest.mark.parametrize("viewer", endings.VIEWERS)
def test_every_ending_is_told_true_from_every_source(readable_dir, viewer):
    as_viewer, python = _viewer(viewer)
    sources = tuple(s for s in endings.SOURCES if s != "slurm")  # Slurm's: the test below, on the Slurm worker
    matrix = endings.run(readable_dir, viewer, as_viewer, python, docker=docker(), sources=sources)  # the real Docker (CI: fails without)
    assert {c.source for c in matrix.cells.values()} == set(sources)
    problems = _problems(matrix, viewer)
    assert problems == [], "\n".join(problems)


@pytest.mark.slow
@pytest.mark.xdist_group("slurm")  # one Slurm node of a CPU or two: its jobs one worker at a time
# its own time: Slurm's time limit alone ends a job 60-90 s after its start (77-105 s in all here, loaded or not); the
# cluster's start is the fixture's, not counted
@pytest.mark.timeout(300, func_only=True)
def test_every_slurm_ending_is_told_true_to_root_and_to_an_ordinary_user(readable_dir, slurm_cluster):
    """The slurm source: real jobs of a real Slurm, every ending of the lists that a job can have (its time limit
    included: Slurm's TIMEOUT comes 60-90 s after the start), watched by root and by an ordinary user at once."""
    viewers = [endings.Viewer(v, *_viewer(v)) for v in endings.VIEWERS]
    matrices = endings.run(readable_dir, viewers, cluster=slurm_cluster, sources=("slurm",))
    problems = []
    for viewer, matrix in matrices.items():
        assert {c.ending for c in matrix.cells.values()} == {e for e, s in endings.cells(viewer) if s == "slurm"}
        problems += [f"{viewer}: {p}" for p in _problems(matrix, viewer)]
    assert problems == [], "\n".join(problems)


def test_a_look_in_flight_is_not_counted_and_a_false_state_is(readable_dir):
    """The rule the matrix asserts can fail: a died told for a run that finished is a false look; a look that began
    before the event is not held against it."""
    cell = endings.Cell("exit0", "writer", subprocess.Popen(["true"]), event_at=100.0)
    cell.proc.wait()
    cell.looks = [(100.2, "running", 30.0, "in flight"), (101.5, "died", None, "wrong"), (102.0, "finished", None, "right")]
    assert endings.false_looks(cell, "root") == [(1.5, "died", "wrong")]
    assert endings.time_to_truth(cell, "root") == pytest.approx(2.0)
