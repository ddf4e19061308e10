"""Issue 51 item 4, measured: each complete checkpoint served through the runbook's launch step (the demo's STAND-IN
SGLang, which serves a draft at the accuracies its STAND-IN file gives: demo/specmodel.py), the same prompts for each,
the acceptance the engine reports stored as a benchmark run; the runs watcher ships by what was measured (the estimate
beside it), in the CLI's JSON and text and in the runs pane alike.  The rule is checked over every shape of three
measured checkpoints; the whole path once, end to end, in the demo's world with an earlier checkpoint that serves better."""

from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.builders import write_checkpoint

from cockpit import paths
from cockpit.bench.store import save_run

LINES = "Train Epoch [{e}/{n}], position {i},  Acc: {a:.2f}\nEval Epoch [{e}/{n}], position {i},  Acc: {a:.2f}\n"


def _runs(config: Path, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", "runs", "--no-wait", *more, "-c", str(config)], capture_output=True,
                          text=True, timeout=60)


def _world(tmp_path: Path, epochs: int = 3, accuracy: float = 0.6) -> Path:
    log = tmp_path / "train.log"
    log.write_text("".join(LINES.format(e=e + 1, n=epochs, i=i, a=accuracy) for e in range(epochs) for i in range(3)))
    for epoch in range(epochs):
        write_checkpoint(tmp_path / "outputs" / f"epoch_{epoch}", "E2-early", "outputs__tiny-llama-eagle3__epoch_1")
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\ndir = "{tmp_path}/store"\n'
                      f'[runs.r]\nhost = "here"\nlog = "{log}"\noutput_dir = "{tmp_path / "outputs"}"\ndepth = 3\n')
    return config


def _measured(tmp_path: Path, epoch: int, accept: float, mtime: float | None = None, steps: int | None = None) -> None:
    """A measurement as `cockpit bench checkpoints` stores it (`steps`: the depth it was served with)."""
    folder = tmp_path / "outputs" / f"epoch_{epoch}"
    newest = max(p.stat().st_mtime for p in folder.iterdir())
    paths.use_storage(tmp_path / "store")
    try:
        save_run({"label": f"checkpoint epoch_{epoch}", "concurrency": 1, "requests": 8, "failed": 0, "accept_length": accept,
                  "output_throughput_tok_s": 100.0, "engine": "sglang", "training_run": "r", "checkpoint": f"epoch_{epoch}",
                  "checkpoint_path": str(folder), "checkpoint_mtime": newest if mtime is None else mtime, "time": time.time(),
                  "depth": None if steps is None else {"steps": steps, "topk": 1, "draft_tokens": steps + 1}}, [])
    finally:
        paths.use_storage(None)


@pytest.mark.parametrize("shape", list(itertools.product((2.0, 2.08, 2.4), repeat=3)))
def test_the_choice_by_what_was_measured_over_every_shape(tmp_path, shape):
    """Three checkpoints whose epochs predict the same, measured at `shape`: the newest is shipped unless an earlier one
    measured more than 5 % higher (the noise of a few hundred verify steps), and then that one is named."""
    config = _world(tmp_path)
    for epoch, accept in enumerate(shape):
        _measured(tmp_path, epoch, accept)
    done = _runs(config, "--json")
    assert done.stderr == "", done.stderr
    choice = json.loads(done.stdout)["runs"][0]["per_checkpoint"]
    best = max(range(3), key=lambda k: (shape[k], k))
    earlier = best != 2 and shape[best] > shape[2] * 1.05
    assert choice["basis"] == "measured" and choice["earlier_better"] is earlier, (shape, choice)
    assert choice["ship"] == f"epoch_{best if earlier else 2}" and "measured by serving: sglang, 8 requests each" in choice["words"]
    assert [r["measured"] for r in choice["rows"]] == list(shape) and all(r["estimate"] is not None for r in choice["rows"])
    text = _runs(config).stdout  # the text says the same choice, each measured figure beside its estimate
    assert choice["words"] in text and f"epoch_2 {shape[2]:.2f} (est. " in text


def test_a_measurement_of_a_checkpoint_written_again_is_not_its(tmp_path):
    """A checkpoint written again after it was measured (a retrain into the same folder): its measurement is stale, said
    so, and the choice rests on the estimate again where nothing else was measured."""
    config = _world(tmp_path, epochs=2)
    _measured(tmp_path, 1, 2.5, mtime=1.0)
    choice = json.loads(_runs(config, "--json").stdout)["runs"][0]["per_checkpoint"]
    assert choice["basis"] == "estimate" and "estimated from accuracy" in choice["words"]
    assert choice["rows"][1]["measured"] is None and "measure it again" in choice["rows"][1]["measured_stale"]


@pytest.mark.parametrize("steps", [1, 2, 3, 5])
def test_the_estimate_beside_a_measurement_is_at_the_depth_it_was_served_with(tmp_path, steps):
    """A checkpoint served at another depth than the run's (a sweep's recommendation, say): the estimate shown beside
    what was measured is the one for the depth it was served with, and says that depth."""
    from cockpit.drafter.acceptance import estimate

    config = _world(tmp_path, epochs=2, accuracy=0.7)
    _measured(tmp_path, 1, 1.9, steps=steps)
    row = json.loads(_runs(config, "--json").stdout)["runs"][0]["per_checkpoint"]["rows"][1]
    expected = estimate([0.7] * 3, steps)  # three positions known: served deeper, the estimate covers those three
    assert row["measured_depth"] == steps and row["estimate_at_measured"] == pytest.approx(expected.with_bonus, abs=1e-3)
    assert row["estimate_depth"] == min(steps, 3) == expected.depth
    assert f"epoch_1 1.90 (est. {expected.with_bonus:.2f} at depth {expected.depth})" in _runs(config).stdout


def _cli(config: Path, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *argv, "-c", str(config)], capture_output=True, text=True, timeout=timeout)


def test_bench_checkpoints_refuses_clearly(tmp_path):
    config = _world(tmp_path, epochs=1)
    for argv, words in ((("bench", "checkpoints", "r"), "has no runbook"),
                        (("bench", "checkpoints", "nope", "--requests", "0"), "--requests must be at least 1, got 0")):
        done = _cli(config, *argv)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_demo_measures_each_checkpoint_by_serving_it_and_ships_the_earlier_one_that_serves_better(tmp_path):
    """The demo's world, end to end through the real CLI: its training run finishes into epoch_0 and epoch_1; epoch_0's
    keys are fixed by hand as a user would (`cockpit drafter fix-keys`) and its STAND-IN accuracies made the better ones;
    the story runs to its server (the key fix of epoch_1, the launch refused for its flag, the fix applied); `bench
    checkpoints` serves each checkpoint through the launch step (its fixed depth and flags, only the draft changes),
    stores what the engine reported and leaves the launch step's own server up again; the runs watcher then ships
    epoch_0, flagged as earlier and better, by what was measured."""
    from cockpit.demo.specmodel import DRAFT_ACCURACY_FILE, DRAFTER_ACCURACY
    from cockpit.demo.world import build

    world = build(tmp_path / "demo")
    config = world.root / "demo.toml"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run = json.loads(_cli(config, "runs", "--json", "--no-wait").stdout)["runs"][0]
            if sum(c["complete"] for c in run["checkpoints"]) == 2:
                break
            time.sleep(1)
        assert sum(c["complete"] for c in run["checkpoints"]) == 2, run["checkpoints"]
        epoch_0 = world.root / "outputs" / "epoch_0"
        fixed = _cli(config, "drafter", "fix-keys", str(epoch_0), "--yes")
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        (epoch_0 / DRAFT_ACCURACY_FILE).write_text(json.dumps({"accuracy": [min(0.95, a * 1.15) for a in DRAFTER_ACCURACY]}))
        # the story up to its server: the launch refused for its flag, the fix applied (`f`), the server up
        story = _cli(config, "plan", "run", "--yes")
        assert story.returncode != 0 and "is not an SGLang flag" in story.stdout + story.stderr, story.stdout + story.stderr
        for argv in (("plan", "fix", "launch", "--yes"), ("plan", "run", "launch", "--yes")):
            done = _cli(config, *argv)
            assert done.returncode == 0, done.stdout + done.stderr
        done = _cli(config, "bench", "checkpoints", "eagle3-train", "--yes", "--json", timeout=400)
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
        data = json.loads(done.stdout)
        rows = {r["checkpoint"]: r for r in data["rows"]}
        assert set(rows) == {"epoch_0", "epoch_1"} and all(r["failure"] is None for r in rows.values()), rows
        assert rows["epoch_0"]["accept_length"] > rows["epoch_1"]["accept_length"] * 1.05 > 1.05, rows
        stored = [json.loads(Path(r["file"]).read_text().splitlines()[0]) for r in rows.values()]
        assert {s["checkpoint_path"] for s in stored} == {str(epoch_0), str(world.root / "outputs" / "epoch_1")}
        assert all(s["requests"] == 8 and s["concurrency"] == 1 and s["training_run"] == "eagle3-train" for s in stored)
        # served through the launch step: its depth and flags each time, only the draft path changed
        audit = next((world.root / "state" / "runbooks").glob("*.audit.jsonl")).read_text().splitlines()
        launched = [e["argv"] for e in map(json.loads, audit) if e["event"] == "launch"][-3:]  # epoch_0, epoch_1, its own
        drafts = [argv[argv.index("--speculative-draft-model-path") + 1] for argv in launched]
        assert drafts == [str(epoch_0), str(world.root / "outputs" / "epoch_1"), str(world.root / "outputs" / "epoch_1")], drafts
        assert len({tuple(w for w in argv if w not in drafts) for argv in launched}) == 1  # the fixed line each time, but the draft
        choice = data["choice"]
        assert choice["ship"] == "epoch_0" and choice["earlier_better"] is True and choice["basis"] == "measured"
        assert data["serving"].startswith("serving the launch step's own config again"), data["serving"]
        after = _cli(config, "server", "--json")
        assert after.returncode == 0 and json.loads(after.stdout)["alive"] is True, after.stdout + after.stderr
    finally:
        world.close()


async def test_the_runs_pane_shows_what_was_measured_and_a_asks_before_it_serves_anything(tmp_path):
    """The TUI: the runs pane shows each checkpoint's measured acceptance beside its estimate and the choice's words
    (the same as the CLI's); `a` in it starts a measurement that runs the steps before the launch first, each asking:
    refused, nothing was launched, and it says why.  Read-only, `a` says it cannot."""
    from helpers import eventually
    from rich.console import Console

    from cockpit.demo.world import build
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.screens.confirm import ConfirmScreen
    from cockpit.ui.widgets.runs_pane import RunsPane, run_block

    world = build(tmp_path / "demo")
    try:
        app = CockpitApp(world.config, demo=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("t")
            pane = app.query_one(RunsPane)
            await eventually(lambda: sum(c["complete"] for c in pane.statuses["eagle3-train"].checkpoints) == 2, timeout=60,
                             what="two complete checkpoints")
            for epoch, accept in ((0, 2.6), (1, 2.3)):
                paths.use_storage(world.root)  # the demo's [storage]: where `bench checkpoints` stores them
                save_run({"label": f"checkpoint epoch_{epoch}", "concurrency": 1, "requests": 8, "failed": 0, "accept_length": accept,
                          "engine": "sglang", "training_run": "eagle3-train", "checkpoint": f"epoch_{epoch}",
                          "checkpoint_path": str(world.root / "outputs" / f"epoch_{epoch}"), "time": time.time(),
                          "checkpoint_mtime": max(p.stat().st_mtime for p in (world.root / "outputs" / f"epoch_{epoch}").iterdir())}, [])
            def shown() -> str:  # the pane's lines for the run, as it draws them (run_block), in plain text
                console = Console(width=200, record=True, file=io.StringIO())
                console.print(run_block(pane.statuses["eagle3-train"], 200))
                return console.export_text()

            # a finished run is read every ENDED_POLL_S (10 s): the measurement shows at its next look
            await eventually(lambda: "epoch_0 2.60 (est. " in shown(), timeout=40, what=f"the measured figures ({shown()})")
            assert "epoch_1 2.30 (est. 2.97)" in shown() and "epoch_0 measures 2.60, the newest epoch_1 2.30: ship epoch_0" in shown()
            assert any(c.title == "Measure the checkpoints of: eagle3-train" for c in app.get_system_commands(app.screen))  # ctrl+p
            pane.focus()
            await pilot.press("a")
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), timeout=20, what="the first step's question")
            assert "train_eagle3.py" in app.screen.plan  # the steps before the launch first: the stale trainer's kill
            await pilot.press("n")
            await eventually(lambda: any("before the measurement" in n.message for n in app._notifications), timeout=20,
                             what=f"the refusal said ({[n.message[:80] for n in app._notifications]})")
            assert app.runbook.launched("launch") is None  # nothing was served
        read_only = CockpitApp(world.config, demo=True, read_only=True)
        async with read_only.run_test(size=(160, 48)) as pilot:
            await pilot.press("t")
            read_only.query_one(RunsPane).focus()
            await pilot.press("a")
            await eventually(lambda: any("Read-only" in n.message for n in read_only._notifications), what="read-only said")
    finally:
        world.close()
