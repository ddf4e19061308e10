"""The serving server, live: figures and flags from real-format `Decode batch` lines (every SGLang
wording), /metrics (prometheus_client's format) and /server_info.  The server is the demo's stand-in
SGLang (cockpit/demo/server.py, named a stand-in: no GPU here): it writes 0.5.x decode lines and
SGLang's metric names, and its faults are switched from a control file (the draft stops being used;
decoding hangs while requests wait)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

FIXTURES = __import__("pathlib").Path(__file__).resolve().parent / "fixtures"

from cockpit.config import HostConfig
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.http import default_opener
from cockpit.hosts.local import LocalTransport
from cockpit.serving.live import LiveFigures, LiveServer
from cockpit.sglang.loglines import parse_batch_line
from harness.sshd import free_port
from harness.builders import DECODE_LINES as LINES  # noqa: F401

# one decode line per wording of runs-facts b.2 (0.4.6, 0.4.10-0.5.3, 0.5.4-0.5.8, 0.5.10+, 0.5.23 extras, DP ranks, Ray prefix)
def test_every_wording_of_the_decode_line_is_read():
    figures = LiveFigures(clock=lambda: 0.0)
    figures.feed(LINES)
    assert [w.accept_len for w in figures.history] == [2.95, 2.90, 2.80, 2.70, 2.60]
    assert [w.queued for w in figures.history] == [0, 1, 2, 3, 4]
    assert [w.throughput for w in figures.history] == [812.40, 800.00, 790.00, 780.00, 770.00]
    assert parse_batch_line(LINES[3]).ranks == "DP1 TP8"
    prefill = ("[2026-10-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, token usage: 0.04, "
               "#running-req: 7, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 5120.33")
    figures.feed([prefill, "[2026-10-01 10:00:00] INFO:     127.0.0.1:56304 - \"POST /generate HTTP/1.1\" 200 OK", "garbage \x00\xff"])
    assert len(figures.history) == 5 and figures.last_prefill.detail["#new-token"] == "1024" and figures.flags == []


@pytest.mark.parametrize("line, kind", [
    ("[2026-05-05 02:22:14 TP0] Scheduler hit an exception: Traceback (most recent call last):", "crashed"),
    ("[2026-05-05 02:22:14 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "crashed"),
    ("[2025-04-17 11:44:15 TP0] Watchdog timeout (self.watchdog_timeout=300)", "crashed"),
    ("[2026-05-05 02:22:15] Received sigquit from a child process. It usually means the child failed.", "crashed"),
    ("[2026-05-05 02:22:15] Subprocess scheduler_0 (pid=4242) crashed with exit code -9. Triggering SIGQUIT for cleanup...", "crashed"),
    ("[2026-05-05 02:22:15 TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "oom"),
    ("[2026-05-05 02:22:15 TP0] Decode out of memory. Try to lower your batch size.", "oom"),
    ("[2026-05-05 02:22:15] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. "
     "tic start time: 02:22:15. last_heartbeat time: 02:21:55", "hung"),
])
def test_crash_and_oom_texts_are_flagged(line, kind):
    figures = LiveFigures(clock=lambda: 0.0)
    figures.feed([LINES[0], line])
    assert [(f.kind, f.line) for f in figures.current_flags()] == [(kind, line)]


def test_kv_pressure_is_counted_not_flagged():
    figures = LiveFigures(clock=lambda: 0.0)
    figures.feed(["[2026-05-05 02:22:15 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.5 -> 0.6"] * 3)
    assert figures.retractions == 3 and figures.flags == []


def test_low_acceptance_without_load_is_not_a_lost_draft():
    figures = LiveFigures(clock=lambda: 0.0)
    idle = LINES[0].replace("#running-req: 8", "#running-req: 0").replace("accept len: 2.95", "accept len: 1.00")
    figures.feed([idle] * 5)
    assert figures.flags == []
    loaded = LINES[0].replace("accept len: 2.95", "accept len: 1.02")
    figures.feed([loaded] * 2)
    assert figures.flags == []
    figures.feed([loaded])
    assert [f.kind for f in figures.flags] == ["draft_not_used"]
    figures.feed([LINES[0]])  # the draft back: the flag goes
    assert figures.flags == []


async def _load(port: int, stop: asyncio.Event) -> None:
    """One client keeping a long /generate stream open (requests in flight, as under load)."""
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        body = json.dumps({"text": "x", "sampling_params": {"max_new_tokens": 100000}, "stream": True}).encode()
        writer.write(f"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        try:
            while not stop.is_set() and await reader.read(65536):
                pass
        finally:
            writer.close()


def test_standin_server_through_acceptance_collapse_and_a_hang(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    control = tmp_path / "control.json"
    control.write_text("{}")
    env = {**os.environ, "COCKPIT_DEMO_CONTROL": str(control)}
    argv = [sys.executable, "-m", "cockpit.demo.server", "--model-path", "m", "--port", str(port), "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "5", "--speculative-eagle-topk", "1", "--enable-metrics"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    transport = LocalTransport(HostConfig(name="here", local=True), CommandLog())
    live = LiveServer(transport, str(log), f"http://127.0.0.1:{port}", opener=default_opener)

    async def until(predicate, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            figures = await live.poll()
            if predicate(figures):
                return figures
            await asyncio.sleep(0.3)
        raise AssertionError(f"not within {timeout} s: {figures.to_json()}")

    async def go():
        stop = asyncio.Event()
        clients = [asyncio.ensure_future(_load(port, stop)) for _ in range(4)]
        try:
            figures = await until(lambda f: len(f.history) >= 3 and f.lifetime_accept and f.counter_accept, 30)
            data = figures.to_json()
            assert data["running"] == 4 and data["accept_length"]["window"] > 1.5 and data["flags"] == []
            assert data["accept_length"]["lifetime"] > 1.5 and data["accept_length"]["counters"] > 1.5  # Δtokens / Δverifies
            assert {"log", "metrics", "server_info"} <= set(data["sources"])

            control.write_text(json.dumps({"draft": False}))  # the draft stops being used
            figures = await until(lambda f: any(x.kind == "draft_not_used" for x in f.current_flags()), 30)
            flag = next(x for x in figures.current_flags() if x.kind == "draft_not_used")
            assert "accept len: 1.00" in flag.line and "Decode batch" in flag.line

            result = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(log), "--url", f"127.0.0.1:{port}", "--json"],
                                    capture_output=True, text=True, timeout=60)
            assert result.returncode == 1, result.stderr
            out = json.loads(result.stdout)
            assert {"throughput_tok_s", "running", "queued", "token_usage", "accept_length", "history", "flags"} <= set(out)
            assert {"window", "lifetime"} <= set(out["accept_length"]) and "draft_not_used" in [f["kind"] for f in out["flags"]]

            control.write_text(json.dumps({"draft": True, "hang": True}))  # the scheduler stops; requests stay open
            figures = await until(lambda f: any(x.kind == "hung" for x in f.current_flags()), 30)
            hung = next(x for x in figures.current_flags() if x.kind == "hung")
            assert "no decode line for" in hung.message and "requests run" in hung.message
        finally:
            stop.set()
            for client in clients:
                client.cancel()
            await asyncio.gather(*clients, return_exceptions=True)

    try:
        asyncio.run(go())
    finally:
        proc.kill()
        proc.wait()


def test_cockpit_server_exit_codes(tmp_path):
    healthy = tmp_path / "ok.log"
    healthy.write_text("\n".join(LINES) + "\n")
    ok = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(healthy), "--json"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout)["flags"] == [] and json.loads(ok.stdout)["accept_length"]["window"] == 2.60
    # the same log, last written 10 minutes ago: requests were running and no decode line came since.
    # An idle SGLang prints nothing either: the log alone cannot tell idle from hung, and says so (no alarm)
    os.utime(healthy, (time.time() - 600, time.time() - 600))
    stale = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(healthy), "--json"], capture_output=True, text=True, timeout=60)
    assert stale.returncode == 0 and json.loads(stale.stdout)["flags"] == []
    assert json.loads(stale.stdout)["activity"]["state"] == "quiet"
    text = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(healthy)], capture_output=True, text=True, timeout=60)
    assert "idle or hung cannot be told from the log alone" in text.stdout
    # the story's start-up crash: not "serving, nothing flagged"
    crash = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(FIXTURES / "sglang" / "unrecognized_0.5.2.log"),
                            "--json"], capture_output=True, text=True, timeout=60)
    assert crash.returncode == 1 and [f["kind"] for f in json.loads(crash.stdout)["flags"]] == ["crashed"]
    assert "--num-speculative-tokens" in json.loads(crash.stdout)["flags"][0]["message"]
    idle = tmp_path / "idle.log"
    idle.write_text(LINES[0].replace("#running-req: 8", "#running-req: 0") + "\n")
    assert subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(idle)], capture_output=True, timeout=60).returncode == 0
    missing = subprocess.run([sys.executable, "-m", "cockpit", "server", "--log", str(tmp_path / "nope.log")], capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 2 and "nope.log" in missing.stdout + missing.stderr and "Traceback" not in missing.stderr


def test_a_server_that_dies_under_a_passed_launch_is_one_alert_with_its_cause(fixtures):
    """The death alert names the first error the log's diagnosis found; a server stopped on purpose
    (its launch step no longer passed, as a sweep's relaunch does) or already dead is no alert."""
    from cockpit.runbook.model import StepResult, StepState
    from cockpit.serving.logread import diagnose_lines
    from cockpit.serving.server import ServerStatus, death_alert

    lines = (fixtures / "sglang" / "unrecognized_0.5.17.log").read_text().splitlines()
    dead = ServerStatus("down", False, diagnose_lines(lines), [])
    passed = StepResult(StepState.PASSED, 1.0, 2.0, "ready")
    alert = death_alert("launch", passed, True, dead)
    assert alert is not None and alert.level == "error" and alert.title == "launch: the server died"
    assert alert.text == next(d.message for d in dead.report.diagnoses if d.severity == "error")
    assert death_alert("launch", StepResult(StepState.PENDING, None, None, ""), True, dead) is None
    assert death_alert("launch", passed, False, dead) is None  # already dead: said once
    assert death_alert("launch", passed, True, ServerStatus("ready", True, diagnose_lines([]), [])) is None


def _windows(figures, now: list, seconds: int = 20, running: int = 8) -> None:
    """A decode line a second for `seconds` s of the cockpit's clock, `running` requests each."""
    for i in range(seconds):
        now[0] += 1
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now[0]))
        figures.feed([f"[{stamp} TP0] Decode batch, #running-req: {running}, #token: 2100, token usage: 0.04, accept len: 2.80, "
                      "cuda graph: True, gen throughput (token/s): 1390.00, #queue-req: 0"])


def test_a_sweep_that_ended_is_idle_not_hung_and_a_stuck_scheduler_is_hung():
    """Issue 27 item 5: the last decode line of a sweep says 8 running, then SGLang prints nothing
    (it is idle).  Silence alone is 'quiet'; /metrics at 0 running, or /server_info answering, is
    idle; hung needs every source to show no progress while work waits."""
    now = [1_000_000.0]
    figures = LiveFigures(clock=lambda: now[0])
    _windows(figures, now)
    figures.feed_values({"num_running_reqs": 8, "num_queue_reqs": 0, "generation_tokens_total": 1000}, now[0], "metrics")
    now[0] += 30
    assert figures.activity()[0] == "quiet" and figures.current_flags() == []  # the log alone: no alarm
    figures.feed_values({"num_running_reqs": 0, "num_queue_reqs": 0, "generation_tokens_total": 9000}, now[0], "metrics")
    assert figures.activity()[0] == "idle" and figures.current_flags() == []

    stuck = LiveFigures(clock=lambda: now[0])
    _windows(stuck, now)
    stuck.feed_values({"num_running_reqs": 8, "num_queue_reqs": 2, "generation_tokens_total": 5000}, now[0], "metrics")
    now[0] += 30
    stuck.feed_values({"num_running_reqs": 8, "num_queue_reqs": 2, "generation_tokens_total": 5000}, now[0], "metrics")
    stuck.server_info_answered(False, now[0])
    assert stuck.activity()[0] == "hung" and [f.kind for f in stuck.current_flags()] == ["hung"]
    assert "/server_info does not answer" in stuck.current_flags()[0].message
    stuck.server_info_answered(True, now[0] + 1)  # it answers again: the scheduler is not stuck
    now[0] += 1
    assert stuck.current_flags() == []


def test_figures_belong_to_one_launch_a_relaunch_in_the_same_log_resets_them():
    from cockpit.hosts.procs import launch_marker

    now = [1_000_000.0]
    figures = LiveFigures(clock=lambda: now[0])
    _windows(figures, now, 5)
    assert figures.to_json()["throughput_tok_s"] == 1390.0
    figures.feed([launch_marker("launch", "gpu-server"), "[2026-12-04 18:00:00] server_args=ServerArgs(model_path='/m')"])
    data = figures.to_json()
    assert data["throughput_tok_s"] is None and data["running"] is None and data["history"] == [] and data["relaunches_seen"] == 1


def test_a_server_just_started_or_relaunched_is_idle_and_never_below_one_accepted():
    """Issue 36 item 2: after a sweep's relaunch the pane said `unknown - tok/s ... accept - (lifetime 0.00)`
    for a quarter of an hour.  SGLang's acceptance counts the bonus token: never below 1; a 0 from /server_info
    (a division guarded to 0 before the first speculative step) is no figure.  A server whose start was read
    in its log, with no prefill or decode line since and its scheduler answering, is idle."""
    from cockpit.hosts.procs import launch_marker

    now = [1_000_000.0]
    figures = LiveFigures(clock=lambda: now[0])
    _windows(figures, now, 3)
    figures.feed([launch_marker("launch", "gpu-server"), "[2026-12-04 18:00:00] server_args=ServerArgs(model_path='/m')"])
    assert figures.activity()[0] == "starting"  # its start read, its ready line not yet: starting (nothing asked yet)
    figures.server_info_answered(True, now[0])
    figures.feed_server_info({"internal_states": [{"avg_spec_accept_length": 0.0, "last_gen_throughput": 0.0}]})
    data = figures.to_json()
    assert data["accept_length"]["lifetime"] is None and data["activity"]["state"] == "idle", data
    assert "no request since it started" in data["activity"]["why"] and data["sources"] == ["server_info"]
    figures.feed_server_info({"internal_states": [{"avg_spec_accept_length": 2.41}]})
    assert figures.to_json()["accept_length"]["lifetime"] == 2.41
    # a prefill with no decode line yet is work, not idleness
    figures.feed(["[2026-12-04 18:00:05 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, token usage: 0.04, "
                  "#running-req: 0, #queue-req: 0"])
    assert figures.activity()[0] == "serving"
    # the same silence without the start in the log (a tail of a long log): cannot be told
    tail = LiveFigures(clock=lambda: now[0])
    tail.server_info_answered(True, now[0])
    assert tail.activity()[0] == "unknown"


def test_the_server_pane_says_why_there_are_no_figures_yet():
    from cockpit.ui.widgets.server_log import live_text

    figures = LiveFigures(clock=lambda: 1_000_000.0)
    figures.feed(["[2026-12-04 18:00:00] server_args=ServerArgs(model_path='/m')"])
    figures.server_info_answered(True)
    figures.feed_server_info({"internal_states": [{"avg_spec_accept_length": 0}]})
    shown = live_text(figures.to_json()).plain
    assert shown.startswith("idle no request since it started") and "0.00" not in shown and " - " not in shown, shown


async def test_a_server_serving_well_is_not_diagnosed_again_for_each_decode_line(tmp_path, monkeypatch):
    """Issue 36 item 1: the server pane diagnosed its last 2000 lines again whenever a line came (~70 ms), so
    with a decode line every second that was most of the cockpit's CPU.  A decode line of a draft in use
    changes no diagnosis: the report is made again only for a line that can change it, and its line numbers
    stay those the lines were read with as old lines leave the window."""
    import cockpit.serving.server as server_module
    from cockpit.serving.server import ServerWatcher

    log = tmp_path / "sglang.log"
    log.write_text("[2026-12-04 18:00:00] server_args=ServerArgs(model_path='/m')\n")
    calls = []
    real = server_module.diagnose_lines
    monkeypatch.setattr(server_module, "diagnose_lines", lambda *a, **k: calls.append(k) or real(*a, **k))
    watcher = ServerWatcher(LocalTransport(HostConfig(name="here", local=True), CommandLog()), os.getpid(), free_port(), str(log),
                            keep_lines=50)
    watcher.ask_every_s = 3600
    await watcher.poll()
    assert len(calls) == 1
    for second in range(80):
        with open(log, "a") as handle:
            handle.write(f"[2026-12-04 18:01:{second % 60:02d} TP0] Decode batch, #running-req: 8, #token: 2100, token usage: 0.04, "
                         "accept len: 2.80, cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 0\n"
                         f'[2026-12-04 18:01:{second % 60:02d}] INFO:     127.0.0.1:56304 - "POST /generate HTTP/1.1" 200 OK\n')
        status = await watcher.poll()
    assert len(calls) == 1 and status.report.diagnoses == []
    with open(log, "a") as handle:
        handle.write("[2026-12-04 18:02:00 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    status = await watcher.poll()
    assert len(calls) == 2 and calls[-1]["first_line"] == 162 - 50 + 1  # the 112 lines that left the window counted
    oom = [d for d in status.report.diagnoses if d.severity == "error"]
    assert oom and oom[0].line == 1 + 160 + 1  # the line's number as read: the 162nd line of the log
