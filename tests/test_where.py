"""Truth wherever the work runs (issue 37): a trainer of another user, one that opens its log per line, a Slurm
job, a Docker container, a Kubernetes pod.  Slurm and Docker are REAL (tests/harness/managers.py starts them,
as sshd is started); Kubernetes is a STAND-IN kubectl replaying pod JSON (no API server can run here)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import Checker, HostConfig
from cockpit.errors import ConfigError
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.local import LocalTransport
from cockpit.runs.spec import RunSpec
from cockpit.runs.watch import RunWatcher
from cockpit.where.placement import Placement, parse_placement
from harness.managers import docker, ordinary_cockpit, runs_as, unprivileged
from harness.sshd import STANDIN_DIR

E4_LINE = "step {n}: {{'loss': {loss}, 'acc': 0.{acc}, 'lr': 0.0001}}"


def local(path: str | None = None) -> LocalTransport:
    transport = LocalTransport(HostConfig(name="here", local=True), CommandLog())
    return transport


async def watch_until(watcher: RunWatcher, states: set[str], timeout: float = 60.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        status, events = await watcher.poll()
        seen.append(status.state)
        if status.state in states:
            return status, seen
        if time.monotonic() > deadline:
            raise AssertionError(f"never {states}: {seen[-5:]}; {status.evidence}")
        await asyncio.sleep(every)


# --- where, in the config ----------------------------------------------------------------------------


@pytest.mark.parametrize("table, message", [
    ({"slurm_job": "12 34"}, "is not a Slurm job id"),
    ({"slurm_job": "eagle3"}, "a job's name goes in slurm_job_name"),
    ({"slurm_job": "12", "container": "c"}, "both say where it runs"),
    ({"container": "c", "container_engine": "lxc"}, "must be 'docker' or 'podman'"),
    ({"container": "-rm"}, "is not a container name"),
    ({"pod_container": "t"}, "'pod_container' goes with 'pod'"),
    ({"pod": "ML/eagle"}, "is not a pod namespace"),
    ({"pod": "ml/"}, "names no pod"),
])
def test_where_a_run_lives_is_checked_naming_the_key(table, message):
    text = "[runs.r]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items())
    with pytest.raises(ConfigError, match=message) as caught:
        parse_placement(Checker("c.toml", text), ("runs", "r"), table)
    assert caught.value.line is not None


def test_placements_parse():
    check = Checker("c.toml", "")
    assert parse_placement(check, ("r",), {"slurm_job": "123_4"}) == Placement("slurm", "123_4")
    assert parse_placement(check, ("r",), {"pod": "ml/eagle3-0", "pod_container": "trainer", "kube_context": "prod"}) == \
        Placement("pod", "eagle3-0", namespace="ml", container="trainer", context="prod")
    assert parse_placement(check, ("r",), {"container": "eagle3", "container_engine": "podman"}).label == "podman container eagle3"


def test_a_manager_command_missing_on_the_host_is_one_clear_line(tmp_path):
    """No podman on this host: one line that says so, the run `unknown`, never a traceback or a death."""
    async def go():
        watcher = RunWatcher(RunSpec("r", "here", placement=Placement("podman", "eagle3")), local())
        status, _ = await watcher.poll()
        return status

    with_path = os.environ["PATH"]
    bare = tmp_path / "bin"  # a PATH with a shell and nothing else: podman is not there, installed or not
    bare.mkdir()
    for tool in ("sh", "env", "cat"):
        os.symlink(shutil.which(tool), bare / tool)
    os.environ["PATH"] = str(bare)
    try:
        status = asyncio.run(go())
    finally:
        os.environ["PATH"] = with_path
    assert status.state == "unknown" and "`podman` is not installed on here" in status.evidence, status.evidence


# --- another user's trainer, and one that opens its log per line -----------------------------------


TRAINER = """
import sys, time
log, per_line = sys.argv[1], sys.argv[2] == "per-line"
handle = None if per_line else open(log, "a")
for n in range(1, 100000):
    line = "step %d: {'loss': %.2f, 'acc': 0.3, 'lr': 0.0001}\\n" % (n * 10, 3.0 - n * 0.001)
    if per_line:
        with open(log, "a") as each:  # open, append, close for each record, as many hand-written loops do
            each.write(line)
    else:
        handle.write(line); handle.flush()
    time.sleep(0.3)
"""


@pytest.fixture
def shared_dir():
    """A folder every user can read (the trainer's log is read by the cockpit's user)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cockpit-shared-"))
    os.chmod(folder, 0o755)
    yield folder
    subprocess.run(["rm", "-rf", str(folder)])


def start_trainer(folder: Path, per_line: bool = False) -> subprocess.Popen:
    script = folder / "trainer.py"
    script.write_text(TRAINER)
    log = folder / "train.log"
    log.touch()
    os.chmod(log, 0o644)
    with open(folder / "trainer.out", "w") as out:  # the trainer holds its own copy
        return subprocess.Popen([sys.executable, str(script), str(log), "per-line" if per_line else "held"], stdout=out, stderr=out,
                                start_new_session=True)


def runs_json(user: str, config: Path, python: tuple[list[str], dict[str, str]], every: bool = False):
    """`cockpit runs --json` as `user`: the first run's status (every run's, with every=True)."""
    done = subprocess.run(runs_as(user, [*python[0], "-m", "cockpit", "runs", "--json", "-c", str(config)]),
                          capture_output=True, text=True, timeout=120, cwd="/", env=python[1])
    assert done.stdout, done.stderr
    runs = json.loads(done.stdout)["runs"]
    return runs if every else runs[0]


def test_another_users_trainer_is_never_died_while_its_log_grows(shared_dir, needs_sshd):
    """Issue 37 item 1: the cockpit as an ordinary user, the trainer root's.  It cannot read root's descriptors:
    `no writer found` proves nothing.  While the log grows, the run runs; once the trainer is gone, whether it
    died cannot be seen from here: unknown, and why (never DIED)."""
    user, python = ordinary_cockpit()
    trainer = start_trainer(shared_dir)
    # the same run read locally and through a real sshd, as that user (`ssh cockpit-watcher@host`)
    from harness.sshd import SshdHarness

    sshd = SshdHarness(shared_dir / "sshd").start()
    key = shared_dir / "watcher_key"
    key.write_bytes(sshd.client_key.read_bytes())
    os.chmod(key, 0o600)
    shutil.chown(key, user)
    log = shared_dir / "train.log"
    config = shared_dir / "c.toml"
    config.write_text(f'[ssh]\nknown_hosts = "{sshd.known_hosts}"\nconfig = []\n\n[hosts.here]\nlocal = true\n\n'
                      f'[hosts.box]\naddress = "127.0.0.1"\nport = {sshd.port}\nuser = "{user}"\nidentity_file = "{key}"\n\n'
                      f'[runs.r]\nhost = "here"\nlog = "{log}"\n\n[runs.s]\nhost = "box"\nlog = "{log}"\n')
    os.chmod(config, 0o644)
    try:
        time.sleep(1.5)
        for seen in runs_json(user, config, python, every=True):
            assert seen["state"] == "running" and "was written" in seen["evidence"] and "cannot be read by cockpit-watcher" in seen["evidence"], \
                (seen["name"], seen["evidence"], seen["read_error"], seen["notes"])
            assert seen["process"]["complete"] is False and seen["process"]["hidden"] > 0, seen["process"]
        # as root, the same run reads the same: its writer found
        as_root = runs_json("root", config, ([sys.executable], dict(os.environ)))
        assert as_root["state"] == "running" and as_root["process"]["state"] == "alive"
        trainer.kill()
        trainer.wait()
        time.sleep(11)  # past the moment a freshly written log is taken for a writer that lives (10 s)
        for after in runs_json(user, config, python, every=True):
            assert after["state"] == "unknown" and "cannot be read by cockpit-watcher" in after["evidence"], after
    finally:
        trainer.kill()
        trainer.wait()
        sshd.stop()


def test_a_trainer_that_opens_its_log_per_line_is_never_died_while_it_writes(shared_dir):
    """Issue 37 item 1, as root: a loop that opens, appends and closes its log for each record holds no descriptor
    between writes.  A log that grew since the last look is never a dead trainer's."""
    trainer = start_trainer(shared_dir, per_line=True)

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(shared_dir / "train.log"), poll_s=0.5), local())
        states = []
        for _ in range(10):
            status, _ = await watcher.poll()
            states.append(status.state)
            await asyncio.sleep(0.5)
        assert "died" not in states and states[-1] == "running", states
        trainer.kill()
        trainer.wait()
        await asyncio.sleep(1.0)
        status, _ = await watcher.poll()
        status, _ = await watcher.poll()
        assert status.state == "unknown" and "opens its log for each record" in status.evidence, status.evidence

    try:
        asyncio.run(go())
    finally:
        trainer.kill()


# --- Slurm (real) ------------------------------------------------------------------------------------


def job_script(cluster, name: str, body: str) -> str:
    """A job's program as a file in the cluster's shared folder; the --wrap line that runs it."""
    path = cluster.workdir / f"{name}.py"
    path.write_text(body)
    os.chmod(path, 0o644)
    return f"python3 {path}"


def slurm_run(job: str, placement: Placement | None = None) -> RunWatcher:
    return RunWatcher(RunSpec(f"job{job}", "here", placement=placement or Placement("slurm", job), poll_s=0.5), local())


@pytest.mark.xdist_group("slurm")  # one Slurm node of a CPU or two: its jobs one worker at a time
def test_slurm_jobs_end_as_slurm_says_with_its_reason_and_its_log(tmp_path, slurm_cluster):
    """A real Slurm: a job that completes is finished (Slurm's exit 0), one that exits 1, is cancelled or exceeds
    its --mem (killed by the cgroup, no line in its log) died, with Slurm's state and reason; the log is the job's
    StdOut, read without being named; the node it ran on is said."""
    cluster = slurm_cluster
    progress = "".join(f"print({E4_LINE.format(n=n * 10, loss=3 - n / 10, acc=n)!r}, flush=True); time.sleep(0.3)\n"
                       for n in range(1, 4))
    ok = cluster.submit(job_script(cluster, "ok", f"import time\n{progress}"), "-J", "cockpit-ok")
    fail = cluster.submit(job_script(cluster, "fail", "import sys\nprint('about to fail', flush=True)\nsys.exit(1)\n"), "-J", "cockpit-fail")
    cancel = cluster.submit(job_script(cluster, "cancel", f"import time\nprint({E4_LINE.format(n=10, loss=3, acc=1)!r}, flush=True)\n"
                                                          "time.sleep(600)\n"), "-J", "cockpit-cancel")
    oom = cluster.submit(job_script(cluster, "oom", "x = bytearray(400 * 1024 * 1024)\nx[::4096] = b'x' * len(x[::4096])\n"),
                         "--mem=50M", "-J", "cockpit-oom")

    async def go():
        status, _ = await watch_until(slurm_run(ok), {"finished", "died"})
        assert status.state == "finished" and "COMPLETED" in status.evidence and status.step == 30, status.evidence
        assert status.where["manager"]["node"] == cluster.node and status.where["manager"]["exit_code"] == "0:0"
        status, _ = await watch_until(slurm_run(fail), {"finished", "died"})
        assert status.state == "died" and "FAILED (exit 1:0)" in status.evidence and "exited with code 1" in status.evidence
        assert "about to fail" in status.evidence  # its last line, from its StdOut
        watcher = slurm_run(cancel)
        status, _ = await watch_until(watcher, {"running"})
        assert "RUNNING" in status.evidence
        subprocess.run(["scancel", cancel], check=True)
        status, events = await watch_until(watcher, {"cancelled", "died"})
        assert status.state == "cancelled" and "CANCELLED" in status.evidence and "cancelled" in status.evidence
        status, _ = await watch_until(slurm_run(oom), {"died", "oom", "finished"})
        assert status.state == "oom" and "OUT_OF_MEMORY" in status.evidence and "--mem" in status.evidence, status.evidence

    asyncio.run(go())


@pytest.mark.xdist_group("slurm")  # one Slurm node of a CPU or two: its jobs one worker at a time
def test_a_slurm_job_by_name_pending_then_running_and_another_users_job(tmp_path, slurm_cluster):
    cluster = slurm_cluster
    later = cluster.submit("sleep 60", "--begin=now+3600", "-J", "cockpit-later")
    user = unprivileged("cockpit-trainer")
    theirs = cluster.submit(job_script(cluster, "theirs", f"import time\nprint({E4_LINE.format(n=10, loss=2.5, acc=1)!r}, flush=True)\n"
                                                          "time.sleep(60)\n"), "-J", "cockpit-theirs", user=user)

    async def go():
        status, _ = await watch_until(slurm_run(later), {"pending"})
        assert "waiting" in status.evidence and "BeginTime" in status.evidence
        assert status.read_error is None and not any("not there" in n for n in status.notes)  # its StdOut is not written yet
        # issue 46 item 7: the one-shot command says pending, exit 0 (it read 'None is not there', exit 2)
        config = tmp_path / "c.toml"
        config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.later]\nhost = "here"\nslurm_job = "{later}"\n')
        cli = subprocess.run([sys.executable, "-m", "cockpit", "runs", "later", "--json", "-c", str(config)], capture_output=True,
                             text=True, timeout=60)
        [run] = json.loads(cli.stdout)["runs"]
        assert cli.returncode == 0 and run["state"] == "pending" and run["read_error"] is None, cli.stdout
        by_name = slurm_run(theirs, Placement("slurm", "cockpit-theirs", by_name=True))
        status, _ = await watch_until(by_name, {"running"})
        assert f"Slurm job {theirs}" in status.evidence and status.step == 10

    try:
        asyncio.run(go())
    finally:
        subprocess.run(["scancel", later, theirs])


@pytest.mark.xdist_group("slurm")  # one Slurm node of a CPU or two: its jobs one worker at a time
def test_a_slurm_job_whose_node_fails(tmp_path, slurm_cluster):
    """NODE_FAIL when the node is set DOWN under a --no-requeue job (a job over its time limit: the endings matrix,
    tests/test_endings_matrix.py)."""
    cluster = slurm_cluster
    node = cluster.submit(job_script(cluster, "node", "import time\nprint('on the node', flush=True)\ntime.sleep(600)\n"),
                          "--no-requeue", "-J", "cockpit-nodefail")

    async def go():
        watcher = slurm_run(node)
        await watch_until(watcher, {"starting", "running"})
        cluster.node_down()
        try:
            status, _ = await watch_until(watcher, {"died"}, timeout=60)
        finally:
            cluster.node_up()
        assert "NODE_FAIL" in status.evidence and "its node failed" in status.evidence

    try:
        asyncio.run(go())
    finally:
        subprocess.run(["scancel", node])


# --- Docker (real) -----------------------------------------------------------------------------------


def container_run(name: str) -> RunWatcher:
    return RunWatcher(RunSpec(name, "here", placement=Placement("docker", name), poll_s=0.5), local())


def test_docker_containers_end_as_docker_says_and_their_log_is_read_from_docker():
    engine = docker()
    names = ["cockpit-c-ok", "cockpit-c-fail", "cockpit-c-kill", "cockpit-c-oom"]
    steps = "; ".join(f"echo \"{E4_LINE.format(n=n * 10, loss=3 - n / 10, acc=n)}\"; sleep 0.3" for n in range(1, 4))
    engine.run(names[0], "sh", "-c", steps)
    engine.run(names[1], "sh", "-c", "echo about to fail >&2; exit 1")  # its stderr: docker logs gives it on stderr
    engine.run(names[2], "sh", "-c", f"echo \"{E4_LINE.format(n=10, loss=3, acc=1)}\"; sleep 600")
    engine.run(names[3], "sh", "-c", "echo allocating; sleep 1; exec dd if=/dev/zero of=/dev/null bs=100M count=1",
               options=("--memory", "20m"))

    async def go():
        watcher = container_run(names[0])
        status, _ = await watch_until(watcher, {"finished", "died"})
        assert status.state == "finished" and "exited" in status.evidence and status.step == 30, (status.evidence, status.step)
        assert watcher.stream is not None and watcher.stream.started >= 1
        await watcher.close()
        status, _ = await watch_until(container_run(names[1]), {"died"})
        assert "exit 1" in status.evidence and "about to fail" in status.evidence, status.evidence
        watcher = container_run(names[2])
        status, _ = await watch_until(watcher, {"running"})
        assert status.step == 10 and "docker container cockpit-c-kill: running" in status.evidence
        subprocess.run(["docker", "kill", names[2]], capture_output=True, check=True)
        status, _ = await watch_until(watcher, {"died"})
        assert "exit 137" in status.evidence and "SIGKILL" in status.evidence
        await watcher.close()
        status, _ = await watch_until(container_run(names[3]), {"died", "oom"})
        assert status.state == "oom" and "OOMKilled" in status.evidence and "memory limit" in status.evidence, status.evidence

    try:
        asyncio.run(go())
    finally:
        engine.remove(*names)


def test_a_container_removed_after_its_run_is_gone_not_died_without_evidence(tmp_path):
    """`docker run --rm`: once it exits, Docker no longer knows it.  Gone, with nothing saying how it ended: the log
    decides, and this log (a record with no total) cannot place where it stopped against its end: ended, never died
    (issue 46: never died for an end that could not be seen to be abnormal; it exited 0 here)."""
    engine = docker()
    name = "cockpit-c-rm"
    engine.run(name, "sh", "-c", f"echo \"{E4_LINE.format(n=10, loss=3, acc=1)}\"; sleep 2", options=("--rm",))

    async def go():
        watcher = container_run(name)
        status, _ = await watch_until(watcher, {"running", "starting"})
        status, seen = await watch_until(watcher, {"died", "ended", "finished"}, timeout=30)
        assert "running" not in seen[seen.index("unknown") + 1:] if "unknown" in seen else True
        # Docker's removal after the exit races the poll: a poll in the middle sees `removing` with the exit code
        # (exit 0 here: finished, said so); one after it sees nothing (gone: the log decides)
        if status.state == "finished":
            assert "removing (exit 0)" in status.evidence and "being removed" in status.evidence, status.evidence
        else:
            assert status.state == "ended", status
            assert "gone from Docker" in status.evidence and "cannot be told" in status.evidence, status.evidence
        await watcher.close()

    asyncio.run(go())


def test_a_container_being_removed_is_read_as_the_exit_it_had():
    """`removing` is Docker's word for a stopped container on its way out (recorded on Docker 28 during a `--rm`
    container's removal: Running false, ExitCode and FinishedAt set): its exit is still evidence.  A container removed
    before it ever started has none: gone, said why."""
    from cockpit.where.container import state_of
    from cockpit.where.state import FAILED, FINISHED, GONE

    def inspect(code, started="2026-12-06T13:16:24.023463667Z", finished="2026-12-06T13:16:25.040221287Z"):
        return {"State": {"Status": "removing", "Running": False, "Paused": False, "Restarting": False, "OOMKilled": False,
                          "Dead": False, "Pid": 0, "ExitCode": code, "Error": "", "StartedAt": started, "FinishedAt": finished},
                "RestartCount": 0, "HostConfig": {"Memory": 0}}

    done = state_of("docker", "docker container t", inspect(0), "here")
    assert done.phase == FINISHED and done.exit_code == "0" and done.reason == "being removed" and done.finished_at
    assert done.describe().startswith("docker container t: removing (exit 0)")
    killed = state_of("docker", "docker container t", inspect(137), "here")
    assert killed.phase == FAILED and "SIGKILL" in killed.reason and killed.reason.endswith("; being removed")
    never = state_of("docker", "docker container t", inspect(0, "0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"), "here")
    assert never.phase == GONE and "before it ever started" in never.describe()


# --- Kubernetes (a STAND-IN kubectl) ------------------------------------------------------------------


def pod_json(name: str, phase: str, state: dict, restarts: int = 0, last: dict | None = None) -> dict:
    status = {"name": "trainer", "ready": "running" in state, "restartCount": restarts, "state": state,
              "image": "lmsysorg/sglang:v0.5.2", "containerID": "containerd://" + "a" * 64}
    if last:
        status["lastState"] = {"terminated": last}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": "gpu-node-7", "containers": [{"name": "trainer"}]},
            "status": {"phase": phase, "containerStatuses": [status]}}


@pytest.fixture
def kubectl(tmp_path, monkeypatch):
    folder = tmp_path / "kube"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{STANDIN_DIR}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KUBECTL_STANDIN_DIR", str(folder))
    return folder


def test_pods_as_their_container_statuses_say(kubectl):
    """OOMKilled (not restarted: the pod Failed; restarted: running again, the last run's reason said), Completed,
    Error, a pod deleted after it was seen, and no API server: each as the pod's JSON says (STAND-IN kubectl)."""
    oom = {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-12-06T02:00:00Z", "finishedAt": "2026-12-06T02:10:00Z"}
    pods = {
        "oom": pod_json("oom", "Failed", {"terminated": oom}),
        "restarted": pod_json("restarted", "Running", {"running": {"startedAt": "2026-12-06T02:11:00Z"}}, restarts=1, last=oom),
        "done": pod_json("done", "Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}}),
        "error": pod_json("error", "Failed", {"terminated": {"exitCode": 1, "reason": "Error"}}),
        "crashloop": pod_json("crashloop", "Running", {"waiting": {"reason": "CrashLoopBackOff"}}, restarts=3,
                              last={"exitCode": 1, "reason": "Error"}),
    }
    for name, pod in pods.items():
        (kubectl / f"{name}.json").write_text(json.dumps(pod))
    (kubectl / "restarted.log").write_text("2026-12-06T02:11:05.000000001Z " + E4_LINE.format(n=40, loss=2.2, acc=4) + "\n")

    def watcher(name: str) -> RunWatcher:
        return RunWatcher(RunSpec(name, "here", placement=Placement("pod", name, namespace="ml", container="trainer")), local())

    async def go():
        said = {}
        for name in pods:
            w = watcher(name)
            status, _ = await w.poll(catch_up=True)
            said[name] = status
            await w.close()
        assert said["oom"].state == "oom" and "OOMKilled" in said["oom"].evidence and "gpu-node-7" in said["oom"].evidence
        assert said["restarted"].state == "running" and "restarted 1 time" in said["restarted"].evidence
        assert "the last run ended OOMKilled" in said["restarted"].evidence and said["restarted"].step == 40
        assert said["done"].state == "finished" and "Completed" in said["done"].evidence
        assert said["error"].state == "died" and "Error (exit 1)" in said["error"].evidence
        assert said["crashloop"].state == "pending" and "CrashLoopBackOff" in said["crashloop"].evidence
        w = watcher("done")
        await w.poll()
        (kubectl / "done.json").unlink()  # deleted after it was seen
        status, _ = await w.poll()
        assert status.where["manager"]["phase"] == "gone"
        (kubectl / "oom.down").write_text("")
        status, _ = await watcher("oom").poll()
        assert status.state == "unknown" and "connection to the server" in status.evidence
        calls = [json.loads(line) for line in (kubectl / "calls.log").read_text().splitlines()]
        assert ["--namespace", "ml", "get", "pod", "oom", "--output", "json"] in calls  # argv, never a shell string

    asyncio.run(go())


# --- a server in a container (real Docker) -----------------------------------------------------------


def test_a_server_in_a_container_is_watched_through_docker(tmp_path):
    """`cockpit server --container NAME`: its log from `docker logs`, its figures, alive as Docker says; killed, it is
    not serving and says why (Docker's exit and signal), exit 1.  The server is the demo's STAND-IN SGLang run in a
    real container (this machine's Python through -v /usr, on the host's network)."""
    import site

    from harness.sshd import free_port

    engine = docker()
    root = str(Path(__file__).resolve().parents[1])
    packages = site.getsitepackages()[0]
    port = free_port()
    name = "cockpit-c-server"
    engine.run(name, "python3", "-m", "cockpit.demo.server", "--model-path", "/m", "--port", str(port), "--speculative-algorithm",
               "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--enable-metrics",
               image=engine.HOSTUSR, options=("--network", "host", "-v", "/usr:/usr:ro", "-v", f"{root}:{root}:ro", "-v",
                                              f"{packages}:{packages}:ro", "-e", f"PYTHONPATH={root}:{packages}"))
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\n')

    def server(*more: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cockpit", "server", "--container", name, "--url", f"127.0.0.1:{port}", "--json",
                               "-c", str(config), *more], capture_output=True, text=True, timeout=60)

    try:
        deadline = time.monotonic() + 30
        while True:
            done = server()
            data = json.loads(done.stdout)
            if "server_info" in data["sources"] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert done.returncode == 0 and data["alive"] is True and data["where"]["manager"]["phase"] == "running", (done.stderr, data)
        assert data["activity"]["state"] == "idle" and data["where"]["label"] == f"docker container {name}"
        subprocess.run(["docker", "kill", name], capture_output=True, check=True)
        engine.wait(name)
        done = server()
        data = json.loads(done.stdout)
        assert done.returncode == 1 and data["alive"] is False
        assert any("not serving" in f["message"] and "exit 137" in f["message"] for f in data["flags"]), data["flags"]
        # issue 46 item 7: Docker says OOMKilled false: a SIGKILL is no OOM; a dead server's activity is its end, never serving
        assert not any(f["kind"] == "oom" for f in data["flags"]) and data["ended"]["state"] == "died", data["ended"]
        assert data["activity"]["state"] == "died"
        assert data["where"]["manager"]["node"] == "here"  # named as the config names the host, as `runs` names it
        bad = subprocess.run([sys.executable, "-m", "cockpit", "server", "--container", "a b", "-c", str(config)], capture_output=True,
                             text=True, timeout=60)
        assert bad.returncode == 2 and "--container: 'a b' is not a container name" in bad.stderr, bad.stderr
    finally:
        engine.remove(name)


# --- launching in a container (real Docker) ----------------------------------------------------------


async def test_a_launch_step_runs_its_server_in_a_container_and_watches_it_through_docker(tmp_path, standin_path):
    """`image` on a launch step: the server runs in a container of it, gated exactly as a bare one (a fresh clean-GPU
    pass first), linted against the image's own SGLang (its --help asked inside the image), its output in the
    step's log, ready on its port; the server watcher asks Docker whether it lives and, killed, says Docker's why.
    The image here is an empty root over this machine's /usr running the demo's STAND-IN SGLang."""
    import site

    from cockpit.config import parse_config
    from cockpit.context import Context
    from cockpit.demo.world import serving_python
    from cockpit.runbook.model import StepState
    from cockpit.serving.server import ServerWatcher
    from cockpit.serving.target import launched_server
    from harness.sshd import free_port

    engine = docker()
    (standin_path / "default.json").write_text(json.dumps({"gpus": 2}))
    serving_python(tmp_path, sys.executable)  # the shim: `python3 -m sglang.launch_server` runs the stand-in
    shim, repo, packages = tmp_path / "shim", str(Path(__file__).resolve().parents[1]), site.getsitepackages()[0]
    (tmp_path / "model").mkdir()
    (tmp_path / "draft").mkdir()
    port = free_port()
    args = ["--volume", "/usr:/usr:ro", "--volume", f"{repo}:{repo}:ro", "--volume", f"{packages}:{packages}:ro",
            "--volume", f"{shim}:{shim}:ro", "--env", f"PYTHONPATH={shim}:{repo}:{packages}", "--pid", "host"]
    name = f"cockpit-launch-{os.getpid()}"
    config = parse_config(f"""
[hosts.here]
local = true
telemetry = "smi"

[runbook]
name = "in-a-box-{os.getpid()}"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "here"

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
host = "here"
model_path = "{tmp_path / 'model'}"
draft_path = "{tmp_path / 'draft'}"
depth = 3
port = {port}
log = "{tmp_path / 'server.log'}"
settle_s = 1.0
image = "{engine.HOSTUSR}"
container_name = "{name}"
container_gpus = "none"
container_args = {json.dumps(args)}
env = {{ COCKPIT_DEMO_PARENT = "{os.getpid()}" }}

[[runbook.steps]]
name = "ready"
kind = "sglang_ready"
host = "here"
timeout_s = 60
poll_s = 0.5
""", str(tmp_path / "c.toml"))

    async def yes(_text: str) -> bool:
        return True

    ctx = Context.of(config)
    try:
        ctx.hub.start()
        for step in ("clean", "launch", "ready"):
            result = await ctx.runbook.run_step(step, yes)
            assert result.state is StepState.PASSED, (step, result.message, result.output[-800:])
        evidence = ctx.runbook.result("launch").evidence
        assert evidence["container"] == {"engine": "docker", "name": name, "image": engine.HOSTUSR}
        assert evidence["argv"][:4] == ["docker", "run", "--name", name] and "--speculative-num-steps" in evidence["argv"]
        assert "ServerArgs" in (tmp_path / "server.log").read_text()  # the container's output, in the step's log
        target = launched_server(ctx.runbook, "launch")
        assert target.placement is not None and target.placement.name == name
        watcher = ServerWatcher(ctx.pool.get("here"), target.pid, target.port, target.log, placement=target.placement)
        status = await watcher.poll()
        assert status.alive and status.health == "ready" and watcher.manager_state.phase == "running"
        subprocess.run(["docker", "kill", name], capture_output=True, check=True)
        engine.wait(name)
        status = await watcher.poll()
        assert not status.alive and any(d.kind == "manager" and "exit 137" in d.message for d in status.report.diagnoses), \
            status.report.diagnoses
    finally:
        await ctx.close()
        engine.remove(name)


def test_podman_containers_end_as_podman_says_its_oom_said_as_probably():
    """A real Podman 4.3: an exit 0 is finished, a kill died with its signal; an OOM kill under --memory is
    `probably OOM` (Podman 4.3 does not set OOMKilled reliably: its conmon writes the marker elsewhere)."""
    from harness.managers import podman

    engine = podman()
    names = ["cockpit-p-ok", "cockpit-p-kill", "cockpit-p-oom"]
    engine.run(names[0], "sh", "-c", f"echo \"{E4_LINE.format(n=10, loss=3, acc=1)}\"; sleep 1")
    engine.run(names[1], "sh", "-c", "sleep 600")
    engine.run(names[2], "sh", "-c", "sleep 1; exec dd if=/dev/zero of=/dev/null bs=100M count=1", options=("--memory", "20m"))

    def watcher(name: str) -> RunWatcher:
        return RunWatcher(RunSpec(name, "here", placement=Placement("podman", name), poll_s=0.5), local())

    async def go():
        status, _ = await watch_until(watcher(names[0]), {"finished", "died"})
        assert status.state == "finished" and "podman container cockpit-p-ok: exited" in status.evidence and status.step == 10
        w = watcher(names[1])
        await watch_until(w, {"starting", "running"})
        subprocess.run(["podman", "kill", names[1]], capture_output=True, check=True)
        status, _ = await watch_until(w, {"died"})
        assert "exit 137" in status.evidence and "SIGKILL" in status.evidence
        await w.close()
        status, _ = await watch_until(watcher(names[2]), {"died"})
        assert "probably OOM" in status.evidence or "OOMKilled" in status.evidence, status.evidence

    try:
        asyncio.run(go())
    finally:
        engine.remove(*names)


@pytest.mark.xdist_group("slurm")  # one Slurm node of a CPU or two: its jobs one worker at a time
def test_a_job_slurm_dropped_is_read_from_sacct_and_its_log_found_where_its_workdir_says(tmp_path, slurm_cluster):
    """Issue 46 item 7: once slurmctld drops a finished job (MinJobAge, 300 s), scontrol says `Invalid job id` and
    sacct 22.05 has no StdOut; the log was lost (`step None`, no last line) though slurm-%j.out was still in the job's
    WorkDir.  The job is real (sbatch's default output, no -o); scontrol's answer after MinJobAge is a STAND-IN (its
    real words), since waiting out MinJobAge in CI is 5 minutes and lowering it would change the shared cluster."""
    from cockpit.hosts.transport import CommandResult

    cluster = slurm_cluster
    script = job_script(cluster, "dropped", f"print({E4_LINE.format(n=20, loss=2.5, acc=1)!r}, flush=True)\n")
    done = subprocess.run(["sbatch", "--parsable", "--chdir", str(cluster.workdir), "-J", "cockpit-dropped", "--wrap", script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip().split(";")[0]
    cluster.wait(job, {"COMPLETED"})
    # right after the end, slurmdbd's record is partial (JobName 'allocation', no WorkDir: seen on 22.05); by the time
    # slurmctld drops a job (MinJobAge, 300 s) it is whole: wait for that
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "JobName,WorkDir"], capture_output=True, text=True).stdout
        if row.strip().endswith(str(cluster.workdir)):
            break
        time.sleep(0.5)

    class AfterMinJobAge(LocalTransport):  # scontrol as it answers once slurmctld has dropped the job
        async def run(self, argv, **kw):
            if argv[0] == "scontrol":
                return CommandResult(tuple(argv), 1, "", "slurm_load_jobs error: Invalid job id specified\n", 0.0)
            return await super().run(argv, **kw)

    async def go():
        watcher = RunWatcher(RunSpec("dropped", "here", placement=Placement("slurm", job), poll_s=0.5),
                             AfterMinJobAge(HostConfig(name="here", local=True), CommandLog()))
        status, _ = await watch_until(watcher, {"finished", "died", "ended"})
        return status

    status = asyncio.run(go())
    assert status.state == "finished" and "COMPLETED" in status.evidence, status.evidence
    assert status.where["manager"]["log"] == f"{cluster.workdir}/slurm-{job}.out", status.where["manager"]
    assert status.step == 20 and status.read_error is None  # its log read from where its WorkDir says


@pytest.mark.parametrize("status", ["exited", "stopped"])
@pytest.mark.parametrize("code", [0, 1, 137])
def test_podmans_stopped_is_an_exit_said_as_one(status, code):
    """Podman says `stopped` for an exit whose cleanup has not run (a loaded machine sees it; `exited` a moment later):
    the same phase and words as `exited`, never 'stopped' beside the cockpit's own 'stopped by you'."""
    from cockpit.where.container import state_of

    info = {"Id": "a" * 64, "State": {"Status": status, "Running": False, "ExitCode": code, "OOMKilled": False,
                                      "StartedAt": "2026-12-07T10:00:00Z", "FinishedAt": "2026-12-07T10:01:00Z"}}
    said = state_of("podman", "cockpit-p", info, "here")
    same = state_of("podman", "cockpit-p", {**info, "State": {**info["State"], "Status": "exited"}}, "here")
    assert (said.phase, said.describe()) == (same.phase, same.describe()) and "stopped" not in said.describe()
