"""STAND-IN trainer (no GPU, no SpecForge here): replays a real recorded SpecForge log to its stdout
(`nohup python trainer_replay.py LOG > train.log 2>&1 &`, so it holds train.log open for writing as
the real trainer does), one record every `--every` seconds, from `--start` records in.

On SIGUSR1 it dies of a CUDA OOM: it writes the traceback a real trainer wrote when the real CUDA
allocator refused (recorded on an H200: tests/fixtures/training/torch-deaths/oom) and exits 1.  SIGKILL needs
no help.  At the end of the recording it exits 0 (or, with `--hold`, stays with the log open: a
trainer in its final eval)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

# the real traceback of a real CUDA OOM (tests/fixtures/training/torch-deaths/oom, recorded on an H200)
RECORDED_OOM = Path(__file__).resolve().parents[1] / "fixtures" / "training" / "torch-deaths" / "oom" / "train.log"


def oom_text() -> str:
    text = RECORDED_OOM.read_text(encoding="utf-8", errors="replace")
    return text[text.index("Traceback (most recent call last)"):]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("recording")
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--loop", action="store_true", help="start the recording's records again at its end (a long run)")
    args = parser.parse_args()

    def oom(*_):
        sys.stdout.write(oom_text())
        sys.stdout.flush()
        sys.exit(1)

    signal.signal(signal.SIGUSR1, oom)
    with open(args.recording, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    records = [line for line in lines if line.startswith("step ")]
    head = [line for line in lines if not line.startswith("step ")][:8]
    sys.stdout.write("\n".join(head) + "\n")
    index, offset = args.start, 0
    while True:
        if index >= len(records):
            if not args.loop:
                break
            index, offset = 0, offset + int(records[-1].split(":")[0].split()[1])
        line = records[index]
        if offset:
            step = int(line.split(":")[0].split()[1])
            line = f"step {step + offset}:" + line.split(":", 1)[1]
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        index += 1
        time.sleep(args.every)
    while args.hold:
        time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
