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


async def test_q_asks_while_a_step_runs_and_says_what_keeps_running(tmp_path):
    """Issue 50 item 2: q quits at once when nothing runs; while a step runs it asks, naming the step and saying the hosts
    keep what was started; n keeps the cockpit (and the step), y quits."""
    import asyncio

    from cockpit.ui.screens.confirm import ConfirmScreen

    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\n'
                          f'dir = "{tmp_path}"\n[runbook]\nname = "q"\n[[runbook.steps]]\nname = "slow"\nkind = "command"\n'
                          'host = "here"\nargv = ["sleep", "30"]\n')
    app = CockpitApp(config)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.quit_words() is None  # nothing runs: q would quit at once
        await pilot.press("n")
        for _ in range(50):
            if isinstance(app.screen, ConfirmScreen):
                await pilot.press("y")  # the step's own confirmation, where it asks
            if app.quit_words() is not None:
                break
            await asyncio.sleep(0.1)
        words = app.quit_words()
        assert words is not None and "'slow'" in words and "keeps running" in words
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Quit while a step runs?"
        await pilot.press("n")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, ConfirmScreen) and app.quit_words() is not None
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
    assert not app.is_running


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_tab_moves_between_open_panes_or_says_why_and_still_moves_in_a_dialog(size):
    """Issue 50 item 4: Tab does something everywhere: the next pane, the next button of a dialog, or a word saying why not."""
    from cockpit.ui.screens.confirm import ConfirmScreen

    one = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    app = CockpitApp(one)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        before = app.focused
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is before and any("Tab moves between the open panes" in n.message for n in app._notifications)
        app.push_screen(ConfirmScreen("Sure?", "a plan"))
        await pilot.pause()
        first = app.focused
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is not first and app.focused is not None and app.focused.id in ("yes", "no")
    two = parse_config('[hosts.a]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[hosts.b]\nlocal = true\n'
                       'nvidia_smi = "/nonexistent/nvidia-smi"\n')
    app = CockpitApp(two)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        seen = {app.focused}
        for _ in range(3):
            await pilot.press("tab")
            await pilot.pause()
            seen.add(app.focused)
        assert len(seen) >= 2 and not any("Tab moves" in n.message for n in app._notifications)


async def test_the_footer_never_cuts_a_key_mid_word_at_any_width():
    """Issue 50 item 3: at every width and with every pane in focus, each key shown in the footer is whole (it ends
    before the right edge and the palette key); one that does not fit is hidden whole, with those after it."""
    from cockpit.ui.widgets.footer import CockpitFooter

    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[runs.r]\nhost = "here"\n'
                          'log = "/nonexistent/train.log"\n[runbook]\nname = "f"\n[[runbook.steps]]\nname = "s"\nkind = "command"\n'
                          'host = "here"\nargv = ["true"]\n')
    hidden_somewhere = False
    for width in (80, 81, 93, 100, 117, 130):
        app = CockpitApp(config)
        async with app.run_test(size=(width, 24)) as pilot:
            for key in ("p", "c", "t", "h"):
                await pilot.press(key)
                await pilot.pause()
                await pilot.pause()
                footer = app.query_one(CockpitFooter)
                docked = [c for c in footer.children if c.has_class("-command-palette")]
                limit = min([footer.region.right, *(c.region.x for c in docked)])
                shown = [c for c in footer.children if c.display and c not in docked]
                assert shown, (width, key)
                assert all(c.region.right <= limit for c in shown), (width, key, [c.region for c in shown], limit)
                hidden_somewhere |= any(not c.display for c in footer.children)
    assert hidden_somewhere  # the narrow widths did need it


async def test_read_only_hides_the_kill_key_and_k_says_why(tmp_path):
    """Issue 50 item 7: --read-only offered `K kill` in the process table's footer.  Hidden there, and K answers."""
    from cockpit.ui.widgets.proc_pane import ProcessPane

    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    for read_only in (False, True):
        app = CockpitApp(config, read_only=read_only)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("p")
            await pilot.pause()
            pane = app.query_one(ProcessPane)
            pane.focus()
            await pilot.pause()
            shown = {b.binding.key for b in app.active_bindings.values() if b.binding.show and b.enabled
                     and pane.check_action(b.binding.action.split("(")[0], ("hidden",) if "hidden" in b.binding.action else ())}
            assert ("K" in shown) is (not read_only), (read_only, shown)
            await pilot.press("K")
            await pilot.pause()
            said = " ".join(n.message for n in app._notifications)
            assert ("Read-only" in said) if read_only else ("no process selected" in said), said


def test_help_has_one_row_per_key_and_no_internal_names():
    """Issue 50 item 7: help listed ten 'zoom GPU N' rows; every help row's keys appear once per scope."""
    from collections import Counter

    from cockpit.ui import actions

    for scope in ("app", "checklist", "procs", "logview", "bench", "runs"):
        rows = actions.help_rows(scope)
        assert sum("zoom GPU" in what for _, what, _ in rows) <= 1
        doubled = [k for k, n in Counter(keys for keys, _, _ in rows).items() if n > 1]
        assert doubled == [], (scope, doubled)


async def test_a_step_that_ends_off_screen_is_said_in_the_message_line(tmp_path):
    """Issue 50 item 3: at 80x24 with the hosts in view, `n` passed a step with no word; it is said now (and not where
    the checklist shows it: no noise in a large terminal)."""
    import asyncio

    from cockpit.ui.screens.confirm import ConfirmScreen

    text = ('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n[storage]\n'
            f'dir = "{tmp_path}"\n[runbook]\nname = "said"\n[[runbook.steps]]\nname = "hello"\nkind = "command"\n'
            'host = "here"\nargv = ["true"]\n')
    for size, expect in (((80, 24), True), ((160, 48), False)):
        app = CockpitApp(parse_config(text))
        async with app.run_test(size=size) as pilot:
            app.runbook.reset()
            await pilot.pause()
            app.action_focus_hosts() if hasattr(app, "action_focus_hosts") else None
            await pilot.pause()
            await pilot.press("n")
            for _ in range(50):
                if isinstance(app.screen, ConfirmScreen):
                    await pilot.press("y")
                result = app.runbook.result("hello")
                if result is not None and result.state.value == "passed":
                    break
                await asyncio.sleep(0.1)
            await pilot.pause()
            said = [n.message for n in app._notifications if "step 1 'hello' passed" in n.message]
            assert bool(said) is expect, (size, [n.message for n in app._notifications])
