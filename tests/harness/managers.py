"""Real workload managers for the tests: a single-node Slurm 22.05 (slurmctld, slurmd, slurmdbd with MariaDB,
munge; Debian's packages) and a Docker daemon (Debian's docker.io), started on this machine the way
../shared/docs/where-work-runs/ found works on this machine kind (no systemd: daemons started by hand; cgroup
v1, so Slurm's cgroup OOM kills and Docker's OOMKilled are real).  Kubernetes cannot run here: its tests use a
STAND-IN kubectl (tests/standin/kubectl) replaying pod JSON of the API reference's fields.

`slurm()` and `docker()` reuse managers that already answer; otherwise, where the machine allows (root), they
start them once per test session, installing the packages through tools.need (else the test is skipped with
one line; in CI, failed).  An unprivileged user for the "another user's trainer" tests: `unprivileged()`."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness.tools import machine_lock, need

MARK = "# written by the cockpit's tests (tests/harness/managers.py)"
_STARTED: dict[str, object] = {}


def _run(*argv: str, timeout: float = 60, check: bool = False, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=check, **kw)


def _fail_or_skip(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run every test)")
    pytest.skip(message)


# --- Slurm -------------------------------------------------------------------------------------------


class Slurm:
    def __init__(self) -> None:
        self.node = socket.gethostname().split(".")[0]
        self.workdir = Path(tempfile.mkdtemp(prefix="cockpit-slurm-"))
        os.chmod(self.workdir, 0o1777)  # jobs of other users write here too
        # the node has a CPU or two: jobs an earlier, interrupted test run left would keep new ones pending
        for line in _run("squeue", "-h", "-o", "%i %j").stdout.splitlines():
            job, _, name = line.partition(" ")
            if name.startswith("cockpit-"):
                _run("scancel", job)
        # jobs that ask (`--oversubscribe`) share the node's CPUs, eight to one: the endings matrix runs its jobs at once
        # (set here too for a cluster an older harness started)
        if os.geteuid() == 0:
            _run("scontrol", "update", "PartitionName=debug", "OverSubscribe=YES:8")

    def submit(self, wrap: str, *options: str, user: str | None = None) -> str:
        argv = ["sbatch", "--parsable", "--chdir", str(self.workdir), "-o", str(self.workdir / "%x-%j.out"), *options, "--wrap", wrap]
        if user:
            argv = ["runuser", "-u", user, "--", *argv]
        done = _run(*argv, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip().split(";")[0]

    def state(self, job: str) -> str:
        line = _run("scontrol", "-o", "show", "job", job).stdout
        for part in line.split():
            if part.startswith("JobState="):
                return part.split("=", 1)[1]
        return ""

    def wait(self, job: str, states: set[str], timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(job)
            if state in states:
                return state
            time.sleep(0.3)
        raise AssertionError(f"job {job} never reached {states} (last: {self.state(job)!r})")

    def node_down(self) -> None:
        _run("scontrol", "update", f"nodename={self.node}", "state=down", "reason=cockpit-test")

    def node_up(self) -> None:
        _run("scontrol", "update", f"nodename={self.node}", "state=resume")


def _slurm_answers() -> bool:
    return shutil.which("sinfo") is not None and _run("sinfo", "-h", "-o", "%T", timeout=20).returncode == 0 and \
        any(s.strip() in ("idle", "mixed", "allocated") for s in _run("sinfo", "-h", "-o", "%T", timeout=20).stdout.splitlines())


def _start_slurm() -> None:
    node = socket.gethostname().split(".")[0]
    conf = Path("/etc/slurm/slurm.conf")
    if conf.exists() and MARK not in conf.read_text(errors="replace") and "ClusterName=cockpit" not in conf.read_text(errors="replace"):
        _fail_or_skip(f"{conf} is another cluster's configuration: the tests do not overwrite it")
    Path("/run/munge").mkdir(parents=True, exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    if _run("pgrep", "-x", "munged").returncode != 0:
        _run("runuser", "-u", "munge", "--", "/usr/sbin/munged", check=True)
    _run("/etc/init.d/mariadb", "start", timeout=120)
    _run("mysql", "-e", "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' "
         "IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';", check=True)
    Path("/etc/slurm").mkdir(parents=True, exist_ok=True)
    dbd = Path("/etc/slurm/slurmdbd.conf")
    dbd.write_text(f"{MARK}\nAuthType=auth/munge\nDbdHost=localhost\nSlurmUser=root\nLogFile=/var/log/slurm/slurmdbd.log\n"
                   "PidFile=/run/slurmdbd.pid\nStorageType=accounting_storage/mysql\nStorageHost=localhost\nStorageUser=slurm\n"
                   "StoragePass=slurmpw\nStorageLoc=slurm_acct_db\n")
    os.chmod(dbd, 0o600)
    Path("/etc/slurm/cgroup.conf").write_text(f"{MARK}\nCgroupPlugin=autodetect\nConstrainCores=no\nConstrainRAMSpace=yes\n"
                                              "ConstrainSwapSpace=no\n")
    conf.write_text(f"""{MARK}
ClusterName=cockpit
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=200
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
MinJobAge=300
KillWait=5
ReturnToService=2
SchedulerType=sched/backfill
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES:8
""")
    for folder in ("/var/lib/slurm/slurmctld", "/var/lib/slurm/slurmd", "/var/log/slurm"):
        Path(folder).mkdir(parents=True, exist_ok=True)
    if _run("pgrep", "-x", "slurmdbd").returncode != 0:
        _run("slurmdbd", check=True)
    deadline = time.monotonic() + 60
    while _run("sacctmgr", "-n", "show", "cluster").returncode != 0:
        if time.monotonic() > deadline:
            _fail_or_skip("slurmdbd did not answer in 60 s: " + Path("/var/log/slurm/slurmdbd.log").read_text(errors="replace")[-500:])
        time.sleep(1)
    for daemon in ("slurmctld", "slurmd"):
        if _run("pgrep", "-x", daemon).returncode != 0:
            _run(daemon, check=True)
    deadline = time.monotonic() + 60
    while not _slurm_answers():
        if time.monotonic() > deadline:
            _fail_or_skip("Slurm's node never became idle: " + _run("sinfo").stdout[-500:])
        time.sleep(1)


def slurm() -> Slurm:
    with machine_lock("slurm"):
        if "slurm" not in _STARTED:
            if not _slurm_answers():
                need("slurm")
                if os.geteuid() != 0:
                    _fail_or_skip("a Slurm for the tests is started as root (slurmctld, slurmd, slurmdbd, munge)")
                _start_slurm()
            _STARTED["slurm"] = Slurm()
    return _STARTED["slurm"]  # type: ignore[return-value]


# --- Docker ------------------------------------------------------------------------------------------


class Docker:
    BUSYBOX = "local/busybox:test"  # an image made here from busybox-static: no registry is reached
    HOSTUSR = "local/hostusr:test"  # an empty root run with -v /usr:/usr:ro: this machine's python3 inside

    def run(self, name: str, *argv: str, options: tuple[str, ...] = (), image: str | None = None) -> str:
        _run("docker", "rm", "-f", name)
        done = _run("docker", "run", "-d", "--name", name, *options, image or self.BUSYBOX, *argv, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def wait(self, name: str, timeout: float = 60) -> dict:
        import json

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = json.loads(_run("docker", "inspect", "--format", "{{json .State}}", name).stdout or "{}")
            if state.get("Status") in ("exited", "dead"):
                return state
            time.sleep(0.2)
        raise AssertionError(f"container {name} did not exit")

    def remove(self, *names: str) -> None:
        for name in names:
            _run("docker", "rm", "-f", name)


def _docker_answers() -> bool:
    return shutil.which("docker") is not None and _run("docker", "info", timeout=20).returncode == 0


def docker() -> Docker:
    with machine_lock("docker"):
        if "docker" not in _STARTED:
            if not _docker_answers():
                need("docker")
                if os.geteuid() != 0:
                    _fail_or_skip("a Docker daemon for the tests is started as root")
                log = open(tempfile.mktemp(prefix="cockpit-dockerd-", suffix=".log"), "w")
                subprocess.Popen(["dockerd"], stdout=log, stderr=log, start_new_session=True)
                deadline = time.monotonic() + 60
                while not _docker_answers():
                    if time.monotonic() > deadline:
                        _fail_or_skip("dockerd did not answer in 60 s")
                    time.sleep(1)
            images = _run("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
            if Docker.BUSYBOX not in images:
                root = Path(tempfile.mkdtemp())
                (root / "bin").mkdir()
                (root / "tmp").mkdir()
                shutil.copy("/bin/busybox", root / "bin" / "busybox")
                for applet in ("sh", "echo", "sleep", "cat", "dd", "date", "true", "false", "seq"):
                    os.symlink("busybox", root / "bin" / applet)
                tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
                _run("docker", "import", "-", Docker.BUSYBOX, stdin=tar.stdout, check=True)
                tar.wait()
            if Docker.HOSTUSR not in images:
                root = Path(tempfile.mkdtemp())
                for sub in ("usr", "tmp", "etc"):
                    (root / sub).mkdir()
                for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/sbin")):
                    os.symlink(target, root / link)
                tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
                _run("docker", "import", "-", Docker.HOSTUSR, stdin=tar.stdout, check=True)
                tar.wait()
            _STARTED["docker"] = Docker()
    return _STARTED["docker"]  # type: ignore[return-value]


# --- Podman ------------------------------------------------------------------------------------------

PODMAN_CONF = """{mark}
# Podman 4.3 on this machine kind: no CAP_SYS_RESOURCE, so its default ulimits are refused; crun 1.8 refuses the
# hybrid cgroup v1/v2 layout, runc does not (../shared/docs/where-work-runs/README.md)
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


class Podman(Docker):
    BUSYBOX = "localhost/busybox:test"

    def run(self, name: str, *argv: str, options: tuple[str, ...] = (), image: str | None = None) -> str:
        _run("podman", "rm", "-f", name)
        # from a scratch folder: Podman 4.3's conmon leaves its OOM marker file in the folder podman was run from
        done = _run("podman", "run", "-d", "--name", name, *options, image or self.BUSYBOX, *argv, timeout=60, cwd=tempfile.mkdtemp())
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def wait(self, name: str, timeout: float = 60) -> dict:
        import json

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = json.loads(_run("podman", "inspect", "--format", "{{json .State}}", name).stdout or "{}")
            if state.get("Status") in ("exited", "stopped", "dead"):
                return state
            time.sleep(0.2)
        raise AssertionError(f"container {name} did not exit")

    def remove(self, *names: str) -> None:
        for name in names:
            _run("podman", "rm", "-f", name)


def podman() -> Podman:
    with machine_lock("podman"):
        if "podman" not in _STARTED:
            need("podman")
            if os.geteuid() != 0:
                _fail_or_skip("the Podman tests run rootful Podman (as root)")
            conf = Path("/etc/containers/containers.conf")
            if not conf.exists() or MARK in conf.read_text(errors="replace"):
                conf.parent.mkdir(parents=True, exist_ok=True)
                conf.write_text(PODMAN_CONF.format(mark=MARK))
            if Podman.BUSYBOX not in _run("podman", "images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split():
                root = Path(tempfile.mkdtemp())
                (root / "bin").mkdir()
                (root / "tmp").mkdir()
                shutil.copy("/bin/busybox", root / "bin" / "busybox")
                for applet in ("sh", "echo", "sleep", "cat", "dd", "true", "false"):
                    os.symlink("busybox", root / "bin" / applet)
                tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
                _run("podman", "import", "-q", "-", Podman.BUSYBOX, stdin=tar.stdout, check=True)
                tar.wait()
            if _run("podman", "run", "--rm", Podman.BUSYBOX, "true", timeout=60, cwd=tempfile.mkdtemp()).returncode != 0:
                _fail_or_skip("podman cannot run a container here: " + _run("podman", "run", "--rm", Podman.BUSYBOX, "true").stderr[-300:])
            _STARTED["podman"] = Podman()
    return _STARTED["podman"]  # type: ignore[return-value]


# --- another user ------------------------------------------------------------------------------------


def unprivileged(name: str = "cockpit-watcher") -> str:
    """An ordinary account on this machine (made with useradd where it is missing): the cockpit run as a jump
    box's user, or a trainer of a colleague's."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        if os.geteuid() != 0 or shutil.which("useradd") is None:
            _fail_or_skip(f"no user {name}, and this test cannot add one (not root)")
        with machine_lock("useradd"):
            with contextlib.suppress(KeyError):
                pwd.getpwnam(name)
                return unprivileged(name)  # another worker made it meanwhile
            _run("useradd", "-m", "-s", "/bin/sh", name, check=True)
    if os.geteuid() == 0:
        # not locked (useradd leaves '!'): sshd without PAM refuses a locked account even a key; no password either
        _run("usermod", "-p", "*", name)
    return name


def runs_as(user: str, argv: list[str]) -> list[str]:
    """argv as `user` (runuser, from root)."""
    return ["runuser", "-u", user, "--", *argv]


def python_for(user: str) -> tuple[list[str], dict[str, str]] | None:
    """How `user` runs this checkout's cockpit: (argv prefix, environment), or None when it cannot.  This test run's
    interpreter when the user may run it; else the system's Python of the same version with this run's
    packages on its path (pyenv's interpreters live under /root, which other users cannot enter)."""
    import site
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = f"/home/{user}" if os.path.isdir(f"/home/{user}") else "/tmp"
    probe = ["-c", "import cockpit, textual, asyncssh"]
    if _run(*runs_as(user, [sys.executable, *probe]), timeout=60, cwd="/", env=env).returncode == 0:
        return [sys.executable], env
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if os.path.exists(system):
        root = str(Path(__file__).resolve().parents[2])
        env = {**env, "PYTHONPATH": os.pathsep.join([root, *site.getsitepackages()])}
        if _run(*runs_as(user, [system, *probe]), timeout=60, cwd="/", env=env).returncode == 0:
            return [system], env
    return None


def ordinary_cockpit(name: str = "cockpit-watcher") -> tuple[str, tuple[list[str], dict[str, str]]]:
    """An ordinary user who can run this checkout's cockpit, and how (python_for): the test is skipped where that cannot
    be had (not root), and fails in CI, where .ci/run makes its venv readable."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("needs root: the trainer is root's, the cockpit an ordinary user's")
    user = unprivileged(name)
    python = python_for(user)
    if python is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{user} cannot run the cockpit of this test run (.ci/run makes its venv readable)")
        pytest.skip(f"{user} cannot run the cockpit of this test run (its folders are not readable by other users)")
    return user, python


# --- a memory cgroup (the kernel's OOM killer) ----------------------------------------------------------


class MemoryCgroup:
    """A memory cgroup with a hard limit, made by hand (cgroup v1's memory hierarchy, else v2's): a process put in it
    that outgrows the limit is killed by the kernel's OOM killer, which counts the kill in the group and says it in the
    kernel log, as it does a trainer on a host or under a cgroup-limited login."""

    def __init__(self, name: str, limit_bytes: int) -> None:
        v1 = Path("/sys/fs/cgroup/memory")
        if (v1 / "memory.limit_in_bytes").exists():
            self.path = v1 / name
            self.path.mkdir(exist_ok=True)
            (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if (self.path / "memory.memsw.limit_in_bytes").exists():
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        else:
            root = Path("/sys/fs/cgroup")
            if "memory" not in (root / "cgroup.subtree_control").read_text().split():
                (root / "cgroup.subtree_control").write_text("+memory")
            self.path = root / name
            self.path.mkdir(exist_ok=True)
            (self.path / "memory.max").write_text(str(limit_bytes))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")

    def join(self) -> None:
        """Put the calling process in the group (a Popen's preexec_fn: the child, before it runs its program)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)  # its last process is still being reaped


def memory_cgroup(name: str, limit_bytes: int = 192 << 20) -> MemoryCgroup:
    if os.geteuid() != 0:
        _fail_or_skip("a memory cgroup for the OOM cases is made as root")
    try:
        return MemoryCgroup(name, limit_bytes)
    except OSError as exc:
        _fail_or_skip(f"no memory cgroup can be made here: {exc}")
        raise


# --- started ahead -----------------------------------------------------------------------------------


def warm() -> None:
    """Start this machine's Slurm and Docker for the tests, ahead of the first test that asks (a whole run starts this
    in the background at its start: on a bare CI machine a cold Slurm, MariaDB included, takes tens of seconds, which
    fell inside the first Slurm test's own time limit).  A test that asks meanwhile waits on the machine lock, then
    finds them answering; what cannot start here is said by that test, as ever."""
    def start_slurm() -> None:  # its daemons only: Slurm() clears the jobs of earlier runs, once, in the test's process
        with machine_lock("slurm"):
            if not _slurm_answers():
                need("slurm")
                if os.geteuid() == 0:
                    _start_slurm()

    for start in (start_slurm, docker):
        try:
            start()
        except BaseException as error:  # noqa: BLE001 - pytest's skip and fail outcomes too: the test that asks says it
            print(f"{start.__name__}: {type(error).__name__}: {error}", flush=True)


if __name__ == "__main__":
    warm()
