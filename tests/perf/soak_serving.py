"""Resident for days with a server up (issue 36): the demo's serving state at 8 hosts x 8 GPUs, the TUI and
the same collectors headless, with no server and with a server up, side by side in one run.

Run on demand (not part of the test suite):
    python tests/perf/soak_serving.py [--speed 10] [--hours 2] [--modes ui,headless] [--phases idle,procs,serving]

The world is the demo's (cockpit/demo/world.py): its two replayed local hosts (gpu-server, the trainer, here
with 8 GPUs each) plus six hosts behind a real loopback sshd whose stand-in nvidia-smi replays the recorded
busy H200 stream: 8 hosts x 8 GPUs.  Phase `idle`: the cockpit before any launch.  Phase `serving`: the
demo's runbook walked by the CLI to a running server (`plan run`, `plan fix launch`, `plan run launch`,
`plan run ready`; the TUI then follows it through the config's shared state), with a light load on it
(one request at a time, a pause between) so that decode lines, /metrics and /server_info keep moving.
Phase `procs` (issue 40): the idle world with the TUI's process table open on the focused host (it polls that
host's compute processes and one ps while shown): side by side with `idle`, the table's own cost.

Time is compressed by --speed: every poll of the cockpit (telemetry interval, process polls, the served
server's poll, the training run's poll) runs `speed` times as often, so an hour-equivalent of polls takes
3600/speed s.  Figures per hour-equivalent: RSS, and CPU as % of one core at that speed (divide by the
speed for the cost at the real 1 Hz polls: timers counted in wall-clock seconds, such as the checklist's
clock tick and SSH keepalives, are not compressed, so at speed 1 the figure is the real one).  The memory
slope is a least-squares line through the samples after the first fifth (warm-up), per hour-equivalent
and per real hour.  Targets: memory flat (< 1 MiB per real hour), CPU with a server up <= 1.5 % of a
core at speed 1 (8 hosts x 8 GPUs), beside the idle phase.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from harness.sshd import SshdHarness  # noqa: E402

SSH_HOSTS = 6
WARMUP_SHARE = 0.2


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def cockpit(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


# --- the world ----------------------------------------------------------------------------------------


def make_world(root: Path, speed: float):
    """The demo's world, eight GPUs on each of its hosts, six SSH hosts more, every poll `speed` times as often."""
    from cockpit.demo.world import build

    world = build(root / "demo")
    trainer = root / "demo" / "trainer.json"
    scenario = json.loads(trainer.read_text())
    scenario["gpus"] = 8
    trainer.write_text(json.dumps(scenario))
    harness = SshdHarness(root / "sshd", addresses=[f"127.0.0.{n + 2}" for n in range(SSH_HOSTS)]).start()
    for address in harness.addresses:
        harness.scenario({"gpus": 8, "base": "busy"}, address)
    config = root / "demo" / "demo.toml"
    text = config.read_text()
    interval = max(100, int(1000 / speed))
    text = text.replace("interval_ms = 1000\nprocesses_interval_s = 1\n",
                        f"interval_ms = {interval}\nprocesses_interval_s = {max(0.5, 1 / speed):g}\n"
                        f"server_poll_s = {max(0.1, 1 / speed):g}\n")
    text = re.sub(r"(?m)^poll_s = 1$", f"poll_s = {max(0.2, 1 / speed):g}", text)
    ssh = (f'[ssh]\nknown_hosts = "{harness.known_hosts}"\nconfig = []\nstagger_ms = 0\n\n')
    text = text.replace("[telemetry]\n", ssh + "[telemetry]\n", 1)
    text += "\n" + "".join(harness.host_toml(f"h{n + 1}", address) + "\n" for n, address in enumerate(harness.addresses))
    config.write_text(text)
    return world, harness, config


def walk_to_serving(config: Path) -> int:
    """The demo's runbook walked by the CLI to a ready server; returns its port."""
    cockpit(config, "plan", "run", "--yes", timeout=600)  # to the launch, refused with the story's crash
    fixed = cockpit(config, "plan", "fix", "launch", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    for step in ("launch", "ready"):
        ran = cockpit(config, "plan", "run", step, "--yes", timeout=300)
        assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = json.loads(cockpit(config, "plan", "show", "--json").stdout)
    ready = next(s for s in shown["steps"] if s["name"] == "ready")
    assert ready["state"] == "passed", ready
    port = re.search(r"^port = (\d+)$", config.read_text(), re.M)
    return int(port.group(1))


class Load(threading.Thread):
    """One request at a time, a pause between: the server alternates serving and idle."""

    def __init__(self, port: int, pause_s: float):
        super().__init__(daemon=True)
        self.port, self.pause_s = port, pause_s
        self.stop = threading.Event()
        self.done = 0

    def run(self) -> None:
        body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": 96}, "stream": True})
        while not self.stop.is_set():
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                conn.request("POST", "/generate", body, {"Content-Type": "application/json"})
                conn.getresponse().read()
                conn.close()
                self.done += 1
            except OSError:
                pass
            self.stop.wait(self.pause_s)


# --- the headless child ----------------------------------------------------------------------------


def child_headless(config_path: str, samples: int, every_s: float) -> None:
    """What the TUI runs, without Textual: the hub, the runs watch and the served server's watch."""
    import resource

    import psutil

    from cockpit.context import Context
    from cockpit.runs.watch import watch_runs
    from cockpit.serving.server import watch_server
    from cockpit.serving.target import launched_server, server_watcher

    async def go():
        ctx = Context.load(config_path)
        ctx.hub.start()
        tasks = []
        if ctx.runs:
            tasks.append(asyncio.ensure_future(watch_runs(list(ctx.runs.values()), ctx.pool.get, lambda statuses, events: None)))
        runbook = ctx.runbook
        spec, result = runbook.latest_launch("sglang_launch") if runbook else (None, None)
        if spec is not None and runbook.launched(spec.name) is not None and result.state.value == "passed":
            watcher = server_watcher(launched_server(runbook, spec.name), ctx.pool.get, ctx.config)
            tasks.append(asyncio.ensure_future(watch_server(watcher, lambda status: None, ctx.config.telemetry.server_poll_s)))
        me = psutil.Process()
        last = resource.getrusage(resource.RUSAGE_SELF)
        for sample in range(1, samples + 1):
            await asyncio.sleep(every_s)
            now = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (now.ru_utime - last.ru_utime) + (now.ru_stime - last.ru_stime)
            last = now
            gc.collect()
            print(json.dumps({"sample": sample, "rss_mib": me.memory_info().rss / 2**20, "cpu_pct": 100 * cpu / every_s,
                              "objects": len(gc.get_objects()), "tasks": len(asyncio.all_tasks()), "fds": me.num_fds()}), flush=True)
        for task in tasks:
            task.cancel()
        await ctx.close()

    asyncio.run(go())


def run_headless(config: Path, samples: int, every_s: float, label: str) -> list[dict]:
    proc = subprocess.Popen([sys.executable, __file__, "--child-headless", str(config), str(samples), str(every_s)],
                            stdout=subprocess.PIPE, text=True)
    rows = []
    for line in proc.stdout:
        row = json.loads(line)
        rows.append(row)
        print(f"  {label} headless {row['sample']:>3}: RSS {row['rss_mib']:.1f} MiB, CPU {row['cpu_pct']:.2f} %, "
              f"{row['objects']} objects, {row['tasks']} tasks, {row['fds']} fds", flush=True)
    proc.wait()
    return rows


# --- the TUI in a pseudo-terminal -------------------------------------------------------------------


def run_ui(config: Path, samples: int, every_s: float, label: str) -> list[dict]:
    import os

    from harness.pty_tui import PtyTui

    tui = PtyTui(["--config", str(config)])
    rows = []
    try:
        tui.drain(min(10.0, every_s))  # start-up
        if label in ("procs", "hosts"):  # the process table open on the focused host (h: the hosts, p: its processes), polling;
            os.write(tui.fd, b"h")  # `hosts`: only h (what the focus and layout alone cost, apart from the table)
            tui.drain(0.5)
            if label == "procs":
                os.write(tui.fd, b"p")
            tui.drain(2.0)
        tui.sample()
        for sample in range(1, samples + 1):
            tui.drain(every_s)
            row = {"sample": sample, **tui.sample()}
            rows.append(row)
            print(f"  {label} ui {sample:>3}: RSS {row['rss_mib']:.1f} MiB, CPU {row['cpu_pct']:.2f} %, {row['threads']} threads, "
                  f"{row['fds']} fds", flush=True)
    finally:
        tui.stop()
    return rows


def summarize(rows: list[dict], every_s: float, speed: float) -> dict:
    after = rows[int(len(rows) * WARMUP_SHARE):] or rows
    per_sample_hours = every_s * speed / 3600  # hour-equivalents per sample
    mib_per_heq = slope([(r["sample"] * per_sample_hours, r["rss_mib"]) for r in after])
    out = {"cpu_pct": sum(r["cpu_pct"] for r in after) / len(after), "rss_first": after[0]["rss_mib"], "rss_last": after[-1]["rss_mib"],
           "mib_per_hour_equivalent": mib_per_heq, "mib_per_wall_hour": mib_per_heq * speed}
    if "objects" in after[0]:
        out["objects_per_hour_equivalent"] = slope([(r["sample"] * per_sample_hours, r["objects"]) for r in after])
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-headless":
        child_headless(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--speed", type=float, default=10.0, help="polls this many times as often (1: real time)")
    parser.add_argument("--hours", type=float, default=2.0, help="hour-equivalents per phase and mode (168: a week)")
    parser.add_argument("--samples-per-hour", type=int, default=10, help="samples per hour-equivalent")
    parser.add_argument("--modes", default="ui,headless")
    parser.add_argument("--phases", default="idle,serving")
    parser.add_argument("--load-pause", type=float, default=2.0, help="seconds between the serving phase's requests")
    args = parser.parse_args()
    every_s = 3600 / args.speed / args.samples_per_hour
    samples = max(5, int(args.hours * args.samples_per_hour))
    root = Path(tempfile.mkdtemp(prefix="cockpit-soak-serving-"))
    world, harness, config = make_world(root, args.speed)
    results: dict[tuple[str, str], dict] = {}
    load = None
    try:
        for phase in args.phases.split(","):
            if phase == "serving":
                started = time.monotonic()
                port = walk_to_serving(config)
                print(f"serving: the demo's runbook walked to a ready server on port {port} in {time.monotonic() - started:.0f} s", flush=True)
                load = Load(port, args.load_pause)
                load.start()
            for mode in args.modes.split(","):
                if phase in ("procs", "hosts") and mode != "ui":
                    continue  # the process table is the TUI's: headless, this phase is the idle one
                print(f"{phase} / {mode}: 8 hosts x 8 GPUs, {samples} samples every {every_s:.1f} s ({args.hours:g} hour-equivalents "
                      f"at {args.speed:g}x: {samples * every_s / 60:.1f} min)", flush=True)
                runner = run_ui if mode == "ui" else run_headless
                rows = runner(config, samples, every_s, phase)
                results[(phase, mode)] = summarize(rows, every_s, args.speed)
    finally:
        if load is not None:
            load.stop.set()
        harness.stop()
        world.close()
    print(f"\nSide by side (after the first {int(WARMUP_SHARE * 100)} % of each run; speed {args.speed:g}x"
          + (f", {load.done} requests served in the serving phase" if load else "") + "):")
    print(f"{'phase':<8} {'mode':<9} {'CPU % core':>10} {'/speed':>7} {'RSS MiB first':>13} {'last':>7} {'MiB/h of polls':>15} "
          f"{'MiB/wall h':>11} {'objects/h-eq':>13}")
    for (phase, mode), s in results.items():
        print(f"{phase:<8} {mode:<9} {s['cpu_pct']:>10.2f} {s['cpu_pct'] / args.speed:>7.2f} {s['rss_first']:>13.1f} {s['rss_last']:>7.1f} "
              f"{s['mib_per_hour_equivalent']:>+15.3f} {s['mib_per_wall_hour']:>+11.3f} "
              f"{s.get('objects_per_hour_equivalent', float('nan')):>+13.0f}")
    print("\nTargets: memory flat after warm-up (< 1 MiB per hour of polls: a real hour at 1x); CPU with a server up <= 1.5 % "
          "of a core at --speed 1 (the /speed column is only an estimate of it).")


if __name__ == "__main__":
    main()
