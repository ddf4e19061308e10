"""Where the TUI's CPU goes, part by part, without a sampling profiler.

Run on demand (not part of the test suite):
    python tests/perf/attribute_tui.py [--hosts 8] [--seconds 40] [--size 160x48] [--world sshd|demo] [--keys "h p" [--compare]]

--keys: typed into the TUI after its warm-up (`h p`: the process table open on the first host); with --compare the
same run first without them, then with them, the two reports side by side (each part's % of a core, and the change).

The real `cockpit` TUI runs in a pseudo-terminal against N hosts x 8 GPUs at 1 Hz through a loopback
sshd (the stand-in nvidia-smi behind it), as bench_monitor.py runs it.  Inside it, every callback the
event loop runs, the loop's own turns, its waits in epoll, garbage collections and a few named parts
(asyncssh's receive path, parsing, the paint timer, the frame) are timed with the thread's CPU clock
(time.thread_time_ns) between two signals sent after a warm-up.  A line is CPU of the main thread as a
% of one core, with how often it ran.

Why not py-spy or cProfile: at 1 kHz py-spy's sampling costs the TUI about ten times what it measures,
and cProfile's cost per call is larger than most of the calls here; this adds two clock reads to a few
hundred calls a second.  The parts overlap (a frame contains the pane's drawing): read them as a tree,
indented by what contains what.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(report: str) -> None:
    """Inside the TUI's process: install the clocks, then run the cockpit."""
    import asyncio
    import asyncio.base_events as base_events
    import asyncio.events as events
    import gc
    import resource
    import selectors

    clock = time.thread_time_ns
    spent: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    on = [False]

    def timed(owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if not on[0]:
                return original(*args, **kwargs)
            start = clock()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] += clock() - start
                calls[label] += 1

        setattr(owner, name, wrapper)

    run_handle = events.Handle._run

    def handle_run(self):
        if not on[0]:
            return run_handle(self)
        start = clock()
        try:
            return run_handle(self)
        finally:
            took = clock() - start
            callback = self._callback
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, asyncio.Task):
                label = "task " + getattr(owner.get_coro(), "__qualname__", "?")
            else:
                label = "callback " + getattr(callback, "__qualname__", type(callback).__name__)
            for key in ("loop callbacks, all", "  " + label):
                spent[key] += took
                calls[key] += 1

    events.Handle._run = handle_run
    timed(base_events.BaseEventLoop, "_run_once", "loop turns, all (callbacks, waits, the loop's own work)")
    timed(selectors.EpollSelector, "select", "  waiting in epoll (the system call and its wake-up)")
    import asyncssh.connection

    timed(asyncssh.connection.SSHConnection, "data_received", "    asyncssh: a packet received")
    from textual.screen import Screen

    timed(Screen, "_compositor_refresh", "    Textual: a frame")
    from textual.app import App

    timed(App, "_display", "      Textual: writing the frame")
    from cockpit.telemetry import monitor, smi

    timed(smi.GpuStreamAssembler, "feed", "    cockpit: an nvidia-smi line parsed")
    timed(monitor._MonitorBase, "_set_gpus", "    cockpit: a sample kept (history, snapshot, publish)")
    from cockpit.ui.host_actions import HostActions
    from cockpit.ui.widgets.host_pane import HostPane

    timed(HostActions, "_paint_pending", "    cockpit: the paint timer (samples to panes)")
    timed(HostPane, "_refresh_body", "      cockpit: a pane's rows made")
    timed(HostPane, "render_lines", "      cockpit: a pane drawn (inside the frame)")

    started = [0]

    def collecting(phase, info):
        if not on[0]:
            return
        if phase == "start":
            started[0] = clock()
        else:
            spent[f"  garbage collection, generation {info['generation']}"] += clock() - started[0]
            calls[f"  garbage collection, generation {info['generation']}"] += 1

    gc.callbacks.append(collecting)
    mark = {}

    def begin(*_):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        mark.update(cpu=usage.ru_utime + usage.ru_stime, wall=time.monotonic())
        on[0] = True

    def end(*_):
        on[0] = False
        usage = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - mark["wall"]
        cpu = usage.ru_utime + usage.ru_stime - mark["cpu"]
        with open(report, "w") as out:
            out.write(f"the whole process (every thread, user + system): {100 * cpu / wall:.3f} % of a core over {wall:.0f} s\n")
            for label, ns in sorted(spent.items(), key=lambda item: -item[1]):
                if 100 * ns / 1e9 / wall >= 0.001:
                    out.write(f"{label:<66} {100 * ns / 1e9 / wall:6.3f} %   {calls[label] / wall:6.1f} /s\n")

    signal.signal(signal.SIGUSR1, begin)
    signal.signal(signal.SIGUSR2, end)
    from cockpit.cli import main

    raise SystemExit(main())


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.argv = ["cockpit", *sys.argv[3:]]
        child(os.environ["ATTRIBUTE_REPORT"])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--world", choices=("sshd", "demo"), default="sshd",
                        help="sshd: N loopback hosts (bench_monitor's); demo: soak_serving.py's world (the demo's hosts and servers)")
    parser.add_argument("--keys", default="", help="keys typed after the warm-up, space-separated (e.g. 'h p')")
    parser.add_argument("--compare", action="store_true", help="run without the keys, then with them; both reports side by side")
    args = parser.parse_args()
    if args.compare and args.keys:
        without, with_keys = measure(args, ""), measure(args, args.keys)
        side_by_side(without, with_keys, args)
        return
    print(f"{args.hosts} hosts x 8 GPUs at 1 Hz, the TUI at {args.size}" + (f", keys {args.keys!r}" if args.keys else "")
          + ", main thread CPU by part:")
    print(measure(args, args.keys) or "no report: the TUI did not answer the signals")


def side_by_side(a: str, b: str, args) -> None:
    def parts(text: str) -> dict[str, float]:
        found = {}
        for line in text.splitlines()[1:]:
            label, _, rest = line.rpartition(" %")
            if not label:
                continue
            head, _, value = label.rstrip().rpartition(" ")
            try:
                found[head.rstrip()] = float(value)
            except ValueError:
                continue
        return found

    whole = [line.split(": ", 1)[1].split(" %")[0] if line else "?" for line in (a.splitlines()[:1] or [""]) + (b.splitlines()[:1] or [""])]
    print(f"{args.hosts} hosts x 8 GPUs at 1 Hz, the TUI at {args.size}, {args.seconds:g} s each: without keys, then with {args.keys!r}")
    print(f"{'the whole process (% of a core)':<66} {whole[0]:>8} {whole[1]:>8}")
    pa, pb = parts(a), parts(b)
    for label in sorted(set(pa) | set(pb), key=lambda k: -max(pa.get(k, 0), pb.get(k, 0))):
        x, y = pa.get(label, 0.0), pb.get(label, 0.0)
        print(f"{label:<66} {x:8.3f} {y:8.3f} {y - x:+8.3f}")


def measure(args, keys: str) -> str:
    import fcntl
    import pty
    import select
    import struct
    import tempfile
    import termios

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from bench_monitor import WARMUP, config_text
    from harness.sshd import SshdHarness

    columns, rows = (int(n) for n in args.size.split("x"))
    root = Path(tempfile.mkdtemp(prefix="cockpit-attribute-"))
    world = None
    if args.world == "demo":  # soak_serving.py's: the demo's world (its servers and processes) and six SSH hosts, 8 GPUs each
        from soak_serving import make_world

        world, harness, config = make_world(root, 1.0)
    else:
        harness = SshdHarness(root / "sshd", addresses=[f"127.0.0.{n + 1}" for n in range(args.hosts)]).start()
    try:
        if world is None:
            harness.scenario({"gpus": 8, "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}]})
            config = root / "cockpit.toml"
            config.write_text(config_text(harness, args.hosts))
        report = root / "report.txt"
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["TERM"] = "xterm-256color"
            os.environ["ATTRIBUTE_REPORT"] = str(report)
            os.execvp(sys.executable, [sys.executable, __file__, "--child", "-", "--config", str(config)])
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

        def drain(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                if select.select([fd], [], [], 0.2)[0]:
                    try:
                        os.read(fd, 65536)
                    except OSError:
                        return

        drain(WARMUP + 1)
        for key in keys.split():
            os.write(fd, key.encode())
            drain(0.5)
        drain(3)
        os.kill(pid, signal.SIGUSR1)
        drain(args.seconds)
        os.kill(pid, signal.SIGUSR2)
        drain(2)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return report.read_text() if report.exists() else ""
    finally:
        harness.stop()
        if world is not None:
            world.close()


if __name__ == "__main__":
    main()
