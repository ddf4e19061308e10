"""Issue 51 item 1: "is speculation paying" against a short baseline measured on request (`cockpit bench baseline`), where
no sweep measured one at this load or it is newer than the sweep's: the rule over every order of the two, and the whole
path in the demo's world (the launch step's server relaunched without its draft, measured, relaunched as it was; the
verdict then names that baseline)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit import paths
from cockpit.bench.steps import _with_requested
from cockpit.bench.store import save_run
from cockpit.serving.paying import Baseline, judge


def _requested(tmp_path: Path, concurrency: int, tok_s: float, at: float) -> None:
    paths.use_storage(tmp_path)
    try:
        save_run({"label": f"baseline c{concurrency}", "concurrency": concurrency, "requests": 32, "failed": 0,
                  "output_throughput_tok_s": tok_s, "speculative": False, "baseline_on_request": True, "time": at}, [])
    finally:
        paths.use_storage(None)


@pytest.mark.parametrize("swept_at,asked_at,asked_c", list(itertools.product((None, 1000.0, 3000.0), (2000.0,), (1, 8, 16))))
def test_a_baseline_on_request_stands_where_it_is_newer_than_the_sweeps(tmp_path, swept_at, asked_at, asked_c):
    _requested(tmp_path, asked_c, 500.0, asked_at)
    swept = Baseline({1: 100.0, 8: 700.0}, 16, "sweep 'sweep' of then") if swept_at is not None else None
    paths.use_storage(tmp_path)
    try:
        found = _with_requested(swept, swept_at or 0.0)
    finally:
        paths.use_storage(None)
    newer = swept_at is None or asked_at > swept_at
    expected = dict(swept.tok_s) if swept is not None else {}
    if newer:
        expected[asked_c] = 500.0
    assert (found.tok_s if found is not None else {}) == expected
    if found is not None:
        assert ("on request" in found.source_at(asked_c)) is newer
        assert found.off_above == (swept.off_above if swept is not None else None)  # where the sweep found it should be off
        figures = {"activity": {"state": "serving"}, "running": asked_c, "throughput_tok_s": 1000.0, "accept_length": {"window": 2.5}}
        verdict = judge(figures, True, found)
        assert verdict is not None and verdict.state == "paying" and (("on request" in verdict.words) is newer), verdict.words


def _cli(config: Path, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *argv, "-c", str(config)], capture_output=True, text=True, timeout=timeout)


def test_the_demo_measures_a_baseline_on_request_and_judges_against_it(tmp_path):
    from cockpit.demo.world import build

    world = build(tmp_path / "demo")
    config = world.root / "demo.toml"
    try:
        story = _cli(config, "plan", "run", "--yes")  # the training run waited for, to the launch refused for its flag
        assert story.returncode != 0 and "is not an SGLang flag" in story.stdout + story.stderr, story.stdout + story.stderr
        for argv in (("plan", "fix", "launch", "--yes"), ("plan", "run", "launch", "--yes")):  # the fix; the server up
            done = _cli(config, *argv)
            assert done.returncode == 0, done.stdout + done.stderr
        done = _cli(config, "bench", "baseline", "--concurrency", "4", "--yes", "--json")
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
        data = json.loads(done.stdout)
        assert data["output_throughput_tok_s"] > 0 and data["serving"].startswith("serving the launch step's own config again")
        stored = json.loads(Path(data["file"]).read_text().splitlines()[0])
        assert stored["baseline_on_request"] is True and stored["speculative"] is False and stored["concurrency"] == 4
        audit = next((world.root / "state" / "runbooks").glob("*.audit.jsonl")).read_text().splitlines()
        launched = [e["argv"] for e in map(json.loads, audit) if e["event"] == "launch"][-2:]  # the baseline, then its own
        assert not any(w.startswith("--speculative") for w in launched[0]) and "--speculative-draft-model-path" in launched[1]
        port = launched[1][launched[1].index("--port") + 1]
        load = subprocess.Popen([sys.executable, "-m", "cockpit", "bench", "run", "--endpoint", f"127.0.0.1:{port}", "--concurrency", "4",
                                 "--requests", "400", "--max-tokens", "64", "--no-save"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline, verdict = time.monotonic() + 60, None
            while time.monotonic() < deadline:
                verdict = json.loads(_cli(config, "server", "--json").stdout).get("speculation") or {}
                if verdict.get("state") in ("paying", "not_paying", "even"):
                    break
                time.sleep(1)
            assert verdict and "a baseline measured on request at" in verdict["words"], verdict
        finally:
            load.kill()
            load.wait()
        refused = _cli(config, "bench", "baseline", "--concurrency", "0")
        assert refused.returncode == 2 and "--concurrency must be at least 1, got 0" in refused.stderr
    finally:
        world.close()
