"""Resident for days (issue 36): what grows with every poll, redraw or rebuild is bounded, by a test each.

The cockpit is left in a tmux pane for a whole training run and the serving after it.  A leak of a few
kilobytes a second is a gigabyte a day; these tests fail at the first rounds of one."""

from __future__ import annotations

import gc

from textual.widgets._footer import FooterKey

from cockpit.config import parse_config
from cockpit.ui.app import CockpitApp
from cockpit.ui.widgets.footer import CockpitFooter

LOCAL = '[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'


def alive(kind: type) -> int:
    """Objects of exactly this type alive (an exact type test: isinstance on every object wakes lazy modules'
    deprecated attributes, torch's among them)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


async def test_the_footer_lets_go_of_the_keys_it_replaced():
    """Textual's Footer binds each key it builds to its own `compact` and forgets that binding only when
    `compact` changes: every rebuild's keys stayed alive (about 11 KB each).  After 40 rebuilds the keys
    alive are the keys on screen."""
    app = CockpitApp(parse_config(LOCAL))
    async with app.run_test(size=(160, 48)) as pilot:
        footer = app.query_one(CockpitFooter)
        for _ in range(100):  # the start's first footer: late on a loaded machine (0 keys 0.3 s in, once, in a loaded suite)
            await pilot.pause(0.1)
            if len(footer.query(FooterKey)) > 5:
                break
        shown = len(footer.query(FooterKey))
        assert shown > 5
        for _ in range(40):
            app.screen.refresh_bindings()  # what a change of focus, layout or offered fix does
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        assert len(footer.query(FooterKey)) == shown
        assert alive(FooterKey) <= 2 * shown, f"{alive(FooterKey)} keys alive for {shown} on screen"


async def test_asking_for_the_keys_again_rebuilds_the_footer_only_when_they_change(monkeypatch):
    """Each server poll asks for the footer's keys again (f comes and goes with a fix); with nothing
    changed, nothing is rebuilt (the rebuild once a second was most of the TUI's CPU with a server up)."""
    rebuilt = []
    original = CockpitFooter.recompose

    async def counting(self):
        rebuilt.append(1)
        await original(self)

    monkeypatch.setattr(CockpitFooter, "recompose", counting)
    app = CockpitApp(parse_config(LOCAL))
    async with app.run_test(size=(160, 48)) as pilot:
        # the start's own rebuilds (the first focus, the first looks) come late on a loaded machine: wait until none
        # came for half a second
        for _ in range(60):
            before = len(rebuilt)
            await pilot.pause(0.5)
            if len(rebuilt) == before:
                break
        before = len(rebuilt)
        for _ in range(30):
            app.show_keys()
            await pilot.pause(0.02)
        await pilot.pause(0.2)
        assert len(rebuilt) == before
        await pilot.resize_terminal(80, 24)  # the view keys leave the footer in a small terminal: one rebuild at least
        await pilot.pause(0.3)
        assert len(rebuilt) > before


def test_a_long_training_log_keeps_what_it_reads_bounded():
    """A million-step run printing its accuracies per step (SpecForge's E3 `Eval - Step` lines), or a log full of
    tracebacks: what the reader keeps of them stays bounded (every step's dict used to stay)."""
    from cockpit.runs.parse import MAX_FLAGS, MAX_PENDING, TrainingLog

    log = TrainingLog()
    for step in range(0, 20_000, 1):
        log.feed([f"Eval - Step {step} [{step + 1}/2], position {i},  Acc: 0.{70 - i}" for i in range(3)], now=float(step))
    assert len(log._pending_epoch) <= MAX_PENDING and log.per_position["train"] == [0.70, 0.69, 0.68]
    for n in range(500):
        log.feed(["Traceback (most recent call last):", f'  File "train.py", line {n}, in <module>', f"ValueError: bad batch {n}"])
    assert 0 < len(log.flags) <= MAX_FLAGS


def test_the_command_log_forgets_the_oldest_of_the_commands_it_saw_succeed():
    """Each pid's `ps -o stat= -p PID` and each kill is a command of its own: over days of relaunches the set of
    commands seen to succeed (their repeats are counted, not shown) stays at its bound."""
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.ui.widgets.command_log import SEEN_AT_MOST, CommandLogPane

    pane = CommandLogPane()
    pane.write = lambda *a, **k: None  # not mounted: what it would show is not this test's
    log = CommandLog()
    for pid in range(3 * SEEN_AT_MOST):
        record = log.start("gpu-server", f"ps -o stat= -p {pid}")
        pane.add(log.finish(record, 0))
    assert len(pane._seen_ok) == SEEN_AT_MOST and len(log.records()) <= 500


def test_the_server_figures_and_lines_stay_bounded(tmp_path):
    """A server serving for a week: its windows of figures and the lines kept for its diagnosis are bounded."""
    from cockpit.serving.live import LiveFigures

    figures = LiveFigures(clock=lambda: 1_000_000.0)
    line = ("[2026-12-04 18:00:00 TP0] Decode batch, #running-req: 8, #token: 2100, token usage: 0.04, accept len: 2.80, "
            "cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 0")
    for _ in range(20):
        figures.feed([line] * 1000)
    assert len(figures.history) == figures.history.maxlen and len(figures.flags) <= 4
