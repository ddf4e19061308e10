"""The scenes the snapshots and the ASCII test draw: fixed telemetry, a deployment's recorded results
(the real SGLang 0.5.23 crash text), the real E2 training recording, decode lines of every SGLang
wording, and every pane open at once."""

from __future__ import annotations

import time

from cockpit.config import parse_config
from cockpit.ui.app import CockpitApp
from harness.builders import SNAPSHOT_CONFIG as CONFIG, fixed_hub

PANES_CONFIG = CONFIG + """
[[runbook.steps]]
name = "serve"
kind = "sglang_launch"
host = "gpu-server"
model_path = "/models/Llama-3.3-70B-Instruct"
draft_path = "/ckpt/eagle3"
depth = 16
tp = 8
log = "/tmp/sglang-eagle3.log"
"""
HOURS_AGO = 3 * 3600  # ages read "3.0 h ago" for the whole hour a snapshot may take


def recorded_results(app, fixtures) -> None:
    """What a deployment left: the clean check refused (GPU 5 holds 30000 MiB), the launch of a
    server that crashed on the flag of the story, read from the real SGLang 0.5.23 crash text."""
    from cockpit.hosts.commandlog import CommandRecord
    from cockpit.runbook.checks import judge
    from cockpit.runbook.model import StepResult, StepState
    from cockpit.serving.logread import diagnose_file

    then = time.time() - HOURS_AGO
    report = judge(app.hub.latest["gpu-server"])
    crash = fixtures / "sglang" / "unrecognized_0.5.23.log"
    diagnoses = diagnose_file(crash).diagnoses
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Llama-3.3-70B-Instruct", "--tp-size", "8",
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/ckpt/eagle3",
            "--num-speculative-tokens", "16", "--port", "30000"]
    app.runbook.results.update({
        "clean": StepResult(StepState.FAILED, then, then + 2, "; ".join(report.reasons), evidence=report.evidence),
        "serve": StepResult(StepState.FAILED, then + 10, then + 40, "the server died: --num-speculative-tokens is not an SGLang flag",
                            evidence={"pid": 4242, "host": "gpu-server", "port": 30000, "log": "/tmp/sglang-eagle3.log",
                                      "argv": argv, "started_at": then + 10, "diagnoses": [d.to_json() for d in diagnoses]},
                            output=crash.read_text()),
    })
    app.runbook._changed()
    for n, (command, status) in enumerate([("nvidia-smi --query-gpu=index,uuid,name,memory.used --format=csv", 0),
                                           ("ps -eo pid,user,args", 0), ("kill -TERM 4242", 1)]):
        at = 1796299200 + n  # a fixed time (TZ=UTC): the log shows clock times
        app.hub.log.events.publish(CommandRecord(n, "gpu-server", command, "run", at, at + 0.2, status))


def _show_as_polled(pilot, pane, status) -> None:
    """A server poll's status shown as the app shows one: with the speculation verdict the app judges for it."""
    from cockpit.bench.steps import live_verdict

    spec, _ = pilot.app.runbook.latest_launch("serve_launch") if pilot.app.runbook is not None else (None, None)
    pane.show(status, live_verdict(pilot.app.runbook, spec.name if spec is not None else None, status.figures))


async def _keys(pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await pilot.pause()


async def _confirm(pilot) -> None:
    from cockpit.ui.screens.confirm import ConfirmScreen

    pilot.app.push_screen(ConfirmScreen("This step changes things on a host:", "On gpu-server, send SIGTERM to pid 4242 "
                                        "(python3 -m sglang.launch_server ...), wait up to 10 s, then SIGKILL what is left"))
    await pilot.pause()


async def _force(pilot) -> None:
    pilot.app.action_force_step("serve")
    await pilot.pause()


async def _bench(pilot) -> None:
    from harness.builders import RUNS

    from cockpit.ui.widgets.bench_pane import BenchPane

    pilot.app.query_one(BenchPane).show_runs(RUNS)
    await _keys(pilot, "b")


async def _procs(pilot) -> None:
    """p on gpu-server: its process table, the rows fixed (the pane's own poll stopped: the host is not reachable here)."""
    from cockpit.hosts.proctable import ProcRow
    from cockpit.ui.widgets.proc_pane import ProcessesPolled, ProcessPane

    await _keys(pilot, "h", "p")
    pane = pilot.app.query_one(ProcessPane)
    pilot.app.workers.cancel_group(pane, "procs")
    rows = [ProcRow(4242, (5,), 30000, "alice", 97.5, 9_437_184, 3 * 3600 + 125, "python3 -m sglang.launch_server --model-path "
                    "/models/Llama-3.3-70B-Instruct --tp-size 8 --speculative-algorithm EAGLE3 --speculative-num-steps 16"),
            ProcRow(5151, (0, 1), 2048, "bob", 3.0, 1_048_576, 59, "python train.py --config eagle3.yaml"),
            ProcRow(6060, (2,), 512, None, None, None, None, None, seen=False)]
    pane.on_processes_polled(ProcessesPolled(pane.host or "gpu-server", rows, None))
    pane.focus()
    await pilot.pause()


async def _procs_filtered(pilot) -> None:
    """/ in the process table: only the rows the pattern matches, said in its title."""
    await _procs(pilot)
    await _keys(pilot, "slash", *"sglang", "enter")


async def _copied(pilot) -> None:
    """y on the selected process, then Y: the copied command line whole, selected, to select by mouse."""
    await _procs(pilot)
    await _keys(pilot, "y", "Y")
    pilot.app.clear_notifications()
    await pilot.pause()


PANES = {
    "processes": _procs,
    "processes-filtered": _procs_filtered,
    "copied": _copied,
    "hosts": lambda pilot: _keys(pilot),
    "zoomed-host": lambda pilot: _keys(pilot, "h", "z"),  # the hosts focused first: the server pane may have taken the focus
    "one-gpu": lambda pilot: _keys(pilot, "h", "z", "5"),
    "checklist": lambda pilot: _keys(pilot, "c"),
    "checklist-raw": lambda pilot: _keys(pilot, "c", "x"),
    "server-log": lambda pilot: _keys(pilot, "h", "s") if not pilot.app.layout_state.shown("server") else _keys(pilot),
    "command-log": lambda pilot: _keys(pilot, "l"),
    "benchmarks": _bench,
    "help": lambda pilot: _keys(pilot, "c", "question_mark"),
    "confirm": _confirm,
    "force-reason": _force,
}


RUNS_CONFIG = PANES_CONFIG.replace('[hosts.trainer]\naddress = "trainer.example"', '[hosts.trainer]\nlocal = true') + """
[runs.eagle3-train]
host = "trainer"
log = "{log}"
output_dir = "{out}"
depth = 16
"""


async def _runs(pilot) -> None:
    from helpers import eventually

    from cockpit.ui.widgets.runs_pane import RunsPane

    pane = pilot.app.query_one(RunsPane)
    await eventually(lambda: pane.statuses.get("eagle3-train") is not None, what="the run read")
    if not pilot.app.layout_state.shown("runs"):
        await _keys(pilot, "t")
    pilot.app.workers.cancel_group(pilot.app, "runs")  # read once: the snapshot holds still


async def _serving(pilot) -> None:
    from harness.builders import DECODE_LINES as LINES

    from cockpit.serving.logread import LogReport
    from cockpit.serving.live import LiveFigures
    from cockpit.serving.server import ServerStatus
    from cockpit.ui.widgets.server_log import ServerLogPane

    await _runs(pilot)
    figures = LiveFigures(clock=lambda: 1790848808.0)
    figures.feed(LINES)
    figures.feed([LINES[-1].replace("accept len: 2.60", "accept len: 1.00")] * 3)  # the draft stops being used
    figures.lifetime_accept = 2.41
    pane = pilot.app.query_one(ServerLogPane)
    pane.follow("serve @gpu-server")
    _show_as_polled(pilot, pane, ServerStatus("ready", True, LogReport(), LINES, figures.to_json()))
    if not pilot.app.layout_state.shown("server"):
        await _keys(pilot, "s")


VLLM_LINES = [
    "(APIServer pid=123) INFO 12-04 10:00:00 [api_server.py:1896] vLLM API server version 0.10.2",
    "(APIServer pid=123) INFO 12-04 10:00:31 [default_loader.py:267] Loading weights took 30.80 seconds",
    "(APIServer pid=123) INFO 12-04 10:00:38 [kv_cache_utils.py:864] GPU KV cache size: 1,048,576 tokens",
    "(APIServer pid=123) INFO 12-04 10:00:40 [launcher.py:29] Starting vLLM API server 0 on http://127.0.0.1:30000",
    "INFO:     Application startup complete.",
    "(APIServer pid=123) INFO 12-04 10:01:00 [loggers.py:123] Engine 000: Avg prompt throughput: 120.5 tokens/s, Avg generation "
    "throughput: 1390.2 tokens/s, Running: 8 reqs, Waiting: 2 reqs, GPU KV cache usage: 9.3%, Prefix cache hit rate: 0.0%",
    "(APIServer pid=123) INFO 12-04 10:01:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.95, Accepted "
    "throughput: 900.12 tokens/s, Drafted throughput: 2400.00 tokens/s, Accepted: 9001 tokens, Drafted: 24000 tokens, "
    "Per-position acceptance rate: 0.780, 0.620, 0.550, Avg Draft acceptance rate: 37.5%",
]


async def _vllm_serving(pilot) -> None:
    """A vLLM server (its 0.10.2 log lines, as its source formats them) in the same server pane."""
    from cockpit.serving.logread import diagnose_lines
    from cockpit.serving.live import LiveFigures
    from cockpit.serving.server import ServerStatus
    from cockpit.ui.widgets.server_log import ServerLogPane

    await _runs(pilot)
    figures = LiveFigures(clock=lambda: 1790848808.0)
    figures.feed(VLLM_LINES)
    pane = pilot.app.query_one(ServerLogPane)
    pane.follow("serve @gpu-server (vLLM)")
    _show_as_polled(pilot, pane, ServerStatus("ready", True, diagnose_lines(VLLM_LINES), VLLM_LINES, figures.to_json()))
    if not pilot.app.layout_state.shown("server"):
        await _keys(pilot, "s")


async def _group(pilot) -> None:
    """A launch group whose rank 1 died after the start: failed, never half-up; the cause names the node."""
    from cockpit.serving.logread import LogReport
    from cockpit.sglang.group import group_state, node_state
    from cockpit.serving.server import ServerStatus
    from cockpit.ui.widgets.server_log import ServerLogPane

    await _runs(pilot)
    rank0 = node_state(0, "node0", ["[2026-12-03 10:00:00 TP0] The server is fired up and ready to roll!"], True)
    rank1 = node_state(1, "node1", ["[2026-12-03 10:00:00 TP8] Dummy health check server started in background thread at 0.0.0.0:30000"],
                       False)
    lines = ["[rank0]:[E1203 10:05:00.000000 ProcessGroupNCCL.cpp:1834] [PG ID 2 PG GUID 3 Rank 0] Timeout at NCCL work: 32, last "
             "enqueued NCCL work: 32, last completed NCCL work: 31."]
    pane = pilot.app.query_one(ServerLogPane)
    pane.follow("serve @node0+1")
    pane.show(ServerStatus("ready", False, LogReport(), lines, {}, group_state([rank0, rank1]).to_json()))
    if not pilot.app.layout_state.shown("server"):
        await _keys(pilot, "s")


async def everything(pilot) -> None:
    """Every pane open at once: runs, the serving server, the benchmarks' decision, the command log (its
    lines fixed: the run's own probes ran at wall-clock times)."""
    from harness.builders import RUNS

    from cockpit.hosts.commandlog import CommandRecord
    from cockpit.ui.widgets.bench_pane import BenchPane
    from cockpit.ui.widgets.command_log import CommandLogPane

    await _serving(pilot)
    pilot.app.query_one(BenchPane).show_runs(RUNS)
    for view, key in (("bench", "b"), ("log", "l")):
        if not pilot.app.layout_state.shown(view):
            await _keys(pilot, key)
    log = pilot.app.query_one(CommandLogPane)
    log.clear()
    for n, (host, command, status) in enumerate([("gpu-server", "nvidia-smi --query-compute-apps=pid,used_memory --format=csv", 0),
                                                 ("trainer", "ps -eo pid,user,args", 0)]):
        at = 1796299200 + n  # a fixed time (TZ=UTC)
        log.add(CommandRecord(100 + n, host, command, "run", at, at + 0.2, status))
    await _keys(pilot, "c")


def runs_app(tmp_path, fixtures, monkeypatch, ascii_only: bool | None = None) -> CockpitApp:
    import shutil

    from harness.builders import write_checkpoint

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    log = tmp_path / "train.log"
    shutil.copy(fixtures / "training" / "E2-early" / "train.log", log)
    write_checkpoint(tmp_path / "outputs" / "epoch_1", "E2-early", "outputs__tiny-llama-eagle3__epoch_1")
    config = parse_config(RUNS_CONFIG.format(log=log, out=tmp_path / "outputs"))
    app = CockpitApp(config, hub=fixed_hub(config), ascii_only=ascii_only)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    return app


SCENES = {"runs": _runs, "serving": _serving, "vllm-serving": _vllm_serving, "group-failed": _group, "everything": everything}



def panes_app(tmp_path, monkeypatch, ascii_only: bool | None = None) -> CockpitApp:
    """The app of the PANES scenes (call recorded_results once it runs)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    config = parse_config(PANES_CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config), ascii_only=ascii_only)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    return app
