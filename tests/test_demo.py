"""`cockpit demo`: the whole story, walked through Pilot to the charts."""

from __future__ import annotations

from cockpit.demo.world import build
from cockpit.hosts.state import HostState
from cockpit.runbook.model import StepState
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.server_log import ServerLogPane
from helpers import eventually


async def run_next(app, pilot, step: str, state=StepState.PASSED, confirm: bool = False, timeout: float = 20):
    await pilot.press("n")
    if confirm:
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), timeout=timeout,
                         what=f"{step} asks ({[n.message[:80] for n in app._notifications]}, {app.runbook.results.get(step)})")
        await pilot.press("y")
    await eventually(lambda: app.runbook.result(step) and app.runbook.result(step).state is state, timeout=timeout,
                     what=f"{step} {state.value}: {app.runbook.result(step) and app.runbook.result(step).message}")


async def test_demo_walks_the_story_to_the_charts(tmp_path):
    world = build(tmp_path / "demo")
    try:
        app = CockpitApp(world.config, demo=True)
        async with app.run_test(size=(160, 48)) as pilot:
            assert app.title == "cockpit DEMO" and "DEMO" in app.sub_title
            await eventually(lambda: len(app.panes["gpu-server"].snapshot.gpus) == 8, what="8 GPUs replayed")
            server = app.panes["gpu-server"].snapshot
            assert server.state is HostState.UP and any(g.memory_used_mib == 30000 for g in server.gpus)
            launch_view = [v for v in app.runbook.views() if v.spec.name == "launch"][0]
            assert launch_view.locked
            await run_next(app, pilot, "kill-trainer", confirm=True)
            await run_next(app, pilot, "kill-server-leftovers", confirm=True)
            await run_next(app, pilot, "server-gpus-clean")
            await run_next(app, pilot, "draft-ready", confirm=True)
            assert app.runbook.result("draft-ready").evidence["fixed"] == 10
            # the story's crash: refused before launch, named, with the fix
            await run_next(app, pilot, "launch", state=StepState.FAILED)
            assert "--num-speculative-tokens 16 is not an SGLang flag" in app.runbook.result("launch").message
            pane = app.query_one(ServerLogPane)
            assert pane.top_fix is not None
            await pilot.press("f")
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="relaunch asks")
            await pilot.press("y")
            await eventually(lambda: app.runbook.result("launch").state is StepState.PASSED, timeout=20, what="relaunched")
            await run_next(app, pilot, "ready", timeout=30)
            await run_next(app, pilot, "sweep", confirm=True, timeout=120)
            bench = app.query_one(BenchPane)
            assert not bench.has_class("hidden") and {r["config"] for r in bench.runs} >= {"baseline", "16 draft tokens (steps 15, topk 1)"}
            rows = app.runbook.result("sweep").evidence["rows"]
            assert all(r["failed"] == 0 for r in rows)
            deep = [r for r in rows if r["config"].startswith("16") and r["concurrency"] == 1][0]
            assert deep["speedup"] > 1.0 and deep["accept_length"] > 2.0
    finally:
        world.close()
