"""--ascii: every glyph on the screen ASCII, whoever drew it (issue 30: nested +--+ frames, the focused
pane still ┏━┃, bars, sparklines and scrollbars not ASCII, and `--ascii --theme X demo` ignored)."""

from __future__ import annotations

import html
import re

import pytest

from cockpit.cli import ui_options
from cockpit.cli_args import build_parser
from cockpit.ui.ascii import glyph, to_ascii
from harness.scenes import PANES, SCENES, everything, panes_app, recorded_results, runs_app

from rich.cells import cell_len


def screen_text(app) -> str:
    svg = app.export_screenshot()
    body = svg.split("<g class=\"terminal-", 1)[-1]  # past the window chrome's own title
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", body)
    return html.unescape("".join(texts)).replace("\xa0", " ")


@pytest.mark.parametrize("argv", [["--ascii", "--theme", "cockpit-light", "demo"], ["demo", "--ascii", "--theme", "cockpit-light"],
                                  ["--ascii"], ["--theme", "cockpit-light", "--ascii", "--read-only"],
                                      ["--ascii", "demo", "--no-mouse"], ["--no-mouse", "--ascii"]])
def test_the_flags_count_wherever_they_are_written(argv):
    options = ui_options(build_parser().parse_args(argv))
    assert options == {"theme": "cockpit-light" if "--theme" in argv else None, "ascii_only": True,
                       "mouse": False if "--no-mouse" in argv else None}


def test_every_glyph_keeps_its_width_and_becomes_ascii():
    for char in "┏━┓┃┗┛╭─╮│╰╯├┤┬┴┼═║╔╗█▉▊▋▌▍▎▏░▒▓▁▂▃▄▅▆▇⠁⣿…·✓✗⚠⭘▏🔒中é⏎":
        out = glyph(char)
        assert out.isascii() and cell_len(out) == max(1, cell_len(char)), (char, out)
    assert to_ascii("┏━ checklist ━┓") == "+= checklist =+" and to_ascii("╭─ hosts ─╮") == "+- hosts -+"


def not_ascii(text: str) -> set[str]:
    return {c for c in text if not c.isascii()}


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48)], ids=["80x24", "100x30", "160x48"])
async def test_every_scene_is_ascii_at_every_size(tmp_path, fixtures, monkeypatch, size):
    """Every pane of the snapshots (hosts, zoom, checklist, raw evidence, server log, command log,
    benchmarks, help, the confirm and force dialogs), the runs, the serving server, a failed group,
    every pane open at once, and the command palette: no glyph outside ASCII."""
    for name, scene in PANES.items():
        app = panes_app(tmp_path, monkeypatch, ascii_only=True)
        async with app.run_test(size=size) as pilot:
            recorded_results(app, fixtures)
            await pilot.pause()
            await scene(pilot)
            await pilot.pause()
            shown = screen_text(app)
            assert not not_ascii(shown), (name, not_ascii(shown))
            assert "+" in shown and "|" in shown  # borders are drawn, in ASCII
    for name, scene in SCENES.items():
        (tmp_path / name).mkdir()
        app = runs_app(tmp_path / name, fixtures, monkeypatch, ascii_only=True)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await scene(pilot)
            await pilot.pause()
            shown = screen_text(app)
            assert not not_ascii(shown), (name, not_ascii(shown))
            if name == "everything":
                from textual.command import CommandPalette

                await pilot.press("ctrl+p")
                await pilot.pause(0.3)
                assert isinstance(app.screen, CommandPalette)
                await pilot.press(*"toggle")
                await pilot.pause(0.5)
                shown = screen_text(app)
                assert "Toggle" in shown and not not_ascii(shown), not_ascii(shown)


async def test_without_ascii_the_glyphs_stay(tmp_path, fixtures, monkeypatch):
    """The filter is ASCII mode's only: the default look keeps its box drawing (this test fails if
    screen_text could not see a glyph at all)."""
    app = runs_app(tmp_path, fixtures, monkeypatch)
    async with app.run_test(size=(160, 48)) as pilot:
        await everything(pilot)
        await pilot.pause()
        assert {"╭", "│", "━"} <= not_ascii(screen_text(app))
