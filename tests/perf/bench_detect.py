"""Time to truth: from an event in the world to the cockpit's state and its alert, and false alarms.

Run on demand:  python tests/perf/bench_detect.py [--repeats 3] [--idle-minutes 10] [--skip-idle]

Each event is caused for real, at a random phase of the watchers' poll intervals (so the maximum is
near the worst case), and timed from the moment it is caused (time.monotonic) to the first
poll whose state says it, and to the alert's delivery (an [alerts] command channel running `true`),
through the cockpit's own watch loops at their default intervals (runs: poll_s 2 s; the server pane:
1 s, /metrics and /server_info every 5 s; telemetry: nvidia-smi every 1 s, processes every 5 s):
- trainer SIGKILL and trainer CUDA OOM: the STAND-IN trainer (tests/standin/trainer_replay.py)
  replays the real SpecForge E4 recording into its log, which it holds open as `nohup ... > log`
  does; SIGKILL kills it, SIGUSR1 makes it write PyTorch's OOM traceback and exit 1;
- server process killed, server hung: the demo's STAND-IN SGLang server (cockpit/demo/server.py,
  real SGLang log and /metrics formats), 8 requests in flight; killed with SIGKILL, or its scheduler
  stopped (decode lines stop, requests stay open, /server_info no longer answers);
- a foreign process taking GPU memory on the launch host: the stand-in nvidia-smi behind a real
  loopback sshd; a passed gpu_clean gate must turn stale;
- a host becoming unreachable: that sshd stopped (every session killed);
- through the workload managers (issue 37; --managers): a real Slurm job cancelled, killed by its cgroup for
  memory, over its time limit (timed from the limit: Slurm's own check runs every 30 s); a real Docker
  container killed and OOM-killed; and the cockpit run as an ordinary user while root's trainer is killed
  (the truth it can reach is `unknown`, never died: seconds to that).
Locally (LocalTransport) and through the real sshd on 127.0.0.1 (SSH, SFTP, direct-tcpip), as a host
of the config.  Then a scripted idle -> busy -> idle -> sweep (three relaunches under load) -> idle
scenario with a trainer running throughout: every alert raised there is a false alarm.

Targets (issue 27): a death seen in <= 5 s locally and <= 10 s over SSH, a hang in <= 30 s, 0 false
alarms.  Anchors: Alertmanager with Prometheus's defaults fires 1-6 min after the fact (scrape
interval 1 min + `for:` + group_wait 30 s); a Kubernetes liveness probe with defaults, 30 s
(periodSeconds 10 x failureThreshold 3).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from cockpit.alerts import Alerter, AlertSettings  # noqa: E402
from cockpit.config import HostConfig, SshSettings, parse_config  # noqa: E402
from cockpit.hosts.commandlog import CommandLog  # noqa: E402
from cockpit.hosts.local import LocalTransport  # noqa: E402
from cockpit.hosts.procs import launch_marker  # noqa: E402
from cockpit.hosts.ssh import SshTransport  # noqa: E402
from cockpit.runbook.model import StepResult, StepState  # noqa: E402
from cockpit.runs.spec import RunSpec  # noqa: E402
from cockpit.runs.watch import run_alert, watch_runs  # noqa: E402
from cockpit.serving.live import flag_alert  # noqa: E402
from cockpit.serving.server import ServerWatcher, death_alert, watch_server  # noqa: E402

RECORDING = ROOT / "tests" / "fixtures" / "training" / "E4-report-none" / "train.log"
TRAINER = ROOT / "tests" / "standin" / "trainer_replay.py"
PASSED = StepResult(StepState.PASSED, 1.0, 2.0, "ready")


def alerter() -> Alerter:
    return Alerter(AlertSettings(bell=False, desktop=False, command=("true",), min_interval_s=600, max_per_hour=1000),
                   log_path=Path(tempfile.gettempdir()) / "bench_detect_alerts.jsonl")


async def until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


def start_trainer(log: Path, every: float = 0.3) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, str(TRAINER), str(RECORDING), "--every", str(every), "--loop"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


async def watch_run_event(transport, spec: RunSpec, cause, want: str, ready=("running", "starting")) -> tuple[float, float, str]:
    """Watch a run as the TUI does; once it runs, `cause()` the event (returns its time, time.monotonic), then the
    seconds to the run's state `want` and to its alert's delivery, and the evidence it gave."""
    records: list = []
    delivered: list = []
    send = alerter()

    def publish(statuses, events):
        records.append((time.monotonic(), statuses[0].state, statuses[0].evidence))
        for event in events:
            if event.kind in ("died", "crashed"):
                async def deliver(alert=run_alert(event)):
                    await send.send(alert)
                    delivered.append(time.monotonic())
                asyncio.ensure_future(deliver())

    task = asyncio.ensure_future(watch_runs([spec], lambda _: transport, publish))
    try:
        await until(lambda: records and records[-1][1] in ready, 60, f"{spec.name} running")
        await asyncio.sleep(random.uniform(0, spec.poll_s))  # anywhere inside a poll interval
        t0 = await cause()
        seen = await until(lambda: next(((t, e) for t, s, e in records if t > t0 and s == want), None), 200, f"{spec.name} {want}")
        sent = await until(lambda: delivered and delivered[0], 30, "alert delivered")
        return seen[0] - t0, sent - t0, seen[1]
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def trainer_event(transport, host: str, folder: Path, how: str) -> tuple[float, float]:
    """(seconds to the state, seconds to the alert's delivery) after SIGKILL or an OOM."""
    log = folder / f"train-{how}-{host}.log"
    trainer = start_trainer(log)
    spec = RunSpec("r", host, log=str(log))

    async def cause() -> float:
        t0 = time.monotonic()
        os.kill(trainer.pid, signal.SIGKILL if how == "sigkill" else signal.SIGUSR1)
        return t0

    try:
        state_s, alert_s, _ = await watch_run_event(transport, spec, cause, "died" if how == "sigkill" else "crashed", ready=("running",))
        return state_s, alert_s
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait()


def start_server(log: Path, port: int, control: Path, steps: int = 5, append: bool = False) -> subprocess.Popen:
    env = {**os.environ, "COCKPIT_DEMO_CONTROL": str(control), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "cockpit.demo.server", "--model-path", "m", "--port", str(port), "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1", "--enable-metrics"]
    with open(log, "a" if append else "w") as out:
        out.write(launch_marker("launch", "bench") + "\n")
        out.flush()
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL, start_new_session=True)


async def load(port: int, stop: asyncio.Event, tokens: int = 100000) -> None:
    """One client keeping a /generate stream open (a request in flight)."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        body = json.dumps({"text": "x", "sampling_params": {"max_new_tokens": tokens}, "stream": True}).encode()
        writer.write(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        try:
            while not stop.is_set() and await reader.read(65536):
                pass
        except OSError:
            await asyncio.sleep(0.1)
        finally:
            writer.close()


class Following:
    """The server pane's loop: watch_server over one launch, the death and flag alerts as the TUI raises them."""

    def __init__(self, transport, proc, port: int, log: Path):
        self.statuses: list = []
        self.alerts: list = []
        self.flags: set = set()
        self.send = alerter()
        self.watcher = ServerWatcher(transport, proc.pid, port, str(log))
        self.task = asyncio.ensure_future(watch_server(self.watcher, self.publish, 1.0))

    def publish(self, status) -> None:
        was_alive = self.statuses[-1][1].alive if self.statuses else True
        self.statuses.append((time.monotonic(), status))
        new = []
        alert = death_alert("launch", PASSED, was_alive, status)
        if alert is not None:
            new.append(alert)
        kinds = {f["kind"] for f in status.figures.get("flags") or []}
        new += [flag_alert("launch", f) for f in status.figures.get("flags") or [] if f["kind"] not in self.flags]
        self.flags = kinds
        for alert in new:
            async def deliver(alert=alert):
                await self.send.send(alert)
                self.alerts.append((time.monotonic(), alert))
            asyncio.ensure_future(deliver())

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


async def server_event(transport, host: str, folder: Path, how: str) -> tuple[float, float]:
    from harness.sshd import free_port

    log, control, port = folder / f"server-{how}-{host}.log", folder / f"control-{how}-{host}.json", free_port()
    control.write_text("{}")
    proc = start_server(log, port, control)
    stop = asyncio.Event()
    following = None
    clients = []
    try:
        following = Following(transport, proc, port, log)
        await until(lambda: following.statuses and following.statuses[-1][1].health == "ready", 60, "server ready")
        clients = [asyncio.ensure_future(load(port, stop)) for _ in range(8)]
        await until(lambda: (following.statuses[-1][1].figures.get("running") or 0) >= 8, 60, "8 requests running")
        await asyncio.sleep(6 + random.uniform(0, 5))  # a few decode windows (the usual interval is known), any phase
        t0 = time.monotonic()
        if how == "killed":
            os.kill(proc.pid, signal.SIGKILL)
            seen = await until(lambda: next((t for t, s in following.statuses if t > t0 and not s.alive), None), 60, "server dead")
            kind = "server_crashed"
        else:
            control.write_text(json.dumps({"hang": True}))
            seen = await until(lambda: next((t for t, s in following.statuses if t > t0 and any(
                f["kind"] == "hung" for f in s.figures.get("flags") or [])), None), 90, "server hung")
            kind = "server_hung"
        sent = await until(lambda: next((t for t, a in following.alerts if a.kind == kind), None), 30, "alert delivered")
        return seen - t0, sent - t0
    finally:
        stop.set()
        control.write_text("{}")
        for client in clients:
            client.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
        if following is not None:
            await following.stop()
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


async def host_events(folder: Path) -> dict[str, float]:
    """A foreign process on the launch host's GPU 5 (a passed gate turns stale), then the host unreachable."""
    from harness.sshd import SshdHarness

    from cockpit.context import parse_runbook
    from cockpit.hosts.state import HostState
    from cockpit.runbook.engine import Runbook
    from cockpit.runbook.store import StateStore
    from cockpit.telemetry.hub import TelemetryHub

    sshd = SshdHarness(folder / "sshd-hosts").start()
    sshd.scenario({"gpus": 8})
    text = (f'[ssh]\nknown_hosts = "{sshd.known_hosts}"\nconfig = []\n\n' + sshd.host_toml("gpu-server")
            + '\n[runbook]\nname = "bench"\nfreshness_s = 30\n\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "gpu-server"\n')
    config = parse_config(text)
    hub = TelemetryHub(config)
    runbook = Runbook(parse_runbook(config), hub, StateStore("bench", folder / "state"))
    invalidated: list = []
    states: list = []
    runbook.invalidations.subscribe(lambda item: invalidated.append(time.monotonic()))
    hub.subscribe(lambda snap: states.append((time.monotonic(), snap.state)))
    hub.start()
    out = {}
    try:
        async def yes(_):
            return True

        await until(lambda: states and states[-1][1] is HostState.UP, 30, "host up")
        result = await runbook.run_step("clean", yes)
        assert result.state is StepState.PASSED, result.message
        await asyncio.sleep(1 + random.uniform(0, 5))  # any phase of the 1 s stream and the 5 s process poll
        t0 = time.monotonic()
        sshd.scenario({"gpus": 8, "set": {"5": {"memory.used": 30000}},
                       "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}]})
        out["foreign GPU process (gate stale)"] = await until(lambda: invalidated and invalidated[0], 60, "gate stale") - t0
        await asyncio.sleep(1 + random.uniform(0, 1))
        t0 = time.monotonic()
        sshd.stop()
        out["host unreachable (first state not up)"] = await until(
            lambda: next((t for t, s in states if t > t0 and s is not HostState.UP), None), 60, "host not up") - t0
        out["host unreachable (unreachable)"] = await until(
            lambda: next((t for t, s in states if t > t0 and s is HostState.UNREACHABLE), None), 90, "host unreachable") - t0
    finally:
        await hub.stop()
        sshd.stop()
    return out


async def idle_scenario(transport, folder: Path, minutes: float) -> tuple[int, list]:
    """idle -> busy -> idle -> sweep (3 relaunches under load, each followed as the TUI does) -> idle,
    with a trainer running throughout: every alert raised is a false alarm."""
    from harness.sshd import free_port

    phase = minutes * 60 / 5
    log, control = folder / "idle-server.log", folder / "idle-control.json"
    control.write_text("{}")
    train_log = folder / "idle-train.log"
    trainer = start_trainer(train_log, every=0.5)
    run_alerts: list = []
    task = asyncio.ensure_future(watch_runs([RunSpec("r", "here", log=str(train_log))], lambda _: transport,
                                            lambda st, ev: run_alerts.extend((time.monotonic(), e) for e in ev if e.kind != "checkpoint")))
    alarms: list = []
    port = free_port()
    proc = start_server(log, port, control)
    following = Following(transport, proc, port, log)
    stop = asyncio.Event()
    clients: list = []
    timeline = []
    try:
        await until(lambda: following.statuses and following.statuses[-1][1].health == "ready", 60, "server ready")
        timeline.append("idle")
        await asyncio.sleep(phase)
        timeline.append("busy (8 in flight)")
        clients = [asyncio.ensure_future(load(port, stop, tokens=2000)) for _ in range(8)]
        await asyncio.sleep(phase)
        stop.set()
        await asyncio.gather(*clients, return_exceptions=True)
        timeline.append("idle")
        await asyncio.sleep(phase)
        for steps in (3, 5, 8):  # the sweep: stop on purpose (no alert for that), relaunch, load, stop
            timeline.append(f"sweep depth {steps}")
            alarms += following.alerts
            await following.stop()
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait()
            port = free_port()
            proc = start_server(log, port, control, steps=steps, append=True)
            following = Following(transport, proc, port, log)
            await until(lambda: following.statuses and following.statuses[-1][1].health == "ready", 60, "server ready")
            stop = asyncio.Event()
            clients = [asyncio.ensure_future(load(port, stop, tokens=600)) for _ in range(8)]
            await asyncio.sleep(phase / 3)
            stop.set()
            await asyncio.gather(*clients, return_exceptions=True)
        timeline.append("idle")
        await asyncio.sleep(phase)
        alarms += following.alerts
    finally:
        stop.set()
        await following.stop()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        for p in (proc, trainer):
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
    alarms = [(t, a.kind, a.text) for t, a in alarms] + [(t, e.kind, e.text) for t, e in run_alerts]
    return len(alarms), alarms


# --- through the workload managers (issue 37): a real Slurm and a real Docker ------------------------------


async def slurm_event(transport, how: str) -> tuple[float, float]:
    from cockpit.where.placement import Placement
    from harness.managers import slurm

    cluster = slurm()
    trigger = cluster.workdir / f"go-{how}-{time.monotonic_ns()}"
    program = cluster.workdir / f"{trigger.name}.py"
    program.write_text("import os, time\nprint(\"step 10: {'loss': 3.0}\", flush=True)\n"
                       f"while not os.path.exists({str(trigger)!r}): time.sleep(0.05)\n"
                       "x = bytearray(400 * 1024 * 1024); x[::4096] = b'x' * len(x[::4096]); time.sleep(600)\n")
    options = {"cancelled": (), "oom": ("--mem=50M",), "timeout": ("--time=1",)}[how]
    job = cluster.submit(f"python3 {program}", *options, "-J", f"cockpit-bench-{how}")
    spec = RunSpec(f"job-{how}", "here", placement=Placement("slurm", job), poll_s=2.0)

    async def cause() -> float:
        if how == "cancelled":
            t0 = time.monotonic()
            subprocess.run(["scancel", job], check=True)
        elif how == "oom":
            t0 = time.monotonic()
            trigger.touch()
        else:  # Slurm's own limit: from the moment it is reached (its start + 1 min), its check runs every 30 s
            line = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout
            start = next(p.split("=", 1)[1] for p in line.split() if p.startswith("StartTime="))
            from cockpit.where.state import parse_time

            t0 = time.monotonic() + (parse_time(start) + 60 - time.time())
        return t0

    try:
        state_s, alert_s, _ = await watch_run_event(transport, spec, cause, "died")
        return state_s, alert_s
    finally:
        subprocess.run(["scancel", job], capture_output=True)


async def container_event(transport, how: str) -> tuple[float, float]:
    from cockpit.where.placement import Placement
    from harness.managers import docker

    engine = docker()
    name = f"cockpit-bench-{how}"
    engine.run(name, "sh", "-c", "echo \"step 10: {'loss': 3.0}\"; while [ ! -e /tmp/go ]; do sleep 0.05; done; "
                                 "exec dd if=/dev/zero of=/dev/null bs=100M count=1; sleep 600",
               options=("--memory", "20m") if how == "oom-killed" else ())
    spec = RunSpec(name, "here", placement=Placement("docker", name), poll_s=2.0)

    async def cause() -> float:
        t0 = time.monotonic()
        if how == "killed":
            subprocess.run(["docker", "kill", name], capture_output=True, check=True)
        else:
            subprocess.run(["docker", "exec", name, "sh", "-c", ": > /tmp/go"], capture_output=True, check=True)
        return t0

    try:
        state_s, alert_s, _ = await watch_run_event(transport, spec, cause, "died")
        return state_s, alert_s
    finally:
        engine.remove(name)


async def non_root_event(folder: Path) -> float:
    """The cockpit as an ordinary user, the trainer root's: SIGKILL of the trainer.  It cannot see root's processes:
    the truth it can reach is `unknown` (never died), once the log has stopped being written; seconds to that."""
    from harness.managers import python_for, runs_as, unprivileged

    user = unprivileged()
    python = python_for(user)
    if python is None:
        raise TimeoutError(f"{user} cannot run the cockpit here")
    shared = Path(tempfile.mkdtemp(prefix="cockpit-bench-shared-"))
    os.chmod(shared, 0o755)
    log = shared / "train.log"
    trainer = start_trainer(log)
    os.chmod(log, 0o644)
    config = shared / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.r]\nhost = "here"\nlog = "{log}"\n')
    os.chmod(config, 0o644)

    def state() -> str:
        done = subprocess.run(runs_as(user, [*python[0], "-m", "cockpit", "runs", "--json", "-c", str(config)]), capture_output=True,
                              text=True, timeout=60, cwd="/", env=python[1])
        return json.loads(done.stdout)["runs"][0]["state"]

    try:
        await asyncio.sleep(2)
        assert state() == "running"
        await asyncio.sleep(random.uniform(0, 2))
        t0 = time.monotonic()
        os.kill(trainer.pid, signal.SIGKILL)
        while True:
            said = await asyncio.to_thread(state)
            assert said != "died", "a non-root watcher said died"
            if said == "unknown":
                return time.monotonic() - t0
            await asyncio.sleep(2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--idle-minutes", type=float, default=10.0)
    parser.add_argument("--skip-idle", action="store_true")
    parser.add_argument("--managers", choices=("yes", "no", "only"), default="yes",
                        help="the rows through a real Slurm and a real Docker, and the non-root watcher (root: starts them)")
    args = parser.parse_args()
    from harness.sshd import SshdHarness

    rows: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        sshd = SshdHarness(folder / "sshd").start()
        local = LocalTransport(HostConfig(name="here", local=True), CommandLog())
        ssh = SshTransport(HostConfig(name="box", address="127.0.0.1", user="root", port=sshd.port, identity_file=str(sshd.client_key)),
                           SshSettings(known_hosts=str(sshd.known_hosts), config_files=()), CommandLog())
        try:
            for repeat in range(args.repeats):
                if args.managers != "only":
                    for name, transport in (("local", local), ("ssh", ssh)):
                        for how in ("sigkill", "oom"):
                            rows.setdefault((f"trainer {how}", name), []).append(await trainer_event(transport, name, folder, how))
                        for how in ("killed", "hung"):
                            rows.setdefault((f"server {how}", name), []).append(await server_event(transport, name, folder, how))
                    for event, seconds in (await host_events(folder / f"hosts{repeat}")).items():
                        rows.setdefault((event, "ssh"), []).append((seconds, None))
                if args.managers != "no":
                    for name, transport in (("local", local), ("ssh", ssh)):
                        for how in ("cancelled", "oom"):
                            rows.setdefault((f"slurm job {how}", name), []).append(await slurm_event(transport, how))
                        for how in ("killed", "oom-killed"):
                            rows.setdefault((f"container {how}", name), []).append(await container_event(transport, how))
                    if repeat == 0:
                        rows.setdefault(("slurm job timeout (from its limit)", "local"), []).append(await slurm_event(local, "timeout"))
                    rows.setdefault(("non-root watcher: root's trainer killed -> unknown", "local"), []).append(
                        (await non_root_event(folder), None))
                print(f"round {repeat + 1}/{args.repeats} done", flush=True)
            print(f"\n{'event':<38} {'path':<6} {'state s (median, max)':>22} {'alert s (median, max)':>22}  target")
            for (event, path), values in rows.items():
                states = [s for s, _ in values]
                alerts = [a for _, a in values if a is not None]
                target = ("<= 30 s" if "hung" in event else "Slurm's check (30 s) + 5 s" if "timeout" in event
                          else "<= 15 s (the 10 s a fresh log counts as written by someone)" if "non-root" in event
                          else ("<= 5 s" if path == "local" else "<= 10 s"))
                alert_text = f"{statistics.median(alerts):6.2f} {max(alerts):6.2f}" if alerts else "     -      -"
                print(f"{event:<38} {path:<6} {statistics.median(states):13.2f} {max(states):7.2f} {alert_text:>22}  {target}")
            if not args.skip_idle:
                count, alarms = await idle_scenario(local, folder, args.idle_minutes)
                print(f"\nfalse alarms over {args.idle_minutes:g} min idle -> busy -> idle -> sweep -> idle (trainer running): {count}")
                for alarm in alarms:
                    print(f"  {alarm}")
        finally:
            await ssh.close()
            sshd.stop()


if __name__ == "__main__":
    asyncio.run(main())
