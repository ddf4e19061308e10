"""Search, follow and wrap in the logs, as less and k9s users reach for them (issue 40): `/` a case-smart regular
expression with its matches marked and counted, n/N between them, scrolling up pauses following and says so, G
resumes, w wraps long lines, y copies the line (OSC 52).  The command log pane, fed real command records."""

from __future__ import annotations

from cockpit.config import parse_config
from cockpit.hosts.commandlog import CommandLog
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.search import SearchScreen, compile_search
from cockpit.ui.widgets.command_log import CommandLogPane


def test_a_search_is_case_smart():
    assert compile_search("error").search("ERROR: x") and not compile_search("Error").search("ERROR: x")
    assert compile_search("") is None


async def test_search_follow_wrap_and_copy_in_a_log(monkeypatch):
    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    app = CockpitApp(config)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("l")
        await pilot.pause(0.2)
        pane = app.query_one(CommandLogPane)
        log = CommandLog()
        for n in range(300):
            pane.add(log.finish(log.start("here", f"probe-{n} " + "x" * 150), 1))  # failures are always written
        pane.focus()
        await pilot.pause(0.2)
        assert pane.following and "following" in pane.state_line
        await pilot.press("slash")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"probe-29\\d ")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert len(pane.matches()) == 10 and "10/10" in pane.state_line and not pane.following  # at the newest match
        await pilot.press("N")
        assert "9/10" in pane.state_line
        await pilot.press("n", "n")
        assert "1/10" in pane.state_line  # past the newest: around to the first
        await pilot.press("y")
        assert copied and "probe-290 " in copied[-1]
        await pilot.press("slash")
        await pilot.press(*"PROBE-29\\d ")  # an upper-case letter: case-sensitive
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert pane.matches() == [] and "not found" in pane.state_line
        await pilot.press("slash", "ctrl+u", "enter")  # empty: the search is cleared
        await pilot.pause(0.2)
        assert pane.search is None
        assert not pane.check_action("search_next", (1,))  # no search: n goes on to the app (the checklist's next step)
        await pilot.press("G")
        assert pane.following and pane.scroll_y == pane.max_scroll_y
        pane.scroll_to(y=0, animate=False)
        await pilot.pause(0.2)
        assert not pane.following and "paused: G follows" in pane.state_line
        pane.add(log.finish(log.start("here", "a new line while paused"), 1))
        await pilot.pause(0.2)
        assert pane.scroll_y == 0  # a new line does not pull the reader down while paused
        await pilot.press("G")
        await pilot.pause(0.2)
        assert pane.following and pane.scroll_y == pane.max_scroll_y
        rows = len(pane.lines)
        await pilot.press("w")
        await pilot.pause(0.2)
        assert pane.wrap and "wrap" in pane.state_line and len(pane.lines) > rows  # the long lines take two rows each
        await pilot.press("w")  # whole lines, read sideways
        await pilot.pause(0.2)
        assert not pane.wrap and pane.wide and len(pane.lines) == len(pane.kept) and pane.max_scroll_x > 0
        assert "left/right" in pane.state_line
        await pilot.press("right")
        assert pane.scroll_x > 0
        await pilot.press("w")  # back to cut at the edge
        await pilot.pause(0.2)
        assert not pane.wide and pane.scroll_x == 0 and len(pane.lines) == len(pane.kept)  # one row a line (the host may log more)


async def test_colon_jumps_to_a_host_a_step_or_a_pane_by_a_few_letters():
    """`:` as k9s: a fuzzy list of the cockpit's places; a few letters and enter go there."""
    from cockpit.ui.widgets.checklist import ChecklistPane
    from cockpit.ui.widgets.host_pane import HostPane

    config = parse_config('[hosts.gpu-server]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'
                          '[hosts.trainer]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'
                          '[runbook]\nname = "r"\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "gpu-server"\n'
                          '[[runbook.steps]]\nname = "look"\nkind = "command"\nhost = "trainer"\nargv = ["true"]\n')
    app = CockpitApp(config)

    async def jump(pilot, letters: str) -> None:
        await pilot.press("colon")
        await pilot.pause(0.2)
        await pilot.press(*letters)
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)

    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.2)
        await jump(pilot, "trainr")
        assert isinstance(app.focused, HostPane) and app.focused.host.name == "trainer"
        await jump(pilot, "step look")
        checklist = app.query_one(ChecklistPane)
        assert app.focused is checklist and checklist.selected_view.spec.name == "look"
        await jump(pilot, "pane command")
        assert app.layout_state.shown("log") and isinstance(app.focused, CommandLogPane)


async def test_y_on_a_step_copies_its_command_line_shell_quoted(monkeypatch):
    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n'
                          '[runbook]\nname = "r"\n[[runbook.steps]]\nname = "look"\nkind = "command"\nhost = "here"\n'
                          'argv = ["echo", "a b", "it\'s"]\n')
    app = CockpitApp(config)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("c")
        await pilot.pause(0.2)
        await pilot.press("y")
        await pilot.pause(0.2)
        import shlex

        assert len(copied) == 1 and shlex.split(copied[0]) == ["echo", "a b", "it's"]  # pastes as it runs
