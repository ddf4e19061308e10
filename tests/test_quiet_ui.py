"""What the TUI no longer does when nothing needs it: an input thread that sleeps until a key comes,
line filters applied once per style,
and start-up's heap out of the collector's walks.  Each must leave the screen and the keys exactly as
Textual's own parts make them; these tests hold them to that."""

from __future__ import annotations

import gc
import os
import pty
import random
import selectors
import threading
import time
import tty

import pytest
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.color import Color
from textual.filter import ANSIToTruecolor, DimFilter, LineFilter, Monochrome, NoColor
from textual.drivers.linux_driver import LinuxDriver

from cockpit.config import parse_config
from cockpit.runtime import settle_heap
from cockpit.telemetry.hub import TelemetryHub
from cockpit.ui.app import CockpitApp
from cockpit.ui.driver import quiet_driver_class
from cockpit.ui.line_filters import FilteredStyles

from harness.builders import PANE_HOSTS_CONFIG as CONFIG


# --- line filters ----------------------------------------------------------------------------------------


def random_styles(rng: random.Random) -> list[Style | None]:
    colours = ["red", "green", "cyan", "yellow", "bright_black", "#336699", "color(200)", "default"]
    out: list[Style | None] = [None, Style()]
    for _ in range(40):
        out.append(Style(color=rng.choice(colours), bgcolor=rng.choice([None, *colours]), bold=rng.random() < 0.3,
                         dim=rng.random() < 0.4, italic=rng.random() < 0.1))
    return out


class Shouting(LineFilter):
    """An app's own filter that reads the text: it must be applied Textual's way, not per style."""

    def apply(self, segments, background):
        return [Segment(text.upper(), style, control) for text, style, control in segments]


@pytest.mark.parametrize("names", [("ansi",), ("ansi", "dim"), ("ansi", "mono"), ("nocolor",), ("ansi", "shout")])
def test_filters_applied_once_per_style_give_what_textual_gives(names):
    from textual.app import App

    theme = App().ansi_theme
    made = {"ansi": lambda: ANSIToTruecolor(theme), "dim": DimFilter, "mono": Monochrome, "nocolor": NoColor, "shout": Shouting}
    filters = [made[name]() for name in names]
    rng = random.Random(7)
    styles = [s for s in random_styles(rng) if s is not None or "mono" not in names]  # Textual's Monochrome needs a style
    memo = FilteredStyles()
    for background in (Color(0, 0, 0), Color(250, 250, 240)):
        for _ in range(30):  # the same styles again and again, as a pane's rows use them
            segments = [Segment(rng.choice(["GPU 1 ", "█", " 120/700W", "▁▂▃"]), rng.choice(styles)) for _ in range(12)]
            expected = list(segments)
            for line_filter in filters:
                expected = line_filter.apply(expected, background)
            assert memo.prepare(filters, background).apply(segments) == expected


def test_filters_memo_follows_a_filter_being_switched_off():
    from textual.app import App

    theme = App().ansi_theme
    truecolor = ANSIToTruecolor(theme)
    memo = FilteredStyles()
    red = [Segment("x", Style(color="red"))]
    assert memo.prepare([truecolor], Color(0, 0, 0)).apply(red)[0].style.color.triplet is not None
    assert memo.prepare([], Color(0, 0, 0)).apply(red) == red  # the app asked for ANSI colours: the filter is gone


# --- input driver ----------------------------------------------------------------------------------------


class CountingSelector(selectors.SelectSelector):
    calls = 0

    def select(self, timeout=None):
        type(self).calls += 1
        return super().select(timeout)


def make_driver(cls, fd):
    class Recording(cls):
        def __init__(self):
            super().__init__(app=None, mouse=False, size=(80, 24))
            self.fileno = fd
            self.received = []

        def process_message(self, message):  # the thread's output, without an app behind it
            self.received.append(message)

    return Recording()


async def test_the_input_thread_sleeps_until_a_key_comes(monkeypatch):
    """Textual's driver wakes ten times a second with no key pressed; this one waits, yet a lone
    Escape still becomes an Escape key after its timeout, keys arrive, and stopping wakes it."""
    import signal

    quiet = quiet_driver_class()
    assert quiet is not None, "this Textual is one the quiet driver was read from"
    monkeypatch.setattr(selectors, "SelectSelector", CountingSelector)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = pty.openpty()
    tty.setraw(slave)  # as Textual puts the terminal: keys arrive as they are pressed
    try:
        counts = {}
        for name, cls in (("textual", LinuxDriver), ("quiet", quiet)):
            driver = make_driver(cls, slave)
            CountingSelector.calls = 0
            thread = threading.Thread(target=driver.run_input_thread, daemon=True)
            thread.start()
            time.sleep(0.65)
            counts[name] = CountingSelector.calls
            os.write(master, b"j")
            os.write(master, b"\x1b")
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and len([m for m in driver.received if isinstance(m, events.Key)]) < 2:
                time.sleep(0.02)
            keys = [m.key for m in driver.received if isinstance(m, events.Key)]
            assert keys == ["j", "escape"], f"{name}: keys came through as {keys}"
            driver.exit_event.set()
            thread.join(3)
            assert not thread.is_alive(), f"{name}: the input thread did not stop"
            if hasattr(driver, "_wake_read"):
                driver.close()
        assert counts["textual"] >= 4, f"Textual's own driver no longer polls ({counts}): this test needs another witness"
        assert counts["quiet"] <= 1, f"the quiet driver woke with no key pressed: {counts}"
    finally:
        os.close(master)
        os.close(slave)
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_driver_named_in_the_environment_still_wins(monkeypatch):
    from textual import constants

    monkeypatch.setattr(constants, "DRIVER", "textual.drivers.linux_driver:LinuxDriver")
    config = parse_config(CONFIG)
    assert CockpitApp(config, hub=TelemetryHub(config)).get_driver_class() is LinuxDriver


# --- heap ------------------------------------------------------------------------------------------------


def test_settling_the_heap_collects_startup_garbage_and_freezes_the_rest():
    import weakref

    class Node:
        pass

    garbage = Node()
    garbage.me = garbage  # a reference cycle start-up left behind
    gone = weakref.ref(garbage)
    del garbage
    before = gc.get_freeze_count()
    kept = [[n] for n in range(1000)]  # start-up's objects, still alive
    try:
        settle_heap()
        assert gone() is None, "start-up's garbage was frozen instead of collected"
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()


# --- the benchmark pane's progress bar -------------------------------------------------------------------


async def test_the_sweep_progress_bar_has_no_timer_and_still_moves():
    """Textual's ProgressBar ticks once a second for an ETA this pane does not show: it woke the TUI
    every second with no sweep running and the pane hidden."""
    from cockpit.ui.widgets.bench_pane import BenchPane, SweepProgressBar

    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=TelemetryHub(config))
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BenchPane)
        bar = pane.query_one(SweepProgressBar)
        assert not list(bar._timers), "the progress bar started a timer"
        pane.progress({"done": 3, "total": 4, "text": "depth 5"})
        await pilot.pause()
        assert bar.percentage == 0.75


async def test_a_dialog_waiting_for_words_redraws_nothing_while_it_waits(tmp_path, monkeypatch):
    """Textual's Input blinks its cursor: a redraw every half second for as long as a dialog waits (and the skip-a-gate
    dialog's snapshot depended on the moment it was taken).  The reason dialog, open with its input focused, asks for no
    redraw of the input in 1.5 s (three blinks); and every text input the cockpit builds
    is that steady one (read from the source: a plain Input( in cockpit/ui fails this)."""
    import re
    from pathlib import Path

    from harness.scenes import panes_app

    import cockpit.ui
    from cockpit.ui.widgets.steady_input import SteadyInput

    app = panes_app(tmp_path, monkeypatch)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.action_force_step("serve")
        for _ in range(50):
            await pilot.pause(0.05)
            if isinstance(app.screen.focused, SteadyInput):
                break
        field = app.screen.focused
        assert isinstance(field, SteadyInput), app.screen.focused
        redraws = []
        field.refresh = lambda *a, **k: redraws.append(a) or field  # type: ignore[method-assign]
        await pilot.pause(1.5)
        assert redraws == [] and field.has_focus
    source = Path(cockpit.ui.__file__).parent
    plain = [f"{p.relative_to(source)}:{n}" for p in source.rglob("*.py") for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"(?<![A-Za-z])Input\(", line)]
    assert plain == [], plain


async def test_a_closed_quiet_driver_never_writes_to_its_old_pipe_number():
    """Textual sets the exit event once more after closing the driver; by then the pipe's number may
    belong to another file, which must not receive the wake-up byte."""
    import signal
    import tempfile

    quiet = quiet_driver_class()
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    try:
        driver = quiet(app=None, mouse=False, size=(80, 24))
        old_write = driver._wake_write
        driver.close()
        with tempfile.TemporaryFile() as other:
            moved = os.dup2(other.fileno(), old_write)  # another file now holds that number
            try:
                driver.exit_event.clear()
                driver.exit_event.set()
                assert os.fstat(moved).st_size == 0, "the wake-up byte went into another file"
            finally:
                os.close(moved)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_the_mirrored_parts_run_only_on_the_exact_textual_they_were_read_from(monkeypatch):
    """An upgrade inside the pin (8.2.9) runs Textual's own driver: never a stale copy."""
    import textual

    from cockpit.ui import textual_internals

    assert textual_internals.mirrored(textual.__version__)  # the pinned Textual is the one read
    assert not textual_internals.mirrored("8.2.9") and not textual_internals.mirrored("8.3.0") and not textual_internals.mirrored("8.")
    from rich.terminal_theme import DEFAULT_TERMINAL_THEME
    from textual.filter import ANSIToTruecolor

    class App:
        _driver = "the driver"

    theme_filter = ANSIToTruecolor(DEFAULT_TERMINAL_THEME)
    assert textual_internals.terminal_driver(App()) == "the driver"
    assert textual_internals.terminal_theme_of(theme_filter) is not None
    monkeypatch.setattr(textual, "__version__", "8.2.9")
    assert quiet_driver_class() is None
    # the two private attributes read: not on a release they were not read from
    assert textual_internals.terminal_driver(App()) is None and textual_internals.terminal_theme_of(theme_filter) is None


def test_a_lone_escape_arrives_whatever_escdelay_says():
    """With ESCDELAY above the old 0.1 s tick, a lone Escape still becomes Escape without another key."""
    import subprocess
    import sys

    script = r'''
import asyncio, os, pty, threading, time, tty
from textual import events
from cockpit.ui.driver import quiet_driver_class, pending_tick

async def main():
    cls = quiet_driver_class()
    master, slave = pty.openpty(); tty.setraw(slave)
    class D(cls):
        def __init__(self):
            super().__init__(app=None, mouse=False, size=(80, 24)); self.fileno = slave; self.received = []
        def process_message(self, m): self.received.append(m)
    d = D()
    t = threading.Thread(target=d.run_input_thread, daemon=True); t.start()
    time.sleep(0.2)
    os.write(master, b"\x1b"); sent = time.monotonic()
    while time.monotonic() - sent < 3 and not [m for m in d.received if isinstance(m, events.Key)]:
        time.sleep(0.01)
    keys = [m.key for m in d.received if isinstance(m, events.Key)]
    print(keys, round(time.monotonic() - sent, 2), pending_tick())
    d.exit_event.set(); t.join(3); d.close()

asyncio.run(main())
'''
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "ESCDELAY": "300"})
    keys, took, tick = out.stdout.rsplit(" ", 2)
    assert keys.strip() == "['escape']", out.stdout + out.stderr
    assert 0.3 <= float(took) < 1.0 and abs(float(tick) - 0.32) < 1e-9
