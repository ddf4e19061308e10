"""The TUI fits the terminal it meets and says what it does: one pane at a time at 80x24, side by side
at 160x48, live resizing, messages that cover nothing, visible focus, keys that say why they do
nothing, the footer's keys, and the runbook's actions in the palette (confirmed; none in read-only)."""

from __future__ import annotations

import time

import psutil
from helpers import eventually
from harness.builders import SNAPSHOT_CONFIG as CONFIG, fixed_hub

from cockpit.config import parse_config
from cockpit.runbook.model import StepState
from cockpit.ui.app import CockpitApp
from cockpit.ui.layout import MessageBar
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.screens.reason import ReasonScreen
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane


def fixed_app(tmp_path, **kwargs) -> CockpitApp:
    config = parse_config(CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config), **kwargs)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    return app


def shown_ids(app) -> set[str]:
    return {active.binding.id for active in app.screen.active_bindings.values() if active.binding.show and active.binding.id}


async def test_small_terminal_shows_one_pane_and_resizes_live(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        checklist, log = app.query_one(ChecklistPane), app.query_one(CommandLogPane)
        assert app.layout_state.compact and app.hosts_view.display and not checklist.display
        await pilot.press("c")
        assert checklist.display and not app.hosts_view.display and app.focused is checklist
        await pilot.press("l")
        assert not log.has_class("hidden") and not checklist.display and app.focused is log
        await pilot.press("l")  # its key again: back to the hosts
        assert app.hosts_view.display and log.has_class("hidden") and isinstance(app.focused, HostPane)
        await pilot.press("c")
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not app.layout_state.compact and app.hosts_view.display and checklist.display  # side by side
        assert not app.query_one("#views").display
        await pilot.press("l")
        assert not log.has_class("hidden") and app.hosts_view.display and checklist.display  # below them
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.layout_state.compact and app.layout_state.view == "log"  # the pane in use stays in view
        assert log.display and not app.hosts_view.display


async def test_a_pane_key_shows_and_focuses_and_hides_only_the_pane_in_focus(tmp_path):
    """Issue 30: `b` as the README says must show the benchmarks, never hide them because they were
    open; the same key on the pane in focus hides it, and so does Escape."""
    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        log = app.query_one(CommandLogPane)
        await pilot.press("l")
        assert not log.has_class("hidden") and app.focused is log
        await pilot.press("c")  # the focus leaves; the log stays open
        assert isinstance(app.focused, ChecklistPane) and not log.has_class("hidden")
        await pilot.press("l")  # open but not in focus: shown and focused, not hidden
        assert not log.has_class("hidden") and app.focused is log
        await pilot.press("l")  # in focus: hidden
        assert log.has_class("hidden") and isinstance(app.focused, HostPane)
        await pilot.press("l")
        await pilot.press("escape")
        assert log.has_class("hidden") and isinstance(app.focused, HostPane)
        await pilot.press("escape")  # nothing to hide: the hosts and the checklist stay
        assert app.hosts_view.display and app.query_one(ChecklistPane).display
    app = fixed_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        assert app.layout_state.view == "log"
        await pilot.press("escape")  # a small terminal: back to the hosts
        assert app.layout_state.view == "hosts" and isinstance(app.focused, HostPane)


async def test_messages_take_room_instead_of_covering_in_a_small_terminal(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("c")
        bar = app.query_one(MessageBar)
        assert not bar.display
        await pilot.press("z")  # nothing to zoom from the checklist: it says why
        await pilot.pause()
        assert bar.display and "z zooms a host" in str(bar.content) and "checklist has the focus" in str(bar.content)
        assert bar.region.y + bar.region.height <= app.size.height - 1  # above the footer
        assert app.query_one(ChecklistPane).region.bottom <= bar.region.y  # the pane gave room: nothing covered
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        # a large terminal too (issue 36 item 5: a toast covered a pane's text): the panes end above the bar
        assert bar.display and bar.region.y + bar.region.height <= app.size.height - 1
        assert app.query_one("#main").region.bottom <= bar.region.y
        assert not any(t.display for t in app.query("Toast"))


async def test_a_resize_keeps_the_pane_in_use_in_view_and_in_focus(tmp_path):
    """Issue 36 item 5: the command log in focus at 80x24 was gone at 160x48 with nothing in focus, and back
    at 80x24 the hosts showed.  Whatever the size, the pane in use stays shown and focused."""
    from cockpit.ui.widgets.command_log import CommandLogPane

    app = fixed_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await pilot.pause()
        log = app.query_one(CommandLogPane)
        assert app.layout_state.view == "log" and log in (app.focused, *(app.focused.ancestors if app.focused else ()))
        for size in ((160, 48), (80, 24), (120, 40), (160, 48)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
            assert not log.has_class("hidden") and log.region.height > 2, size
            assert app.focused is not None and (app.focused is log or log in app.focused.ancestors), (size, app.focused)


async def test_keys_elsewhere_say_where_they_work(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert isinstance(app.focused, HostPane)
        await pilot.press("x")
        await pilot.press("r")
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("x: ") and "checklist (c focuses it)" in m for m in messages), messages
        assert any("run step" in m and "checklist" in m for m in messages), messages
        assert app.runbook.results == {}  # r in the hosts ran nothing


async def test_footer_holds_the_keys_that_work_now(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert "host.zoom" in shown_ids(app) and "server.apply_fix" not in shown_ids(app)  # no fix is offered
        await pilot.press("c")
        await pilot.pause()
        assert "host.zoom" not in shown_ids(app)  # z does nothing from the checklist: not offered
        assert "checklist.run" in shown_ids(app)


async def test_focus_is_marked_by_a_heavy_border(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        host, checklist = app.panes["trainer"], app.query_one(ChecklistPane)
        host.focus()
        await pilot.pause()
        assert host.styles.border_top[0] == "heavy" and checklist.styles.border_top[0] == "round"
        await pilot.press("c")
        await pilot.pause()
        assert host.styles.border_top[0] == "round" and checklist.styles.border_top[0] == "heavy"


async def test_the_checklist_follows_a_refusal(tmp_path):
    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        checklist = app.query_one(ChecklistPane)
        assert checklist.selected == 0
        app.action_run_step("launch")  # blocked: 'clean' has not run
        await eventually(lambda: checklist.selected == 1, what="the refused step selected")
        await pilot.pause()
        assert any("launch: blocked" in (n.title or "") for n in app._notifications)


LOCAL = """
[hosts.here]
local = true
nvidia_smi = "/nonexistent/nvidia-smi"

[runbook]
name = "palette"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "here"

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "here"
argv = ["sleep", "60"]
settle_s = 0.3
log = "{log}"
"""


def palette_titles(app) -> list[str]:
    return [command.title for command in app.get_system_commands(app.screen)]


async def test_palette_forces_stops_and_resets_as_the_cli_does(tmp_path):
    config = parse_config(LOCAL.format(log=tmp_path / "server.log"))
    app = CockpitApp(config)
    app.runbook.store.path = tmp_path / "state.json"
    app.runbook.store.audit_path = tmp_path / "audit.jsonl"
    async with app.run_test(size=(160, 48)) as pilot:
        titles = palette_titles(app)
        assert "Force step past its gate: launch" in titles and "Reset every step" in titles
        assert not any(t.startswith("Stop the server") for t in titles)  # nothing started yet
        app.action_force_step("launch")
        await eventually(lambda: isinstance(app.screen, ReasonScreen), what="the reason asked")
        await pilot.press("enter")  # no reason: refused, still asking
        assert isinstance(app.screen, ReasonScreen)
        for key in "old GPUs":
            await pilot.press("space" if key == " " else key)
        await pilot.press("enter")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="the launch's own confirmation")
        assert "sleep 60" in app.screen.plan
        await pilot.press("y")
        await eventually(lambda: app.runbook.result("launch") and app.runbook.result("launch").state is StepState.PASSED,
                         timeout=20, what="launched")
        result = app.runbook.result("launch")
        assert result.forced_reason == "old GPUs"
        pid = app.runbook.launched("launch").pid
        assert psutil.pid_exists(pid)
        assert "Stop the server of: launch" in palette_titles(app)

        app.action_stop_server("launch")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="stop asks")
        assert f"SIGTERM pid {pid}" in app.screen.plan
        await pilot.press("y")
        await eventually(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                         timeout=15, what="the server stopped")
        await eventually(lambda: app.runbook.result("launch").state is StepState.STALE, what="the step stale")

        app.action_reset_step("launch")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="reset asks")
        await pilot.press("n")  # declined: nothing forgotten
        await pilot.pause()
        assert app.runbook.result("launch") is not None
        app.action_reset_step("launch")
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="reset asks")
        await pilot.press("y")
        await eventually(lambda: app.runbook.result("launch") is None, what="reset")
    audit = (tmp_path / "audit.jsonl").read_text()
    assert '"override"' in audit and "old GPUs" in audit and '"reset"' in audit


async def test_read_only_palette_has_no_runbook_actions(tmp_path):
    config = parse_config(LOCAL.format(log=tmp_path / "server.log"))
    app = CockpitApp(config, read_only=True)
    app.runbook.store.path = tmp_path / "state.json"
    async with app.run_test(size=(80, 24)) as pilot:
        titles = palette_titles(app)
        assert not [t for t in titles if t.split(":")[0] in ("Run step", "Force step past its gate", "Reset step", "Stop the server of")]
        assert "Reset every step" not in titles and "Run the next step" not in titles
        app.action_reset_step(None)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("Read-only" in n.message for n in app._notifications)


async def test_step_details_are_sentences_with_the_raw_evidence_one_key_away(tmp_path):
    from cockpit.runbook.checks import judge
    from cockpit.runbook.model import StepResult

    app = fixed_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        report = judge(app.hub.latest["gpu-server"])
        then = time.time() - 120
        app.runbook.results["clean"] = StepResult(StepState.FAILED, then, then + 1, "; ".join(report.reasons), evidence=report.evidence)
        app.runbook._changed()
        checklist = app.query_one(ChecklistPane)
        await eventually(lambda: checklist.views and checklist.views[0].result is not None, what="shown")
        await pilot.press("c")
        text = " ".join(str(checklist.render()).split())  # (wrapped to the pane's width)
        assert "8 GPUs of gpu-server sampled" in text and "GPU 5 30000 MiB" in text
        assert "pid 4242 (python3, 30000 MiB, GPU 5)" in text and "2 min ago" in text
        assert '"memory_used_mib"' not in text and str(int(report.evidence["time"])) not in text  # no JSON, no epoch
        # x: the raw JSON in a view over the panes (wherever the checklist's detail lies), the evidence exactly
        from cockpit.ui.screens.evidence import EvidenceScreen
        from textual.widgets import TextArea
        import json

        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)
        shown = app.screen.query_one(TextArea).text
        assert '"memory_used_mib"' in shown and json.loads(shown) == json.loads(json.dumps(report.evidence, default=str))
        await pilot.press("x")
        await pilot.pause()
        assert not isinstance(app.screen, EvidenceScreen)
        app.runbook.results.pop("clean")
        app.runbook._changed()
        await eventually(lambda: checklist.views[0].result is None, what="not run")
        await pilot.press("x")  # a step with no evidence: says so, opens nothing
        await pilot.pause()
        assert not isinstance(app.screen, EvidenceScreen) and any("has none yet" in n.message for n in app._notifications)


def test_open_panes_share_the_rows_and_stack_as_tabs_when_they_cannot():
    """Issue 30: with runs, server log, benchmarks and command log open at 160x48 the checklist was
    one row and the trainer pane its title.  The hosts and the checklist keep their rows; every open
    pane gets at least MIN_PANE; when they cannot, they stack behind the last one shown."""
    from cockpit.ui.layout import MIN_PANE, Layout, main_rows

    state = Layout()
    for view in ("runs", "server", "bench", "log"):
        state.press(view)
    heights, tabbed = state.shares(46)  # 160x48 less the title and the footer
    assert not tabbed and set(heights) == {"runs", "server", "bench", "log"}
    assert sum(heights.values()) <= 46 - main_rows(46) and min(heights.values()) >= MIN_PANE
    heights, tabbed = state.shares(28)  # 100x30: room for one
    assert list(heights) == ["log"] and tabbed == ["runs", "server", "bench"] and heights["log"] >= MIN_PANE
    state.press("server")  # its key: shown in front, the others behind it
    heights, tabbed = state.shares(28)
    assert list(heights) == ["server"] and "log" in tabbed and state.shown("server") and not state.shown("log")
    state.press("server", focused="server")  # again in it: hidden
    assert "server" not in state.opened and "server" not in state.shares(28)[1]
    few = Layout()
    few.press("log")
    assert few.shares(46) == ({"log": 8}, [])  # one pane: the rows it wants


async def test_every_open_pane_has_rows_at_160x48_and_tabs_at_100x30(tmp_path, fixtures, monkeypatch):
    from harness.scenes import everything, runs_app

    from cockpit.ui.layout import TabLine

    app = runs_app(tmp_path, fixtures, monkeypatch)
    async with app.run_test(size=(160, 48)) as pilot:
        await everything(pilot)
        await pilot.pause()
        panes = app._panes()
        shown = {v: p for v, p in panes.items() if p.display and not p.has_class("hidden")}
        assert set(shown) == {"hosts", "checklist", "runs", "server", "bench", "log"}
        assert all(p.size.height >= 3 for p in shown.values()), {v: p.size.height for v, p in shown.items()}
        assert app.query_one(ChecklistPane).size.height >= 10 and not app.query_one(TabLine).display
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        shown = [v for v, p in panes.items() if v not in ("hosts", "checklist") and not p.has_class("hidden")]
        tabs = app.query_one(TabLine)
        assert len(shown) == 1 and tabs.display and all(key in str(tabs.content) for key in " t  s  b  l ".split())
        assert all(p.size.height >= 3 for v, p in panes.items() if p.display and not p.has_class("hidden"))
        await pilot.press("s")  # a pane behind the tabs: its key brings it to the front, focused
        await pilot.pause()
        assert not panes["server"].has_class("hidden") and panes["log"].has_class("hidden") and app._view_of_focus() == "server"


def test_a_pane_already_open_is_not_brought_to_the_front_by_news():
    """Issue 30: during a sweep the server log and the benchmarks took turns in front at 100x30."""
    from cockpit.ui.layout import Layout

    state = Layout()
    for view in ("runs", "server", "bench", "log"):
        state.press(view)
    state.press("server")
    assert state.shares(28)[0].keys() == {"server"}
    state.reveal("bench")  # a sweep's progress: open already, behind a tab
    assert state.shares(28)[0].keys() == {"server"}
    state.press("bench", focused="server")
    state._close("log")
    state.reveal("log")  # closed: news opens it, in front
    assert state.shares(28)[0].keys() == {"log"}


GRID = [(80, 24), (81, 25), (99, 27), (100, 28), (100, 30), (120, 40), (129, 36), (130, 36), (160, 48), (200, 60), (300, 80)]


async def test_every_size_and_every_set_of_open_panes_keeps_the_floors(tmp_path, fixtures, monkeypatch):
    """Issue 50 item 1: over a grid of sizes (odd ones included) and every set of open bottom panes, a large terminal keeps
    the hosts and the checklist their rows (main_rows: at 130x36 the charts' own min-height took them, 4 rows left) and
    every shown pane at least 3 rows of its own, all inside the screen; a small one fills the screen with the pane in view."""
    import itertools

    from harness.scenes import everything, runs_app

    from cockpit.ui.layout import BOTTOM, VIEWS, main_rows
    from cockpit.ui.widgets.footer import CockpitFooter

    app = runs_app(tmp_path, fixtures, monkeypatch)
    problems = []
    async with app.run_test(size=(160, 48)) as pilot:
        await everything(pilot)
        listing = app.query_one(ChecklistPane)
        listing.selected = len(listing.views) - 1  # the last step selected: the one a tall list would hide
        for width, height in GRID:
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            state = app.layout_state
            bottom = app.query_one(CockpitFooter).region.y
            if state.compact:
                for view, _key in VIEWS:
                    state.view = view
                    app.apply_layout()
                    await pilot.pause()
                    pane = app._panes()[view]
                    shown = app.query_one("#main") if view in ("hosts", "checklist") else pane
                    if pane.region.height < min(10, height - 8) or shown.region.bottom > bottom:
                        problems.append(f"{width}x{height} small, {view}: {pane.region}")
                continue
            for count in range(len(BOTTOM) + 1):
                for opened in itertools.combinations(BOTTOM, count):
                    state.opened, state.order = set(opened), list(opened)
                    app.apply_layout()
                    await pilot.pause()
                    rows = height - 2 - app.query_one(MessageBar).rows
                    main = app.query_one("#main").region
                    hosts, checklist = app.query_one("#hosts").region, app.query_one(ChecklistPane).region
                    panes = [(v, app._panes()[v].region) for v in opened if not app._panes()[v].has_class("hidden")]
                    where = f"{width}x{height} {'+'.join(opened) or 'none'}"
                    if main.height < min(main_rows(rows), rows - 3 * len(panes)) or min(hosts.height, checklist.height) < 4:
                        problems.append(f"{where}: main {main.height} rows (hosts {hosts.height}, checklist {checklist.height})")
                    drawn = listing.render().plain.splitlines()[:listing.content_region.height]
                    if not any(line.startswith(">") for line in drawn):
                        problems.append(f"{where}: the selected step is not in the checklist's rows: {drawn}")
                    problems += [f"{where}: {v} {r.height} rows" for v, r in panes if r.height < 3]
                    problems += [f"{where}: {v} runs past the footer" for v, r in panes if r.bottom > bottom]
                    if opened and not panes:
                        problems.append(f"{where}: every open pane hidden")
    assert problems == [], "\n".join(problems[:20])


def test_the_checklist_detail_never_splits_a_path_in_two():
    """Issue 50 item 8: a path longer than the pane was cut into two pieces that read as two words (`/tmp/co`,
    `ckpit-demo...`).  At every width, each path shows whole or cut once at the edge with an ellipsis."""
    from cockpit.runbook.model import StepResult, StepSpec, StepView
    from cockpit.ui.widgets.checklist import render_checklist

    path = "/tmp/cockpit-demo-4242/outputs/epoch_1/model.safetensors"
    spec = StepSpec("draft-ready", "drafter_check", "gpu-server")
    result = StepResult(StepState.PASSED, 1.0, 2.0, "ready", evidence={"path": path})
    view = StepView(spec, result, StepState.PASSED, "draft ready", "checks the draft", False,
                    details=(f"checked {path} (its headers only)", f"renamed 10 keys in {path}"))
    for width in range(24, 100):
        lines = render_checklist([view], 0, width).plain.splitlines()
        pieces = [w for line in lines for w in line.split() if w.startswith("/tmp/") or "cockpit-demo" in w]
        assert pieces and all(w == path or (w.endswith("…") and path.startswith(w[:-1])) for w in pieces), (width, pieces)
        assert not any(line.strip().startswith(("ckpit", "outputs/", "model.safetensors")) for line in lines), (width, lines)


def every_ordered_pair(sizes: list) -> list:
    """A walk from sizes[0] back to it that goes from each size to each other size exactly once (an Eulerian circuit of
    the complete directed graph, Hierholzer's)."""
    left = {a: [b for b in sizes if b != a] for a in sizes}
    stack, walk = [sizes[0]], []
    while stack:
        if left[stack[-1]]:
            stack.append(left[stack[-1]].pop())
        else:
            walk.append(stack.pop())
    return walk[::-1]


def test_the_walk_takes_every_ordered_pair_once():
    sizes = [(160, 48), (100, 30), (80, 24), (130, 36)]
    walk = every_ordered_pair(sizes)
    steps = list(zip(walk, walk[1:]))
    assert sorted(steps) == sorted((a, b) for a in sizes for b in sizes if a != b) and walk[0] == sizes[0]


async def test_no_frame_is_drawn_at_a_size_the_terminal_no_longer_has(tmp_path, fixtures, monkeypatch):
    """CI (a loaded 2-core machine): after a resize from 160x48 to 100x30 with four panes open, tmux showed the checklist
    at the top and no title, no GPU rows.  The panes' heights were set when the app heard of the resize, while the screen
    still had the old size: Textual drew a 48-row frame into the 30-row terminal (which scrolls it), and the full frame
    of the new size came later (>1 s later under load).  Every frame written must have the terminal's size: over every
    ordered pair of sizes (large and small, each crossing of the small/large line), with every bottom pane open, with and
    without a dialog over the main screen.  (Textual's frames are read where the app writes them, App._display.)"""
    from harness.scenes import everything, runs_app

    from cockpit.ui.screens.help import HelpScreen

    app = runs_app(tmp_path, fixtures, monkeypatch)
    frames: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    sizes = [(160, 48), (100, 30), (80, 24), (130, 36), (99, 27), (200, 60)]
    async with app.run_test(size=(160, 48)) as pilot:
        await everything(pilot)
        write = app._display

        def display(screen, renderable):
            if renderable is not None:
                frames.append((tuple(screen.outer_size), tuple(app.size), type(renderable).__name__))  # (Screen.size is the app's)
            return write(screen, renderable)

        app._display = display  # type: ignore[method-assign]
        laid_out = []  # the panes laid out once per resize (the app's word and Textual's later one are the same resize)
        lay_out = app.screen_resized
        app.screen_resized = lambda size: (laid_out.append(tuple(size)), lay_out(size))  # type: ignore[method-assign]
        resizes = 0
        for with_dialog in (False, True):
            if with_dialog:
                await pilot.press("question_mark")
                await pilot.pause()
                assert isinstance(app.screen, HelpScreen)
            for size in every_ordered_pair(sizes)[1:]:  # each resize one of the pairs, each pair once
                await pilot.resize_terminal(*size)
                resizes += 1
                await pilot.pause(0.02)  # (Textual resizes the screen 1/120 s after the app)
    stale = [f for f in frames if f[0] != f[1]]
    assert len(frames) > 40 and stale == [], stale[:10]
    assert len(laid_out) == resizes, (len(laid_out), resizes)
