"""How host panes reach the screen: rows that change are drawn by the pane itself (not through
Textual's per-line style pipeline) and must match what Textual draws, line for line; panes scrolled
out of view keep their samples without drawing and show the newest one when they come back."""

from __future__ import annotations

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from cockpit.telemetry.hub import TelemetryHub
from cockpit.ui.app import CockpitApp
from harness.builders import FUTURE, PANE_HOSTS as HOSTS, PANE_HOSTS_CONFIG as CONFIG, host_snapshot as snapshot  # noqa: F401

async def paint(app, pilot, tick: int, states: dict[int, HostState] | None = None) -> None:
    for host in range(len(HOSTS)):
        app.hub.publish(snapshot(host, tick, (states or {}).get(host, HostState.UP)))
    app._paint_pending()
    await pilot.pause()


async def drawn_by_textual(app, pilot) -> str:
    """The screen as Textual's own pipeline draws it: every pane repainted whole."""
    for pane in app.panes.values():
        pane.refresh()
    await pilot.pause()
    return app.export_screenshot()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("theme", ["cockpit-dark", "cockpit-light"])
async def test_rows_drawn_by_the_pane_match_textual(size, theme):
    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=TelemetryHub(config), theme=theme)
    async with app.run_test(size=size) as pilot:
        await paint(app, pilot, 0)
        for tick in range(1, 6):
            # a focus move (heavy border) and a host going stale (dim rows, yellow border) on the way
            if tick == 3:
                app.panes["alpha"].focus()
                await pilot.pause()
            states = {1: HostState.STALE} if tick >= 4 else None
            await paint(app, pilot, tick, states)
            ours = app.export_screenshot()
            assert ours == await drawn_by_textual(app, pilot), f"tick {tick}: the pane's own rows differ from Textual's"
        drawn_here = sum(pane.rows_drawn_here for pane in app.panes.values())
        assert drawn_here >= 8 * 3, "the rows were never drawn by the pane: the comparison above proved nothing"


async def test_a_pane_out_of_view_waits_and_shows_the_newest_sample_when_it_comes_back():
    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=TelemetryHub(config))
    async with app.run_test(size=(160, 30)) as pilot:
        await paint(app, pilot, 0)
        last = app.panes["delta"]
        assert not app.screen.can_view_partial(last), "the layout changed: delta should start below the screen"
        for tick in range(1, 4):
            await paint(app, pilot, tick)
        assert last.lines_skipped == 8 * 3 and last.rows_drawn_here == 0
        assert app.panes["alpha"].lines_skipped == 0
        newest = f"{100 + 97 * 3 + 3 * 3:.0f}/700W"  # delta's GPU 0 at tick 3
        assert newest not in app.export_screenshot()
        last.scroll_visible(animate=False)
        await pilot.pause()
        await pilot.pause()
        assert app.screen.can_view_partial(last)
        assert newest in app.export_screenshot(), "the pane came back showing an old sample"
        assert newest in str(last.content)


async def test_hosts_hidden_behind_the_checklist_draw_nothing_and_come_back_current(tmp_path):
    """At 80x24 one pane is shown at a time: while the checklist is, the hosts keep their samples
    without drawing, and show the newest when h brings them back."""
    config = parse_config(CONFIG + '[runbook]\nname = "t"\n\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "alpha"\n')
    app = CockpitApp(config, hub=TelemetryHub(config))
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    async with app.run_test(size=(80, 24)) as pilot:
        await paint(app, pilot, 0)
        await pilot.press("c")
        assert not app.hosts_view.display
        skipped = {name: pane.lines_skipped for name, pane in app.panes.items()}
        for tick in range(1, 3):
            await paint(app, pilot, tick)
        assert all(pane.lines_skipped == skipped[name] + 16 for name, pane in app.panes.items())
        await pilot.press("h")
        await pilot.pause()
        assert app.hosts_view.display
        assert f"{100 + 3 * 2:.0f}/700W" in app.export_screenshot()  # alpha's GPU 0 at tick 2
