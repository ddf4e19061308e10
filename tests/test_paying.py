"""Issue 51 item 1: is speculation paying at this load?  The verdict over the space of what a live server shows
(idle or serving, acceptance absent, collapsed or real, throughput above, even with or below the baseline, a baseline
near this load or not), and from a real sweep's rows (the demo's stand-in server, whose speculation pays at low
concurrency and not at high)."""

from __future__ import annotations

import itertools

import pytest

from cockpit.serving.paying import COLLAPSED_AT, MARGIN, Baseline, baseline_of, judge

BASE = Baseline({1: 100.0, 8: 600.0, 32: 1500.0}, off_above=32, source="sweep 'sweep' of today")


def figures(state="serving", running=8, tok_s=900.0, window=2.5, last=False):
    return {"activity": {"state": state, "why": ""}, "running": running, "throughput_tok_s": tok_s, "figures_are_last": last,
            "accept_length": {"window": window, "lifetime": None, "counters": None}}


@pytest.mark.parametrize("state,running,ratio,window,near", list(itertools.product(
    ("serving", "idle"), (0, 1, 8, 20, 100), (0.5, 0.97, 1.0, 1.8), (None, 1.0, 1.04, 2.5), (True, False))))
def test_the_verdict_over_every_load_and_figure(state, running, ratio, window, near):
    baseline = BASE if near else Baseline({512: 9000.0})
    base = baseline.near(running)
    tok_s = (base[1] if base else 600.0) * ratio
    verdict = judge(figures(state, running, tok_s, window), True, baseline)
    assert verdict is not None
    if state != "serving" or running == 0:
        assert verdict.state == "idle"
    elif window is None:
        assert verdict.state == "inactive"
    elif window <= COLLAPSED_AT:
        assert verdict.state == "collapsed" and f"{window:.2f}" in verdict.words
    elif base is None:
        assert verdict.state == "unknown" and f"cockpit bench baseline --concurrency {running}" in verdict.words
    elif ratio >= 1 + MARGIN:
        assert verdict.state == "paying" and f"x{ratio:.2f}" in verdict.words and f"c={running}" in verdict.words
    elif ratio <= 1 - MARGIN:
        assert verdict.state == "not_paying" and "off above c=32" in verdict.words
    else:
        assert verdict.state == "even"
    assert judge(figures(state, running, tok_s, window), False, baseline) is None  # no draft: no verdict


def test_figures_that_are_the_last_ones_are_not_judged():
    assert judge(figures(last=True), True, BASE).state == "idle"


def test_a_baseline_is_only_near_within_a_factor_of_two():
    assert BASE.near(8) == (8, 600.0) and BASE.near(12) == (8, 600.0) and BASE.near(20) == (32, 1500.0)
    assert BASE.near(100) is None and BASE.near(0) is None and Baseline().near(8) is None


def test_the_baseline_of_a_sweeps_rows_and_where_it_said_off():
    rows = [{"config": "baseline", "concurrency": c, "throughput_median": t} for c, t in ((1, 90.0), (8, 700.0), (32, 1800.0))]
    rows += [{"config": "depth 5", "concurrency": c, "throughput_median": t} for c, t in ((1, 180.0), (8, 1000.0), (32, 1700.0))]
    decisions = [{"concurrency": 1, "best": "depth 5"}, {"concurrency": 8, "best": "depth 5"}, {"concurrency": 32, "best": "baseline"}]
    baseline = baseline_of(rows, decisions, "s")
    assert baseline == Baseline({1: 90.0, 8: 700.0, 32: 1800.0}, 32, "s")
    assert baseline_of([r for r in rows if r["config"] != "baseline"]) is None


def test_a_turn_is_alerted_once_seen_in_two_looks_and_never_for_idle_or_unknown():
    """The verdict's turns over every sequence of three looks: an alert only where a judged state different from the one
    held is seen twice in a row (the first judged state is no turn); idle and unknown never alert nor reset."""
    from cockpit.serving.paying import JUDGED, Verdict, VerdictTurns, verdict_alert

    states = ("paying", "not_paying", "idle", "unknown")
    for first, second, third in itertools.product(states, repeat=3):
        turns = VerdictTurns()
        turns.see(Verdict("paying", "x1.8")), turns.see(Verdict("paying", "x1.8"))  # held: paying
        said = [turns.see(Verdict(s, s)) for s in (first, second, third)]
        judged = [s for s in (first, second, third) if s in JUDGED]
        for index, alert in enumerate(said):
            if alert is not None:
                assert alert.state == "not_paying" and [s for s in (first, second, third)[: index + 1] if s in JUDGED][-2:] == ["not_paying"] * 2
        expected = any(judged[i:i + 2] == ["not_paying", "not_paying"] for i in range(len(judged)))
        assert (sum(a is not None for a in said) == 1) is expected, (first, second, third, said)
    fresh = VerdictTurns()
    assert [fresh.see(Verdict("not_paying", "")) for _ in range(2)] == [None, None]  # the first judged state: no turn
    alert = verdict_alert("launch", Verdict("not_paying", "not paying at this load: x0.80 at c=32"))
    assert alert.key == "speculation:launch" and alert.level == "warning" and "x0.80" in alert.text


def test_a_sweep_run_from_the_cli_is_the_baseline_without_a_sweep_step(tmp_path, monkeypatch):
    """`cockpit bench sweep` keeps its runs in the benchmark store, not in a step's result: the verdict's baseline is
    read from there too (the newer of the two wins), and read again only when the store changed."""
    from cockpit.bench import steps
    from cockpit.bench.stats import summarize
    from cockpit.bench.store import save_run

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setattr(steps, "_STORED", {"key": None, "found": None})
    assert steps.sweep_baseline(None) is None  # no store, no step: none, said so by the verdict

    def run(config: str, speculative: bool, concurrency: int, tok_s: float, repeat: int) -> None:
        summary = {**summarize([], 0.0, 1.0), "config": config, "speculative": speculative, "concurrency": concurrency,
                   "output_throughput_tok_s": tok_s, "sweep": "s-1", "time": 1796650000.0 + repeat,
                   **({"steps": 5, "topk": 1, "draft_tokens": 6} if speculative else {})}
        save_run(summary, [], f"{config}-c{concurrency}-{repeat}")

    for repeat in (1, 2, 3):
        run("baseline", False, 1, 100.0 + repeat, repeat)
        run("baseline", False, 8, 600.0, repeat)
        run("depth 5", True, 1, 190.0, repeat)
        run("depth 5", True, 8, 500.0, repeat)
    base = steps.sweep_baseline(None)
    assert base is not None and base.tok_s == {1: 102.0, 8: 600.0} and "stored sweep s-1" in base.source
    assert base.off_above == 8  # the baseline won at c=8: speculation off there
