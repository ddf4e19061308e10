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
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


async def test_the_footer_lets_go_of_the_keys_it_replaced():
    """Textual's Footer binds each key it builds to its own `compact` and forgets that binding only when
    `compact` changes: every rebuild's keys stayed alive (about 11 KB each).  After 40 rebuilds the keys
    alive are the keys on screen."""
    app = CockpitApp(parse_config(LOCAL))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.3)
        footer = app.query_one(CockpitFooter)
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
        await pilot.pause(0.3)
        before = len(rebuilt)
        for _ in range(30):
            app.show_keys()
            await pilot.pause(0.02)
        await pilot.pause(0.2)
        assert len(rebuilt) == before
        await pilot.resize_terminal(80, 24)  # the view keys leave the footer in a small terminal: one rebuild at least
        await pilot.pause(0.3)
        assert len(rebuilt) > before
