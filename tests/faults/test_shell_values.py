"""Config values with shell metacharacters, spaces, quotes, newlines and unicode reach the remote
host (a real sshd, whose login shell runs every command string) unharmed and never executed: in a
command step's argv, a launch step's argv, log path, working directory and environment, an SGLang
launch's model path, flag values and log, a kill_stale pattern, a drafter path over SFTP, and the
host's nvidia-smi and python paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from cockpit.config import parse_config
from cockpit.runbook.engine import Runbook
from cockpit.runbook.model import StepState
from cockpit.context import parse_runbook
from cockpit.runbook.store import StateStore
from cockpit.telemetry.hub import TelemetryHub
from harness.faultreport import FaultRow, report
from harness.sshd import free_port

pytestmark = pytest.mark.usefixtures("needs_sshd")


def evil_values(marker: Path) -> list[str]:
    """Each would run `touch marker` if any shell along the way saw it unquoted."""
    m = str(marker)
    return [
        f"$(touch {m})", f"`touch {m}`", f"; touch {m}", f"&& touch {m}", f"| touch {m}", f"x\ntouch {m}",
        f"' ; touch {m} ; '", f'" ; touch {m} ; "', f"\\'; touch {m}", "two  spaces", " lead and trail ",
        "ünïcödé ✓ 日本語 🚀", "$HOME ${PATH} $0 $1 $@", "*", "~", "-n", "--", "%s %n %%", "", "tab\there",
    ]


RECORD = (
    "import json, os, sys, time; "
    "open(sys.argv[1], 'w', encoding='utf-8').write(json.dumps({'argv': sys.argv[2:], 'env': os.environ.get('EVIL'), "
    "'cwd': os.getcwd()})); time.sleep(float(os.environ.get('HOLD', '0')))"
)


def toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


async def yes(_: str) -> bool:
    return True


@pytest.fixture
def weird_dir(tmp_path):
    folder = tmp_path / "dir with spaces $(touch x) ü ✓"
    folder.mkdir()
    return folder


async def test_values_reach_the_host_unharmed(sshd, tmp_path, weird_dir):
    sshd.scenario({"gpus": 8})
    marker = tmp_path / "EXECUTED"
    evil = evil_values(marker)
    record_cmd = weird_dir / "command; $(touch x).json"
    record_launch = weird_dir / "launch `x`.json"
    log = weird_dir / "log $(touch x) ; ü.log"
    port = free_port()
    sglang_log = weird_dir / "sglang 'log'.log"
    model = str(weird_dir / "model $(touch m) ✓")
    served = "name; touch x $(y) 'z'"
    steps = f"""
[runbook]
name = "evil"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "command"
kind = "command"
host = "gpu-server"
argv = {json.dumps(["python3", "-c", RECORD, str(record_cmd), *evil], ensure_ascii=False)}

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "gpu-server"
argv = {json.dumps(["python3", "-c", RECORD, str(record_launch), *evil], ensure_ascii=False)}
log = {toml_str(str(log))}
cwd = {toml_str(str(weird_dir))}
env = {{ EVIL = {toml_str(evil[0] + evil[5])}, HOLD = "30" }}
settle_s = 0.5

[[runbook.steps]]
name = "sglang"
kind = "sglang_launch"
host = "gpu-server"
model_path = {toml_str(model)}
draft_path = {toml_str(model + " draft")}
draft_tokens = 4
port = {port}
log = {toml_str(str(sglang_log))}
settle_s = 0.5
lint = false
extra_args = {json.dumps(["--served-model-name", served], ensure_ascii=False)}
env = {{ SGLANG_STANDIN = '{{"load_s": 0, "warmup_s": 0}}' }}

[[runbook.steps]]
name = "kill"
kind = "kill_stale"
host = "gpu-server"
pattern = {toml_str("no-such-process-$(touch " + str(marker) + ")")}
"""
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server")) + steps)
    runbook = Runbook(parse_runbook(config), TelemetryHub(config), StateStore("evil", tmp_path / "state"))
    pids = []
    try:
        results = {name: await runbook.run_step(name, yes) for name in ("clean", "command", "launch", "sglang", "kill")}
        for name, result in results.items():
            assert result.state is StepState.PASSED, (name, result.message)
            if result.evidence.get("pid"):
                pids.append(int(result.evidence["pid"]))
        altered = 0
        for path in (record_cmd, record_launch):
            recorded = json.loads(path.read_text(encoding="utf-8"))
            altered += sum(1 for got, want in zip(recorded["argv"], evil) if got != want) + abs(len(recorded["argv"]) - len(evil))
        launched = json.loads(record_launch.read_text(encoding="utf-8"))
        assert launched["env"] == evil[0] + evil[5] and launched["cwd"] == str(weird_dir)
        assert log.exists() and "# cockpit: launch" in log.read_text(encoding="utf-8")
        # the SGLang server's own command line, as the host's kernel holds it
        cmdline = psutil.Process(int(results["sglang"].evidence["pid"])).cmdline()
        assert cmdline[cmdline.index("--model-path") + 1] == model
        assert cmdline[cmdline.index("--speculative-draft-model-path") + 1] == model + " draft"
        assert cmdline[cmdline.index("--served-model-name") + 1] == served
        assert sglang_log.exists()
    finally:
        await runbook.hub.stop()
        await runbook.hub.pool.close()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    executed = marker.exists() or any(p.name in ("x", "m") for p in tmp_path.rglob("*") if p.is_file())
    report(FaultRow("shell metacharacters in config values", len(evil) * 2 + 6, "n/a", altered, [],
                    note=f"{len(evil)} values x (command, launch argv) + log, cwd, env, model, flag, pattern; "
                         f"executed: {int(executed)}"))
    assert altered == 0 and not executed


def test_program_paths_with_metacharacters_are_one_word(sshd, tmp_path, weird_dir):
    """nvidia_smi and python set to strings with shell syntax: not found, nothing run."""
    marker = tmp_path / "EXECUTED"
    sshd.scenario({"gpus": 1})
    evil = f"nvidia-smi; touch {marker}; $(touch {marker})"
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server", nvidia_smi=evil, python=f"python3 $(touch {marker})")))
    status = subprocess.run([sys.executable, "-m", "cockpit", "status", "--once", "--json", "--config", str(config)],
                            capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)["hosts"][0]["state"] == "driver_error"
    lint = subprocess.run([sys.executable, "-m", "cockpit", "lint-flags", "--host", "gpu-server", "--config", str(config),
                           "--", "python3", "-m", "sglang.launch_server", "--model-path", "m"],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 2 and "Traceback" not in lint.stderr, lint.stderr
    assert not marker.exists()


async def test_drafter_path_over_sftp(sshd, tmp_path, weird_dir):
    from drafter_files import write_draft

    from cockpit.drafter.remote import inspect_remote

    draft = write_draft(weird_dir / "draft $(touch y) 'q'", "layers0")
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server")))
    hub = TelemetryHub(config)
    try:
        found = await inspect_remote(hub.pool.get("gpu-server"), str(draft))
        assert any(p.code == "layers0_keys" for p in found.problems)
    finally:
        await hub.pool.close()
    assert not any(p.name == "y" for p in tmp_path.rglob("*"))
