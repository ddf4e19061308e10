"""Issue 51 item 4 (as an estimate: no checkpoint is served here): which checkpoint to ship, by the acceptance each one's
epoch's accuracies predict at the serving depth, from the real SpecForge recordings (E1, E2: two epochs, two complete
checkpoints) and over every shape of a run's estimates (rising, falling, flat, within the margin)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builders import write_checkpoint

from cockpit.drafter.acceptance import estimate

TRAINING = Path(__file__).resolve().parent / "fixtures" / "training"


def _runs(tmp_path: Path, log: Path, depth: int = 7) -> dict:
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\ndir = "{tmp_path}/state"\n'
                      f'[runs.r]\nhost = "here"\nlog = "{log}"\noutput_dir = "{tmp_path / "outputs"}"\ndepth = {depth}\n')
    done = subprocess.run([sys.executable, "-m", "cockpit", "runs", "--json", "--no-wait", "-c", str(config)], capture_output=True,
                          text=True, timeout=60)
    assert done.stderr == "", done.stderr
    return json.loads(done.stdout)["runs"][0]


@pytest.mark.parametrize("era", ["E1", "E2-early"])
def test_the_real_recordings_each_checkpoint_its_own_epochs_estimate(tmp_path, era):
    log = tmp_path / "train.log"
    shutil.copy(TRAINING / era / "train.log", log)
    for epoch in (0, 1):
        write_checkpoint(tmp_path / "outputs" / f"epoch_{epoch}", era, f"outputs__tiny-llama-eagle3__epoch_{epoch}")
    run = _runs(tmp_path, log)
    choice = run["per_checkpoint"]
    assert [r["checkpoint"] for r in choice["rows"]] == ["epoch_0", "epoch_1"]
    text = log.read_text()
    for row in choice["rows"]:  # epoch_K is judged on the accuracies printed as Eval (or Train) Epoch [K+1/2]
        # (E1 is SpecForge v0.1.0, whose "Eval" lists were its train ones: read as train, as the runs pane says)
        word = {"eval": "Eval", "train": "Train"}[row["source"]]
        assert row["source"] == ("train" if era == "E1" else "eval")
        accs = [float(v) for v in re.findall(rf"^{word} Epoch \[{row['epoch'] + 1}/2\], position \d+,\s+Acc: (\S+)$", text, re.M)]
        assert row["estimate"] == pytest.approx(estimate(accs, 7).with_bonus, abs=1e-3)
    best = max(choice["rows"], key=lambda r: r["estimate"])
    assert choice["ship"] in (best["checkpoint"], "epoch_1") and "estimated from accuracy" in choice["words"]


LINES = "Train Epoch [{e}/{n}], position {i},  Acc: {a:.2f}\nEval Epoch [{e}/{n}], position {i},  Acc: {a:.2f}\n"


@pytest.mark.parametrize("shape", list(itertools.product((0.50, 0.60, 0.70), repeat=3)))
def test_the_choice_over_every_shape_of_three_epochs(tmp_path, shape):
    """Three epochs whose accuracy at every position is `shape`: the newest is shipped unless an earlier one predicts
    more than 2 % higher, and then that one is named."""
    log = tmp_path / "train.log"
    log.write_text("".join(LINES.format(e=e + 1, n=3, i=i, a=a) for e, a in enumerate(shape) for i in range(3)))
    for epoch in range(3):
        write_checkpoint(tmp_path / "outputs" / f"epoch_{epoch}", "E2-early", "outputs__tiny-llama-eagle3__epoch_1")
    choice = _runs(tmp_path, log, depth=3)["per_checkpoint"]
    predicted = [estimate([a] * 3, 3).with_bonus for a in shape]
    best = max(range(3), key=lambda k: (predicted[k], k))
    earlier = best != 2 and predicted[best] > predicted[2] * 1.02
    assert choice["earlier_better"] is earlier and choice["ship"] == f"epoch_{best if earlier else 2}", (shape, choice)
