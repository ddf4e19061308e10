"""Following a growing training log: the cost of one update, a 1 GB log side by side with a 1 MB one.

Run on demand:  python tests/perf/bench_follow.py [--updates 200] [--big-mib 1024]
Both logs hold real SpecForge output (the E2 recording's bytes, repeated); each is followed the way
the cockpit follows a run (hosts/follow.py + runs/parse.py), over a real sshd on 127.0.0.1 (SFTP on
one connection) and on the local disk.  After the first read, the trainer appends one update's worth
of tqdm output (~2 KB) at a time and the follower polls; the time per poll and the bytes read per
poll are measured for both logs in the same run.
Target (issue 18): a growing 1 GB log costs the same per update as a 1 MB one (ratio ~1.0), never
its size.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from cockpit.config import HostConfig, SshSettings  # noqa: E402
from cockpit.hosts.commandlog import CommandLog  # noqa: E402
from cockpit.hosts.follow import LogFollower  # noqa: E402
from cockpit.hosts.local import LocalTransport  # noqa: E402
from cockpit.hosts.ssh import SshTransport  # noqa: E402
from cockpit.runs.parse import TrainingLog  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "training" / "E2-early" / "train.log"
UPDATE = ("\rTraining Epoch 1:  50%|█████     | {n}/400000 [00:10<00:10, 11.13it/s, loss=2.24, acc=0.14]" * 20).encode()


def make_log(path: Path, size: int) -> None:
    block = RECORDING.read_bytes()
    with open(path, "wb") as out:
        written = 0
        while written < size:
            chunk = block[: size - written]
            out.write(chunk)
            written += len(chunk)


async def measure(transport, path: Path, updates: int) -> tuple[list[float], list[int]]:
    follower = LogFollower(transport, str(path))
    log = TrainingLog()
    while True:  # the first read: the last 8 MiB at most, whatever the size (4 MiB per poll)
        first = await follower.poll()
        log.feed(first.lines)
        if follower.offset >= first.size:
            break
    times, sizes = [], []
    for n in range(updates):
        with open(path, "ab") as out:
            out.write(UPDATE.replace(b"{n}", str(n).encode()))
        start = time.perf_counter()
        update = await follower.poll()
        log.feed(update.lines)
        log.peek(update.partial)
        times.append(time.perf_counter() - start)
        sizes.append(update.bytes_read)
    return times, sizes


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--big-mib", type=int, default=1024)
    args = parser.parse_args()
    from harness.sshd import SshdHarness

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        small, big = folder / "small.log", folder / "big.log"
        make_log(small, 1 << 20)
        started = time.perf_counter()
        make_log(big, args.big_mib << 20)
        print(f"logs: 1 MiB and {args.big_mib} MiB of real SpecForge output (made in {time.perf_counter() - started:.1f} s)")
        sshd = SshdHarness(folder / "sshd").start()
        try:
            host = HostConfig(name="bench", address="127.0.0.1", user="root", port=sshd.port, identity_file=str(sshd.client_key))
            transports = {
                "sftp": SshTransport(host, SshSettings(known_hosts=str(sshd.known_hosts), config_files=()), CommandLog()),
                "local": LocalTransport(HostConfig(name="here", local=True), CommandLog()),
            }
            print(f"{'transport':<9} {'log':>9} {'median ms/update':>17} {'p95 ms':>8} {'max bytes/update':>18}")
            for name, transport in transports.items():
                results: dict[str, list[float]] = {}
                sizes: dict[str, list[int]] = {}
                # alternated in rounds (small, big, big, small, ...) so that drift of the machine hits both alike
                for round_ in range(4):
                    pairs = [("1 MiB", small), (f"{args.big_mib} MiB", big)]
                    for label, path in (pairs if round_ % 2 == 0 else pairs[::-1]):
                        times, read = await measure(transport, path, args.updates // 4)
                        results.setdefault(label, []).extend(times)
                        sizes.setdefault(label, []).extend(read)
                for label, times in results.items():
                    times.sort()
                    print(f"{name:<9} {label:>9} {1000 * statistics.median(times):17.3f} {1000 * times[int(0.95 * len(times))]:8.3f} "
                          f"{max(sizes[label]):18.0f}")
                small_t, big_t = (statistics.median(t) for t in results.values())
                print(f"{name:<9} ratio big/small per update: {big_t / small_t:.2f}")
                await transport.close()
        finally:
            sshd.stop()


if __name__ == "__main__":
    asyncio.run(main())
