"""The depth sweep tells the truth and makes the decision (issue 15): one meaning of depth, a stand-in
that models speculative decoding, the decision and its report, predicted vs measured acceptance,
and kills that never reach a process they should not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.bench import store
from cockpit.bench.sweep import SweepResult
from cockpit.config import parse_config
from cockpit.context import Context, check_config
from cockpit.errors import ConfigError
from cockpit.serving.depth import DepthConfig
from cockpit.serving.logread import diagnose_file
from cockpit.serving.lint import apply_fix
from harness.sshd import STANDIN_DIR, free_port

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_one_meaning_of_depth_the_fix_is_in_the_sweep():
    """The story's `--num-speculative-tokens 16` fixed is depth 16 = steps 16, topk 1, 17 draft tokens:
    the same configuration the sweep's "16" means."""
    [fix] = diagnose_file(FIXTURES / "sglang" / "unrecognized_0.5.23.log").diagnoses
    fixed = apply_fix(["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--num-speculative-tokens", "16"], fix)
    assert DepthConfig.from_argv(fixed) == DepthConfig.chain(16) == DepthConfig(16, 1, 17)
    assert DepthConfig.chain(16).label == "depth 16 (steps 16, topk 1, draft tokens 17)"
    assert DepthConfig.of_draft_tokens(17) == DepthConfig.chain(16)  # SGLang's draft-token count of the same chain
    assert DepthConfig(4, 4, 8).label == "tree 4x4 (steps 4, topk 4, draft tokens 8)"


HOSTS = '[hosts.here]\nlocal = true\n\n'
LAUNCH = '[[runbook.steps]]\nname = "launch"\nkind = "sglang_launch"\nhost = "here"\nmodel_path = "/m"\ndepth = 16\n\n'


@pytest.mark.parametrize("bench, fragment", [
    ('configs = [{steps = 3, topk = 4, draft_tokens = 2}]', "cannot hold a path of 3 steps"),
    ('configs = [{steps = 2, topk = 4, draft_tokens = 40}]', "at most 21 tokens"),
    ('configs = [{steps = 0, topk = 1, draft_tokens = 1}]', "at least 1 step"),
    ('configs = [{steps = 5, topk = 1, draft_tokens = 8}]', "steps + 1 = 6"),
    ('configs = [{steps = 5, topk = 1}]', "steps, topk and draft_tokens"),
    ('depths = [16, 0]', "positive integers"),
    ('after = "keep"', "recommended, original, stop"),
    ('serve_concurrency = 4\nconcurrency = [1, 8]', "not one of the concurrencies"),
    ('drafter_accuracy = [0.7, 1.5]', "between 0 and 1"),
])
def test_config_check_refuses_an_impossible_sweep(tmp_path, bench, fragment):
    path = tmp_path / "c.toml"
    path.write_text(HOSTS + LAUNCH + "[bench]\n" + bench + "\n")
    proc = cli("config", "check", str(path))
    assert proc.returncode == 2 and fragment in proc.stderr and f"{path}:" in proc.stderr, proc.stderr


def test_a_launch_step_with_an_impossible_depth_is_refused():
    with pytest.raises(ConfigError, match="cannot hold a path"):
        check_config(parse_config(HOSTS + LAUNCH.replace("depth = 16", "steps = 6\ntopk = 2\ndraft_tokens = 3"), "c.toml"))


@pytest.fixture
def sweep_config(tmp_path, standin_path):
    """A local host with the stand-in nvidia-smi and the stand-in SGLang, which models speculative
    decoding (acceptance from the drafter, cost from the batch)."""
    (standin_path / "default.json").write_text(json.dumps({"gpus": 8}))
    port = free_port()
    env = {"PYTHONPATH": str(STANDIN_DIR), "SGLANG_STANDIN": json.dumps({"load_s": 0.05, "warmup_s": 0.1, "ttft_ms": 5, "model": True})}
    text = f"""[hosts.here]
local = true
telemetry = "smi"
python = {json.dumps(sys.executable)}

[runbook]
name = "decide"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "here"

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
host = "here"
model_path = "/models/m"
draft_path = "/ckpt/eagle3"
depth = 16
help_text = "{FIXTURES / 'sglang' / 'help_0.5.23.txt'}"
port = {port}
log = "{tmp_path / 'sglang.log'}"
settle_s = 0.3
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}

[[runbook.steps]]
name = "ready"
kind = "sglang_ready"
host = "here"
timeout_s = 30
poll_s = 0.2

[bench]
depths = [16, 5, 2]
concurrency = [1, 8]
requests = 8
max_tokens = 64
repeats = 1
after = "original"
drafter_accuracy = [0.747, 0.675, 0.635, 0.595, 0.565, 0.535, 0.505]
"""
    path = tmp_path / "c.toml"
    path.write_text(text)
    yield path
    # the sweep leaves a server running (after = "original"): stopped here, never left behind the test run
    import signal

    server = Context.load(path).runbook.launched("launch")
    if server is not None:
        try:
            os.kill(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_the_sweep_finds_the_depth_that_depends_on_concurrency_and_reports_it(sweep_config, tmp_path):
    assert cli("plan", "run", "--yes", "--config", str(sweep_config)).returncode == 0
    proc = cli("bench", "sweep", "--yes", "--json", "--config", str(sweep_config))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    rows = data["rows"]
    accept = {r["steps"]: r["accept_length"] for r in rows if r["concurrency"] == 1 and r["steps"]}
    assert accept[2] < accept[5] and accept[2] < accept[16]  # acceptance rises with depth (and saturates)
    decisions = {d["concurrency"]: d for d in data["decisions"]}
    assert decisions[1]["best_depth"]["steps"] > decisions[8]["best_depth"]["steps"]  # the best depth moves down
    assert data["recommended"]["concurrency"] == 8 and data["recommended"]["best"] == decisions[8]["best"]
    # predicted (truncated at each depth, bonus included) next to measured; the served drafter trails its estimate
    acceptance = {a["steps"]: a for a in data["acceptance"]}
    assert acceptance[2]["estimate_with_bonus"] == pytest.approx(1 + 0.747 + 0.747 * 0.675, abs=1e-3)
    assert acceptance[16]["positions_known"] == 7 and acceptance[5]["measured"] < acceptance[5]["estimate_with_bonus"]
    assert "serving the launch step's own config" in data["serving"]
    # after = "original": the launch step's own depth 16 runs again, and the checklist says so
    context = Context.load(sweep_config)
    server = context.runbook.launched("launch")
    assert DepthConfig.from_argv(server.argv) == DepthConfig.chain(16)
    assert all(v.state.value == "passed" for v in context.runbook.views())

    # the report: Markdown with the tables, numbers equal to the stored runs
    md = cli("bench", "report", "--format", "md")
    assert md.returncode == 0, md.stderr
    stored = store.sweep_runs(data["sweep"])
    assert len(stored) == len(rows) == 8
    for run in stored:
        assert f"| {run['config']} |" in md.stdout and f"| {run['concurrency']} | {round(run['output_throughput_tok_s'], 2):.1f} |" in md.stdout
    assert "## Decision" in md.stdout and "## Predicted vs measured acceptance" in md.stdout and "```" in md.stdout
    for section in ("Recommended for serving", decisions[8]["best"]):
        assert section in md.stdout
    out = tmp_path / "report.csv"
    assert cli("bench", "report", "--format", "csv", "--out", str(out)).returncode == 0
    assert out.read_text().splitlines()[0].startswith("config,steps,topk,draft_tokens,concurrency")
    as_json = json.loads(cli("bench", "report", "--format", "json").stdout)
    assert as_json["rows"] == SweepResult.from_runs(stored).table()


def test_kill_shows_every_gpu_of_a_process_and_keeps_to_its_users_processes(tmp_path, standin_path):
    """A match of another user's process is left alone (and said so); with any_user it is offered,
    marked.  Each process shows its memory on every GPU it holds."""
    import pwd

    if os.geteuid() != 0:
        pytest.skip("starting another user's process needs root (CI runs as root)")
    nobody = pwd.getpwnam("nobody").pw_name
    command = ["/bin/sh", "-c", "sleep 60; : fake_trainer_cockpit_test"]  # the shell's command line is what matches
    mine = subprocess.Popen(command)
    theirs = subprocess.Popen(command, user=nobody, cwd="/")
    (standin_path / "default.json").write_text(json.dumps({"gpus": 4, "processes": [
        {"pid": mine.pid, "name": "python3", "used_memory": 61234, "gpu": g} for g in range(4)]}))
    try:
        time.sleep(0.3)
        steps = ('[hosts.here]\nlocal = true\ntelemetry = "smi"\n\n[runbook]\nname = "kill"\n\n[[runbook.steps]]\nname = "k"\n'
                 'kind = "kill_stale"\nhost = "here"\npattern = "fake_trainer_cockpit_test"\ngrace_s = 1\n')
        config = tmp_path / "k.toml"
        config.write_text(steps)
        proc = cli("plan", "run", "--yes", "--json", "--config", str(config))
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        [plan] = json.loads(proc.stdout)["confirmed_by_yes"]  # what --yes confirmed, in the result
        assert "0:61234 1:61234 2:61234 3:61234" in plan and "244936" in plan
        header = next(line for line in plan.splitlines() if "COMMAND" in line)
        row = next(line for line in plan.splitlines() if "0:61234 1:61234" in line)
        assert row.index("/bin/sh") == header.index("COMMAND")  # the GPUs' column holds 4 GPUs: the command stays in its column
        assert f"left alone: pid {theirs.pid} of user {nobody}" in plan
        mine.wait(timeout=10)
        assert theirs.poll() is None  # never reached
        [ran] = json.loads(proc.stdout)["ran"]
        assert [r["pid"] for r in ran["evidence"]["left_alone"]] == [theirs.pid]
        config.write_text(steps + "any_user = true\n")
        cli("plan", "reset", "--config", str(config))
        proc = cli("plan", "run", "--yes", "--config", str(config))
        assert proc.returncode == 0 and "(ANY user's processes)" in proc.stdout and "<- another user" in proc.stdout
        assert "(confirmed by --yes)" in proc.stdout and proc.stderr == ""
        theirs.wait(timeout=10)
    finally:
        for p in (mine, theirs):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_each_measured_acceptance_says_its_concurrency():
    """Issue 36 item 4: the chart said d16 2.56 (concurrency 8) and the table d16 2.44 (the median of 1 and 8),
    neither saying so.  The measure is kept per concurrency, and every table and chart names it."""
    from cockpit.bench.decision import predicted_vs_measured
    from cockpit.bench.report import render_acceptance

    rows = [{"config": "depth 16", "steps": 16, "topk": 1, "concurrency": c, "accept_length": a}
            for c, a in ((1, 2.33), (1, 2.35), (8, 2.56), (8, 2.56))]
    [row] = predicted_vs_measured(rows, [0.7, 0.6])
    assert row["measured_at_concurrency"] == {"1": 2.34, "8": 2.56}
    text = render_acceptance([row])
    assert "measured c1" in text and "measured c8" in text and "2.34" in text and "2.56" in text
    assert "2.45" not in text  # the median of both, which is neither, is not shown as "measured"
