"""The system tools some tests need (a real OpenSSH sshd, tmux, Prometheus), on a bare machine too.

`need(tool)`: present, the test goes on.  Missing: where the machine allows it (root, apt-get, and
COCKPIT_NO_INSTALL unset) it is installed once for the session, from Debian's packages, with one
line saying so; where it does not (a jump box without root), the test is skipped with one line
naming the tool and the command that installs it, and the closing summary counts those skips.  In
CI (CI=true) a missing tool is a failure, never a silent skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

import pytest

MISSING: Counter = Counter()  # tool -> tests skipped for want of it
_TRIED: dict[str, bool] = {}
_UPDATED = False


def _sshd() -> bool:
    from harness.sshd import sshd_available

    return sshd_available() and shutil.which("ssh-keygen") is not None


def _prometheus() -> bool:
    from harness.prometheus import prometheus_available

    return prometheus_available()


SLURM_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "slurmdbd", "munge", "mariadb-server"]
DOCKER_PACKAGES = ["docker.io", "busybox-static"]

TOOLS = {
    # tool: (Debian packages, apt-get options, is it here?)
    "sshd": (["openssh-server", "openssh-client"], [], _sshd),
    "tmux": (["tmux"], [], lambda: shutil.which("tmux") is not None),
    "prometheus": (["prometheus"], ["--no-install-recommends"], _prometheus),
    # a real Slurm (slurmctld, slurmd, slurmdbd with MariaDB, munge) and a real Docker daemon: started by the tests
    # that need them (tests/harness/managers.py), as sshd is
    "slurm": (SLURM_PACKAGES, ["--no-install-recommends"],
              lambda: all(shutil.which(c) or os.path.exists(f"/usr/sbin/{c}") for c in ("slurmctld", "slurmd", "sbatch", "sacct",
                                                                                         "slurmdbd", "munged", "mysqld"))),
    "podman": (["podman", "runc", "busybox-static"], ["--no-install-recommends"],
               lambda: shutil.which("podman") is not None and shutil.which("runc") is not None and os.path.exists("/bin/busybox")),
    "docker": (DOCKER_PACKAGES, ["--no-install-recommends"],
               lambda: (shutil.which("dockerd") is not None or os.path.exists("/usr/sbin/dockerd")) and os.path.exists("/bin/busybox")),
}


def install_command(tool: str) -> str:
    packages, options, _ = TOOLS[tool]
    return "apt-get install " + " ".join([*options, *packages])


@contextlib.contextmanager
def machine_lock(name: str):
    """One test process at a time starts or sets up a machine-wide thing (a daemon, an image, an account): the
    parallel workers of one run (pytest-xdist) share what the first one started."""
    with open(os.path.join(tempfile.gettempdir(), f"cockpit-tests-{name}.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _can_install() -> bool:
    return (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None
            and os.environ.get("COCKPIT_NO_INSTALL") != "1")


def _install(tool: str) -> bool:
    global _UPDATED
    packages, options, present = TOOLS[tool]
    sys.stderr.write(f"\n[tests] {tool} is missing: installing it ({install_command(tool)})\n")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        if not _UPDATED:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            _UPDATED = True
        subprocess.run(["apt-get", "install", "-y", "-qq", *options, *packages], env=env, capture_output=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return present()


def need(tool: str) -> None:
    """Go on with `tool` here, or skip (fail in CI) saying how to get it."""
    _, _, present = TOOLS[tool]
    if present():
        return
    if tool not in _TRIED and _can_install():
        with machine_lock("apt"):  # one apt-get at a time (dpkg's own lock refuses a second)
            _TRIED[tool] = present() or _install(tool)
        if _TRIED[tool]:
            return
    message = f"{tool} is not installed: {install_command(tool)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (CI must run every test: .ci/run installs it)")
    MISSING[tool] += 1
    pytest.skip(message)


def summary_lines() -> list[str]:
    return [f"{count} test(s) skipped: {tool} is not installed ({install_command(tool)})" for tool, count in sorted(MISSING.items())]
