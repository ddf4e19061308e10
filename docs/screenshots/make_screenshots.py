"""Screenshots for the README, made by the app itself: the demo walked by Pilot, Textual's SVG
screenshots at each stage, turned into PNG with rsvg-convert (Debian's librsvg2-bin).

    python docs/screenshots/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from cockpit.demo.world import build  # noqa: E402
from cockpit.runbook.model import StepState  # noqa: E402
from cockpit.ui.app import CockpitApp  # noqa: E402
from cockpit.ui.screens.confirm import ConfirmScreen  # noqa: E402
from cockpit.ui.widgets.proc_pane import ProcessPane  # noqa: E402


async def until(predicate, timeout: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the demo did not get there")
        await asyncio.sleep(0.1)


async def shoot(app, name: str) -> None:
    await asyncio.sleep(0.6)
    svg = HERE / f"{name}.svg"
    app.save_screenshot(str(svg))
    subprocess.run(["rsvg-convert", "-w", "1600", str(svg), "-o", str(HERE / f"{name}.png")], check=True)
    svg.unlink()
    print(f"{name}.png")


async def main() -> None:
    if not shutil.which("rsvg-convert"):
        sys.exit("needs rsvg-convert: apt-get install librsvg2-bin fonts-dejavu-core")
    with tempfile.TemporaryDirectory(prefix="cockpit-shots-") as folder:
        world = build(Path(folder) / "demo")
        try:
            app = CockpitApp(world.config, demo=True)
            async with app.run_test(size=(160, 48)) as pilot:
                await until(lambda: any(g.memory_used_mib == 30000 for g in app.panes["gpu-server"].snapshot.gpus))
                await shoot(app, "hosts-and-checklist")

                async def step(name: str, confirm: bool, state=StepState.PASSED, shot: str | None = None):
                    await pilot.press("n")
                    if confirm:
                        await until(lambda: isinstance(app.screen, ConfirmScreen))
                        if shot:
                            await shoot(app, shot)
                        await pilot.press("y")
                    await until(lambda: app.runbook.result(name) and app.runbook.result(name).state is state)

                await step("training-done", False)  # the training run finishes into its checkpoint
                await step("kill-trainer", True, shot="confirm-kill")
                await step("kill-server-leftovers", True)
                await step("server-gpus-clean", False)
                await step("draft-ready", True)
                await step("launch", False, StepState.FAILED)
                await shoot(app, "server-log-crash-diagnosis")
                await pilot.press("f")
                await until(lambda: isinstance(app.screen, ConfirmScreen))
                await pilot.press("y")
                await until(lambda: app.runbook.result("launch").state is StepState.PASSED)
                await step("ready", False)
                await step("sweep", True)
                await shoot(app, "benchmark-charts")
                await pilot.press("l")
                await shoot(app, "command-log")
                await pilot.press("l")
                # issue 51: is this draft paying at my load, and which checkpoint?  The checkpoints measured by serving
                # (`a` in the runs pane), then a load on the recommended server (`cockpit bench run`, c=8): the server's
                # verdict, the sweep's schedule and the runs pane's choice on one screen
                await pilot.press("t")
                await pilot.press("a")
                await until(lambda: isinstance(app.screen, ConfirmScreen))
                await pilot.press("y")
                await until(lambda: any("checkpoints of" in (n.title or "") for n in app._notifications), timeout=180)
                port = app.runbook.launched("launch").port
                load = subprocess.Popen([sys.executable, "-m", "cockpit", "bench", "run", "--endpoint", f"127.0.0.1:{port}",
                                         "--concurrency", "8", "--requests", "2000", "--max-tokens", "64", "--no-save"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    await pilot.press("b", "b")  # the bench pane away: the runs pane has the rows for its choice
                    await pilot.press("s")
                    await until(lambda: "speculation: paying" in str(app.query_one("#server-live").content), timeout=60)
                    await shoot(app, "is-it-paying-and-which-checkpoint")
                finally:
                    load.kill()
                    load.wait()
                await pilot.press("h", "p")
                await until(lambda: app.query_one(ProcessPane).rows, timeout=30)  # its first look
                await shoot(app, "who-holds-each-gpu")
        finally:
            world.close()


if __name__ == "__main__":
    asyncio.run(main())
