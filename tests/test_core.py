"""The core owns its rules: a kind that raises never leaves a step running (CLI and TUI), the runbook
invalidates a gate from telemetry without the TUI, and records on disk in the old shape still load."""

from __future__ import annotations

import json
import time

import pytest

import cockpit.context
from cockpit.cli import main
from cockpit.config import parse_config
from cockpit.context import Context, default_kinds
from cockpit.hosts.procs import LaunchedProcess
from cockpit.runbook.kind import RunContext, StepKind
from cockpit.runbook.model import StepResult, StepSpec, StepState
from cockpit.runbook.store import StateStore
from cockpit.diagnosis import Diagnosis
from helpers import eventually
from harness.builders import DIRTY_GPU5, cli, runbook_toml

LOCAL = '[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n\n[runbook]\nname = "broken"\n\n'
BROKEN_STEP = '[[runbook.steps]]\nname = "bad"\nkind = "broken"\nhost = "here"\n'


class Broken(StepKind):
    """A kind with a bug in it."""

    name = "broken"

    async def run(self, ctx: RunContext, spec: StepSpec, planned) -> StepResult:
        raise KeyError("boom")


def kinds_with_broken():
    return {**default_kinds(), "broken": Broken()}


def test_a_kind_that_raises_fails_its_step_from_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cockpit.context, "default_kinds", kinds_with_broken)
    path = tmp_path / "c.toml"
    path.write_text(LOCAL + BROKEN_STEP)
    code = main(["plan", "run", "--yes", "--json", "--config", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    [ran] = out["ran"]
    assert ran["state"] == "failed" and "internal error in broken run: KeyError: 'boom'" in ran["message"]
    checked = cockpit.context.load_checked(path)
    store = StateStore(checked.runbook.id)
    assert store.load()["bad"].state is StepState.FAILED  # never left RUNNING
    errors = [r for r in store.audit_records() if r["event"] == "error"]
    assert errors and "Traceback" in errors[0]["traceback"] and "KeyError" in errors[0]["traceback"]


async def test_a_kind_that_raises_fails_its_step_in_the_tui(tmp_path):
    from cockpit.ui.app import CockpitApp

    context = Context.of(parse_config(LOCAL + BROKEN_STEP, str(tmp_path / "c.toml")), kinds=kinds_with_broken())
    app = CockpitApp(context)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("n")
        await eventually(lambda: app.runbook.result("bad") and app.runbook.result("bad").state is StepState.FAILED,
                         what="the step failed")
        assert "KeyError: 'boom'" in app.runbook.result("bad").message


async def test_a_worker_that_fails_is_shown(tmp_path):
    from cockpit.ui.app import CockpitApp

    app = CockpitApp(parse_config(LOCAL + '[[runbook.steps]]\nname = "a"\nkind = "command"\nhost = "here"\nargv = ["true"]\n'))
    async with app.run_test(size=(120, 40)) as pilot:
        async def explode(*_args, **_kw):
            raise RuntimeError("the engine broke")

        app.runbook.run_step = explode
        await pilot.press("n")
        await eventually(lambda: any("the engine broke" in n.message for n in app._notifications), what="the failure shown")


def test_plan_run_sees_a_gate_go_stale_without_the_tui(sshd, tmp_path):
    """A gpu_clean passed, then the host got dirty: `plan run` re-checks its gates first, so the next
    step is refused, and `plan show` says the gate is stale."""
    sshd.scenario({"gpus": 8})
    config = tmp_path / "c.toml"
    config.write_text(runbook_toml(sshd, '[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "gpu-server"\n\n'
                                         '[[runbook.steps]]\nname = "after"\nkind = "command"\nhost = "gpu-server"\nargv = ["true"]\n'))
    assert cli("plan", "run", "clean", "--yes", "--config", str(config)).returncode == 0
    time.sleep(0.1)
    sshd.scenario(DIRTY_GPU5)
    refused = cli("plan", "run", "after", "--yes", "--config", str(config))
    assert refused.returncode == 1 and "'clean' is stale" in refused.stderr, refused.stderr
    steps = json.loads(cli("plan", "show", "--json", "--config", str(config)).stdout)["steps"]
    assert steps[0]["state"] == "stale" and "GPU 5" in steps[0]["result"]["message"]


def test_state_written_in_the_old_shape_still_loads(tmp_path):
    """A state file as earlier cockpits wrote it: the launched server and its diagnoses read back typed."""
    config = parse_config(LOCAL + '[[runbook.steps]]\nname = "launch"\nkind = "launch"\nhost = "here"\nargv = ["sleep", "1"]\n',
                          str(tmp_path / "c.toml"))
    context = Context.of(config)
    store = context.runbook.store
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps({"format": 1, "runbook": store.runbook_id, "saved_at": time.time(), "overrides": {},
                                      "steps": {"launch": {
                                          "state": "failed", "started_at": 1.0, "finished_at": 2.0, "message": "refused",
                                          "evidence": {"pid": 4242, "port": 30000, "log": "/tmp/x.log", "argv": ["sleep", "1"],
                                                       "host": "here", "diagnoses": [{"kind": "unrecognized_argument",
                                                       "flag": "--num-speculative-tokens", "value": "16", "suggestions": ["a"],
                                                       "message": "m", "line": 3, "replacement": ["--x", "1"], "severity": "error"},
                                                                                      {"odd": "record"}]},
                                          "output": "", "forced_reason": None, "runner_pid": None, "runner_started": None}}}))
    runbook = Context.of(config).runbook
    server = runbook.launched("launch")
    assert server == LaunchedProcess("here", 4242, "/tmp/x.log", ("sleep", "1"), 30000)
    [diagnosis] = Diagnosis.all_from_json(runbook.result("launch").evidence["diagnoses"])
    assert diagnosis.flag == "--num-speculative-tokens" and diagnosis.replacement == ("--x", "1") and diagnosis.line == 3
    assert LaunchedProcess.from_evidence({"pid": True, "log": "x"}) is None  # a hand-edited file, not a process


@pytest.mark.parametrize("evidence", [{}, {"pid": "12", "log": "/l"}, {"pid": 0, "log": "/l"}, None, [1, 2]])
def test_no_process_read_from_evidence_of_another_shape(evidence):
    assert LaunchedProcess.from_evidence(evidence) is None


async def test_ctrl_c_says_how_to_quit_in_plain_words():
    """Issue 50: Ctrl-C showed Textual's raw markup (`Press [b]ctrl+q[/b] ...`)."""
    from cockpit.ui.app import CockpitApp

    app = CockpitApp(parse_config(LOCAL))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+c")
        await eventually(lambda: any("to quit" in n.message for n in app._notifications), what="the hint shown")
        [hint] = [n for n in app._notifications if "to quit" in n.message]
        assert "[" not in hint.message and "ctrl+q" in hint.message and app.is_running


def test_a_config_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Issue 50: a config saved by an editor that writes a UTF-8 BOM gave a cryptic TOML error."""
    plain = parse_config(LOCAL)
    marked = parse_config("\ufeff" + LOCAL)
    assert [h.name for h in marked.hosts] == [h.name for h in plain.hosts]


def test_a_utf16_log_is_named_with_the_conversion_to_run(tmp_path):
    """Issue 50: a UTF-16 log (PowerShell's `>`) was "binary file" with no hint."""
    import subprocess
    import sys

    log = tmp_path / "server.log"
    log.write_bytes("INFO start\nerror: argument --dtype: invalid choice\n".encode("utf-16"))
    for args, stdin in ((["parse-log", str(log)], None), (["parse-log", "-"], log.read_bytes())):
        done = subprocess.run([sys.executable, "-m", "cockpit", *args], input=stdin, capture_output=True, timeout=60)
        said = done.stderr.decode()
        assert done.returncode == 2 and "UTF-16" in said and "iconv -f utf-16 -t utf-8" in said and "Traceback" not in said
