"""The benchmark client against the stand-in SGLang server (tests/standin/sglang/serving.py), which
streams the real wire formats with scripted timings and chunk sizes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.bench.client import RequestRecord, Workload, run_closed_loop, run_request
from cockpit.hosts.http import default_opener
from cockpit.bench.stats import percentile, summarize
from harness.sshd import free_port
from harness.standin_sglang import start_standin_sglang

MESSAGES = [[{"role": "user", "content": "hello"}]]


def run_with_terminal_stderr(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """`argv` with its stderr on a pseudo-terminal (a person watching), its stdout captured."""
    import pty
    import threading

    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, text=True)
    os.close(slave)
    said = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            said.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=timeout)
    reader.join(5)
    os.close(master)
    return subprocess.CompletedProcess(argv, proc.returncode, out, said.decode(errors="replace"))


@pytest.fixture
def standin_server():
    """Start the stand-in server (a separate process, like a real one) with a scenario."""
    procs = []

    def start(scenario: dict, *flags: str) -> str:
        proc, endpoint = start_standin_sglang(scenario, *flags)
        procs.append(proc)
        return endpoint

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("api", ["sglang", "openai"])
async def test_timings_and_counts_match_the_scripted_truth(standin_server, api):
    pattern = [3, 1, 4, 2]
    endpoint = standin_server({"ttft_ms": 40, "itl_ms": 15, "chunk_tokens": pattern}, "--speculative-algorithm", "EAGLE3",
                              "--speculative-num-draft-tokens", "4")
    sent: list[tuple[float, float]] = []
    record = RequestRecord(index=0)
    await run_request(default_opener, endpoint, api, MESSAGES[0], 30, 0.0, record,
                      on_event=lambda arrived, event: sent.append((arrived, event.get("standin_sent", arrived))))
    assert record.ok, record.error
    # counts are exact: 30 tokens in chunks of 3,1,4,2,... = 12 verify steps
    expected_chunks, total = [], 0
    while total < 30:
        step = min(pattern[len(expected_chunks) % 4], 30 - total)
        total += step
        expected_chunks.append(total)
    assert record.chunk_tokens == expected_chunks and record.completion_tokens == 30
    assert record.spec_verify_ct == len(expected_chunks)
    assert record.accept_length == 30 / len(expected_chunks)
    # timings: the client stamps a chunk when it arrives, so its stamps sit within a millisecond of the
    # server's send stamps; the median is held to that (a single chunk can wait for the OS scheduler on a
    # busy machine: tests/perf/bench_client.py measures the spread under load)
    # (how close they sit is measured under load in tests/perf/bench_client.py: no wall-clock threshold here, only
    # what holds however busy the machine is: a chunk arrives after it was sent, and never sooner than scripted)
    lags = sorted(arrived - sent_at for arrived, sent_at in sent)
    assert lags[0] >= 0, lags
    assert record.chunk_times == [arrived for arrived, _ in sent if arrived in record.chunk_times]
    assert record.ttft >= 0.040 - 0.002  # scripted 40 ms (+ connect and request): never less
    itls = record.itls()
    assert len(itls) == 30 - expected_chunks[0]
    gaps = sorted(record.chunk_latencies())
    assert gaps[len(gaps) // 2] >= 0.015 - 0.002, gaps  # scripted 15 ms between chunks: never less
    assert abs(record.tpot - (record.e2e - record.ttft) / 29) < 1e-12


async def test_in_stream_error_and_abort_are_failures(standin_server):
    endpoint = standin_server({"ttft_ms": 5, "itl_ms": 2, "error_after": 3})
    record = await run_request(default_opener, endpoint, "sglang", MESSAGES[0], 20, 0.0, RequestRecord(0))
    assert not record.ok and "scheduler aborted" in record.error
    endpoint = standin_server({"ttft_ms": 5, "itl_ms": 2, "abort_after": 3})
    record = await run_request(default_opener, endpoint, "openai", MESSAGES[0], 20, 0.0, RequestRecord(0))
    assert not record.ok and record.error
    workload = Workload(MESSAGES, requests=8, concurrency=2, max_tokens=20)
    records, start, end = await run_closed_loop(endpoint, "sglang", workload)
    summary = summarize(records, start, end)
    assert summary["requests"] == 8 and summary["failed"] == 8  # never counted as fast requests
    assert summary["output_tokens"] == 0 and summary["ttft_ms"]["p50"] is None


async def test_closed_loop_warmup_excluded_and_pooled_acceptance(standin_server):
    endpoint = standin_server({"ttft_ms": 5, "itl_ms": 2, "chunk_tokens": [2, 3]}, "--speculative-algorithm", "EAGLE3")
    workload = Workload(MESSAGES * 3, requests=12, concurrency=4, max_tokens=10)
    records, start, end = await run_closed_loop(endpoint, "sglang", workload)
    assert len(records) == 16 and sum(r.warmup for r in records) == 4
    summary = summarize(records, start, end)
    assert summary["requests"] == 12 and summary["failed"] == 0
    assert summary["output_tokens"] == 120
    assert summary["accept_length"] == 10 / 4  # chunks 2,3,2,3: 4 verify steps per request
    assert set(summary["ttft_ms"]) == {"p50", "p90", "p99", "mean"}


def test_percentile_is_numpy_linear():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10], 99) == 10
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90) == pytest.approx(9.1)


def test_bench_run_cli_json_and_report(standin_server, tmp_path):
    endpoint = standin_server({"ttft_ms": 5, "itl_ms": 1})
    spec = standin_server({"ttft_ms": 5, "itl_ms": 1, "chunk_tokens": [3]}, "--speculative-algorithm", "EAGLE3")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120)

    base = cli("bench", "run", "--endpoint", endpoint, "--requests", "8", "--concurrency", "2", "--max-tokens", "12",
               "--label", "baseline", "--json")
    assert base.returncode == 0, base.stderr
    data = json.loads(base.stdout)
    for key in ("requests", "failed", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_throughput_tok_s", "accept_length"):
        assert key in data
    assert data["requests"] == 8 and data["failed"] == 0 and data["accept_length"] is None
    for key in ("p50", "p90", "p99"):
        assert data["ttft_ms"][key] is not None
    fast = cli("bench", "run", "--endpoint", spec, "--requests", "8", "--concurrency", "2", "--max-tokens", "12", "--label", "eagle3", "--json")
    assert json.loads(fast.stdout)["accept_length"] == 3.0
    stored = [json.loads(line) for line in Path(json.loads(fast.stdout)["file"]).read_text().splitlines()]
    assert stored[0]["type"] == "summary" and sum(1 for r in stored if r["type"] == "request") == 10  # 2 warm-up + 8
    report = cli("bench", "report", data["file"], json.loads(fast.stdout)["file"], "--json")
    rows = json.loads(report.stdout)["runs"]
    assert [r["label"] for r in rows] == ["baseline", "eagle3"] and rows[0]["speedup"] == 1.0 and rows[1]["speedup"] > 1.0
    md = cli("bench", "report", data["file"], json.loads(fast.stdout)["file"], "--format", "md")  # a Markdown table, not text
    assert md.returncode == 0 and md.stdout.startswith("| run | concurrency |") and "| eagle3 | 2 |" in md.stdout
    csv_out = cli("bench", "report", data["file"], "--format", "csv")
    assert csv_out.stdout.splitlines()[0].startswith("label,") or ",label," in csv_out.stdout.splitlines()[0]
    bad = cli("bench", "run", "--endpoint", "http://127.0.0.1:1", "--requests", "2", "--concurrency", "1", "--no-save")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert cli("bench", "run", "--endpoint", endpoint, "--prompts", str(tmp_path / "none.jsonl")).returncode == 2


def test_sweep_three_depths_through_the_launch_step(sshd, tmp_path):
    """End to end: the sweep relaunches the (stand-in) server through the runbook's launch step for a
    baseline and three depths, waits for ready, benchmarks through the SSH connection, stops it."""
    sshd.scenario({"gpus": 8})
    port = free_port()
    log = tmp_path / "sglang.log"
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")) + f"""
[runbook]
name = "sweep"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
host = "gpu-server"
model_path = "/models/Llama-3.1-8B-Instruct"
draft_path = "/ckpt/eagle3"
depth = 16
port = {port}
log = "{log}"
settle_s = 0.3
env = {{ SGLANG_STANDIN = {json.dumps(json.dumps({"load_s": 0.1, "warmup_s": 0.2, "ttft_ms": 5, "itl_ms": 2}))} }}

[bench]
launch_step = "launch"
depths = [16, 10, 5]
concurrency = [2]
requests = 6
max_tokens = 24
repeats = 1
after = "stop"
""")
    proc = run_with_terminal_stderr([sys.executable, "-m", "cockpit", "bench", "sweep", "--yes", "--json", "--config", str(config)],
                                    timeout=240)  # progress is for a person at a terminal
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    rows = {r["config"]: r for r in data["rows"]}
    # depth N = N steps of a topk-1 chain, N + 1 draft tokens (the launch step's own depth 16 is one of them)
    deep, shallow = "depth 16 (steps 16, topk 1, draft tokens 17)", "depth 5 (steps 5, topk 1, draft tokens 6)"
    assert set(rows) == {"baseline", deep, "depth 10 (steps 10, topk 1, draft tokens 11)", shallow}
    assert rows["baseline"]["accept_length"] is None and rows["baseline"]["speedup"] == 1.0
    assert rows[deep]["accept_length"] > 1.0
    assert rows[shallow]["accept_length"] > 1.0
    assert all(r["failed"] == 0 for r in rows.values())
    assert "[4/4" in proc.stderr and "left" in proc.stderr  # progress with what runs and how long is left
    runs = [json.loads(Path(f).read_text().splitlines()[0]) for f in data["runs"]]
    assert [r["server_info"].get("speculative_num_draft_tokens") for r in runs] == [None, "17", "11", "6"]
    assert data["decisions"] and data["recommended"]["best"] in rows
    # every relaunch went through the gate; `after = "stop"` stops the server at the end
    assert log.read_text().count("# cockpit: launch ") == 4
    audit = (Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "runbooks")
    events = [json.loads(line)["event"] for f in audit.glob("*.audit.jsonl") for line in f.read_text().splitlines()]
    assert events.count("launch") == 4 and events.count("kill") >= 4
