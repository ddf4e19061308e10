"""The Textual app through Pilot, fed by real collectors over the loopback sshd."""

from __future__ import annotations

import asyncio
import os

import pytest

from cockpit.config import parse_config
from cockpit.hosts.state import HostState
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.help import HelpScreen
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane
from harness.sshd import SshdHarness, free_port
from harness.tools import need
from helpers import eventually


def pane_text(app: CockpitApp, name: str) -> str:
    pane = app.panes[name]
    return str(pane.render()) if not hasattr(pane, "content") else str(pane.content)


@pytest.fixture
def second_sshd(tmp_path):
    need("sshd")
    harness = SshdHarness(tmp_path / "sshd2").start()
    yield harness
    harness.stop()


async def test_panes_for_every_host_and_gpu_and_values_update(sshd, tmp_path):
    sshd.scenario({"gpus": 8, "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}],
                   "set": {"5": {"memory.used": 30000}}})
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server") + "[hosts.here]\nlocal = true\nnvidia_smi = \"/nonexistent/nvidia-smi\"\n", interval_ms=200))
    app = CockpitApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        assert set(app.panes) == {"gpu-server", "here"}
        await eventually(lambda: app.panes["gpu-server"].snapshot.state is HostState.UP and "pid 4242" in pane_text(app, "gpu-server"),
                         what="server pane filled")
        text = pane_text(app, "gpu-server")
        for index in range(8):
            assert f"GPU{index:>2}" in text
        assert "30000/143771" in text
        assert "no NVIDIA GPU driver" in pane_text(app, "here")
        # A value changes on the host: the pane follows.
        sshd.scenario({"gpus": 8, "set": {"5": {"memory.used": 1234}}})
        await eventually(lambda: "1234/143771" in pane_text(app, "gpu-server"), what="updated value")
        await eventually(lambda: "no compute processes" in pane_text(app, "gpu-server"), what="process gone")
        await pilot.press("q")
    assert app.return_code in (0, None)


async def test_host_going_down_does_not_freeze_the_rest(sshd, second_sshd):
    sshd.scenario({"gpus": 2})
    second_sshd.scenario({"gpus": 4})
    hosts = sshd.host_toml("alive") + second_sshd.host_toml("doomed")
    text = sshd.config_toml(hosts, interval_ms=200, stale_after_s=0.6)
    # the second sshd has its own host key: trust both in one known_hosts
    known = sshd.root / "both_known_hosts"
    known.write_text(sshd.known_hosts.read_text() + second_sshd.known_hosts.read_text())
    text = text.replace(str(sshd.known_hosts), str(known))
    app = CockpitApp(parse_config(text))
    async with app.run_test(size=(100, 40)) as pilot:
        await eventually(lambda: all(p.snapshot.state is HostState.UP for p in app.panes.values()), what="both up")
        second_sshd.stop()
        await eventually(lambda: app.panes["doomed"].snapshot.state in (HostState.STALE, HostState.UNREACHABLE), what="doomed down")
        assert app.panes["doomed"].has_class("-stale") or app.panes["doomed"].has_class("-down")
        before = app.hub.monitors["alive"].samples
        handled = app.updates_handled
        await asyncio.sleep(1.0)
        await pilot.pause()
        assert app.hub.monitors["alive"].samples >= before + 2
        assert app.updates_handled > handled
        assert app.panes["alive"].snapshot.state is HostState.UP
        # the UI still answers keys
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_keys_help_log_zoom(sshd):
    sshd.scenario({"gpus": 1})
    config = parse_config(sshd.config_toml(sshd.host_toml("a") + sshd.host_toml("b"), interval_ms=200))
    app = CockpitApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        await eventually(lambda: app.panes["a"].snapshot.state is HostState.UP, what="up")
        log = app.query_one(CommandLogPane)
        assert log.has_class("hidden")
        await pilot.press("l")
        assert not log.has_class("hidden")
        await eventually(lambda: log.shown > 0, what="commands in the log")
        # 80x24: one pane at a time, the log is shown instead of the hosts and has the focus
        assert app.layout_state.compact and app.focused is log and not app.hosts_view.display
        await pilot.press("h")
        assert log.has_class("hidden")
        assert isinstance(app.focused, HostPane) and app.focused.host.name == "a"
        await pilot.press("j")
        assert app.focused.host.name == "b"
        await pilot.press("z")
        assert app.zoomed == "b" and not app.panes["a"].display
        await pilot.press("z")
        assert app.zoomed is None and app.panes["a"].display
        await pilot.press("z", "escape")  # Esc leaves a zoom too (issue 50)
        assert app.zoomed is None and app.panes["a"].display
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        keys = [row[2] for row in app.screen.rows]
        assert "app.quit" in keys and "host.zoom" in keys
        await pilot.press("q")
        await pilot.press("q")
    assert not app.is_running


async def test_checklist_launch_cannot_run_while_blocked(sshd, tmp_path):
    from cockpit.runbook.model import StepState
    from cockpit.ui.screens.confirm import ConfirmScreen
    from cockpit.ui.widgets.checklist import ChecklistPane

    sshd.scenario({"gpus": 8, "set": {"5": {"memory.used": 30000}}})
    log = tmp_path / "server.log"
    steps = f"""
[runbook]
name = "ui"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "launch"
host = "gpu-server"
argv = ["sleep", "30"]
settle_s = 0.3
log = "{log}"
"""
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=200) + steps)
    app = CockpitApp(config)
    app.runbook.store.root = tmp_path / "state"
    app.runbook.store.path = tmp_path / "state" / "ui.json"
    app.runbook.store.audit_path = tmp_path / "state" / "ui.audit.jsonl"
    async with app.run_test(size=(160, 48)) as pilot:
        checklist = app.query_one(ChecklistPane)
        assert [v.state for v in checklist.views] == [StepState.PENDING, StepState.BLOCKED]
        assert checklist.views[1].locked and "locked" in str(checklist.render())
        await pilot.press("c", "j")
        assert checklist.selected_view.spec.name == "launch"
        await pilot.press("enter")  # blocked: refused, nothing starts
        await pilot.pause()
        assert not log.exists() and app.runbook.result("launch") is None
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # runs the next step: clean, which fails on GPU 5
        await eventually(lambda: app.runbook.result("clean") and app.runbook.result("clean").state is StepState.FAILED, what="clean failed")
        await pilot.pause()
        assert checklist.selected_view.spec.name == "clean"  # the selection followed the step that ran
        assert "GPU 5: 30000 MiB used" in str(checklist.render())  # the evidence of the selected step
        await pilot.press("j", "enter")
        await pilot.pause()
        assert app.runbook.result("launch") is None
        from cockpit.ui.layout import MessageBar

        bar = app.query_one(MessageBar)
        assert any(t == "launch: blocked" and "'clean' is failed" in m for _, _, t, m in bar.messages), bar.messages
        # clean the GPU: the gate opens, the launch asks first
        sshd.scenario({"gpus": 8})
        await pilot.press("n")
        await eventually(lambda: app.runbook.result("clean").state is StepState.PASSED, what="clean passed")
        await pilot.pause()
        assert not checklist.views[1].locked
        # issue 46 item 8: the message derived from the gate follows it: 'clean' passed, so "blocked" is gone
        assert not any(t == "launch: blocked" for _, _, t, _ in bar.messages), bar.messages
        await pilot.press("j", "enter")  # the selection is on clean, which just ran: move to launch
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
        assert "sleep 30" in app.screen.plan
        await pilot.press("y")
        await eventually(lambda: app.runbook.result("launch") and app.runbook.result("launch").state is StepState.PASSED, timeout=15, what="launched")
        os.kill(app.runbook.result("launch").evidence["pid"], 9)


async def test_read_only_mode_runs_nothing(sshd, tmp_path):
    sshd.scenario({"gpus": 1})
    steps = '\n[[runbook.steps]]\nname = "hello"\nkind = "command"\nhost = "gpu-server"\nargv = ["echo", "hi"]\n'
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server")) + steps)
    app = CockpitApp(config, read_only=True)
    app.runbook.store.path = tmp_path / "ro.json"
    app.runbook.store.audit_path = tmp_path / "ro.audit.jsonl"
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("n")
        await pilot.press("c", "enter")
        await pilot.pause()
        await asyncio.sleep(0.5)
        assert app.runbook.result("hello") is None
        assert "READ-ONLY" in app.sub_title


async def test_server_log_pane_shows_the_crash_and_applies_the_fix(sshd, tmp_path):
    """The story's crash in the cockpit: the launch is refused with the named flag error, f applies
    the fix, the relaunch starts the (stand-in) server and the pane follows it to ready."""
    import json as _json
    from cockpit.runbook.model import StepState
    from cockpit.ui.screens.confirm import ConfirmScreen
    from cockpit.ui.widgets.server_log import ServerLogPane

    port = free_port()
    sshd.scenario({"gpus": 8})
    log = tmp_path / "sglang.log"
    steps = f"""
[runbook]
name = "ui-serve"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
host = "gpu-server"

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
host = "gpu-server"
model_path = "/models/Kimi-K2.5"
draft_path = "/ckpt/eagle3"
port = {port}
log = "{log}"
settle_s = 0.5
extra_args = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/ckpt/eagle3", "--num-speculative-tokens", "16"]
env = {{ SGLANG_STANDIN = {_json.dumps('{"warmup_s": 1.0}')} }}
"""
    config = parse_config(sshd.config_toml(sshd.host_toml("gpu-server"), interval_ms=300) + steps)
    app = CockpitApp(config)
    store = app.runbook.store
    store.path, store.audit_path = tmp_path / "s.json", tmp_path / "s.audit.jsonl"
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("n")
            await eventually(lambda: app.runbook.result("clean") and app.runbook.result("clean").state is StepState.PASSED, what="clean")
            await pilot.press("n")
            await eventually(lambda: app.runbook.result("launch") and app.runbook.result("launch").state is StepState.FAILED, what="refused")
            await pilot.pause()
            pane = app.query_one(ServerLogPane)
            assert not pane.has_class("hidden")
            fix = pane.top_fix
            assert fix is not None and fix.flag == "--num-speculative-tokens"
            assert "--num-speculative-tokens 16 is not an SGLang flag" in str(pane.query_one("#server-diagnoses").content)
            await pilot.press("f")
            await pilot.pause()
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="confirm relaunch")
            assert "--speculative-num-steps 16" in app.screen.plan
            await pilot.press("y")
            await eventually(lambda: app.runbook.result("launch").state is StepState.PASSED, timeout=20, what="launched")
            await eventually(lambda: pane.status is not None and pane.status.health == "ready", timeout=20, what="ready in the pane")
            assert "ready" in [m for m, _ in pane.status.report.milestones]
    finally:
        pid = (app.runbook.result("launch").evidence or {}).get("pid") if app.runbook.result("launch") else None
        if pid:
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass


async def test_zoom_a_host_then_a_gpu(sshd):
    sshd.scenario({"gpus": 8, "set": {"5": {"memory.used": 30000}},
                   "processes": [{"pid": 4242, "name": "python3", "used_memory": 30000, "gpu": 5}]})
    config = parse_config(sshd.config_toml(sshd.host_toml("a") + sshd.host_toml("b"), interval_ms=200))
    app = CockpitApp(config)
    async with app.run_test(size=(100, 30)) as pilot:
        await eventually(lambda: len(app.panes["a"].snapshot.gpus) == 8 and app.panes["a"].snapshot.processes, what="a up")
        await pilot.press("5")  # not zoomed: only a hint
        assert app.panes["a"].zoomed_gpu is None
        await pilot.press("z", "5")
        await pilot.pause()
        text = pane_text(app, "a")
        assert app.zoomed == "a" and app.panes["a"].zoomed_gpu == 5
        assert "GPU 5  NVIDIA H200" in text and "30000 / 143771 MiB" in text and "pid 4242" in text and "power history" in text
        await pilot.press("5")  # again: back to every GPU
        assert app.panes["a"].zoomed_gpu is None
        await pilot.pause()
        # the zoomed host fills the rows the other left, with its GPUs' histories (issue 36 item 9: 30 empty rows)
        hosts = app.hosts_view
        assert app.panes["a"].outer_size.height >= hosts.size.height - len(app.panes["a"].snapshot.gpus)
        assert "power" in pane_text(app, "a").split("GPU 1")[0]
        await pilot.press("3", "z")  # leaving the host zoom clears the GPU zoom
        assert app.zoomed is None and app.panes["a"].zoomed_gpu is None


async def test_print_inside_the_app_does_not_break_it(tmp_path):
    """Textual captures print() in the app and flushes through App._flush(stderr=...): the cockpit's
    own timer must not shadow that method (a library printing once would raise in the app)."""
    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    app = CockpitApp(config)
    async with app.run_test(size=(80, 24)) as pilot:
        print("a library printing to stdout", flush=True)
        print("and to stderr", file=__import__("sys").stderr, flush=True)
        await pilot.pause(0.3)
        assert app.is_running


async def test_hidden_logs_stay_bounded(tmp_path):
    """Days with the command log hidden: what it holds for later stays at its 500 lines, and showing
    it shows the newest."""
    from cockpit.hosts.commandlog import CommandLog

    config = parse_config('[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n')
    app = CockpitApp(config)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(CommandLogPane)
        assert pane.has_class("hidden") and not pane.size.width
        log = CommandLog()
        for n in range(3000):
            record = log.start("here", f"command-{n}")
            pane.add(log.finish(record, 1))  # failures are always written
        assert len(pane.backlog) == 500
        await pilot.press("l")
        await pilot.pause(0.3)
        assert pane.size.width and not pane.backlog
        shown = "\n".join(line.text for line in pane.lines)  # the host's own retries may log lines too
        assert len(pane.lines) == 500 and "command-2999" in shown and "command-2000" not in shown


async def test_checklist_ages_tick_and_a_gate_counts_down_to_stale(monkeypatch):
    """Issue 27 item 7: 'passed 0 s ago' must not stay for 30 s, nor the evidence's 'SIGTERM ... 0 s ago'."""
    import time as time_module

    from textual.app import App

    from cockpit.format import age
    from cockpit.runbook.model import StepResult, StepSpec, StepState, StepView
    from cockpit.ui.widgets.checklist import ChecklistPane

    clock = [1_800_000_000.0]
    monkeypatch.setattr(time_module, "time", lambda: clock[0])
    result = StepResult(StepState.PASSED, clock[0] - 2, clock[0], "8 GPUs clean", {"time": clock[0]})
    view = StepView(StepSpec("clean", "gpu_clean", "gpu-server", {}), result, StepState.PASSED, "GPUs clean", "why",
                    locked=False, details=("stale text",), explain=lambda: [f"sampled {age(clock[0] - 0)}", f"SIGTERM to 6454 {age(result.finished_at)}"],
                    freshness_s=30.0)

    class Host(App):
        def compose(self):
            yield ChecklistPane()

    app = Host()
    async with app.run_test(size=(100, 24)) as pilot:
        pane = app.query_one(ChecklistPane)
        pane.show([view])
        await pilot.pause()
        first = str(pane.render())
        assert "0 s ago" in first and "fresh for 30 s more" in first and "SIGTERM to 6454 0 s ago" in first
        clock[0] += 12
        pane._tick()
        await pilot.pause()
        later = str(pane.render())
        assert "12 s ago" in later and "fresh for 18 s more" in later and "SIGTERM to 6454 12 s ago" in later
        clock[0] += 30
        drawn = []
        monkeypatch.setattr(pane, "refresh", lambda *a, **k: drawn.append(1))
        pane._tick()
        assert drawn and "older than 30 s" in str(pane.render())
        pane._tick()  # nothing that shows time moved: nothing drawn again
        assert len(drawn) == 1



async def test_the_palette_offers_no_fix_when_there_is_none(tmp_path):
    from harness.builders import SNAPSHOT_CONFIG, fixed_hub

    config = parse_config(SNAPSHOT_CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config))
    async with app.run_test(size=(160, 48)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Apply the suggested fix" not in titles
        assert "Toggle server log" in titles and "Toggle benchmark charts" in titles  # the others stay
        # issue 36 item 9: Textual's own Keys and Maximize beside the cockpit's help and zoom: left out
        assert not {"Keys", "Maximize", "Minimize"} & set(titles) and "Quit" in titles


async def test_the_app_provides_what_each_mixin_protocol_says():
    """ui/mixins.py: each mixin's needs of the app, said once; the app has every one of them."""
    from cockpit.ui import mixins
    from harness.builders import SNAPSHOT_CONFIG, fixed_hub

    config = parse_config(SNAPSHOT_CONFIG)
    app = CockpitApp(config, hub=fixed_hub(config))
    async with app.run_test(size=(100, 30)):
        for name in mixins.__all__:
            protocol = getattr(mixins, name)
            wanted = set()
            for klass in protocol.__mro__:
                if klass in (object,) or klass.__name__ in ("Protocol", "Generic"):
                    continue
                wanted |= set(getattr(klass, "__annotations__", {}))
                wanted |= {k for k, v in vars(klass).items() if callable(v) and not k.startswith("__")}
            missing = sorted(n for n in wanted if not hasattr(app, n))
            assert not missing, f"{name}: the app lacks {missing}"


async def test_log_lines_end_in_an_ellipsis_and_the_last_line_is_never_covered(tmp_path):
    """Issue 30: server log lines were cut at the pane's edge without a mark, and in a pane narrower
    than RichLog's 78-cell minimum a horizontal scrollbar covered the last line ("ready to roll")."""
    from textual.app import App

    from cockpit.ui.widgets.bounded_log import BoundedRichLog

    long_line = "[2026-12-04 10:00:00] Decode batch. #running-req: 8, #token: 4096, gen throughput (token/s): 1390.25, " * 2
    last = "The server is fired up and ready to roll!"

    class One(App):
        def compose(self):
            yield BoundedRichLog(max_lines=100, wrap=False, markup=False)

    app = One()
    async with app.run_test(size=(60, 8)) as pilot:
        log = app.query_one(BoundedRichLog)
        for n in range(20):
            log.write(long_line)
        log.write(last)
        await pilot.pause()
        assert log.max_scroll_x == 0 and not log.show_horizontal_scrollbar
        shown = [line.text for line in log.lines]
        assert shown[0].endswith("…") and len(shown[0]) <= log.scrollable_content_region.width
        bottom = log.scroll_offset.y + log.scrollable_content_region.height - 1
        assert log.lines[bottom].text.startswith(last)  # the last row on screen is the last line
        narrow = len(shown[0])
        await pilot.resize_terminal(120, 8)
        await pilot.pause()
        wider = [line.text for line in log.lines]
        assert len(wider) == 21 and len(wider[0]) > narrow + 50 and wider[0].endswith("…")  # drawn again at the new width


def test_the_command_log_says_what_it_did_not_repeat():
    from cockpit.hosts.commandlog import CommandLog

    pane = CommandLogPane()
    log = CommandLog()
    for _ in range(3):
        pane.add(log.finish(log.start("here", "nvidia-smi --query-compute-apps"), 0))
    assert pane.shown == 1 and str(pane.border_title) == "command log · 2 repeats of a command above that succeeded again, not shown"


def test_the_destructive_mark_is_explained_where_it_is_shown():
    """Issue 30: the `!` beside a step was explained nowhere."""
    from cockpit.runbook.model import StepSpec, StepState, StepView
    from cockpit.ui.actions import PANE_HELP
    from cockpit.ui.widgets.checklist import render_checklist

    views = [StepView(StepSpec("kill", "kill_stale", "trainer", {}), None, StepState.PENDING, "kill stale", "why", False, destructive=True),
             StepView(StepSpec("clean", "gpu_clean", "gpu-server", {}), None, StepState.BLOCKED, "clean", "why", False)]
    shown = render_checklist(views, 0, 100).plain
    assert "kill @trainer  pending  !" in shown and "! it changes the host: it shows exactly what it will do and asks first" in shown
    assert "! it changes" not in render_checklist(views, 1, 100).plain  # only beside a step that does
    assert "marked ! changes a host" in PANE_HELP["checklist"]
