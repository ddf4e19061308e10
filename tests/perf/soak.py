"""Soak: 8 hosts x 8 GPUs for 30 minutes, memory and CPU sampled each minute; reports the slope.

Run on demand (not part of the test suite):
    python tests/perf/soak.py [--minutes 30] [--speed 10] [--modes ui,headless] [--flap-every 2]

Hosts are 127.0.0.1..8 behind a real loopback sshd with the stand-in nvidia-smi replaying the
recorded busy H200 stream (values move every tick).  Every minute one host's GPU 5 gains or loses
a 30 GiB process, so process polls, pane repaints and command-log entries keep happening.

Time is accelerated by --speed (10: a 100 ms sampling interval and a 6 s "minute").  What that keeps
honest: the cockpit handles exactly as many samples, snapshots, repaints and remote commands per
host as in 30 real minutes at 1 Hz, which is what any per-sample leak grows with.  What it does not
compress: timers in wall-clock seconds (SSH keepalives, the 30 s process re-poll), so those run 10x
fewer times than in a real half hour.

Modes, each in its own process so the figures are the cockpit's own:
  ui        the real `cockpit` TUI in a pseudo-terminal (output read and thrown away): RSS, CPU,
            threads and open files from outside;
  headless  the telemetry hub (`cockpit status --watch`'s engine) in a child that also counts
            Python objects (gc) and asyncio tasks.
The slope is a least-squares line through the minutes after warm-up (the first 5).  Target: no
growth, i.e. a slope within noise of zero.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

from harness.sshd import SshdHarness  # noqa: E402

HOSTS = 8
WARMUP_MINUTES = 5


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def config_text(harness: SshdHarness, speed: float) -> str:
    body = "".join(harness.host_toml(f"h{n}", harness.addresses[n]) for n in range(HOSTS))
    text = harness.config_toml(body, interval_ms=max(100, int(1000 / speed)))
    return text.replace("processes_interval_s = 0.5", f"processes_interval_s = {max(0.5, 5 / speed):g}")


def churn(harness: SshdHarness, minute: int) -> None:
    """Every minute one host's GPU 5 gains or loses a process (busy values move every tick anyway)."""
    busy = {"gpus": 8, "base": "busy"}
    for n in range(HOSTS):
        scenario = dict(busy)
        if n == minute % HOSTS and minute % 2 == 0:
            scenario["set"] = {"5": {"memory.used": 30000}}
            scenario["processes"] = [{"pid": 4000 + minute, "name": "python3", "used_memory": 30000, "gpu": 5}]
        harness.scenario(scenario, harness.addresses[n])


# --- the headless child -----------------------------------------------------------------------------

def child_headless(config_path: str, minutes: int, minute_s: float) -> None:
    import resource

    import psutil

    from cockpit.config import load_config
    from cockpit.telemetry.hub import TelemetryHub

    async def go():
        hub = TelemetryHub(load_config(config_path))
        hub.start()
        me = psutil.Process()
        last = resource.getrusage(resource.RUSAGE_SELF)
        for minute in range(1, minutes + 1):
            await asyncio.sleep(minute_s)
            now = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (now.ru_utime - last.ru_utime) + (now.ru_stime - last.ru_stime)
            last = now
            gc.collect()
            print(json.dumps({"minute": minute, "rss_mib": me.memory_info().rss / 2**20, "cpu_pct": 100 * cpu / minute_s,
                              "objects": len(gc.get_objects()), "tasks": len(asyncio.all_tasks()),
                              "fds": me.num_fds(), "samples": sum(m.samples for m in hub.monitors.values()),
                              "log_records": len(hub.log.records())}), flush=True)
        await hub.stop()

    asyncio.run(go())


FLAP_EVERY = [0]  # minutes between outages of every host (0: none); set from --flap-every


def outage(harness: SshdHarness, minute: int) -> None:
    """Every FLAP_EVERY minutes all hosts go down for 2 s (sshd and its sessions killed), then return:
    the reconnect paths are where leaks like to hide (connections, channels, tasks)."""
    if FLAP_EVERY[0] and minute % FLAP_EVERY[0] == 0:
        harness.stop()
        time.sleep(2.0)
        harness.start()


def run_headless(config: Path, minutes: int, minute_s: float, harness: SshdHarness) -> list[dict]:
    proc = subprocess.Popen([sys.executable, __file__, "--child-headless", str(config), str(minutes), str(minute_s)],
                            stdout=subprocess.PIPE, text=True)
    rows = []
    for line in proc.stdout:
        row = json.loads(line)
        rows.append(row)
        churn(harness, row["minute"])
        outage(harness, row["minute"])
        print(f"  headless minute {row['minute']:>3}: RSS {row['rss_mib']:.1f} MiB, CPU {row['cpu_pct']:.2f} %, "
              f"{row['objects']} objects, {row['tasks']} tasks, {row['fds']} fds", flush=True)
    proc.wait()
    return rows


# --- the TUI in a pseudo-terminal -------------------------------------------------------------------

def run_ui(config: Path, minutes: int, minute_s: float, harness: SshdHarness) -> list[dict]:
    from harness.pty_tui import PtyTui

    tui = PtyTui(["--config", str(config)])
    rows = []
    try:
        tui.sample()
        for minute in range(1, minutes + 1):
            tui.drain(minute_s)
            row = {"minute": minute, **tui.sample()}
            rows.append(row)
            churn(harness, minute)
            outage(harness, minute)
            print(f"  ui minute {minute:>3}: RSS {row['rss_mib']:.1f} MiB, CPU {row['cpu_pct']:.2f} %, "
                  f"{row['threads']} threads, {row['fds']} fds", flush=True)
    finally:
        tui.stop()
    return rows


def summarize(mode: str, rows: list[dict], speed: float) -> list[str]:
    after = [r for r in rows if r["minute"] > WARMUP_MINUTES]
    lines = []
    for key, unit in (("rss_mib", "MiB"), ("cpu_pct", "% core"), ("objects", "objects"), ("tasks", "tasks"),
                      ("fds", "fds"), ("threads", "threads")):
        if not after or key not in after[0]:
            continue
        per_minute = slope([(r["minute"], r[key]) for r in after])
        first, last = after[0][key], after[-1][key]
        lines.append(f"{mode:<9} {key:<8} {first:>10.2f} {last:>10.2f} {per_minute:>+12.4f} {per_minute * 60:>+12.2f}  {unit}")
    return lines


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-headless":
        child_headless(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--speed", type=float, default=10.0, help="time acceleration (1 = real time)")
    parser.add_argument("--modes", default="ui,headless")
    parser.add_argument("--flap-every", type=int, default=0, metavar="MINUTES",
                        help="take every host down for 2 s this often (0: never)")
    args = parser.parse_args()
    FLAP_EVERY[0] = args.flap_every
    minute_s = 60.0 / args.speed
    root = Path(tempfile.mkdtemp(prefix="cockpit-soak-"))
    harness = SshdHarness(root / "sshd", addresses=[f"127.0.0.{n + 1}" for n in range(HOSTS)]).start()
    churn(harness, 1)
    config = root / "soak.toml"
    config.write_text(config_text(harness, args.speed))
    results = {}
    try:
        for mode in args.modes.split(","):
            print(f"{mode}: {HOSTS} hosts x 8 GPUs, {args.minutes} minutes at {args.speed:g}x "
                  f"({args.minutes * minute_s:.0f} s wall)", flush=True)
            runner = run_ui if mode == "ui" else run_headless
            results[mode] = runner(config, args.minutes, minute_s, harness)
    finally:
        harness.stop()
    print(f"\nSlopes after the first {WARMUP_MINUTES} minutes (least squares; per soak minute and per soak hour):")
    if args.flap_every:
        print(f"(every host went down for 2 s every {args.flap_every} minutes: {args.minutes // args.flap_every} outages)")
    print(f"{'mode':<9} {'metric':<8} {'minute 6':>10} {'last':>10} {'per minute':>12} {'per hour':>12}")
    for mode, rows in results.items():
        for line in summarize(mode, rows, args.speed):
            print(line)
    print("\nTarget: zero growth after warm-up (slopes within noise of 0).")


if __name__ == "__main__":
    main()
