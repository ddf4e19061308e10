"""SGLang launch, log tail and readiness end to end through the loopback sshd, against the
stand-in server (tests/standin/sglang/) that replays SGLang's real usage crash and start-up lines."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from cockpit.config import parse_config
from cockpit.runbook.engine import Runbook
from cockpit.runbook.model import StepState
from cockpit.context import parse_runbook
from cockpit.runbook.store import StateStore
from cockpit.serving.lint import apply_fix
from cockpit.diagnosis import Diagnosis
from cockpit.serving.server import LogFollower, probe_health
from cockpit.telemetry.hub import TelemetryHub
from harness.builders import steps_toml
from harness.sshd import free_port


async def yes(_: str) -> bool:
    return True




@pytest.fixture
def make_runbook(sshd, tmp_path):
    made = []

    def make(steps: str):
        sshd.scenario({"gpus": 8})
        config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server")) + steps)
        hub = TelemetryHub(config)
        runbook = Runbook(parse_runbook(config), hub, StateStore("serve", tmp_path / "state"))
        made.append(runbook)
        return runbook

    yield make
    for runbook in made:
        for result in runbook.results.values():
            pid = (result.evidence or {}).get("pid")
            if pid:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass


async def test_bad_flag_is_refused_before_launch_and_the_fix_applies(make_runbook, tmp_path):
    port = free_port()
    log = tmp_path / "sglang.log"
    runbook = make_runbook(steps_toml(port, log, ["--trust-remote-code", "--num-speculative-tokens", "16"]))
    try:
        assert (await runbook.run_step("clean", yes)).state is StepState.PASSED
        result = await runbook.run_step("launch", yes)
        # the host's own SGLang --help was read, the command linted, nothing started
        assert result.state is StepState.FAILED and result.message.startswith("refused before launch")
        assert "--num-speculative-tokens 16 is not an SGLang flag" in result.message
        assert not log.exists()
        bad = [Diagnosis(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})
               for d in result.evidence["diagnoses"] if d["severity"] == "error"][0]
        fixed = apply_fix(result.evidence["argv"], bad)
        runbook.set_override("launch", fixed, "applied the suggested fix")
        result = await runbook.run_step("launch", yes)
        assert result.state is StepState.PASSED, result.message
        assert "--speculative-num-steps" in result.evidence["argv"]
        ready = await runbook.run_step("ready", yes)
        assert ready.state is StepState.PASSED, ready.message
        assert ready.evidence["milestones"][-1] == "ready" and "KV cache" in ready.evidence["milestones"]
        assert await probe_health(runbook.hub.pool.get("gpu-server"), port) == "ready"
        records = runbook.store.audit_records()
        assert any(r["event"] == "override_argv" for r in records) and any(r["event"] == "launch" for r in records)
    finally:
        await runbook.hub.stop()


async def test_usage_crash_diagnosed_when_lint_is_off(make_runbook, tmp_path):
    """Lint off: the real-format usage crash happens and is turned into the named flag error."""
    port = free_port()
    log = tmp_path / "sglang.log"
    steps = steps_toml(port, log, ["--num-speculative-tokens", "16"]).replace("settle_s = 1.0", "settle_s = 1.0\nlint = false")
    runbook = make_runbook(steps)
    try:
        await runbook.run_step("clean", yes)
        result = await runbook.run_step("launch", yes)
        assert result.state is StepState.FAILED
        assert result.message.startswith("the server exited: --num-speculative-tokens 16 is not an SGLang flag")
        kinds = [d["kind"] for d in result.evidence["diagnoses"]]
        assert kinds == ["unrecognized_argument"]
        assert result.evidence["diagnoses"][0]["suggestions"][0].startswith("--speculative-num-steps 16")
        assert log.read_text().startswith("# cockpit: launch ")
    finally:
        await runbook.hub.stop()


async def test_server_dies_while_loading_diagnosed(make_runbook, tmp_path):
    port = free_port()
    log = tmp_path / "sglang.log"
    runbook = make_runbook(steps_toml(port, log, [], scenario='{"load_s": 1.5, "crash": "gpus_not_clean"}'))
    try:
        await runbook.run_step("clean", yes)
        assert (await runbook.run_step("launch", yes)).state is StepState.PASSED  # alive after 1 s
        ready = await runbook.run_step("ready", yes)
        assert ready.state is StepState.FAILED
        assert ready.evidence["diagnoses"][0]["kind"] == "gpus_not_clean"
        assert "the server died" in ready.message
    finally:
        await runbook.hub.stop()


async def test_log_follower_survives_truncation_and_rotation(sshd, tmp_path):
    from cockpit.hosts.pool import TransportPool

    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server")))
    pool = TransportPool(config)
    log = tmp_path / "server.log"
    log.write_text("old line 1\nold line 2\n")
    try:
        follower = LogFollower(pool.get("gpu-server"), str(log))
        assert await follower.poll() == ["old line 1", "old line 2"]
        with open(log, "a") as handle:
            handle.write("new line\npartial")
        assert await follower.poll() == ["new line"]
        with open(log, "a") as handle:
            handle.write(" done\n")
        assert await follower.poll() == ["partial done"]
        log.write_text("after truncation\n")  # truncated in place
        assert await follower.poll() == ["after truncation"]
        os.rename(log, tmp_path / "server.log.1")  # rotated: a new, smaller file
        log.write_text("rotated\n")
        assert await follower.poll() == ["rotated"]
        assert follower.rotations == 2
        # nothing was started on the host to read it: only SFTP on the open connection
        assert not [r for r in pool.log.records() if "tail" in r.command]
    finally:
        await pool.close()


def test_lint_flags_against_the_hosts_own_sglang_with_dry_run(sshd, tmp_path):
    import subprocess
    import sys

    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")))

    def lint(*words):
        return subprocess.run([sys.executable, "-m", "cockpit", "lint-flags", "--host", "gpu-server", "--deep", "--json",
                               "--config", str(config), "--", *words], capture_output=True, text=True, timeout=120)

    seed = ["--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--num-speculative-tokens", "16"]
    out = lint(*seed)
    data = json.loads(out.stdout)
    assert out.returncode == 1 and data["schema"]["version"] == "0.5.23" and data["schema"]["flags"] > 500
    assert data["deep"]["accepted"] is False  # SGLang's own parser on the host said no, too
    assert data["diagnoses"][0]["flag"] == "--num-speculative-tokens"
    partial = lint("--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "5")
    kinds = [d["kind"] for d in json.loads(partial.stdout)["diagnoses"]]
    assert partial.returncode == 1 and "partial_depth_flags" in kinds
    good = lint("--model-path", "/m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
                "--speculative-num-steps", "15", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16")
    assert good.returncode == 0, good.stdout
    assert json.loads(good.stdout)["deep"]["accepted"] is True


def test_plan_stop_stops_the_launched_server(sshd, tmp_path):
    import subprocess
    import sys
    import time

    sshd.scenario({"gpus": 8})
    port = free_port()
    log = tmp_path / "sglang.log"
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")) + steps_toml(port, log, []))

    def cockpit(*words):
        return subprocess.run([sys.executable, "-m", "cockpit", *words, "--config", str(config)], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    ran = cockpit("plan", "run", "--yes", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    pid = [r for r in json.loads(ran.stdout)["ran"] if r["step"] == "launch"][0]["evidence"]["pid"]
    assert os.path.exists(f"/proc/{pid}")
    refused = cockpit("plan", "stop", "launch")
    assert "not confirmed" in refused.stdout and os.path.exists(f"/proc/{pid}")
    stopped = cockpit("plan", "stop", "launch", "--yes")
    assert f"stopped pid {pid}" in stopped.stdout, stopped.stdout + stopped.stderr
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    # issue 46 item 1: the cockpit's own stop is evidence, read back by every later look: stopped by you (exit 0, no
    # flag, no "hung", no "crashed"), and the step that rested on the server (ready) is stale, saying why
    watched = cockpit("server", "--json")
    data = json.loads(watched.stdout)
    assert watched.returncode == 0 and watched.stderr == "", watched.stdout + watched.stderr
    assert data["flags"] == [] and data["alive"] is False and data["activity"]["state"] == "stopped"
    assert data["ended"]["by"] == "you" and f"pid {pid}" in data["ended"]["why"] and data["ended"]["at"] is not None
    text = cockpit("server")
    assert text.returncode == 0 and text.stdout.startswith("STOPPED: stopped by you at ") and "crashed" not in text.stdout
    assert "hung" not in text.stdout
    shown = {s["name"]: s for s in json.loads(cockpit("plan", "show", "--json").stdout)["steps"]}
    assert shown["launch"]["state"] == "stale" and shown["ready"]["state"] == "stale"
    assert "stopped by you" in shown["ready"]["result"]["message"]


def test_plan_fix_applies_the_crash_diagnosis_fix_from_the_cli(sshd, tmp_path):
    """After plan run refuses the story's launch, `plan fix` does what `f` does in the TUI (issue 30)."""
    import subprocess
    import sys

    port = free_port()
    log = tmp_path / "sglang.log"
    sshd.scenario({"gpus": 8})
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")) + steps_toml(port, log, ["--num-speculative-tokens", "16"]))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cockpit", *args, "-c", str(config)], capture_output=True, text=True,
                              timeout=120, env=env, stdin=subprocess.DEVNULL)

    assert cli("plan", "fix", "launch", "--yes").returncode == 1  # not run yet: nothing to apply
    assert cli("plan", "run", "clean", "--yes").returncode == 0
    refused = cli("plan", "run", "launch", "--yes")
    assert refused.returncode == 1 and "--num-speculative-tokens 16 is not an SGLang flag" in refused.stdout + refused.stderr
    asked = cli("plan", "fix", "launch")
    assert asked.returncode == 2 and "--yes" in asked.stderr
    fixed = cli("plan", "fix", "launch", "--yes")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "fix: --speculative-num-steps 16 --speculative-eagle-topk 1 --speculative-num-draft-tokens 17" in fixed.stdout
    will_run = fixed.stdout.split("will run:")[1].split("\n")[0].split()
    assert "--num-speculative-tokens" not in will_run
    # the fix replaces the depth flags the step had (15 steps / 16 draft tokens from draft_tokens = 16), never adds a second set
    assert will_run.count("--speculative-num-steps") == 1 and will_run[will_run.index("--speculative-num-steps") + 1] == "16"
    ran = cli("plan", "run", "launch", "--yes", "--json")
    try:
        assert ran.returncode == 0, ran.stdout + ran.stderr
    finally:
        state = json.loads(next((tmp_path / "state" / "cockpit" / "runbooks").glob("*.json")).read_text())
        pid = (state["steps"].get("launch", {}).get("evidence") or {}).get("pid")
        if pid:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
