"""The checklist engine through the real loopback sshd, with the stand-in nvidia-smi behind it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import parse_config
from cockpit.errors import ConfigError
from cockpit.runbook.engine import GateClosed, Runbook
from cockpit.runbook.model import StepState
from cockpit.context import parse_runbook
from cockpit.runbook.store import StateStore
from cockpit.telemetry.hub import TelemetryHub
from harness.builders import DIRTY_GPU5, GATED, cli, runbook_toml, yes  # noqa: F401

def test_verify_names_the_dirty_gpu(sshd, tmp_path):
    sshd.scenario(DIRTY_GPU5)
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")))
    proc = cli("verify", "gpu-server", "--config", str(config))
    assert proc.returncode == 1, proc.stderr
    assert "GPU 5: 30000 MiB used (limit 256 MiB)" in proc.stdout
    assert "GPU 5: compute process pid 4242 (python3, 30000 MiB)" in proc.stdout
    assert "GPU 0" not in proc.stdout
    proc = cli("verify", "gpu-server", "--json", "--config", str(config))
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["clean"] is False and len(report["evidence"]["gpus"]) == 8
    # only GPUs 0-3 are to be used: clean
    proc = cli("verify", "gpu-server", "--gpus", "0,1,2,3", "--config", str(config))
    assert proc.returncode == 0, proc.stdout
    sshd.scenario({"gpus": 8})
    proc = cli("verify", "gpu-server", "--config", str(config))
    assert proc.returncode == 0 and "8 GPUs" in proc.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text(sshd.config_toml('[hosts.gpu-server]\naddress = "127.0.0.1"\nport = 1\n'))
    assert cli("verify", "gpu-server", "--config", str(bad)).returncode == 2


def test_launch_blocked_until_the_gpus_are_clean(sshd, tmp_path):
    sshd.scenario(DIRTY_GPU5)
    log = tmp_path / "server.log"
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, GATED.format(log=log)))
    proc = cli("plan", "run", "launch", "--yes", "--config", str(config))
    assert proc.returncode == 1 and "blocked" in proc.stderr and "'clean' has not run" in proc.stderr
    proc = cli("plan", "run", "--yes", "--json", "--config", str(config))
    ran = json.loads(proc.stdout)["ran"]
    assert proc.returncode == 1 and [r["step"] for r in ran] == ["clean"] and ran[0]["state"] == "failed"
    assert "GPU 5: 30000 MiB used" in ran[0]["message"]
    show = json.loads(cli("plan", "show", "--json", "--config", str(config)).stdout)["steps"]
    assert show[1]["state"] == "blocked" and show[1]["locked"] is True
    assert not log.exists()
    # clean the GPU: the gate opens and the server starts
    sshd.scenario({"gpus": 8})
    proc = cli("plan", "run", "--yes", "--json", "--config", str(config))
    ran = json.loads(proc.stdout)["ran"]
    assert proc.returncode == 0, proc.stderr
    assert [(r["step"], r["state"]) for r in ran] == [("clean", "passed"), ("launch", "passed")]
    pid = ran[1]["evidence"]["pid"]
    try:
        assert Path(f"/proc/{pid}").exists() and "sleep" in Path(f"/proc/{pid}/cmdline").read_text()
        evidence = ran[0]["evidence"]
        assert evidence["host"] == "gpu-server" and len(evidence["gpus"]) == 8 and evidence["processes"] == []
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_pass_invalidated_by_later_telemetry_then_launch_refuses(sshd, tmp_path):
    sshd.scenario({"gpus": 8})
    config = parse_config(runbook_toml(sshd, GATED.format(log=tmp_path / "log")))
    hub = TelemetryHub(config)
    runbook = Runbook(parse_runbook(config), hub, StateStore("t", tmp_path / "state"))
    try:
        assert (await runbook.run_step("clean", yes)).state is StepState.PASSED
        sshd.scenario(DIRTY_GPU5)
        snapshot = await hub.monitor_for(config.host("gpu-server")).sample_once()
        assert runbook.observe(snapshot) == ["clean"]
        assert runbook.result("clean").state is StepState.STALE
        assert "GPU 5" in runbook.result("clean").message
        with pytest.raises(GateClosed) as info:
            await runbook.run_step("launch", yes)
        assert "'clean' is stale" in str(info.value)
        # Forcing skips the gate on purpose: the launch still re-verifies, and what it skipped is recorded.
        result = await runbook.run_step("launch", yes, force_reason="GPU 5 belongs to a colleague's notebook")
        try:
            assert result.state is StepState.PASSED and result.forced_reason.startswith("GPU 5 belongs")
        finally:
            os.kill(result.evidence["pid"], signal.SIGKILL)
        records = runbook.store.audit_records()
        assert any(r["event"] == "invalidated" and r["step"] == "clean" for r in records)
        overrides = [r for r in records if r["event"] == "override"]
        assert any("GPU 5: 30000 MiB used" in reason for r in overrides for reason in r["skipped"])
    finally:
        await hub.stop()


async def test_launch_refuses_when_only_another_host_was_verified(sshd, tmp_path):
    sshd.scenario({"gpus": 2})
    steps = """
[[runbook.steps]]
name = "trainer-clean"
kind = "gpu_clean"
host = "trainer"

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "gpu-server"
argv = ["sleep", "5"]
"""
    config = parse_config(runbook_toml(sshd, steps, extra_hosts=sshd.host_toml("trainer")))
    hub = TelemetryHub(config)
    runbook = Runbook(parse_runbook(config), hub, StateStore("t2", tmp_path / "state"))
    try:
        view = runbook.views()[1]
        assert "verified trainer, launching on gpu-server" in view.warnings
        assert (await runbook.run_step("trainer-clean", yes)).state is StepState.PASSED
        with pytest.raises(GateClosed, match="no gpu_clean step verifies gpu-server"):
            await runbook.run_step("launch", yes)
    finally:
        await hub.stop()


def test_force_needs_a_reason_and_is_recorded(sshd, tmp_path):
    sshd.scenario(DIRTY_GPU5)
    steps = """
[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "hello"
kind = "command"
host = "gpu-server"
argv = ["echo", "hello"]
expect_output = "^hello$"
"""
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, steps))
    assert cli("plan", "run", "hello", "--force", "hello", "--config", str(config)).returncode == 2
    proc = cli("plan", "run", "hello", "--force", "hello", "--reason", "GPU 5 is someone else's, not used", "--json", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["ran"][0]
    assert result["state"] == "passed" and result["forced_reason"] == "GPU 5 is someone else's, not used"
    audit_files = list((Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "runbooks").glob("*.audit.jsonl"))
    records = [json.loads(line) for line in audit_files[0].read_text().splitlines()]
    override = [r for r in records if r["event"] == "override"]
    assert override and override[0]["reason"] == "GPU 5 is someone else's, not used"
    assert "'clean' has not run" in override[0]["skipped"][0]


@pytest.fixture
def stale_processes(tmp_path):
    """Real processes to kill: two under a matching name (one ignores SIGTERM), one that must live."""
    marker = f"stale-trainer-{os.getpid()}"
    fake = tmp_path / marker
    shutil.copy("/bin/sleep", fake)
    ignorer = [sys.executable, "-c", "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)", marker]
    procs = [subprocess.Popen([str(fake), "120"]), subprocess.Popen(ignorer), subprocess.Popen(["sleep", "121"])]
    time.sleep(0.3)
    yield marker, procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_kill_stale_kills_matching_processes_only(sshd, tmp_path, stale_processes):
    marker, procs = stale_processes
    sshd.scenario({"gpus": 1})
    steps = f"""
[[runbook.steps]]
name = "kill"
kind = "kill_stale"
host = "gpu-server"
pattern = "{marker}"
grace_s = 1
"""
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, steps))
    # without --yes and without a terminal nothing is killed
    proc = cli("plan", "run", "kill", "--config", str(config))
    assert proc.returncode == 1 and "pass --yes" in proc.stderr
    assert str(procs[0].pid) in proc.stderr and str(procs[1].pid) in proc.stderr  # the plan was shown
    assert all(p.poll() is None for p in procs)
    proc = cli("plan", "run", "kill", "--yes", "--json", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["ran"][0]
    for victim in procs[:2]:
        victim.wait(timeout=10)
    assert procs[2].poll() is None  # the non-matching sleep lives on
    signals = [s["signal"] for s in result["evidence"]["signals"]]
    assert signals == ["TERM", "KILL"]  # the SIGTERM-ignoring one needed SIGKILL
    assert sorted(f["pid"] for f in result["evidence"]["found"]) == sorted(p.pid for p in procs[:2])


def test_kill_stale_pattern_cannot_inject(sshd, tmp_path):
    sshd.scenario({"gpus": 1})
    pwned = tmp_path / "pwned"
    pattern = f"x'; touch {pwned}; echo \\\"$(touch {pwned})\\\" `touch {pwned}`"
    steps = f'\n[[runbook.steps]]\nname = "kill"\nkind = "kill_stale"\nhost = "gpu-server"\npattern = "{pattern}"\n'
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, steps))
    proc = cli("plan", "run", "kill", "--yes", "--json", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ran"][0]["message"].startswith("no matching process")
    assert not pwned.exists()


def test_sigkill_mid_step_resumes_with_state_intact(sshd, tmp_path):
    sshd.scenario({"gpus": 1})
    steps = """
[[runbook.steps]]
name = "first"
kind = "command"
host = "gpu-server"
argv = ["true"]

[[runbook.steps]]
name = "slow"
kind = "command"
host = "gpu-server"
argv = ["sleep", "30"]
"""
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, steps))
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "plan", "run", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    state_files = Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "runbooks"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        files = list(state_files.glob("t-*.json"))
        if files and json.loads(files[0].read_text())["steps"].get("slow", {}).get("state") == "running":
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the slow step never showed as running")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    data = json.loads(files[0].read_text())  # parses: never torn
    assert data["steps"]["first"]["state"] == "passed" and data["steps"]["slow"]["state"] == "running"
    assert all(json.loads(line) for line in (state_files / files[0].name.replace(".json", ".audit.jsonl")).read_text().splitlines())
    shown = json.loads(cli("plan", "show", "--json", "--config", str(config)).stdout)["steps"]
    assert shown[0]["state"] == "passed"
    assert shown[1]["state"] == "failed" and "interrupted" in shown[1]["result"]["message"]
    # and it resumes: the next run starts at the interrupted step, not the first
    steps_fast = steps.replace('["sleep", "30"]', '["true"]')
    config.write_text(runbook_toml(sshd, steps_fast))
    ran = json.loads(cli("plan", "run", "--json", "--config", str(config)).stdout)["ran"]
    assert [(r["step"], r["state"]) for r in ran] == [("slow", "passed")]


@pytest.mark.parametrize("steps, line, key, fragment", [
    ('[[runbook.steps]]\nname = "a"\nkind = "gpu_clen"\nhost = "gpu-server"\n', 3, "kind", "did you mean 'gpu_clean'"),
    ('[[runbook.steps]]\nname = "a"\nkind = "gpu_clean"\nhost = "gpu-srv"\n', 4, "host", "did you mean 'gpu-server'"),
    ('[[runbook.steps]]\nname = "a"\nkind = "gpu_clean"\nhost = "gpu-server"\nmax_used = 3\n', 5, "max_used", "did you mean 'max_used_mib'"),
    ('[[runbook.steps]]\nname = "a"\nkind = "command"\nhost = "gpu-server"\n', 1, None, "needs 'argv'"),
    ('[[runbook.steps]]\nname = "a"\nkind = "gpu_clean"\nhost = "gpu-server"\n[[runbook.steps]]\nname = "a"\nkind = "gpu_clean"\nhost = "gpu-server"\n', 6, "name", "two steps"),
    ('[[runbook.steps]]\nname = "a"\nkind = "kill_stale"\nhost = "gpu-server"\n', 1, None, "pattern"),
    ('[[runbook.steps]]\nname = "a"\nkind = "gpu_clean"\nhost = "gpu-server"\nmax_used_mib = "lots"\n', 5, "max_used_mib", "must be int"),
])
def test_runbook_config_errors_name_line_and_key(steps, line, key, fragment):
    header = '[hosts.gpu-server]\naddress = "x"\n\n[runbook]\nname = "t"\n\n'
    with pytest.raises(ConfigError) as info:
        parse_runbook(parse_config(header + steps, "deploy.toml"))
    assert info.value.line == line + header.count("\n")
    assert info.value.key == key
    assert fragment in str(info.value)


async def test_refresh_follows_another_process_and_dead_runners(tmp_path):
    """Two cockpits on one runbook: each sees what the other recorded, and a step whose runner died
    (or whose pid now belongs to another process) turns interrupted, without a restart."""
    from cockpit.runbook.store import process_start

    config = parse_config('[hosts.here]\nlocal = true\n\n[runbook]\nname = "two"\n\n[[runbook.steps]]\nname = "a"\n'
                          'kind = "command"\nhost = "here"\nargv = ["true"]\n\n[[runbook.steps]]\nname = "b"\n'
                          'kind = "command"\nhost = "here"\nargv = ["true"]\n')
    spec = parse_runbook(config)
    store = StateStore("two", tmp_path / "state")
    ui = Runbook(spec, TelemetryHub(config), StateStore("two", tmp_path / "state"))
    cli_side = Runbook(spec, TelemetryHub(config), store)
    told = []
    ui.subscribe(lambda: told.append(1))
    assert not ui.refresh()
    assert (await cli_side.run_step("a", yes)).state is StepState.PASSED
    assert ui.refresh() and ui.results["a"].state is StepState.PASSED and told
    # b "runs" in a process that is alive but is not the runner (its start time differs): interrupted
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        from dataclasses import replace

        from cockpit.runbook.model import StepResult
        cli_side.results["b"] = StepResult(StepState.RUNNING, started_at=time.time(), runner_pid=sleeper.pid,
                                           runner_started=process_start(sleeper.pid))
        cli_side._save()
        assert ui.refresh() and ui.results["b"].state is StepState.RUNNING  # its runner lives
        cli_side.results["b"] = replace(cli_side.results["b"], runner_started=process_start(sleeper.pid) - 1)
        cli_side._save()
        assert ui.refresh() and ui.results["b"].state is StepState.FAILED and "interrupted" in ui.results["b"].message
        # a killed runner that nobody reaped yet (a zombie) is dead too
        cli_side.results["b"] = replace(cli_side.results["b"], state=StepState.RUNNING, runner_started=process_start(sleeper.pid))
        cli_side._save()
        assert ui.refresh() and ui.results["b"].state is StepState.RUNNING
        sleeper.kill()
        time.sleep(0.2)  # not waited for: a zombie
        assert ui.refresh() and ui.results["b"].state is StepState.FAILED
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_two_cockpits_never_overwrite_each_others_steps(tmp_path):
    """A TUI with an old view saves its own change: the step another process recorded meanwhile stays."""
    config = parse_config('[hosts.here]\nlocal = true\n\n[runbook]\nname = "two"\n\n'
                          + "".join(f'[[runbook.steps]]\nname = "{n}"\nkind = "command"\nhost = "here"\nargv = ["true"]\n\n'
                                    for n in ("a", "b", "c")))
    spec = parse_runbook(config)
    first = Runbook(spec, TelemetryHub(config), StateStore("two", tmp_path / "state"))
    second = Runbook(spec, TelemetryHub(config), StateStore("two", tmp_path / "state"))
    assert (await first.run_step("a", yes)).state is StepState.PASSED
    # second has not refreshed: it still thinks nothing ran, and forces c
    assert (await second.run_step("c", yes, force_reason="test")).state is StepState.PASSED
    on_disk = StateStore("two", tmp_path / "state").load()
    assert on_disk["a"].state is StepState.PASSED and on_disk["c"].state is StepState.PASSED
    assert second.results["a"].state is StepState.PASSED  # and second now shows it
    # a reset in one process removes only what it reset
    first.reset("c")
    on_disk = StateStore("two", tmp_path / "state").load()
    assert set(on_disk) == {"a"}
