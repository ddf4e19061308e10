"""`cockpit demo`: the whole story, walked through Pilot to the charts."""

from __future__ import annotations

import asyncio
import math

import pytest

from cockpit.demo.specmodel import DRAFTER_ACCURACY
from cockpit.demo.world import build
from cockpit.hosts.state import HostState
from cockpit.runbook.model import StepState
from cockpit.ui.app import CockpitApp
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.server_log import ServerLogPane
from helpers import eventually


async def run_next(app, pilot, step: str, state=StepState.PASSED, confirm: bool = False, timeout: float = 20):
    """Press n; confirm when asked; wait for the step's state.  Returns the plan that was confirmed."""
    plan = None
    await pilot.press("n")
    if confirm:
        await eventually(lambda: isinstance(app.screen, ConfirmScreen), timeout=timeout,
                         what=f"{step} asks ({[n.message[:80] for n in app._notifications]}, {app.runbook.results.get(step)})")
        plan = app.screen.plan
        await pilot.press("y")
    await eventually(lambda: app.runbook.result(step) and app.runbook.result(step).state is state, timeout=timeout,
                     what=f"{step} {state.value}: {app.runbook.result(step) and app.runbook.result(step).message} "
                     f"{[n.message[:200] for n in app._notifications][-3:]}")
    return plan


async def test_demo_walks_the_story_to_the_charts(tmp_path):
    world = build(tmp_path / "demo")
    try:
        app = CockpitApp(world.config, demo=True)
        async with app.run_test(size=(160, 48)) as pilot:
            # DEMO is said once, in the title; the subtitle says what that means
            assert app.title == "cockpit DEMO" and "DEMO" not in app.sub_title and "nothing real is deployed" in app.sub_title
            await eventually(lambda: len(app.panes["gpu-server"].snapshot.gpus) == 8, what="8 GPUs replayed")
            server = app.panes["gpu-server"].snapshot
            assert server.state is HostState.UP and any(g.memory_used_mib == 30000 for g in server.gpus)
            launch_view = [v for v in app.runbook.views() if v.spec.name == "launch"][0]
            assert launch_view.locked
            # the training run of the story (a stand-in) finishes into its checkpoint; the runs pane shows it
            await run_next(app, pilot, "training-done", timeout=60)
            done = app.runbook.result("training-done").evidence
            assert done["checkpoint"]["path"].endswith("outputs/epoch_1") and done["checkpoint"]["key_layout"] == "layers.0.*"
            printed = [float(f"{a:.2f}") for a in DRAFTER_ACCURACY]  # the eval lines of its last epoch, as the log prints them
            assert done["estimate"]["source"] == "eval" and done["estimate"]["depth"] == 7  # depth 16, 7 positions trained
            assert done["estimate"]["with_bonus"] == pytest.approx(1 + sum(math.prod(printed[:k + 1]) for k in range(7)), abs=1e-3)
            from cockpit.ui.widgets.runs_pane import RunsPane

            await eventually(lambda: app.query_one(RunsPane).statuses.get("eagle3-train") is not None
                             and app.query_one(RunsPane).statuses["eagle3-train"].state == "finished", what="the runs pane shows it")
            plan = await run_next(app, pilot, "kill-trainer", confirm=True)
            # the stale trainer with its memory on each of the 4 GPUs; only the demo's own process is matched
            assert "0:61234 1:61234 2:61234 3:61234" in plan and "244936" in plan and str(world.root) in plan
            await run_next(app, pilot, "kill-server-leftovers", confirm=True)
            # the killed stale processes are the demo's children: reaped, not <defunct> all session (issue 36 item 9)
            import psutil

            await eventually(lambda: not [c for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE],
                             what="no <defunct> child")
            await run_next(app, pilot, "server-gpus-clean")
            await run_next(app, pilot, "draft-ready", confirm=True)
            assert app.runbook.result("draft-ready").evidence["fixed"] == 10
            assert app.runbook.result("draft-ready").evidence["path"] == done["checkpoint"]["path"]  # the run's checkpoint
            # the story's crash: refused before launch, named, with the fix
            await run_next(app, pilot, "launch", state=StepState.FAILED)
            assert "--num-speculative-tokens 16 is not an SGLang flag" in app.runbook.result("launch").message
            pane = app.query_one(ServerLogPane)
            assert pane.top_fix is not None
            from cockpit.context import load_checked

            assert any("--num-speculative-tokens" in p for p in load_checked(str(world.root / "demo.toml")).launch_problems())
            await pilot.press("f")
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="relaunch asks")
            # issue 46 item 8: the fix pressed is written to the config the user keeps, the old line kept as a comment
            import tomllib

            kept = (world.root / "demo.toml").read_text()
            [launch_table] = [t for t in tomllib.loads(kept)["runbook"]["steps"] if t["name"] == "launch"]
            assert "--num-speculative-tokens" not in launch_table["extra_args"] and "--speculative-num-steps" in launch_table["extra_args"]
            assert "\n# was: extra_args = [" in kept and "--num-speculative-tokens" in kept.split("# was: ")[1].split("\n")[0]
            assert load_checked(str(world.root / "demo.toml")).launch_problems() == []
            await pilot.press("y")
            await eventually(lambda: app.runbook.result("launch").state is StepState.PASSED, timeout=20, what="relaunched")
            await run_next(app, pilot, "ready", timeout=30)
            # issue 46 item 8: one SGLang version on screen, the one the serving host runs (asked of it); ranges only in reasons
            import re

            verdict = app.query_one(RunsPane).statuses["eagle3-train"].latest_checkpoint["verdict"]
            shown = " ".join([app.title, app.sub_title, verdict, *(app.runbook.result(n).message for n in ("draft-ready", "launch", "ready")),
                              *(v.title for v in app.runbook.views())])
            assert set(re.findall(r"SGLang (\d+\.\d+(?:\.\d+)*)(?![\d.-])", shown)) == {"0.5.2"}, shown
            # the launched server's memory on every GPU of its tensor parallelism, and its process
            await eventually(lambda: [g.memory_used_mib for g in app.panes["gpu-server"].snapshot.gpus] == [126518] * 8,
                             what="the server's memory on the 8 GPUs")
            # an idle server's GPUs replay the idle H200, not the busy one (issue 36 item 9: 100 % at 694 W, idle)
            assert all((g.utilization_pct or 0) < 50 for g in app.panes["gpu-server"].snapshot.gpus)
            server_pid = app.runbook.launched("launch").pid
            await eventually(lambda: {p.pid for p in app.panes["gpu-server"].snapshot.processes} == {server_pid},
                             what="the server's process on the GPUs")
            await run_next(app, pilot, "sweep", confirm=True, timeout=120)
            bench = app.query_one(BenchPane)
            deepest = "depth 16 (steps 16, topk 1, draft tokens 17)"  # the story's 16, and the configuration the fix produced
            assert not bench.has_class("hidden") and {r["config"] for r in bench.runs} >= {"baseline", deepest}
            rows = app.runbook.result("sweep").evidence["rows"]
            assert all(r["failed"] == 0 for r in rows), [(r["config"], r["concurrency"], r["failed"]) for r in rows]
            deep = [r for r in rows if r["config"] == deepest and r["concurrency"] == 1][0]
            assert deep["speedup"] > 1.0 and deep["accept_length"] > 2.0
            # the predicted acceptance is the training run's: its eval accuracies, handed on by training-done
            predicted = {a["steps"]: a["estimate_with_bonus"] for a in app.runbook.result("sweep").evidence["acceptance"] if a.get("steps")}
            assert predicted[2] == pytest.approx(1 + printed[0] + printed[0] * printed[1], abs=1e-3)
            # acceptance rises with depth; the best depth depends on concurrency, and the decision names it
            accept = {r["steps"]: r["accept_length"] for r in rows if r["concurrency"] == 1 and r["steps"]}
            assert accept[2] < min(accept[5], accept[10], accept[16])  # and saturates: the deep ones are close
            decisions = {d["concurrency"]: d for d in app.runbook.result("sweep").evidence["decisions"]}
            assert decisions[1]["best_depth"]["steps"] > decisions[8]["best_depth"]["steps"]
            # the sweep leaves the recommended config running, and the checklist says everything passed
            await eventually(lambda: all(v.state is StepState.PASSED for v in app.runbook.views()), what="every step passed")
            server = app.runbook.launched("launch")
            assert f"--speculative-num-steps {decisions[8]['best_depth']['steps']}" in " ".join(server.argv)
            assert not [n for n in app._notifications if "died" in (n.title or "")], "a planned relaunch raised an error toast"
            # issue 51 item 1: the sweep's baseline rows are what the live verdict compares against, and `cockpit server`
            # says the verdict (the recommended config left running, idle now: not judged, said so)
            from cockpit.bench.steps import sweep_baseline

            baseline = sweep_baseline(app.runbook)
            assert baseline is not None and set(baseline.tok_s) == {r["concurrency"] for r in rows} and "sweep" in baseline.source
            import json as _json
            import subprocess
            import sys

            said = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(world.root / "demo.toml"), "server", "--json"],
                                  capture_output=True, text=True, timeout=60)
            verdict = _json.loads(said.stdout)["speculation"]
            assert verdict is not None and verdict["state"] in ("idle", "paying", "even", "not_paying"), verdict
            # issue 51 item 3: the depth per load, as SGLang's own flags on the launch step's line, from the same sweep
            scheduled = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(world.root / "demo.toml"), "bench",
                                        "schedule", "--json"], capture_output=True, text=True, timeout=60)
            assert scheduled.returncode == 0 and scheduled.stderr == "", scheduled.stderr
            schedule = _json.loads(scheduled.stdout)
            assert schedule["engine"] == "sglang" and {r["concurrency"] for r in schedule["rows"]} == set(decisions)
            for row in schedule["rows"]:
                best = decisions[row["concurrency"]]["best_depth"]
                assert row["off"] or (f"--speculative-num-steps {best['steps']}" in row["argv"]
                                      and f"--speculative-num-draft-tokens {best['draft_tokens']}" in row["argv"]
                                      and "--num-speculative-tokens" not in row["argv"]), row
            assert app.query_one(ServerLogPane).status.alive
            # issue 46 item 1: the cockpit's own stop reads "stopped by you" (no PROCESS DEAD, no alert), and the step that
            # rested on the server turns stale, saying why
            async def yes(_text: str) -> bool:
                return True

            await app.runbook.stop_server("launch", yes)
            pane = app.query_one(ServerLogPane)
            await eventually(lambda: pane.status is not None and not pane.status.alive, what="the stop seen by the pane")
            from cockpit.ui.widgets.server_log import status_line

            line = status_line(pane.status, pane.target).plain
            assert "STOPPED BY YOU" in line and "PROCESS DEAD" not in line and "DIED" not in line, line
            assert app.runbook.result("ready").state is StepState.STALE and "stopped by you" in app.runbook.result("ready").message
            await pilot.pause(0.5)
            assert not [n for n in app._notifications if "died" in (n.title or "") or "crash" in (n.title or "")], \
                [n.title for n in app._notifications]
    finally:
        world.close()


def test_demo_dir_starts_the_story_afresh_and_never_empties_a_foreign_folder(tmp_path):
    """Issue 30: `demo --dir` on an earlier demo's folder mixed its old training log into the loss
    sparkline.  An earlier demo's world is removed first; a folder of anything else is refused, untouched."""
    from cockpit.demo.world import afresh
    from cockpit.errors import CockpitError

    old = tmp_path / "old"
    world = build(old)
    world.close()
    (old / "train.log").write_text("step 1 loss 99.0 (an old run)\n")
    assert afresh(old) and not any(old.iterdir())
    assert not afresh(tmp_path / "new")  # nothing there: nothing to remove
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(CockpitError, match="not a cockpit demo's"):
        afresh(foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


async def test_the_vllm_demo_launches_fixes_and_shows_vllms_figures(tmp_path):
    """`cockpit demo --engine vllm`: the story's habit in vLLM's terms (vLLM <= 0.8.2's separate flags on
    a 0.10.2) refused with the JSON that replaces them, `f` applies it, the STAND-IN vLLM comes up, and
    under load the server pane shows its figures read from its own log lines."""
    from cockpit.bench.client import Workload, run_closed_loop
    from cockpit.bench.workload import load_prompts

    world = build(tmp_path / "demo", "vllm")
    try:
        app = CockpitApp(world.config, demo=True)
        async with app.run_test(size=(160, 48)) as pilot:
            assert "vLLM" in app.sub_title
            await run_next(app, pilot, "training-done", timeout=60)
            await run_next(app, pilot, "kill-trainer", confirm=True)
            await run_next(app, pilot, "kill-server-leftovers", confirm=True)
            await run_next(app, pilot, "server-gpus-clean")
            await run_next(app, pilot, "draft-ready")  # vLLM loads layers.0.* as they are: nothing to fix
            assert "fixed" not in app.runbook.result("draft-ready").evidence
            await run_next(app, pilot, "launch", state=StepState.FAILED)
            assert "vLLM 0.10.2 has none of these" in app.runbook.result("launch").message
            pane = app.query_one(ServerLogPane)
            assert pane.top_fix is not None and pane.top_fix.replacement[0] == "--speculative-config"
            await pilot.press("f")
            await eventually(lambda: isinstance(app.screen, ConfirmScreen), what="relaunch asks")
            await pilot.press("y")
            await eventually(lambda: app.runbook.result("launch").state is StepState.PASSED, timeout=20, what="relaunched")
            await run_next(app, pilot, "ready", timeout=30)
            server = app.runbook.launched("launch")
            assert "--speculative-config" in server.argv and "--num-speculative-tokens" not in server.argv
            workload = Workload(load_prompts(None, None), 24, 4, 64, 0.0)
            assert all((g.utilization_pct or 0) < 50 for g in app.panes["gpu-server"].snapshot.gpus)  # idle: the idle replay
            load = asyncio.ensure_future(run_closed_loop(f"http://127.0.0.1:{server.port}", "openai", workload))
            await eventually(lambda: any((g.utilization_pct or 0) > 50 for g in app.panes["gpu-server"].snapshot.gpus),
                             timeout=15, what="busy GPUs while requests run")
            await eventually(lambda: pane.status is not None and (pane.status.figures.get("accept_length") or {}).get("window"),
                             timeout=30, what="vLLM's figures in the server pane")
            figures = pane.status.figures
            assert 1.0 < figures["accept_length"]["window"] <= 17.0 and figures["spec_decode"]["per_position"]
            await load
    finally:
        world.close()


async def test_the_cli_reads_the_state_the_demo_shows_whatever_its_xdg_folders(tmp_path):
    """Issue 36 item 3: with the demo's checklist advanced, `cockpit --config <demo>/demo.toml plan show` said step 1
    pending until XDG_STATE_HOME pointed into the demo's folder.  The config says where its state lives
    ([storage] dir), so every shell given the config reads the one state; the demo says which command reads it."""
    import json
    import os
    import subprocess
    import sys

    from cockpit.context import Context

    async def yes(_text: str) -> bool:
        return True

    world = build(tmp_path / "demo")
    ctx = Context.of(world.config)
    try:
        ctx.hub.start()
        result = await ctx.runbook.run_step("training-done", yes)
        assert result.state is StepState.PASSED, result.message
    finally:
        await ctx.close()
        world.close()
    elsewhere = {**os.environ, **{var: str(tmp_path / "elsewhere" / var) for var in ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")}}
    shown = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(world.root / "demo.toml"), "plan", "show", "--json"],
                           capture_output=True, text=True, timeout=60, env=elsewhere)
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)
    assert plan["steps"][0]["name"] == "training-done" and plan["steps"][0]["state"] == "passed", plan["steps"][0]
    assert plan["state_file"].startswith(str(world.root)) and not (tmp_path / "elsewhere").exists()


async def test_a_cockpit_started_while_a_server_runs_follows_it(tmp_path):
    """A server launched before the TUI started (by `plan run`, another cockpit, an earlier session) was followed only
    at the runbook's next change: the server pane said nothing of a server that served.  It is followed from the start."""
    from cockpit.context import Context
    from cockpit.diagnosis import Diagnosis
    from cockpit.serving.steps import apply_diagnosis_fix

    async def yes(_text: str) -> bool:
        return True

    world = build(tmp_path / "demo")
    try:
        ctx = Context.of(world.config)
        runbook = ctx.runbook
        try:
            ctx.hub.start()
            for step in ("training-done", "kill-trainer", "kill-server-leftovers", "server-gpus-clean", "draft-ready"):
                assert (await runbook.run_step(step, yes)).state is StepState.PASSED, step
            refused = await runbook.run_step("launch", yes)
            [error] = [Diagnosis.from_json(d) for d in refused.evidence["diagnoses"] if d["severity"] == "error"]
            apply_diagnosis_fix(runbook, "launch", error)
            assert (await runbook.run_step("launch", yes)).state is StepState.PASSED
            assert (await runbook.run_step("ready", yes)).state is StepState.PASSED
        finally:
            await ctx.close()
        app = CockpitApp(world.config, demo=True)
        async with app.run_test(size=(160, 48)):
            pane = app.query_one(ServerLogPane)
            await eventually(lambda: pane.status is not None and pane.status.health == "ready", timeout=20,
                             what="the server pane follows the running server")
            assert pane.status.alive and app.layout_state.shown("server")
    finally:
        world.close()
