"""A real SGLang (0.5.11, one H100) serving EAGLE-3, recorded on the GPU machine with the real vLLM 0.26.0 beside it
(tests/fixtures/gpu-engines/, its README says how), read by the cockpit as a user's log would be (issue 48): every
ending of both engines told as it happened (a killed scheduler, a stop, a SIGTERM to the process group, a draft of
another width), and no alarm from any part of a log before the line that is the evidence of its end, cut where the
GPU machine's lines arrived."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.serving.live import LiveFigures
from cockpit.serving.logread import diagnose_lines

GPU = Path(__file__).parent / "fixtures" / "gpu-engines"
SGLANG = GPU / "sglang-0.5.11-h100"
VLLM = GPU / "vllm-0.26.0-h100"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=120)


def _name(folder: Path) -> str:
    return str(folder.relative_to(GPU)).replace("/", "-")


def editor_line(path: Path, pattern: str) -> int:
    """The line an editor shows `pattern` on: newlines counted, a carriage return inside a line not."""
    data = path.read_bytes()
    at = re.search(pattern.encode(), data)
    assert at is not None, pattern
    return data[: at.start()].count(b"\n") + 1


def test_the_recording_is_what_the_readme_says():
    env = (SGLANG / "env.txt").read_text()
    assert "NVIDIA H100" in env and "sglang==0.5.11" in env and "torch 2.11" in env
    log = (SGLANG / "A-serve.log").read_bytes()
    assert b"\r" in log.replace(b"\r\n", b"")  # the CUDA-graph capture's progress bars, redrawn inside a line
    assert b"The server is fired up and ready to roll!" in log and b"accept len: " in log
    assert float((SGLANG / "A.killed_at").read_text()) > 0 and json.loads((SGLANG / "B.stopped.json").read_text())["by"] == "you"


# (engine's folder, scenario, exit status, state, the first diagnosis's kind, the line it or the stop is cited at)
ENDINGS = [
    (SGLANG, "A", 1, "crashed", "subprocess_killed", r"Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -9"),
    (SGLANG, "B", 0, "stopped", None, r"INFO:     Shutting down"),
    # the recorder's SIGTERM to the whole process group: SGLang drains and shuts down, its detokenizer ends with -15,
    # and its watchdog calls that a crash; the stop came first
    (SGLANG, "C", 0, "stopped", None, r"SIGTERM received\. signum=None frame=None\. Draining requests"),
    (SGLANG, "E", 1, None, "draft_does_not_fit", r"RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    (SGLANG / "run2", "A", 1, "crashed", "subprocess_killed", r"Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -9"),
    (SGLANG / "run2", "B", 0, "stopped", None, r"INFO:     Shutting down"),
    (VLLM, "A", 1, "crashed", "engine_dead", r"engine core exited unexpectedly"),
    (VLLM, "B", 0, "stopped", None, r"trigger received signal=SIGINT"),
    (VLLM, "E", 1, None, "draft_does_not_fit", r"RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
    (VLLM, "D", 1, None, "kv_cache_too_small", r"estimated maximum model length is 224"),
]


@pytest.mark.parametrize(("folder", "tag", "status", "state", "kind", "cited"), ENDINGS,
                         ids=[f"{_name(f)}-{t}" for f, t, *_ in ENDINGS])
def test_every_recorded_ending_is_read_as_it_happened(folder, tag, status, state, kind, cited):
    log = folder / f"{tag}-serve.log"
    proc = cli("parse-log", "--json", str(log))
    data = json.loads(proc.stdout)
    assert proc.returncode == status and proc.stderr == "", (proc.returncode, proc.stderr[-500:])
    if state is not None:
        assert data["state"] == state, data["state"]
    if kind is None:
        errors = [d for d in data["diagnoses"] if d["severity"] == "error"]
        assert not errors and data["stopped_at"] == editor_line(log, cited), (errors, data["stopped_at"])
    else:
        first = data["diagnoses"][0]
        assert first["kind"] == kind and first["line"] == editor_line(log, cited), first


@pytest.mark.parametrize("folder", [SGLANG, VLLM], ids=lambda f: f.name)
def test_a_draft_of_another_width_is_named_with_the_check_that_shows_it_and_no_fix_that_cannot_work(folder):
    """Both engines start a draft of hidden size 128 for a target of 256 and fail inside torch ("mat1 and mat2 shapes
    cannot be multiplied"); SGLang wraps it in "Capture cuda graph failed" and advises memory settings, which would never
    help.  The cockpit names the draft, with the inspection that compares it to the target (paths from the log), and
    offers no flag to press."""
    data = json.loads(cli("parse-log", "--json", str(folder / "E-serve.log")).stdout)
    [shape] = [d for d in data["diagnoses"] if d["kind"] == "draft_does_not_fit"]
    assert shape["suggestions"] == ["cockpit drafter inspect /tmp/m-narrow/draft --target /tmp/m/target"]
    assert "takes 384 inputs (3 x 128" in shape["message"]
    assert not any(d["replacement"] or d["flag"] in ("--mem-fraction-static", "--cuda-graph-max-bs") for d in data["diagnoses"])
    assert not any(d["kind"] == "cuda_graph_capture_failed" for d in data["diagnoses"])


def chunks(folder: Path, tag: str) -> list[list[str]]:
    """The log as it arrived on the GPU machine: lines written together (one arrival time: record_lib.sh's stamper)
    in one chunk; where the arrivals were not recorded (vLLM 0.26.0's A and B), every line a chunk of its own."""
    arrivals = folder / f"{tag}-serve.arrivals"
    rows = [raw.partition("\t") for raw in arrivals.read_bytes().decode(errors="replace").split("\n") if raw] \
        if arrivals.exists() else []
    if not rows:
        return [[line] for line in (folder / f"{tag}-serve.log").read_bytes().decode(errors="replace").split("\n")]
    out: list[list[str]] = []
    previous = None
    for stamp, _sep, line in rows:
        if stamp != previous:
            out.append([])
            previous = stamp
        out[-1].append(line)
    return out


SUSPECT = re.compile(r"Traceback|Error|Exception|exit code|SIG|hutdown|Finished server|[Ff]ail|Killed|error")
RECORDED_LOGS = [(SGLANG, "A"), (SGLANG, "B"), (SGLANG, "C"), (SGLANG / "run2", "A"), (SGLANG / "run2", "B"), (VLLM, "A"), (VLLM, "B"), (VLLM, "D"), (VLLM / "run1", "A"),
                 (VLLM / "run1", "B")]


@pytest.mark.parametrize(("folder", "tag"), RECORDED_LOGS, ids=[f"{_name(f)}-{t}" for f, t in RECORDED_LOGS])
def test_no_part_of_a_real_log_raises_an_alarm_before_its_end_is_written(folder, tag):
    """A watch reads a log as it grows.  Cut where its lines arrived, every part of a real server's log that ends before
    the line its whole reading cites (the crash, the stop) is read without an error and without a flag, by parse-log's
    reading and by the live figures alike; the whole log is read with its end.  (A real 0.5.11 logs a traceback it goes
    on from at start, a route it could not set up: it was flagged crashed for 4 s before this.)  Cut at every arrival
    near a line that could alarm and at 60 more elsewhere: all of them costs a minute."""
    parts = chunks(folder, tag)
    whole = [line for part in parts for line in part]
    report = diagnose_lines(whole)
    ends = [d.line for d in report.diagnoses if d.severity == "error" and d.line] + [report.stopped_at or 0]
    end = min(n for n in ends if n) if any(ends) else len(whole) + 1
    assert end <= len(whole), "the recording has no end to read"
    figures = LiveFigures(clock=lambda: 0.0)
    seen = 0
    alarming = {i for i, part in enumerate(parts) if any(SUSPECT.search(line) for line in part)}
    looked, step = 0, max(1, len(parts) // 60)
    for index, part in enumerate(parts):
        if seen + len(part) >= end:
            break
        figures.feed(part)
        seen += len(part)
        assert not figures.to_json()["flags"], (seen, figures.to_json()["flags"])
        if index % step == 0 or alarming & {index, index - 1, index - 2}:
            cut = diagnose_lines(whole[:seen])
            assert not [d for d in cut.diagnoses if d.severity == "error"], (seen, [d.to_json() for d in cut.diagnoses])
            looked += 1
    assert looked >= 5 and seen > 0


WATCH_ENDS = [(SGLANG, "A", "crashed", "killed by SIGKILL"), (SGLANG, "B", "stopped", "stopped by you"),
              (SGLANG / "run2", "A", "crashed", "killed by SIGKILL"), (SGLANG / "run2", "B", "stopped", "stopped by you"),
              (SGLANG, "C", "stopped", "not by the cockpit"), (SGLANG, "E", "crashed", "the draft does not fit"),
              (VLLM, "A", "crashed", "engine core died while serving"), (VLLM, "B", "stopped", "stopped by you"),
              (VLLM, "E", "crashed", "the draft does not fit"), (VLLM, "D", "crashed", "estimates 224")]


@pytest.mark.parametrize(("folder", "tag", "state", "words"), WATCH_ENDS, ids=[f"{_name(f)}-{t}" for f, t, *_ in WATCH_ENDS])
def test_the_server_watch_ends_each_recording_as_it_ended(folder, tag, state, words):
    """The watch's own look (read_server: what `cockpit server` and the TUI's pane show) at a recorded log whose server
    is gone, with the cockpit's stop record where the cockpit stopped it (B): crashed where the log says so, stopped by
    you after the cockpit's stop, stopped (not by the cockpit) after SGLang's own SIGTERM words, never died with "no
    crash in its log" (what SGLang's killed scheduler and its SIGTERM stop read as before this recording)."""
    import asyncio

    from cockpit.config import HostConfig
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport
    from cockpit.serving.target import ServerTarget, read_server

    record = folder / f"{tag}.stopped.json"
    stop = json.loads(record.read_text()) if record.exists() else None
    gone = 2 ** 22 + 7  # no such process: the server is gone
    if stop is not None:
        stop["pids"] = [gone]
    transport = LocalTransport(HostConfig(name="gpu", address="127.0.0.1", local=True), CommandLog())
    target = ServerTarget(None, "gpu", str(folder / f"{tag}-serve.log"), "http://127.0.0.1:9", gone,
                          engine="sglang" if SGLANG in (folder, folder.parent) else "vllm", stopped=lambda: stop)
    _live, data = asyncio.run(read_server(target, lambda _host: transport))
    ended = data.get("ended") or {}
    assert ended.get("state") == state and words in ended.get("why", ""), ended
    assert (state == "stopped") is not any(f["kind"] in ("crashed", "oom") for f in data["flags"]), data["flags"]


def _before_and_after_the_watchdog() -> tuple[bytes, bytes]:
    """The real A log up to SGLang's watchdog line, and its last words (what it wrote as it ended)."""
    data = (SGLANG / "A-serve.log").read_bytes()
    cut = data.rindex(b"\n", 0, data.index(b"Subprocess scheduler_0")) + 1
    return data[:cut], data[cut:]


@pytest.mark.parametrize("shell", ["server-command", "tui-pane"])
def test_a_server_that_writes_its_end_and_goes_between_two_reads_is_read_with_its_last_words(tmp_path, monkeypatch, shell):
    """A real SGLang wrote its watchdog's crash line and ended within the same look as the cockpit's watch read its log
    and then found its process gone: that look said `died ... no crash in its log` (the live test's one failure on the
    GPU machine).  Its last words are read once it is known gone, in both shells' paths (read_server: `cockpit server`;
    ServerWatcher: the TUI's pane and the launch step's watch): crashed, at the watchdog's line."""
    import asyncio

    from cockpit.config import HostConfig
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport

    head, last_words = _before_and_after_the_watchdog()
    assert last_words.startswith(b"[") and b"crashed with exit code -9" in last_words
    log = tmp_path / "A-serve.log"
    log.write_bytes(head)
    gone = 2 ** 22 + 7
    transport = LocalTransport(HostConfig(name="gpu", address="127.0.0.1", local=True), CommandLog())

    def ends_now():  # what the server does between the log's read and the liveness look: writes, then is gone
        with log.open("ab") as handle:
            handle.write(last_words)

    if shell == "server-command":
        from cockpit.serving import target as target_module

        async def gone_after_writing(_transport, _pid):
            ends_now()
            return False, 1.0

        monkeypatch.setattr(target_module, "_alive_in_two_looks", gone_after_writing)
        server = target_module.ServerTarget(None, "gpu", str(log), None, gone, engine="sglang")
        _live, data = asyncio.run(target_module.read_server(server, lambda _host: transport))
        ended = data["ended"]
    else:
        from cockpit.serving import server as server_module

        calls = []

        async def gone_after_writing(_transport, _pid):
            calls.append(1)
            if len(calls) == 2:  # the look that confirms it gone
                ends_now()
            return False

        monkeypatch.setattr(server_module, "process_alive", gone_after_writing)
        watcher = server_module.ServerWatcher(transport, gone, None, str(log), engine="sglang")

        async def two_looks():
            first = await watcher.poll()
            assert first.confirming and first.ended is None
            return await watcher.poll()

        ended = asyncio.run(two_looks()).ended
    assert ended["state"] == "crashed" and "killed by SIGKILL" in ended["why"], ended


def test_a_kv_cache_smaller_than_one_request_is_a_warning_on_a_server_that_serves():
    """A real 0.5.11 at --mem-fraction-static 0.001 (C) did not fail: it came up with 117 tokens of KV cache for a
    context length of 1024, and would refuse every input of 111 tokens or more.  parse-log says so as a warning at its
    capacity line (the server is up: no crash, exit 0), with the flag that governs it and its value; the servers with
    room (A, B, the second run's) say nothing of it."""
    data = json.loads(cli("parse-log", "--json", str(SGLANG / "C-serve.log")).stdout)
    [warning] = [d for d in data["diagnoses"] if d["kind"] == "kv_cache_below_context"]
    assert warning["severity"] == "warning" and warning["line"] == editor_line(SGLANG / "C-serve.log", r"max_total_num_tokens=117")
    assert (warning["flag"], warning["value"]) == ("--mem-fraction-static", "0.001") and "117 tokens" in warning["message"]
    assert "about 111 tokens" in warning["message"] and not warning["replacement"]
    for folder, tag in ((SGLANG, "A"), (SGLANG, "B"), (SGLANG / "run2", "A")):
        said = json.loads(cli("parse-log", "--json", str(folder / f"{tag}-serve.log")).stdout)
        assert not any(d["kind"] == "kv_cache_below_context" for d in said["diagnoses"]), (folder, tag)


def test_the_capacity_warning_never_hides_a_crash_after_it(tmp_path):
    """The warning rides along; it takes no crash's place: the real C log cut after its capacity line, then a start-up
    that ends in a bare traceback (as an uncaught error prints it), or in a child's failure behind SGLang's sigquit
    wrapper: crashed, the error first, the warning after it."""
    data = (SGLANG / "C-serve.log").read_bytes()
    head = data[:data.index(b"\n", data.index(b"max_total_num_tokens=117")) + 1]
    endings = {
        "python_exception": b'Traceback (most recent call last):\n  File "/x/launch_server.py", line 9, in <module>\n'
                            b"RuntimeError: boom\n",
        "child_failed": b"[2026-12-07 22:07:19] Received sigquit from a child process. It usually means the child failed.\n",
    }
    for kind, tail in endings.items():
        log = tmp_path / f"{kind}.log"
        log.write_bytes(head + tail)
        said = json.loads(cli("parse-log", "--json", str(log)).stdout)
        kinds = [d["kind"] for d in said["diagnoses"]]
        assert said["state"] == "crashed" and kinds[0] == kind and "kv_cache_below_context" in kinds[1:], (kind, kinds)
