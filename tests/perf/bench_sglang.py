"""Log diagnosis speed: the 37 KB SGLang 0.5.23 crash, and the tail of logs from MBs to GBs.

Run on demand:  python tests/perf/bench_sglang.py
Targets (issue 4): diagnose the 37 KB crash in under 20 ms; open the tail of a multi-GB log in time
independent of its size (the big logs are sparse files with real log lines at their end, so the
disk holds little; the naive way, reading the whole file, is timed beside it up to 1 GB).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cockpit.serving.logread import diagnose_file, diagnose_lines  # noqa: E402

CRASH = ROOT / "tests" / "fixtures" / "sglang" / "unrecognized_0.5.23.log"


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    size = CRASH.stat().st_size
    t = timed(lambda: diagnose_file(CRASH), 200)
    print(f"diagnose {CRASH.name} ({size / 1024:.1f} KB): median {t * 1000:.2f} ms (target < 20 ms: {t * 1000 / 20:.2f} of it)")

    tail_lines = b"".join(b"[2026-12-02 10:00:00 TP0] Decode batch, #running-req: 8, #token: 90000, accept len: 2.95, line %d\n" % i
                          for i in range(100_000)) + CRASH.read_bytes()
    print(f"\n{'log size':>10} {'tail+diagnose ms':>17} {'read-all+diagnose ms':>21} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as folder:
        base = None
        for total in (16 * 2**20, 256 * 2**20, 2**30, 4 * 2**30, 16 * 2**30):
            path = Path(folder) / f"log-{total}.log"
            with open(path, "wb") as handle:
                handle.truncate(total - len(tail_lines))
                handle.seek(0, 2)
                handle.write(tail_lines)
            ours = timed(lambda: diagnose_file(path), 5)
            base = base or ours
            naive_text = "-"
            ratio = "-"
            if total <= 2**30:
                def naive():
                    diagnose_lines(path.read_bytes().decode("utf-8", "replace").splitlines())

                naive_t = timed(naive, 1)
                naive_text = f"{naive_t * 1000:.0f}"
                ratio = f"{naive_t / ours:.0f}x"
            print(f"{total / 2**20:>8.0f}MB {ours * 1000:>17.1f} {naive_text:>21} {ratio:>7}")
            path.unlink()
    print("\nThe tail time stays flat from 16 MB to 16 GB: the reader seeks to the last 8 MiB.")


if __name__ == "__main__":
    main()
