"""The demo's vLLM stand-in prints what a real vLLM prints (issue 48), checked line shape by line shape against the
recording of a real vLLM 0.20.2 on an H100 (tests/fixtures/gpu-engines/): each shape below matches lines of the real log
and of the stand-in's alike, so the two cannot drift apart unseen.  The stand-in replays 0.10.2's words where the
releases differ (its version, its route line); what both print alike is held here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.sshd import free_port

REAL = Path(__file__).parent / "fixtures" / "gpu-engines" / "vllm-0.20.2-h100"
STAMP = r"\((?:APIServer|EngineCore(?:_DP\d+)?) pid=\d+\) (?:INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] "
SHAPES = {
    "a process prefix and vLLM's stamp": rf"^{STAMP}",
    # 0.10.2 says it in words, 0.20.2 in its ASCII banner (`... █  version 0.20.2`): the cockpit reads both
    "its version at start": rf"^{STAMP}(?:vLLM API server version |.*[█▄▀] +version )\d+\.\d+",
    "the non-default args": rf"^{STAMP}non-default args: \{{",
    "the stats line": rf"^{STAMP}Engine 000: Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s, "
                      r"Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: [\d.]+%, Prefix cache hit rate: [\d.]+%$",
    "the zero stats line after the traffic": rf"^{STAMP}Engine 000: Avg prompt throughput: 0\.0 tokens/s, Avg generation "
                                             r"throughput: 0\.0 tokens/s, Running: 0 reqs",
    "the speculative line": rf"^{STAMP}SpecDecoding metrics: Mean acceptance length: [\d.]+, Accepted throughput: [\d.]+ "
                            r"tokens/s, Drafted throughput: [\d.]+ tokens/s, Accepted: \d+ tokens, Drafted: \d+ tokens, "
                            r"Per-position acceptance rate: [\d., ]+, Avg Draft acceptance rate: [\d.]+%$",
    "ready": r"^\(APIServer pid=\d+\) INFO:     Application startup complete\.$",
    "an access line": r'^\(APIServer pid=\d+\) INFO:     127\.0\.0\.1:\d+ - "POST /v1/\w+(?:/\w+)? HTTP/1\.1" 200 OK$',
    "the engine's shutdown": r"^\(EngineCore(?:_DP\d+)? pid=\d+\) INFO \d\d-\d\d [\d:]+ \[core\.py:\d+\] Shutdown complete$",
    "uvicorn's shutdown": r"^\(APIServer pid=\d+\) INFO:     Application shutdown complete\.$",
    "its last word": r"^\(APIServer pid=\d+\) INFO:     Finished server process \[\d+\]$",
}


def _matches(lines: list[str], pattern: str) -> int:
    return sum(1 for line in lines if re.search(pattern, line))


def _real_lines() -> list[str]:
    return [line for name in ("A-serve.log", "B-serve.log") for line in (REAL / name).read_text().splitlines()]


def _standin_run(tmp_path: Path) -> tuple[list[str], int, str]:
    port = free_port()
    out = tmp_path / "standin.log"
    env = {**os.environ, "VLLM_LOG_STATS_INTERVAL": "1", "PYTHONUNBUFFERED": "1"}
    with out.open("w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.demo.vllm_server", "serve", "/models/target", "--port", str(port),
                                 "--speculative-config", json.dumps({"method": "eagle3", "model": "/ckpt/eagle3",
                                                                     "num_speculative_tokens": 3})],
                                stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        for _ in range(300):  # up: its ready line (no wall-clock threshold: at most 300 looks)
            if "Application startup complete" in out.read_text():
                break
            time.sleep(0.1)
        for _ in range(2):
            body = json.dumps({"model": "/models/target", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 40,
                               "stream": True}).encode()
            request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=30).read()
        for _ in range(100):  # the window after the traffic: its zero line
            if _matches(out.read_text().splitlines(), SHAPES["the zero stats line after the traffic"]):
                break
            time.sleep(0.1)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out.read_text().splitlines(), code, metrics


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_shape_is_in_the_real_recording(shape):
    assert _matches(_real_lines(), SHAPES[shape]), f"the real vLLM has no line shaped as {shape!r}: the shape is wrong"


def test_the_standin_prints_each_shape_the_real_engine_prints(tmp_path):
    lines, code, metrics = _standin_run(tmp_path)
    missing = [shape for shape, pattern in SHAPES.items() if not _matches(lines, pattern)]
    assert not missing, (missing, lines[-20:])
    assert code == 0  # a graceful stop exits 0, as the real one does (a crash does too: the log says which)
    assert not any("\x1b" in line for line in lines)  # off a terminal, no colour, as the real one writes a file
    # every stamped line of the stand-in's is stamped as the real one stamps
    stamped = [line for line in lines if re.match(r"^\(\w+ pid=\d+\) (?:INFO|WARNING|ERROR) \d", line)]
    assert stamped and all(re.match(SHAPES["a process prefix and vLLM's stamp"], line) for line in stamped)
    # the same order on a stop: the engine's shutdown, then uvicorn's, then its last word
    order = [next(i for i, line in enumerate(lines) if re.search(SHAPES[s], line))
             for s in ("the engine's shutdown", "uvicorn's shutdown", "its last word")]
    assert order == sorted(order)
    # /metrics: every `vllm:` family the real one serves, of the same type (issue 48: the stand-in served 9 of its 74)
    from prometheus_client.parser import text_string_to_metric_families

    def families(text: str) -> dict[str, str]:
        return {f.name: f.type for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")}

    real = families((REAL / "A-traffic" / "during-metrics.txt").read_text())
    served = families(metrics)
    assert len(real) > 40 and {n: t for n, t in served.items() if n in real} == real, sorted(set(real) - set(served))
    assert served.keys() <= real.keys(), sorted(set(served) - set(real))  # nothing the real one does not serve


# the EngineCore killed under traffic (A-serve.log): the API server's traceback, 500s, then its own orderly shutdown
CRASH_SHAPES = {
    "the output handler's failure": rf"^{STAMP}AsyncLLM output_handler failed\.$",
    "EngineDeadError": rf"^{STAMP}vllm\.v1\.engine\.exceptions\.EngineDeadError: EngineCore encountered an issue\.",
    "a 500 to a request": r'^\(APIServer pid=\d+\) INFO:     127\.0\.0\.1:\d+ - "POST /v1/\w+(?:/\w+)? HTTP/1\.1" 500 Internal Server Error$',
    "a 503 from /health": r'^\(APIServer pid=\d+\) INFO:     127\.0\.0\.1:\d+ - "GET /health HTTP/1\.1" 503 Service Unavailable$',
    "uvicorn's shutdown": SHAPES["uvicorn's shutdown"],
    "its last word": SHAPES["its last word"],
}


@pytest.mark.parametrize("shape", list(CRASH_SHAPES))
def test_each_crash_shape_is_in_the_real_recording(shape):
    assert _matches((REAL / "A-serve.log").read_text().splitlines(), CRASH_SHAPES[shape]), shape


def test_the_standins_engine_core_dies_as_the_real_one_did(tmp_path):
    """SIGUSR2 to the stand-in plays the real recording's kill of the EngineCore under traffic: the same shapes in the
    same order, exit status 0, and the cockpit reads that log as a crash (parse-log), never a graceful stop."""
    import threading

    port = free_port()
    out = tmp_path / "crash.log"
    with out.open("w") as handle:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.demo.vllm_server", "serve", "/models/target", "--port", str(port)],
                                stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        for _ in range(300):
            if "Application startup complete" in out.read_text():
                break
            time.sleep(0.1)

        def ask(path: str, body: bytes | None = None) -> int:
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": "application/json"})
            try:
                return urllib.request.urlopen(request, timeout=30).status
            except urllib.error.HTTPError as exc:
                return exc.code

        chat = json.dumps({"model": "/models/target", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000,
                           "stream": True}).encode()
        in_flight = threading.Thread(target=ask, args=("/v1/chat/completions", chat))
        in_flight.start()
        time.sleep(0.5)
        proc.send_signal(signal.SIGUSR2)
        for _ in range(50):
            if "EngineDeadError" in out.read_text():
                break
            time.sleep(0.05)
        assert ask("/health") == 503 and ask("/v1/chat/completions", chat) == 500
        in_flight.join(30)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = out.read_text().splitlines()
    found = {shape: next((i for i, line in enumerate(lines) if re.search(pattern, line)), None) for shape, pattern in CRASH_SHAPES.items()}
    assert None not in found.values(), (found, lines[-20:])
    assert found["the output handler's failure"] < found["EngineDeadError"] < found["uvicorn's shutdown"] < found["its last word"]
    assert code == 0
    said = subprocess.run([sys.executable, "-m", "cockpit", "parse-log", str(out), "--json"], capture_output=True, text=True, timeout=60)
    assert said.returncode == 1 and json.loads(said.stdout)["state"] in ("crashed", "failed"), said.stdout[:500]


# --- the demo's SGLang stand-in against a real SGLang 0.5.11 on an H100 (tests/fixtures/gpu-engines/sglang-0.5.11-h100) --

REAL_SG = Path(__file__).parent / "fixtures" / "gpu-engines" / "sglang-0.5.11-h100"
SG = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "
SG_START = {  # in the order a real start-up prints them (first lines of each shape)
    "its arguments": rf"^{SG}server_args=ServerArgs\(",
    "the weights' loading": rf"^{SG}Load weight begin\. avail mem=[\d.]+ GB$",
    "the weights loaded": rf"^{SG}Load weight end\. elapsed=[\d.]+ s, type=\w+, avail mem=[\d.]+ GB, mem usage=[\d.]+ GB\.$",
    "the KV cache": rf"^{SG}KV Cache is allocated\. #tokens: \d+, K size: [\d.]+ GB, V size: [\d.]+ GB$",
    "the memory pool": rf"^{SG}Memory pool end\. avail mem=[\d.]+ GB$",
    "the graphs' capture": rf"^{SG}Capture cuda graph begin\. This can take up to several minutes\. avail mem=[\d.]+ GB$",
    "the graphs captured": rf"^{SG}Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.$",
    "the draft's graphs": rf"^{SG}Capture draft cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=[\d.]+ GB\. avail mem=[\d.]+ GB\.$",
    "its capacity": rf"^{SG}max_total_num_tokens=\d+, chunked_prefill_size=\d+, max_prefill_tokens=\d+, max_running_requests=\d+, "
                    r"context_len=\d+, available_gpu_mem=[\d.]+ GB$",
    "uvicorn's start": rf"^{SG}INFO:     Started server process \[\d+\]$",
    "uvicorn's startup complete": rf"^{SG}INFO:     Application startup complete\.$",
    "uvicorn's address": rf"^{SG}INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)$",
    "ready": rf"^{SG}The server is fired up and ready to roll!$",
}
SG_SERVING = {
    "a prefill line": rf"^{SG}Prefill batch, #new-seq: \d+, #new-token: \d+, #cached-token: \d+, token usage: [\d.]+, #running-req: \d+, "
                      r"#queue-req: \d+, #pending-token: \d+, cuda graph: (?:True|False), input throughput \(token/s\): [\d.]+$",
    "a decode line": rf"^{SG}Decode batch, #running-req: \d+, #token: \d+, token usage: [\d.]+, accept len: [\d.]+, accept rate: [\d.]+, "
                     r"cuda graph: (?:True|False), gen throughput \(token/s\): [\d.]+, #queue-req: \d+$",
    "an access line": rf'^{SG}INFO:     127\.0\.0\.1:\d+ - "(?:GET /metrics|POST /generate) HTTP/1\.1" 200 OK$',
}
# each ending as the real one logged it (A: its scheduler killed; B: SIGINT as plan stop sends it; C: SIGTERM), in order
SG_ENDINGS = {
    "SIGINT": ("B", [rf"^{SG}INFO:     Shutting down$", rf"^{SG}INFO:     Waiting for application shutdown\.$",
                     rf"^{SG}INFO:     Application shutdown complete\.$", rf"^{SG}INFO:     Finished server process \[\d+\]$"]),
    "SIGTERM": ("C", [rf"^{SG}SIGTERM received\. signum=None frame=None\. Draining requests and shutting down\.\.\.$"]),
    "SIGUSR2": ("A", [rf"^{SG}Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -9\. Triggering SIGQUIT for cleanup\.\.\.$",
                      rf"^{SG}SIGQUIT received\. signum=None, frame=None\. It usually means one child failed\.$"]),
}


def _first(lines: list[str], pattern: str) -> int | None:
    return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)


def _real_sg(tag: str) -> list[str]:
    return (REAL_SG / f"{tag}-serve.log").read_bytes().decode(errors="replace").split("\n")


@pytest.mark.parametrize("shape", [*SG_START, *SG_SERVING])
def test_each_sglang_shape_is_in_the_real_recording(shape):
    pattern = {**SG_START, **SG_SERVING}[shape]
    assert _matches(_real_sg("A"), pattern), f"the real SGLang has no line shaped as {shape!r}: the shape is wrong"


def _sglang_standin(tmp_path: Path, ending: str) -> tuple[list[str], int, str]:
    """The demo's SGLang stand-in started as a user starts SGLang (EAGLE-3, depth 3, metrics on), serving a few streamed
    requests, /metrics read, then ended by `ending`'s signal."""
    port = free_port()
    out = tmp_path / f"sglang-{ending}.log"
    argv = [sys.executable, "-m", "cockpit.demo.server", "--model-path", "/models/target", "--port", str(port), "--enable-metrics",
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/ckpt/eagle3", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    with out.open("w") as handle:
        proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        for _ in range(300):  # at most 300 looks: no wall-clock threshold
            if "fired up" in out.read_text():
                break
            time.sleep(0.1)
        body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 160}, "stream": True}).encode()
        for _ in range(3):
            request = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=body, headers={"Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=30).read()
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        proc.send_signal(getattr(signal, ending))
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return out.read_text().split("\n"), code, metrics


@pytest.mark.parametrize("ending", list(SG_ENDINGS))
def test_the_sglang_standin_prints_what_the_real_one_printed_and_ends_as_it_did(tmp_path, ending):
    """Start-up shapes in the real order, serving lines, /metrics' families, and each ending's lines in the real order;
    then the cockpit reads the stand-in's log as it reads the real log of that ending (parse-log: the same state, the
    same first diagnosis), so that a demo's SGLang cannot drift from what SGLang prints again."""
    lines, code, metrics = _sglang_standin(tmp_path, ending)
    real = _real_sg("A")
    order = {shape: (_first(real, p), _first(lines, p)) for shape, p in SG_START.items()}
    assert all(stand is not None for _real, stand in order.values()), [s for s, (_r, st) in order.items() if st is None]
    assert sorted(order, key=lambda s: order[s][0]) == sorted(order, key=lambda s: order[s][1]), order
    assert all(_matches(lines, p) for p in SG_SERVING.values()), [s for s, p in SG_SERVING.items() if not _matches(lines, p)]
    tag, said = SG_ENDINGS[ending]
    theirs, ours = [_first(_real_sg(tag), p) for p in said], [_first(lines, p) for p in said]
    assert None not in theirs and None not in ours and ours == sorted(ours), (theirs, ours, lines[-8:])
    assert code == (0 if ending == "SIGINT" else -signal.SIGKILL)  # SGLang ends its own process tree otherwise
    # /metrics: every family the real one serves, of its type; beyond them only the counter 0.5.14+ adds (runs-facts b.4)
    from prometheus_client.parser import text_string_to_metric_families

    def kinds(text: str) -> dict[str, str]:
        return {f.name: f.type for f in text_string_to_metric_families(text) if f.name.startswith("sglang:")}

    recorded = kinds("\n".join((REAL_SG / "A-traffic" / "during-metrics.txt").read_text().split("\n")[1:]))
    served = kinds(metrics)
    assert len(recorded) > 40 and {n: t for n, t in served.items() if n in recorded} == recorded, sorted(set(recorded) - set(served))
    assert set(served) - set(recorded) == {"sglang:spec_verify_calls"}, sorted(set(served) - set(recorded))
    # read alike: the stand-in's log and the real log of the same ending
    log = tmp_path / f"sglang-{ending}.log"
    mine = json.loads(subprocess.run([sys.executable, "-m", "cockpit", "parse-log", "--json", str(log)], capture_output=True,
                                     text=True, timeout=60).stdout)
    truth = json.loads(subprocess.run([sys.executable, "-m", "cockpit", "parse-log", "--json", str(REAL_SG / f"{tag}-serve.log")],
                                      capture_output=True, text=True, timeout=60).stdout)
    def first_error(said: dict) -> list[str]:
        return [d["kind"] for d in said["diagnoses"] if d["severity"] == "error"][:1]

    assert (mine["state"], first_error(mine)) == (truth["state"], first_error(truth))
