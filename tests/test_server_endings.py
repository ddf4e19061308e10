"""Issue 46's matrix for a launched server: every ending the cockpit can give it x every shell, with a real process (the
STAND-IN SGLang server, tests/standin/sglang/, launched by the runbook's launch step over the loopback sshd).  The endings
are a user's kill -9 and the cockpit's own actions: `plan stop`, the process table's kill (`procs --kill`), a relaunch (the
launch step run again); the shells are the loop the TUI's server pane runs (serving.target.server_watcher, its runbook
refreshed from the state file at each look, as the TUI's is) and the one-shot `cockpit server --json`.  For every cell: the
state told at last, and no state that is not so at any look between the event and the truth.  The trainers' matrix is
tests/test_endings_matrix.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from harness.builders import steps_toml
from harness.sshd import free_port

SERVER_ENDINGS = ("sigkill", "stop", "kill", "relaunch")
SERVER_SHELLS = ("watch", "oneshot")
TRUTH = {"sigkill": "died", "stop": "stopped", "kill": "stopped", "relaunch": "alive"}  # alive: the new server, serving


def told(ended: dict | None, alive: bool | None) -> str:
    """What one look said: the end's state, alive, or neither yet (a look that awaits its confirming look)."""
    return ended["state"] if ended else "alive" if alive else "confirming"


def test_the_server_matrix_has_a_truth_for_every_ending():
    assert set(TRUTH) == set(SERVER_ENDINGS) and set(TRUTH.values()) <= {"died", "stopped", "alive"}


@pytest.mark.parametrize("ending", SERVER_ENDINGS)
def test_every_server_ending_is_told_true_in_every_shell(sshd, tmp_path, ending):
    from cockpit.config import load_config
    from cockpit.context import Context
    from cockpit.serving.target import launched_server, server_watcher

    sshd.scenario({"gpus": 8})
    config = tmp_path / "c.toml"
    config.write_text(sshd.config_toml(sshd.host_toml("gpu-server")) + steps_toml(free_port(), tmp_path / "sglang.log", []))

    def cockpit(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cockpit", *words, "--config", str(config)], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    ran = cockpit("plan", "run", "--yes", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    pid = [r for r in json.loads(ran.stdout)["ran"] if r["step"] == "launch"][0]["evidence"]["pid"]

    async def go() -> tuple[list, float]:
        ctx = Context.of(load_config(str(config)))
        looks: list[tuple[float, str, str]] = []
        try:
            runbook = ctx.runbook
            watcher = server_watcher(launched_server(runbook), ctx.pool.get, ctx.config)
            for _ in range(6):  # the TUI's loop sees it serving first
                status = await watcher.poll()
            assert status.alive, status
            event_at = time.time()
            if ending == "sigkill":
                os.kill(pid, signal.SIGKILL)
            elif ending == "stop":
                done = await asyncio.to_thread(cockpit, "plan", "stop", "launch", "--yes")
                assert done.returncode == 0, done.stdout + done.stderr
            elif ending == "kill":
                done = await asyncio.to_thread(cockpit, "procs", "gpu-server", "--kill", str(pid), "--yes")
                assert done.returncode == 0, done.stdout + done.stderr
            else:
                done = await asyncio.to_thread(cockpit, "plan", "run", "launch", "--yes")
                assert done.returncode == 0, done.stdout + done.stderr
            deadline = time.time() + 8
            while time.time() < deadline:
                if runbook.refresh():  # the TUI reads the state file again when another cockpit wrote it
                    watcher = server_watcher(launched_server(runbook), ctx.pool.get, ctx.config) if ending == "relaunch" else watcher
                status = await watcher.poll()
                looks.append((time.time(), told(status.ended, status.alive), (status.ended or {}).get("why", "")))
                await asyncio.sleep(0.3)
            return looks, event_at
        finally:
            await ctx.close()

    looks, event_at = asyncio.run(go())
    truth = TRUTH[ending]
    assert looks[-1][1] == truth, looks[-3:]
    wrong = [look for look in looks if look[1] not in (truth, "confirming", "alive" if ending != "relaunch" else truth)]
    assert wrong == [], f"false looks between the event and the truth: {wrong[:3]}"
    if truth == "stopped":
        assert "stopped by you" in looks[-1][2], looks[-1]
    once = cockpit("server", "--json")
    data = json.loads(once.stdout)
    said = told(data.get("ended"), data.get("alive"))
    assert said == truth, (said, data.get("ended"), once.stderr)
    assert once.stderr == ""
    assert once.returncode == (1 if truth == "died" else 0), (once.returncode, data.get("flags"))
    if truth == "stopped":
        assert data["ended"]["by"] == "you" and f"pid {pid}" in data["ended"]["why"]
    if ending == "relaunch":  # the new server's, and the old one's end is not an alarm of the new one
        assert data["alive"] is True and not any(f["kind"] in ("crashed", "died", "hung") for f in data["flags"]), data["flags"]
        shown = {s["name"]: s for s in json.loads(cockpit("plan", "show", "--json").stdout)["steps"]}
        assert shown["launch"]["result"]["evidence"]["pid"] != pid
    else:
        shown = {s["name"]: s for s in json.loads(cockpit("plan", "show", "--json").stdout)["steps"]}
        if truth == "stopped":
            assert shown["ready"]["state"] == "stale", shown["ready"]
