"""Themes from files, the command palette, the user keymap, ASCII borders, and `cockpit init`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cockpit.config import load_config, parse_config
from cockpit.errors import ConfigError
from cockpit.context import parse_runbook
from cockpit.ui.app import CockpitApp
from cockpit.ui.themes import available_themes

LOCAL = '[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'


def test_theme_files_load():
    themes = available_themes()
    assert {"cockpit-dark", "cockpit-light", "cockpit-contrast", "cockpit-terminal"} <= set(themes)
    assert themes["cockpit-light"].dark is False
    assert themes["cockpit-terminal"].ansi is True  # follows the terminal's palette


@pytest.mark.parametrize("theme", ["cockpit-dark", "cockpit-light", "cockpit-contrast", "cockpit-terminal"])
async def test_app_runs_in_every_theme(theme):
    app = CockpitApp(parse_config(LOCAL), theme=theme)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == theme


async def test_unknown_theme_in_config_is_a_clear_error():
    app = CockpitApp(parse_config('[ui]\ntheme = "neon"\n' + LOCAL, "c.toml"))
    with pytest.raises(ConfigError, match="no theme named 'neon'"):
        async with app.run_test(size=(80, 24)):
            pass


async def test_user_keymap_rebinds_by_id():
    config = parse_config('[keymap]\n"app.toggle_log" = "ctrl+l"\n' + LOCAL)
    app = CockpitApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        from cockpit.ui.widgets.command_log import CommandLogPane

        log = app.query_one(CommandLogPane)
        await pilot.press("ctrl+l")
        assert not log.has_class("hidden")
    bad = CockpitApp(parse_config('[keymap]\n"app.nothing" = "x"\n' + LOCAL, "c.toml"))
    with pytest.raises(ConfigError, match="no binding with id 'app.nothing'"):
        async with bad.run_test(size=(80, 24)):
            pass


async def test_palette_lists_every_action_and_none_in_read_only(tmp_path):
    steps = '[[runbook.steps]]\nname = "hello"\nkind = "command"\nhost = "here"\nargv = ["true"]\n'
    config = parse_config(LOCAL + steps)
    app = CockpitApp(config)
    async with app.run_test(size=(100, 30)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Run the next step" in titles and "Run step: hello" in titles and "Toggle server log" in titles
    app = CockpitApp(config, read_only=True)
    async with app.run_test(size=(100, 30)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert not [t for t in titles if t.startswith("Run") or t.startswith("Apply")]


def test_init_writes_a_config_that_loads(tmp_path):
    answers = "\n".join(["1", "gpu-server", "10.1.230.174", "root", "22", "serving", "/models/Kimi-K2.5", "/ckpt/eagle3", "8", "16, 10, 5"]) + "\n"
    target = tmp_path / "cockpit.toml"
    proc = subprocess.run([sys.executable, "-m", "cockpit", "init", str(target)], input=answers, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    config = load_config(target)
    assert config.host("gpu-server").address == "10.1.230.174" and config.host("gpu-server").roles == ("serving",)
    runbook = parse_runbook(config)
    assert [s.kind for s in runbook.steps] == ["gpu_clean", "drafter_check", "serve_launch", "serve_ready"]
    assert config.raw["bench"]["depths"] == [16, 10, 5]
    assert "# " in target.read_text()  # commented
    again = subprocess.run([sys.executable, "-m", "cockpit", "init", str(target)], input=answers, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "exists" in again.stderr


async def test_no_color_and_16_colours(monkeypatch):
    """NO_COLOR and a 16-colour terminal (TEXTUAL_COLOR_SYSTEM=standard): the cockpit runs and says what it shows."""
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TEXTUAL_COLOR_SYSTEM", "standard")
    app = CockpitApp(parse_config(LOCAL))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.no_color and app.console.color_system == "standard"
        from helpers import eventually

        await eventually(lambda: "no NVIDIA GPU driver" in str(app.panes["here"].content), what="the pane's words")
