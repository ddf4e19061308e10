"""Issue 51 item 5: who holds each GPU, from the process's cgroup, named by its manager: a real Docker container and a
real Slurm job (the managers CI starts), every cgroup layout a host may have (cgroup v1 and v2, cgroupfs and systemd
drivers), and `cockpit procs` showing the owner beside the process the GPU lists."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time

import pytest

from harness.managers import docker

from cockpit.config import HostConfig
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.local import LocalTransport
from cockpit.hosts.owner import Owner, owner_of, owners_of
from cockpit.where.owners import name_owners

CID = "3f2a9c" + "0" * 58
UID = "5b7e1c2d-0a1b-4c3d-9e8f-0123456789ab"
LAYOUTS = {
    # how each manager's processes look in /proc/PID/cgroup, by cgroup version and driver
    "docker v1 cgroupfs": (f"12:memory:/docker/{CID}\n1:name=systemd:/docker/{CID}\n", Owner("docker", CID)),
    "docker v2 systemd": (f"0::/system.slice/docker-{CID}.scope\n", Owner("docker", CID)),
    "podman v2 systemd": (f"0::/machine.slice/libpod-{CID}.scope/container\n", Owner("podman", CID)),
    "podman conmon": (f"0::/machine.slice/libpod-conmon-{CID}.scope\n", Owner("podman", CID)),
    "slurm v1": ("4:memory:/slurm/uid_1000/job_4412/step_0/task_0\n", Owner("slurm", "4412")),
    "slurm v2": ("0::/system.slice/slurmstepd.scope/job_4412/step_batch/user/task_0\n", Owner("slurm", "4412")),
    "pod v1 cgroupfs": (f"9:memory:/kubepods/burstable/pod{UID}/{CID}\n", Owner("pod", UID)),
    "pod v2 systemd": (f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/"
                       f"cri-containerd-{CID}.scope\n", Owner("pod", UID)),
    "a login": ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    "root": ("0::/\n", None),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_cgroup_layout_names_its_owner(layout):
    text, owner = LAYOUTS[layout]
    assert owner_of(text.replace("\n", " ")) == owner
    if owner is not None:
        said = owner.describe()
        assert said.split()[0] in ("Slurm", "docker", "podman", "Kubernetes") and owner.short in said


def test_no_owner_is_made_up_from_a_lookalike():
    for a, b in itertools.permutations(["/job_x/", "docker-123", "libpod-zz", "kubepods/podnot-a-uid", "/job_/"], 2):
        assert owner_of(f"0::/{a}{b}") is None


@pytest.fixture
def container():
    """A real Docker container running `sleep`: (its name, its host pid), removed after the test."""
    engine = docker()
    box = f"cockpit-owner-box-{os.getpid()}-{time.monotonic_ns()}"
    engine.run(box, "sleep", "300")
    pid = int(subprocess.run(["docker", "inspect", "--format", "{{.State.Pid}}", box], capture_output=True, text=True,
                             timeout=30).stdout.strip())
    yield box, pid
    engine.remove(box)


def _on_gpu(standin_path, pid: int) -> None:
    """The stand-in nvidia-smi lists `pid` on GPU 1 (30000 MiB), as a GPU lists a container's process by its host pid."""
    (standin_path / "default.json").write_text(json.dumps({"gpus": 2, "processes": [
        {"pid": pid, "name": "python3", "used_memory": 30000, "gpu": 1}]}))


def _local() -> LocalTransport:
    return LocalTransport(HostConfig(name="here", local=True), CommandLog())


@pytest.mark.xdist_group("slurm")  # the single Slurm node: its jobs one worker at a time
def test_a_real_container_and_a_real_slurm_job_are_named_by_their_managers(slurm_cluster):
    engine = docker()
    box = f"cockpit-owner-{os.getpid()}"
    engine.run(box, "sleep", "300")
    manager = slurm_cluster
    job = manager.submit("sleep 300", "-J", "cockpit-owner")
    try:
        pid = int(subprocess.run(["docker", "inspect", "--format", "{{.State.Pid}}", box], capture_output=True, text=True,
                                 timeout=30).stdout.strip())
        manager.wait(job, {"RUNNING"})
        pids: list[int] = []
        deadline = time.monotonic() + 30
        while not pids and time.monotonic() < deadline:
            listed = subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True, timeout=30).stdout
            pids = [int(line.split()[0]) for line in listed.splitlines()[1:] if line.split() and line.split()[0].isdigit()]
            time.sleep(0.3)
        assert pids, f"Slurm listed no pid for job {job}"

        async def look():
            transport = _local()
            owners = await owners_of(transport, [pid, pids[-1], os.getpid()])
            return owners, await name_owners(transport, owners)

        owners, named = asyncio.run(look())
        assert owners[pid].kind == "docker" and owners[pids[-1]] == Owner("slurm", job) and os.getpid() not in owners
        assert named[pid].words == f"docker container {box} (image {engine.BUSYBOX})" and f"Slurm job {job} cockpit-owner (root)" == named[pids[-1]].words
        assert named[pid].stop_argv() == ["docker", "stop", owners[pid].short] and named[pids[-1]].stop_argv() == ["scancel", job]
    finally:
        engine.remove(box)
        subprocess.run(["scancel", job], capture_output=True, timeout=30)


def test_cockpit_procs_shows_the_container_holding_a_gpu(standin_path, tmp_path, container):
    """The GPU lists a container's process (its host pid): `cockpit procs` says whose it is."""
    box, pid = container
    _on_gpu(standin_path, pid)
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\ntelemetry = "smi"\n')
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "cockpit", "procs", "--json", "--config", str(config)], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    [row] = json.loads(done.stdout)["processes"]
    assert row["pid"] == pid and row["owner"] == f"docker container {box} (image {docker().BUSYBOX})"
    text = subprocess.run([sys.executable, "-m", "cockpit", "procs", "--config", str(config)], capture_output=True, text=True,
                          timeout=60, env=env).stdout
    assert "OWNER" in text and f"docker container {box}" in text


def test_the_gate_names_the_owner_holding_a_gpu_and_how_to_stop_it(standin_path, tmp_path, container):
    """verify's evidence: 'GPU 1 held by docker container NAME', with the owner's own stop command."""
    box, pid = container
    _on_gpu(standin_path, pid)
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\ntelemetry = "smi"\n[storage]\ndir = "{tmp_path}/state"\n[runbook]\nname = "g"\n'
                      '[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "here"\n')
    done = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), "plan", "run", "clean", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.stderr == "", done.stderr
    said = json.dumps(json.loads(done.stdout))
    assert done.returncode != 0 and f"GPU 1 held by docker container {box}" in said, said[:1000]
    ident = subprocess.run(["docker", "inspect", "--format", "{{.Id}}", box], capture_output=True, text=True, timeout=30).stdout
    assert f"docker stop {ident[:12]}" in said


async def test_the_process_table_shows_the_owner(standin_path, container):
    """p in the TUI: the OWNER column names the container holding the GPU (asked once per pid)."""
    from helpers import eventually

    from cockpit.config import parse_config
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.widgets.proc_pane import ProcessPane

    box, pid = container
    _on_gpu(standin_path, pid)
    app = CockpitApp(parse_config('[hosts.here]\nlocal = true\ntelemetry = "smi"\n[telemetry]\nprocesses_interval_s = 1\n'))
    async with app.run_test(size=(200, 40)) as pilot:
        await eventually(lambda: app.hub.latest.get("here") is not None and app.hub.latest["here"].processes, 15)
        app.panes["here"].focus()
        await pilot.press("p")
        pane = app.query_one(ProcessPane)
        await eventually(lambda: any(r.owner for r in pane.rows), 20, what="the owner named")
        text = str(pane.content)
        assert "OWNER" in text and f"docker container {box}"[:47] in text and "…" in text  # its image cut at the column, said so


def test_the_kill_plan_names_the_owner_and_its_managers_stop(tmp_path, container):
    """K / kill_stale on a container's process: the plan says whose it is and how its manager stops it."""
    box, pid = container
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\ndir = "{tmp_path}/state"\n')
    done = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), "procs", "--kill", str(pid)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and f"pid {pid} is in docker container {box}" in done.stderr, done.stderr
    assert "its manager stops it with `docker stop" in done.stderr
    assert subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}", box], capture_output=True, text=True,
                          timeout=30).stdout.strip() == "true"  # shown, not done: no --yes, no terminal
