"""The live test on the GPU machine (issue 48): the cockpit's own server watch, one look a second beside a real vLLM or
SGLang serving EAGLE-3 (tests/gpu/record_vllm.sh and record_sglang.sh start both), read back: launch to ready, its figures equal to /metrics,
idle, a stop by the cockpit read as stopped by you, the killed engine core read as crashed within the time to truth.

    COCKPIT_REAL_ENGINE_REC=/tmp/rec python3 -m pytest -c /dev/null --noconftest -p no:cacheprovider tests/gpu

run there by record_vllm.sh and record_sglang.sh after their scenarios (and here, on a committed recording's looks);
elsewhere it skips, saying so.  Its output is committed
(tests/fixtures/gpu-engines/*/live-test.txt) with the watch it read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REC = os.environ.get("COCKPIT_REAL_ENGINE_REC")
if not REC:
    pytest.skip("the live test runs on the GPU machine (tests/gpu/record_vllm.sh sets COCKPIT_REAL_ENGINE_REC)",
                allow_module_level=True)
TRUTH_S = 10.0  # a crash named within this long of the kill (the watch looks once a second)
# whose server the looks are of: record_sglang.sh says so; otherwise its log's first lines do
ENGINE = os.environ.get("COCKPIT_REAL_ENGINE") or (
    "sglang" if "sglang" in (Path(REC) / "A-serve.log").read_text(errors="replace")[:4000] else "vllm")


def looks(tag: str) -> list[dict]:
    return [json.loads(line) for line in (Path(REC) / f"{tag}-watch.jsonl").read_text().splitlines() if line.strip()]


def test_launch_to_ready_then_serving_then_idle():
    states = [look.get("state") for look in looks("A")]
    assert "starting" in states and "serving" in states and "idle" in states
    first_serving = states.index("serving")
    assert all(s in ("unknown", "starting", "idle") for s in states[:first_serving])
    # no false alarm while it served: never hung, never a flag before the kill
    killed_at = float((Path(REC) / "A.killed_at").read_text())
    before = [look for look in looks("A") if look["t"] < killed_at]
    assert not any(look.get("state") == "hung" or look.get("flags") for look in before), \
        [(look["t"], look.get("state"), look.get("flags")) for look in before if look.get("flags") or look.get("state") == "hung"]
    assert not any(look.get("error") for look in looks("A")), [look["error"] for look in looks("A") if look.get("error")]


def test_the_figures_equal_what_metrics_says():
    """vLLM: acceptance over the server's life from its counters equals 1 + accepted / drafts read from /metrics at the
    same look (the bonus token counted, as vLLM's own mean does).  SGLang (0.5.11 serves gauges, no speculative
    counters): each figure the cockpit shows of an idle server (nothing moves between its read and /metrics') equals
    SGLang's own gauge: throughput, the window's acceptance length, requests running.  Throughput is said while it
    serves."""
    if ENGINE == "sglang":
        return _sglang_figures()
    compared = 0
    for look in looks("A"):
        metrics, figures = look.get("metrics") or {}, look.get("figures") or {}
        drafts = metrics.get("vllm:spec_decode_num_drafts_total")
        lifetime = (figures.get("accept_length") or {}).get("lifetime")
        if drafts and lifetime is not None and look.get("state") == "idle":
            expected = 1 + metrics["vllm:spec_decode_num_accepted_tokens_total"] / drafts
            assert lifetime == pytest.approx(expected, rel=0.01), look
            compared += 1
    assert compared >= 3
    assert any((look.get("figures") or {}).get("throughput_tok_s") for look in looks("A") if look.get("state") == "serving")


def _sglang_figures():
    compared = 0
    for look in looks("A"):
        metrics, figures = look.get("metrics") or {}, look.get("figures") or {}
        if look.get("state") != "idle" or not metrics:
            continue
        for shown, gauge in ((figures.get("throughput_tok_s"), "sglang:gen_throughput"),
                             ((figures.get("accept_length") or {}).get("window"), "sglang:spec_accept_length"),
                             (figures.get("running"), "sglang:num_running_reqs")):
            if shown is not None:
                assert shown == pytest.approx(metrics[gauge], rel=0.01), (gauge, look)
                compared += 1
    assert compared >= 9
    assert any((look.get("figures") or {}).get("throughput_tok_s") for look in looks("A") if look.get("state") == "serving")


def test_a_stop_by_the_cockpit_is_stopped_by_you():
    ends = [look for look in looks("B") if look.get("state") == "stopped"]
    assert ends, [look.get("state") for look in looks("B")]
    assert "stopped by you" in ends[-1]["why"] and not ends[-1]["flags"]
    assert not any(look.get("state") in ("died", "crashed", "hung") for look in looks("B"))


def test_the_killed_engine_core_is_crashed_within_the_time_to_truth():
    killed_at = float((Path(REC) / "A.killed_at").read_text())
    after = [look for look in looks("A") if look["t"] >= killed_at]
    named = next(look for look in after if look.get("state") == "crashed" or "crashed" in (look.get("flags") or []))
    assert named["t"] - killed_at <= TRUTH_S
    assert after[-1].get("state") == "crashed", after[-1]  # its end: crashed (its log's EngineDeadError), never died
    assert not any(look.get("state") == "died" for look in after)
