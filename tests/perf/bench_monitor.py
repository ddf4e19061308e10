"""Monitoring cost: the cockpit against the naive `ssh host nvidia-smi ...` per poll, side by side.

Run on demand (not part of the test suite):
    python tests/perf/bench_monitor.py [--hosts 1,8,64] [--seconds 20] [--modes headless,ui,naive,floor,floor-canvas]
    python tests/perf/bench_monitor.py --hosts 8 --against GITREF [--rounds 4]   # the TUI before/after, alternating

N hosts x 8 GPUs at 1 Hz through a real loopback sshd (hosts 127.0.0.1..N, the stand-in nvidia-smi
behind it).  For each N it measures, each in its own process so CPU time is the cockpit's own:
  - headless: the TelemetryHub (what `cockpit status --watch` runs);
  - ui: the real `cockpit` TUI in a pseudo-terminal, its output read and thrown away;
  - naive: one `ssh host nvidia-smi --query-gpu=...` process per host per second (the deployment's way),
    CPU of the ssh processes it starts counted;
  - floor: no cockpit at all: a bare Textual app with N bordered panes whose 8 lines each get new
    (pre-made) text every second, in the same pseudo-terminal: what Textual's own drawing of that
    many changing lines costs, the part of the TUI's figure no cockpit code can remove;
  - floor-canvas: the same lines drawn by one line-API widget for all hosts (borders as text).
It prints CPU seconds per host-sample, % of one core, memory (RSS) after warm-up and at the end,
and the ratio naive/cockpit.  Remote-side CPU (sshd, nvidia-smi) is not counted for either.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import pty
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

from harness.sshd import SshdHarness  # noqa: E402

WARMUP = 5.0


def config_text(harness: SshdHarness, hosts: int) -> str:
    body = "".join(harness.host_toml(f"h{n:02d}", harness.addresses[n]) for n in range(hosts))
    text = harness.config_toml(body, interval_ms=1000)
    return text.replace("processes_interval_s = 0.5", "processes_interval_s = 5").replace("stagger_ms = 0", "stagger_ms = 20")


def rss_mib(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss / 2**20


# --- children ---------------------------------------------------------------------------------------


def child_headless(config_path: str, seconds: float) -> None:
    from cockpit.config import load_config
    from cockpit.telemetry.hub import TelemetryHub

    async def go():
        hub = TelemetryHub(load_config(config_path))
        hub.start()
        await asyncio.sleep(WARMUP)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        samples0 = sum(m.samples for m in hub.monitors.values())
        rss = [rss_mib()]
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            await asyncio.sleep(min(5.0, seconds))
            rss.append(rss_mib())
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        samples1 = sum(m.samples for m in hub.monitors.values())
        states = sorted({s.state.value for s in hub.latest.values()})
        await hub.stop()
        cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        print(json.dumps({"cpu_s": cpu, "wall_s": time.monotonic() - start, "samples": samples1 - samples0, "rss": rss, "states": states}))

    asyncio.run(go())


# --- measurements -------------------------------------------------------------------------------------


def measure_headless(config_path: Path, seconds: float) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child-headless", str(config_path), str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def child_floor(hosts: int, canvas: bool = False) -> None:
    """The floor: Textual alone, repainting 8 lines of each of `hosts` bordered panes once a second
    (canvas: one line-API widget drawing every host's lines instead of a widget per host)."""
    import random

    from rich.segment import Segment
    from rich.style import Style
    from textual.app import App
    from textual.containers import VerticalScroll
    from textual.geometry import Size
    from textual.scroll_view import ScrollView
    from textual.strip import Strip
    from textual.widget import Widget

    rng = random.Random(1)
    styles = [Style.parse(s) for s in ("bold", "green", "dim", "", "cyan", "yellow")]
    # pre-made lines: the floor measures drawing only, no formatting
    variants = [[Strip([Segment(f"GPU{g:>2} {rng.random():.6f} ", styles[0]), Segment("█" * 6, styles[1]), Segment("░" * 10, styles[2]),
                        Segment(f" {rng.randint(0, 143771):>6}/143771M {rng.randint(60, 700):>4}/700W", styles[3]),
                        Segment(" " + "".join(rng.choice("▁▂▃▄▅▆▇█") for _ in range(40)), styles[4])]) for g in range(8)]
                for _ in range(16)]

    class Pane(Widget):
        DEFAULT_CSS = "Pane { border: round $primary; height: 10; padding: 0 1; }"
        tick = 0

        def render_line(self, y: int) -> Strip:
            return variants[self.tick % len(variants)][y] if y < 8 else Strip.blank(self.size.width)

        def advance(self) -> None:
            self.tick += 1
            self.refresh()

    class Canvas(ScrollView):
        tick = 0

        def on_mount(self) -> None:
            self.virtual_size = Size(self.size.width, hosts * 10)

        def render_line(self, y: int) -> Strip:
            host, row = divmod(y + int(self.scroll_offset.y), 10)
            return variants[self.tick % len(variants)][row - 1] if 1 <= row <= 8 else Strip([Segment("-" * self.size.width)])

        def advance(self) -> None:
            self.tick += 1
            self.refresh()

    class Floor(App):
        def compose(self):
            if canvas:
                yield Canvas()
                return
            with VerticalScroll():
                for _ in range(hosts):
                    yield Pane()

        def on_mount(self) -> None:
            self.set_interval(1.0, lambda: [pane.advance() for pane in self.query(Canvas if canvas else Pane)])

    Floor().run()


def measure_ui(config_path: Path, seconds: float, hosts: int, floor: str | None = None, source: Path | None = None) -> dict:
    """`source`: a checkout whose cockpit package runs instead of this one (`python -m` finds it first)."""
    import psutil

    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        if source is not None:
            os.chdir(source)
        if floor:
            os.execvp(sys.executable, [sys.executable, __file__, "--child-floor", str(hosts), floor])
        os.execvp(sys.executable, [sys.executable, "-m", "cockpit", "--config", str(config_path)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    proc = psutil.Process(pid)
    received = 0

    def drain(until: float) -> None:
        nonlocal received
        while time.monotonic() < until:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    received += len(os.read(fd, 65536))
                except OSError:
                    return

    drain(time.monotonic() + WARMUP)
    cpu0 = proc.cpu_times()
    rss = [proc.memory_info().rss / 2**20]
    start = time.monotonic()
    bytes0 = received
    while time.monotonic() - start < seconds:
        drain(min(start + seconds, time.monotonic() + 5))
        rss.append(proc.memory_info().rss / 2**20)
    cpu1 = proc.cpu_times()
    wall = time.monotonic() - start
    os.write(fd, b"q")
    drain(time.monotonic() + 2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"cpu_s": cpu, "wall_s": wall, "samples": hosts * wall, "rss": rss, "terminal_bytes_per_s": (received - bytes0) / wall}


def measure_naive(harness: SshdHarness, hosts: int, seconds: float) -> dict:
    from cockpit.telemetry.smi import gpu_query_argv

    query = " ".join(gpu_query_argv())
    base = ["ssh", "-q", "-p", str(harness.port), "-i", str(harness.client_key), "-o", f"UserKnownHostsFile={harness.known_hosts}",
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
    before = os.times()
    start = time.monotonic()
    polls = ok = 0
    while time.monotonic() - start < seconds:
        tick = time.monotonic()
        procs = [subprocess.Popen(base + [f"root@{harness.addresses[n]}", query], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for n in range(hosts)]
        for proc in procs:
            out, _ = proc.communicate()
            ok += proc.returncode == 0 and out.count(b"\n") == 8
        polls += hosts
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"cpu_s": cpu, "wall_s": time.monotonic() - start, "samples": ok, "polls": polls}


def measure_against(harness: SshdHarness, root: Path, hosts: int, seconds: float, ref: str, rounds: int) -> None:
    """The TUI of this checkout and of git `ref`, measured in alternating rounds on one sshd: the
    machine's own drift (other load, CPU frequency) falls on both, and the median of each is compared."""
    import statistics

    worktree = root / "against"
    repo = HERE.parent.parent
    made = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(worktree), ref], capture_output=True, text=True)
    if made.returncode != 0:
        raise SystemExit(f"--against {ref}: git cannot check it out: {made.stderr.strip().splitlines()[-1] if made.stderr.strip() else 'unknown error'}")
    try:
        config = root / f"against{hosts}.toml"
        config.write_text(config_text(harness, hosts))
        figures: dict[str, list[float]] = {ref: [], "this": []}
        for round_ in range(rounds):
            for name, source in ((ref, worktree), ("this", None)):
                result = measure_ui(config, seconds, hosts, source=source)
                figures[name].append(100 * result["cpu_s"] / result["wall_s"])
                print(f"round {round_ + 1}/{rounds} {name:<12} {figures[name][-1]:.2f} % of a core", flush=True)
        old, new = statistics.median(figures[ref]), statistics.median(figures["this"])
        print(f"\n{hosts} hosts, TUI, median of {rounds} rounds of {seconds:g} s:")
        print(f"  {ref:<14} {old:.2f} %   ({', '.join(f'{v:.2f}' for v in figures[ref])})")
        print(f"  {'this checkout':<14} {new:.2f} %   ({', '.join(f'{v:.2f}' for v in figures['this'])})")
        print(f"  this/{ref} = {new / old:.2f}")
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(worktree)], capture_output=True)


def report(rows: list[tuple]) -> None:
    print()
    print(f"{'hosts':>5} {'mode':<12} {'host-samples':>12} {'CPU s':>7} {'% core':>7} {'ms/sample':>10} {'RSS MiB warm→end':>18} {'naive/this':>10}")
    for hosts, mode, result, ratio in rows:
        per = 1000 * result["cpu_s"] / max(1, result["samples"])
        pct = 100 * result["cpu_s"] / result["wall_s"]
        rss = result.get("rss")
        rss_text = f"{rss[0]:.0f} → {rss[-1]:.0f}" if rss else "-"
        ratio_text = f"{ratio:.1f}x" if ratio else "-"
        print(f"{hosts:>5} {mode:<12} {result['samples']:>12.0f} {result['cpu_s']:>7.2f} {pct:>6.2f}% {per:>10.3f} {rss_text:>18} {ratio_text:>10}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-headless":
        child_headless(sys.argv[2], float(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child-floor":
        child_floor(int(sys.argv[2]), canvas=sys.argv[3:] == ["canvas"])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", default="1,8,64")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--modes", default="headless,ui,naive")
    parser.add_argument("--against", metavar="GITREF", help="compare the TUI with this commit's, in alternating rounds")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    counts = [int(n) for n in args.hosts.split(",")]
    modes = args.modes.split(",")
    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-"))
    addresses = [f"127.0.0.{n + 1}" for n in range(max(counts))]
    harness = SshdHarness(root / "sshd", addresses=addresses).start()
    harness.scenario({"gpus": 8, "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}]})
    rows = []
    if args.against:
        try:
            for hosts in counts:
                measure_against(harness, root, hosts, args.seconds, args.against, args.rounds)
        finally:
            harness.stop()
        return
    try:
        for hosts in counts:
            config = root / f"hosts{hosts}.toml"
            config.write_text(config_text(harness, hosts))
            results = {}
            for mode in modes:
                print(f"measuring {hosts} host(s), {mode}, {args.seconds:g} s ...", flush=True)
                if mode == "headless":
                    results[mode] = measure_headless(config, args.seconds)
                elif mode == "ui":
                    results[mode] = measure_ui(config, args.seconds, hosts)
                elif mode in ("floor", "floor-canvas"):
                    results[mode] = measure_ui(config, args.seconds, hosts, floor="canvas" if mode == "floor-canvas" else "panes")
                else:
                    results[mode] = measure_naive(harness, hosts, args.seconds)
            naive = results.get("naive")
            for mode, result in results.items():
                ratio = None
                if naive and mode != "naive" and result["cpu_s"] > 0:
                    ratio = (naive["cpu_s"] / max(1, naive["samples"])) / (result["cpu_s"] / max(1, result["samples"]))
                rows.append((hosts, mode, result, ratio))
            report([r for r in rows if r[0] == hosts])
    finally:
        harness.stop()
    print("\nAll runs:")
    report(rows)
    print("\nTargets: 8 hosts < 1 % of one core, 64 hosts < 15 %, >= 20x less CPU than naive, RSS flat after warm-up.")


if __name__ == "__main__":
    main()
