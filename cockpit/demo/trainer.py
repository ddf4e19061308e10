"""STAND-IN training run for the demo (no GPU, no SpecForge here): it writes what SpecForge's
`train_eagle3_online.py` of Sept 2025 (runs-facts era E2) writes, in its formats: tqdm bar updates
separated by `\\r` with the `loss=, acc=` postfix, the per-epoch `Train/Eval Epoch [e/N], position i`
lines, `Saved model configuration to <dir>` after each checkpoint, and each checkpoint written
non-atomically in SpecForge's order (training_state.pt, config.json, model.safetensors).  The
accuracies climb to the demo drafter's (specmodel.DRAFTER_ACCURACY), so the run's estimate is the
one the sweep then predicts.  The checkpoint keys are `layers.0.*`, the story's draft that needs the
key fix.  When done it lingers, holding its GPUs, as the story's stale trainer did."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from cockpit.demo.specmodel import DRAFT_ACCURACY_FILE, DRAFTER_ACCURACY

EPOCHS = 2
PER_EPOCH = 120
STEP_S = 0.03


def _bar(epoch: int, n: int, started: float, loss: float, acc: float) -> str:
    pct = int(100 * n / PER_EPOCH)
    filled = pct // 10
    elapsed = time.monotonic() - started
    rate = n / elapsed if elapsed > 0 and n else 0.0
    left = (PER_EPOCH - n) / rate if rate else 0
    return (f"Training Epoch {epoch}: {pct:3d}%|{'█' * filled}{' ' * (10 - filled)}| {n}/{PER_EPOCH} "
            f"[{int(elapsed) // 60:02d}:{int(elapsed) % 60:02d}<{int(left) // 60:02d}:{int(left) % 60:02d}, {rate:5.2f}it/s, "
            f"loss={loss:.2f}, acc={acc:.2f}]")


def run(root: Path, out) -> None:
    from cockpit.demo.world import write_draft

    out.write("rank 0: Initialized distributed environment\nrank 0: Initialized target model\nrank 0: Initialized draft model\n"
              f"rank 0: Auto-calculated total_steps: {EPOCHS * PER_EPOCH // 8} (num_epochs={EPOCHS} * steps_per_epoch={PER_EPOCH // 8})\n"
              "rank 0: Initialized Eagle3 FSDP model\nrank 0: Initialized optimizer and scheduler\nStarting training from epoch 0\n")
    out.flush()
    total = EPOCHS * PER_EPOCH
    for epoch in range(EPOCHS):
        started = time.monotonic()
        out.write(_bar(epoch, 0, started, 0.0, 0.0))
        for n in range(1, PER_EPOCH + 1):
            time.sleep(STEP_S)
            progress = (epoch * PER_EPOCH + n) / total
            loss, acc = 7.5 - 5.4 * progress, 0.05 + 0.70 * progress
            out.write("\r" + _bar(epoch, n, started, loss, acc))
            out.flush()
        out.write("\n")
        reached = 0.35 + 0.65 * (epoch + 1) / EPOCHS
        accuracies = [a * reached for a in DRAFTER_ACCURACY]
        for source, values in (("Train", [min(0.99, a * 1.04) for a in accuracies]), ("Eval", accuracies)):
            for i, value in enumerate(values):
                out.write(f"{source} Epoch [{epoch + 1}/{EPOCHS}], position {i},  Acc: {value:.2f}\n")
            for i in range(len(values)):
                out.write(f"{source} Epoch [{epoch + 1}/{EPOCHS}], position {i}, pLoss: {2.4 - 1.2 * reached + 0.05 * i:.2f}\n")
        out.flush()
        directory = root / "outputs" / f"epoch_{epoch}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "training_state.pt").write_bytes(b"\0" * 4096)
        out.write(f"Saved full training state to outputs/epoch_{epoch}/training_state.pt\n")
        # STAND-IN (demo/specmodel.py): what this checkpoint serves at, for the stand-in engines (its eval accuracies)
        (directory / DRAFT_ACCURACY_FILE).write_text(json.dumps({"accuracy": [round(a, 4) for a in accuracies]}))
        write_draft(directory)  # config.json, then model.safetensors
        out.write(f"Saved model configuration to outputs/epoch_{epoch}\n")
        out.flush()


def main(argv: list[str]) -> None:
    """`python <demo>/train_eagle3.py --demo`: train into <demo>/outputs, log to <demo>/train.log, then linger
    until the demo (its parent) ends or kill_stale ends it."""
    root = Path(argv[0]).resolve().parent
    parent = os.getppid()
    with open(root / "train.log", "w", encoding="utf-8") as out:
        run(root, out)
    while os.getppid() == parent:
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv)
