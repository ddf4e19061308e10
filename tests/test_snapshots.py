"""Snapshots of the cockpit's panes at 80x24 and 160x48 in two themes, from fixed telemetry."""

from __future__ import annotations


import pytest

from cockpit.config import parse_config
from cockpit.ui.app import CockpitApp
from harness.builders import SNAPSHOT_CONFIG as CONFIG, fixed_hub  # noqa: F401
from harness.scenes import PANES, SCENES, everything, panes_app, recorded_results, runs_app

@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("theme", ["cockpit-dark", "cockpit-light"])
def test_cockpit_snapshot(snap_compare, tmp_path, size, theme):
    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config), theme=theme)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    assert snap_compare(app, terminal_size=size)


# --- every pane, at both sizes ------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("pane", list(PANES))
def test_every_pane_snapshot(snap_compare, tmp_path, fixtures, monkeypatch, size, pane):
    app = panes_app(tmp_path, monkeypatch)

    async def run_before(pilot) -> None:
        recorded_results(app, fixtures)
        await pilot.pause()
        app.clear_notifications()
        await PANES[pane](pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- training runs and the serving server, at both sizes --------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("pane", ["runs", "serving", "vllm-serving", "group-failed", "everything"])
def test_runs_and_serving_snapshot(snap_compare, tmp_path, fixtures, monkeypatch, size, pane):
    """The real E2 recording (crashed at teardown after its last checkpoint) and decode lines of every
    SGLang wording; and every pane open at once."""
    app = runs_app(tmp_path, fixtures, monkeypatch)

    async def run_before(pilot) -> None:
        await pilot.pause()
        app.clear_notifications()
        await SCENES[pane](pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(100, 30), (160, 48)], ids=["100x30", "160x48"])
def test_ascii_snapshot(snap_compare, tmp_path, fixtures, monkeypatch, size):
    """--ascii with every pane open: every glyph ASCII (test_ascii.py asserts it of every scene)."""
    app = runs_app(tmp_path, fixtures, monkeypatch, ascii_only=True)

    async def run_before(pilot) -> None:
        await pilot.pause()
        app.clear_notifications()
        await everything(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
