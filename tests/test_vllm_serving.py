"""vLLM served through the runbook as SGLang is (issue 31): the demo's world with `engine = "vllm"`,
its STAND-IN vLLM (cockpit/demo/vllm_server.py, replaying the released 0.10.2's texts) launched,
refused first for the story's habit (vLLM <= 0.8.2's separate flags) with the JSON that replaces them,
fixed, ready, swept over num_speculative_tokens with acceptance from vLLM's own counters, and its log
read into the same live figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from cockpit.context import Context
from cockpit.demo.world import build
from cockpit.diagnosis import Diagnosis
from cockpit.runbook.model import StepState


async def yes(_text: str) -> bool:
    return True


async def test_a_vllm_launch_is_refused_fixed_ready_and_swept(tmp_path, monkeypatch):
    from cockpit.bench.sweep import SweepSpec, run_sweep
    from cockpit.serving.steps import apply_diagnosis_fix

    for var in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var))
    world = build(tmp_path / "demo", "vllm")
    ctx = Context.of(world.config)
    runbook = ctx.runbook
    try:
        ctx.hub.start()
        for step in ("training-done", "kill-trainer", "kill-server-leftovers", "server-gpus-clean", "draft-ready"):
            result = await runbook.run_step(step, yes)
            assert result.state is StepState.PASSED, (step, result.message)
        assert "vLLM 0.10.2-0.33" in runbook.result("draft-ready").evidence["verdicts"]  # judged by vLLM's loader
        refused = await runbook.run_step("launch", yes)
        assert refused.state is StepState.FAILED and refused.message.startswith("refused before launch")
        assert "vLLM 0.10.2 has none of these" in refused.message and not (tmp_path / "demo" / "vllm.log").exists()
        [error] = [Diagnosis.from_json(d) for d in refused.evidence["diagnoses"] if d["severity"] == "error"]
        fixed = apply_diagnosis_fix(runbook, "launch", error)
        assert "--speculative-model" not in fixed and "--num-speculative-tokens" not in fixed
        config = json.loads(fixed[fixed.index("--speculative-config") + 1])
        assert config["method"] == "eagle3" and config["num_speculative_tokens"] == 16
        launched = await runbook.run_step("launch", yes)
        assert launched.state is StepState.PASSED, launched.message
        ready = await runbook.run_step("ready", yes)
        assert ready.state is StepState.PASSED, ready.message
        model = str(tmp_path / "demo" / "models" / "Llama-3.3-70B-Instruct")
        assert ready.evidence["served_models"] == [model] and ready.message.endswith(f"serving {model}")

        sweep = SweepSpec("launch", depths=(2,), concurrency=(1, 4), requests=6, max_tokens=48, repeats=1, after="stop")
        swept = await run_sweep(runbook, sweep, yes)
        assert not swept.failures, swept.failures
        by_config = {(r["steps"], r["concurrency"]): r for r in swept.runs}
        assert {r["api"] for r in swept.runs} == {"openai"}  # vLLM's own API, chosen from the launch step's engine
        assert by_config[(None, 1)]["accept_length"] is None  # the baseline drafts nothing
        d2, d16 = by_config[(2, 4)]["accept_length"], by_config[(16, 4)]["accept_length"]
        assert 1.5 < d2 < d16 < 3.5, (d2, d16)  # from the counters: deeper chains accept more, within the model's bounds
        assert swept.decisions() and swept.recommendation() is not None  # a decision over them, as for SGLang
        assert "stopped" in swept.serving
        log = tmp_path / "demo" / "vllm.log"
        assert "SpecDecoding metrics: Mean acceptance length" in log.read_text()
    finally:
        await ctx.close()
        world.close()


def test_cockpit_server_reads_a_vllm_log_with_the_same_fields(tmp_path):
    """A vLLM log as `cockpit server --log` reads it: the same fields as SGLang's, with vLLM's own
    spec_decode (per-position acceptance, drafted/accepted); a relaunch starts the figures again."""
    prefix = "\x1b[1;36m(APIServer pid=9)\x1b[0;0m INFO 12-05 07:20:48"
    lines = [f"{prefix} [api_server.py:1896] vLLM API server version 0.10.2",
             f"{prefix} [loggers.py:123] Engine 000: Avg prompt throughput: 50.0 tokens/s, Avg generation throughput: 700.0 "
             "tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.6%, Prefix cache hit rate: 0.0%",
             f"{prefix} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.03, Accepted throughput: 120.00 tokens/s, "
             "Drafted throughput: 236.00 tokens/s, Accepted: 240 tokens, Drafted: 472 tokens, Per-position acceptance rate: "
             "0.661, 0.356, Avg Draft acceptance rate: 50.8%"]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(log), "--json"], capture_output=True, text=True,
                         timeout=60)
    data = json.loads(out.stdout)
    assert out.returncode == 0, out.stderr
    assert (data["throughput_tok_s"], data["running"], data["accept_length"]["window"]) == (700.0, 4, 2.03)
    assert data["spec_decode"]["per_position"] == [0.661, 0.356] and data["diagnoses"] == []
    log.write_text("\n".join(lines + [lines[0]]) + "\n")  # a relaunch: the figures before it are another server's
    data = json.loads(subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(log), "--json"], capture_output=True,
                                     text=True, timeout=60).stdout)
    assert data["throughput_tok_s"] is None and data["relaunches_seen"] == 1


def test_an_sglang_sweep_and_a_vllm_sweep_side_by_side(tmp_path, monkeypatch):
    """`bench report --sweep A --against B`: per depth config and concurrency, each engine's throughput,
    acceptance and speedup over its own baseline."""
    from harness.builders import RUNS

    from cockpit.bench.store import save_run

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for run in RUNS:
        save_run({**run, "sweep": "sg-1", "label": "sg"}, [])  # stored before vLLM was an engine: no engine field
        save_run({**run, "sweep": "vl-1", "label": "vl", "engine": "vllm",
                  "output_throughput_tok_s": run["output_throughput_tok_s"] * 0.9}, [])
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report", "--sweep", "sg-1", "--against", "vl-1", "--json"],
                         capture_output=True, text=True, timeout=60, env=env)
    rows = json.loads(out.stdout)["side_by_side"]
    assert out.returncode == 0, out.stderr
    d10 = next(r for r in rows if r["config"].startswith("depth 10") and r["concurrency"] == 8)
    assert d10["sglang"]["throughput_median"] == 1650.0 and d10["vllm"]["throughput_median"] == 1485.0
    assert d10["sglang"]["speedup"] == d10["vllm"]["speedup"]  # each over its own baseline
    text = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report", "--sweep", "sg-1", "--against", "vl-1"],
                          capture_output=True, text=True, timeout=60, env=env).stdout
    assert "sglang tok/s" in text and "vllm tok/s" in text and "each speedup over its own baseline" in text
    missing = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report", "--sweep", "sg-1", "--against", "nope"],
                             capture_output=True, text=True, timeout=60, env=env)
    assert missing.returncode == 2 and "no stored runs of sweep 'nope'" in missing.stderr


def test_a_vllm_start_up_is_read_in_its_own_milestones(tmp_path):
    """The server pane's start-up line for a vLLM log names vLLM's phases, not SGLang's."""
    from cockpit.serving.logread import diagnose_lines
    from cockpit.serving.server import ServerStatus
    from cockpit.ui.widgets.server_log import status_line

    lines = ["\x1b[1;36m(APIServer pid=9)\x1b[0;0m INFO 12-05 07:20:48 [api_server.py:1896] vLLM API server version 0.10.2",
             "\x1b[1;36m(APIServer pid=9)\x1b[0;0m INFO 12-05 07:20:49 [default_loader.py:267] Loading weights took 0.80 seconds",
             "\x1b[1;36m(APIServer pid=9)\x1b[0;0m INFO 12-05 07:20:49 [kv_cache_utils.py:864] GPU KV cache size: 1,048,576 tokens"]
    report = diagnose_lines(lines)
    assert report.engine == "vllm" and report.milestones == [("weights loaded", 2), ("KV cache", 3)] and not report.ready
    shown = status_line(ServerStatus("loading", True, report, lines), "launch").plain
    assert "✔ weights loaded" in shown and "✔ KV cache" in shown and "· ready" in shown and "load weights" not in shown


@pytest.mark.parametrize("module", ["cockpit.demo.server", "cockpit.demo.vllm_server"])
def test_a_demo_server_ends_with_the_demo(tmp_path, module):
    """Both stand-ins watch the demo's process (COCKPIT_DEMO_PARENT): a demo killed with its terminal
    leaves no server holding its port and its replayed GPU memory."""
    import time

    from harness.sshd import free_port

    parent = subprocess.Popen(["sleep", "60"])
    args = ["--model-path", "/m"] if module.endswith(".server") else ["serve", "/m"]
    server = subprocess.Popen([sys.executable, "-m", module, *args, "--port", str(free_port())],
                              env={**os.environ, "COCKPIT_DEMO_PARENT": str(parent.pid)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(2.5)  # up (loading takes ~1.5 s) and watching
        assert server.poll() is None
        parent.kill()
        parent.wait()
        assert server.wait(timeout=10) == 0
    finally:
        for proc in (parent, server):
            if proc.poll() is None:
                proc.kill()


def test_config_check_and_plan_run_reject_a_bad_vllm_step_alike(tmp_path):
    """One validation for every command: engine, vllm_version, an algorithm vLLM's step does not launch and a tree on
    vLLM, named with the file's line."""
    base = ('[hosts.here]\nlocal = true\n\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "here"\n\n'
            '[[runbook.steps]]\nname = "launch"\nkind = "sglang_launch"\nhost = "here"\nmodel_path = "/m"\n')
    for extra, said in (('engine = "vlm"\n', "engine must be one of 'sglang', 'vllm', got 'vlm'"),
                        ('engine = "vllm"\nalgorithm = "EAGLE"\n', "algorithm 'EAGLE': vLLM's launch step drafts with method eagle3 only"),
                        ('engine = "vllm"\nvllm_version = "x.y"\n', "vllm_version: 'x.y' is not a vLLM version"),
                        ('engine = "vllm"\nsteps = 3\ntopk = 2\ndraft_tokens = 8\n', "vLLM drafts a chain")):
        config = tmp_path / "c.toml"
        config.write_text(base + extra)
        for argv in (["config", "check", str(config)], ["plan", "run", "launch", "--yes", "--config", str(config)]):
            out = subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True, timeout=60)
            assert out.returncode == 2 and f"{config}:9: {said}" in out.stderr and "Traceback" not in out.stderr, (argv, out.stderr)
