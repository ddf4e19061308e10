"""A real vLLM (0.20.2, one H100) serving EAGLE-3, recorded on the GPU machine (tests/fixtures/gpu-engines/, its README
says how), read by the cockpit as a user's log would be (issue 48): line numbers as an editor counts them, the time a
line carries, a graceful stop, a crash after start-up, and the KV-cache failure's fix from vLLM's own estimate."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.serving.live import LiveFigures
from cockpit.vllm.logs import line_time

REAL = Path(__file__).parent / "fixtures" / "gpu-engines" / "vllm-0.20.2-h100"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120)


def editor_line(path: Path, pattern: str) -> int:
    """The line an editor shows `pattern` on: newlines counted, a carriage return inside a line not."""
    data = path.read_bytes()
    at = re.search(pattern.encode(), data)
    assert at is not None, pattern
    return data[: at.start()].count(b"\n") + 1


def arrivals(name: str) -> list[tuple[float, str]]:
    """Each line of a recorded log with the time it arrived on the GPU machine (record_vllm.sh's stamper)."""
    rows = []
    for raw in (REAL / name).read_text().splitlines():
        stamp, sep, line = raw.partition("\t")
        if sep:
            rows.append((float(stamp), line))
    return rows


def test_the_recording_is_what_the_readme_says():
    log = (REAL / "A-serve.log").read_bytes()
    assert b"\r" in log.replace(b"\r\n", b"")  # progress bars redrawn inside lines: what item 1 is about
    assert b"Application startup complete" in log and b"EngineDeadError" in log
    assert "NVIDIA H100" in (REAL / "env.txt").read_text() + (REAL / "A-smi-ready.txt").read_text()


def test_a_crash_after_start_up_is_a_crash_at_the_line_an_editor_shows():
    """Item 1 and 4: the engine core killed under traffic: parse-log says crashed (not ready), exit 1, and cites the
    line an editor shows (carriage returns inside the CUDA-graph progress bars do not shift it)."""
    proc = cli("parse-log", "--json", str(REAL / "A-serve.log"))
    data = json.loads(proc.stdout)
    assert proc.returncode == 1 and data["state"] == "crashed" and data["ready"] is True
    [dead] = [d for d in data["diagnoses"] if d["kind"] == "engine_dead"]
    assert dead["line"] == editor_line(REAL / "A-serve.log", r"vllm\.v1\.engine\.exceptions\.EngineDeadError")
    milestones = {m["milestone"]: m["line"] for m in data["milestones"]}
    assert milestones["ready"] == editor_line(REAL / "A-serve.log", r"Application startup complete")
    assert "crashed: it came up, then failed" in cli("parse-log", str(REAL / "A-serve.log")).stdout


def test_a_graceful_stop_is_stopped_not_idle():
    """Item 3: SIGINT to the server (as Ctrl-C, or the cockpit's stop): its own shutdown words read as stopped."""
    proc = cli("parse-log", "--json", str(REAL / "B-serve.log"))
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["state"] == "stopped"
    assert data["stopped_at"] == editor_line(REAL / "B-serve.log", r"Shutdown complete\n")
    rows = arrivals("B-serve.arrivals")
    now = [rows[0][0]]
    figures = LiveFigures(clock=lambda: now[0])
    states = []
    for at, line in rows:
        now[0] = at
        figures.feed([line])
        states.append(figures.activity(at)[0])
    # its own words read: shutting down (finishing), not idle; stopped once its process is gone (the watch below)
    assert "idle" in states and states[-1] == "finishing"
    assert states.index("finishing") > max(i for i, s in enumerate(states) if s == "idle")


def test_an_idle_servers_figures_are_as_old_as_the_line_that_carried_them():
    """Item 2: the last stats line's age is counted from the time it carries, not from the look that read it."""
    rows = arrivals("B-serve.arrivals")
    stats = [(at, line) for at, line in rows if "Avg generation throughput" in line or "SpecDecoding metrics" in line]
    assert stats
    last_at, last_line = stats[-1]
    said = line_time(last_line, last_at)
    assert said is not None and abs(last_at - said) < 2  # vLLM stamps a line when it writes it
    figures = LiveFigures(clock=lambda: last_at)
    for at, line in rows:
        if at <= last_at:
            figures.feed([line], now=at)
    later = last_at + 13
    assert figures.to_json(now=later)["figures_age_s"] == pytest.approx(later - said, abs=0.2)


def _looks(name: str) -> list[dict]:
    return [json.loads(line) for line in (REAL / name).read_text().splitlines() if line.strip()]


def test_the_cockpits_own_watch_on_the_gpu_machine_before_and_after():
    """The watch that ran beside the real server (tests/gpu/watch_real_server.py, one look a second).  The first run,
    before this issue's fixes: the stop written as `plan stop` writes it read `stopped by you`, but the killed engine
    core read `died ... no crash in its log` and the KV-cache failures too.  The last run: crashed, with the cause."""
    stop = _looks("run1-B-watch-before-fixes.jsonl")
    assert "stopped by you" in [look for look in stop if look.get("state") == "stopped"][-1]["why"]
    assert _looks("run1-A-watch-before-fixes.jsonl")[-1]["state"] == "died"
    assert _looks("run1-D-watch-before-fixes.jsonl")[-1]["state"] == "died"
    assert _looks("A-watch.jsonl")[-1]["state"] == "crashed" and "engine core died" in _looks("A-watch.jsonl")[-1]["why"]
    assert "stopped by you" in _looks("B-watch.jsonl")[-1]["why"]
    assert _looks("C-watch.jsonl")[-1]["state"] == "crashed" and "KV cache" in _looks("C-watch.jsonl")[-1]["why"]
    assert _looks("D-watch.jsonl")[-1]["state"] == "crashed" and "estimates 224" in _looks("D-watch.jsonl")[-1]["why"]
    assert "4 passed" in (REAL / "live-test.txt").read_text()


def test_the_real_kv_cache_failures_are_named_with_the_flag_that_governs_them():
    """C: --gpu-memory-utilization 0.0005 (no memory for the cache blocks); D: --kv-cache-memory-bytes 1048576 (vLLM's own
    estimate, 224): the fix from that estimate, and the byte size named as what sizes the cache."""
    c = json.loads(cli("parse-log", "--json", str(REAL / "C-serve.log")).stdout)
    assert [d["kind"] for d in c["diagnoses"] if d["severity"] == "error"][0] == "kv_cache_memory"
    d = json.loads(cli("parse-log", "--json", str(REAL / "D-serve.log")).stdout)
    [kv] = [x for x in d["diagnoses"] if x["kind"] == "kv_cache_too_small"]
    assert kv["replacement"] == ["--max-model-len", "224"] and "--kv-cache-memory-bytes 1048576" in kv["message"]
    assert kv["line"] == editor_line(REAL / "D-serve.log", r"estimated maximum model length is 224")


def test_the_kv_cache_fix_is_vllms_own_estimate_and_the_flag_that_governs_it(tmp_path):
    """Item 5, in 0.10.2's words (vllm-facts §2): --max-model-len from vLLM's estimate, and --gpu-memory-utilization
    never offered when the byte size rules."""
    log = tmp_path / "kv.log"
    log.write_text(
        "(APIServer pid=2587) INFO 12-07 08:29:24 [utils.py:328] non-default args: {'model_tag': '/tmp/m/target', "
        "'max_model_len': 1024, 'kv_cache_memory_bytes': 1048576}\n"
        "(EngineCore pid=2600) ERROR 12-07 08:29:40 [core.py:700] ValueError: To serve at least one request with the models's "
        "max seq len (1024), (0.01 GiB KV cache is needed, which is larger than the available KV cache memory (0.0 GiB). Based "
        "on the available memory, the estimated maximum model length is 400. Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.\n")
    data = json.loads(cli("parse-log", "--json", str(log)).stdout)
    [kv] = [d for d in data["diagnoses"] if d["kind"] == "kv_cache_too_small"]
    assert kv["replacement"] == ["--max-model-len", "400"] and "--kv-cache-memory-bytes 1048576" in kv["message"]
    assert "--gpu-memory-utilization 0" not in " ".join(kv["suggestions"]) and "raise --gpu-memory-utilization" not in kv["message"]


async def test_the_server_pane_follows_the_real_log_line_for_line(tmp_path):
    """The follower of a server's log counts lines as parse-log and an editor do (the pane's line numbers), while a
    trainer's follower keeps each progress-bar redraw as a record (the runs pane's rate and ETA)."""
    from cockpit.config import HostConfig
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.follow import LogFollower as TrainerFollower
    from cockpit.hosts.local import LocalTransport
    from cockpit.serving.server import LogFollower

    transport = LocalTransport(HostConfig(name="gpu", address="127.0.0.1", local=True), CommandLog())
    real = (REAL / "A-serve.log").read_bytes()
    log = tmp_path / "serve.log"
    log.write_bytes(real)
    follower = LogFollower(transport, str(log), backlog_bytes=len(real) + 1)
    lines = []
    for _ in range(20):
        got = await follower.poll()
        if not got:
            break
        lines.extend(got)
    assert len(lines) == real.count(b"\n")
    bar = log.with_name("bar.log")
    bar.write_bytes(b"step 1\rstep 2\rstep 3\n")
    assert (await TrainerFollower(transport, str(bar)).poll()).lines == ["step 1", "step 2", "step 3"]
    assert await LogFollower(transport, str(bar)).poll() == ["step 3"]


# --- vLLM 0.26.0, recorded the same way on an H100 (tests/fixtures/gpu-engines/README.md) -------------------------------

REAL_026 = Path(__file__).parent / "fixtures" / "gpu-engines" / "vllm-0.26.0-h100"


def test_vllm_0_26_crash_stop_and_kv_failure_are_read_as_they_happened():
    """0.26.0 says its ends in new words: a killed EngineCore is `[shutdown] MPClient: engine core exited unexpectedly`
    before the traceback (crashed, cited at that line); a SIGINT stop is `[shutdown] EngineCore: trigger received
    signal=SIGINT`, then the stop's own teardown logs an EngineDeadError: stopped, never crashed (it read crashed before
    this recording); the KV-cache failure names vLLM's own estimate."""
    a = cli("parse-log", "--json", str(REAL_026 / "A-serve.log"))
    data = json.loads(a.stdout)
    assert a.returncode == 1 and data["state"] == "crashed" and data["ready"] is True
    dead = [d for d in data["diagnoses"] if d["kind"] == "engine_dead"][0]
    assert dead["line"] == editor_line(REAL_026 / "A-serve.log", r"engine core exited unexpectedly")
    for b_log in (REAL_026 / "B-serve.log", REAL_026 / "run1" / "B-serve.log"):  # two recorded stops of 0.26.0
        b = cli("parse-log", "--json", str(b_log))
        data = json.loads(b.stdout)
        assert b.returncode == 0 and data["state"] == "stopped" and not data["diagnoses"], data["diagnoses"]
        assert data["stopped_at"] == editor_line(b_log, r"trigger received signal=SIGINT")
    # the first recording's stop logged its teardown's EngineDeadError (what used to be read as a crash); the second's
    # did not: the teardown races
    assert b"EngineDeadError" in (REAL_026 / "run1" / "B-serve.log").read_bytes()
    d = json.loads(cli("parse-log", "--json", str(REAL_026 / "D-serve.log")).stdout)
    [kv] = [x for x in d["diagnoses"] if x["kind"] == "kv_cache_too_small"]
    assert kv["replacement"] == ["--max-model-len", "224"]
    # the live watch: the stop's teardown is no crash flag either, the killed engine is
    for name, flagged in (("B-serve.log", False), ("run1/B-serve.log", False), ("A-serve.log", True), ("run1/A-serve.log", True)):
        figures = LiveFigures(clock=lambda: 0.0)
        figures.feed((REAL_026 / name).read_text(errors="replace").splitlines())
        assert any(f["kind"] == "crashed" for f in figures.to_json()["flags"]) is flagged, name


def test_vllm_0_26_serves_the_families_the_cockpit_reads_under_the_same_names():
    """0.26.0 serves the `vllm:` families the cockpit reads under the same names as 0.20.2 (running, waiting, KV usage,
    tokens, the speculative counters): the live figures read both releases' /metrics alike."""
    from prometheus_client.parser import text_string_to_metric_families

    def names(path: Path) -> set[str]:
        return {f.name for f in text_string_to_metric_families(path.read_text()) if f.name.startswith("vllm:")}

    new, old = names(REAL_026 / "A-traffic" / "during-metrics.txt"), names(REAL / "A-traffic" / "during-metrics.txt")
    read = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:generation_tokens",
            "vllm:prompt_tokens", "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"}
    assert read <= new and read <= old


def test_the_gpu_machines_watch_reads_a_server_without_the_ssh_dependency(tmp_path):
    """tests/gpu/watch_real_server.py runs on the GPU machine, which has no asyncssh: reading a local server's log and
    figures imports nothing of SSH (this session's engines briefly did, through the runbook, and the 0.26.0 recording's
    watch said `No module named 'asyncssh'` at every look)."""
    blocked = tmp_path / "blocked" / "asyncssh"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'asyncssh'\")\n")
    script = (
        "import asyncio\n"
        "from cockpit.config import HostConfig\n"
        "from cockpit.hosts.commandlog import CommandLog\n"
        "from cockpit.hosts.local import LocalTransport\n"
        "from cockpit.serving.target import ServerTarget, read_server\n"
        "t = LocalTransport(HostConfig(name='gpu', address='127.0.0.1', local=True), CommandLog())\n"
        f"target = ServerTarget(None, 'gpu', {str(REAL_026 / 'B-serve.log')!r}, 'http://127.0.0.1:9', 2 ** 22 + 7)\n"
        "live, data = asyncio.run(read_server(target, lambda h: t))\n"
        "print((data.get('activity') or {}).get('state'))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "blocked"), str(Path(__file__).resolve().parents[1])])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr[-1500:]
