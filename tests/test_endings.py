"""Every ending told true (issue 46): a process that exits mid-scan is gone, not hidden; a terminal state rests on
two looks; a finished run is read from its own words whatever its era; the time said is the event's; the cockpit's
own stop reads "stopped by you".  Real processes throughout (the trainer a STAND-IN writing recorded formats)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

from cockpit.hosts.liveness import probe
from harness.builders import local


@pytest.mark.skipif(os.geteuid() != 0, reason="root sees every process's descriptors: hidden must be 0 for it")
def test_processes_that_exit_mid_scan_are_gone_not_hidden(tmp_path):
    """Issue 46 item 4: a process that exited between /proc's glob and the look at its descriptors was counted as
    hidden, and the answer turned incomplete (24 of 150 scans with short-lived processes).  Root can read every
    process's descriptors: over scans made while processes come and go, none may count one as hidden."""
    log = tmp_path / "train.log"
    log.write_text("step 1: {'loss': 1.0}\n")
    churn = subprocess.Popen([sys.executable, "-c", "import subprocess, time\n"
                              "end = time.time() + 60\n"
                              "while time.time() < end:\n"
                              "    procs = [subprocess.Popen(['sleep', '0.01']) for _ in range(20)]\n"
                              "    [p.wait() for p in procs]\n"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    async def scans(n: int):
        transport = local()
        return [await probe(transport, str(log)) for _ in range(n)]

    try:
        answers = asyncio.run(scans(60))
    finally:
        churn.kill()
        churn.wait()
    assert all(a.state == "gone" for a in answers)
    hidden = [a.hidden for a in answers if a.hidden]
    assert hidden == [] and all(a.complete for a in answers), f"{len(hidden)} of {len(answers)} scans counted exited processes as hidden"


# --- a run's own words say when it is done, whatever its era ------------------------------------------------------

def _args_table(args: dict) -> list[str]:
    """SpecForge's `print_args_with_dots` (E2/E3 specforge/utils.py), line for line."""
    width = max(len(k) for k in args)
    rows = ["", " -----------【args】-----------"]
    for key, value in args.items():
        key_str, value_str = f"{key:<{width}}", str(value)
        rows.append(f"{key_str} {'·' * (50 - len(key_str) - len(value_str))} {value_str}")
    return rows


def _e3_log(with_args: bool) -> str:
    args = {"target_model_path": "/models/Llama-3.1-8B-Instruct", "draft_model_config": "configs/llama3-8B-eagle3.json",
            "train_data_path": "/data/sharegpt.jsonl", "output_dir": "/ckpt/outputs", "num_epochs": 2, "batch_size": 1,
            "learning_rate": 0.0001, "max_length": 2048, "report_to": "tensorboard", "save_interval": 400}
    lines = _args_table(args) if with_args else []
    lines += ["Starting training from epoch:0          step:0"]
    for epoch in (0, 1):
        for n in (100, 200, 300, 400):
            bar = "█" * (n // 40) + " " * (10 - n // 40)
            lines.append(f"Training Epoch {epoch}: {n // 4:3d}%|{bar}| {n}/400 [00:{n // 10:02d}<00:{(400 - n) // 10:02d}, "
                         f"10.00it/s, loss=1.{9 - epoch}, acc=0.{3 + epoch}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("with_args, final, state", [
    (True, True, "finished"),    # the run: num_epochs from its args table, epoch_1_step_800 complete
    (True, False, "ended"),      # its last bar at 100 %, no final checkpoint: finished or not cannot be told
    (False, True, "ended"),      # no total anywhere: where it stopped cannot be placed against its end
    (False, False, "ended"),
], ids=["args+final", "args-no-final", "no-args+final", "nothing"])
def test_a_finished_e3_run_is_read_from_its_args_table_last_bar_and_final_checkpoint(tmp_path, with_args, final, state):
    """Issue 46 item 2: a scripts/train_eagle3.py-era run that exited 0 (its args table says num_epochs 2, its last line
    the last epoch's bar at 100 %, its final checkpoint epoch_1_step_800 complete) read DIED.  Never died for a trainer
    whose end could not be seen to be abnormal."""
    from harness.builders import write_checkpoint

    log = tmp_path / "train.log"
    log.write_text(_e3_log(with_args))
    out = tmp_path / "outputs"
    write_checkpoint(out / "epoch_0_step_400", "E1", "outputs__tiny-llama-eagle3__epoch_0")
    if final:
        write_checkpoint(out / "epoch_1_step_800", "E1", "outputs__tiny-llama-eagle3__epoch_1")
    for path in (log, *out.rglob("*")):  # it ended five minutes ago; its first epoch's save ten minutes before
        age = 900 if "epoch_0" in str(path) else 300
        os.utime(path, (time.time() - age, time.time() - age))
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.e3]\nhost = "here"\nlog = "{log}"\noutput_dir = "{out}"\n')
    done = run_cli("runs", "e3", "--json", "-c", str(config))
    [run] = json.loads(done.stdout)["runs"]
    assert done.stderr == "" and run["state"] == state, run["evidence"]
    assert done.returncode == (0 if state == "finished" else 1)
    assert run["looks"] == 2 and run["ended_between"] is not None
    if with_args:
        assert run["total"] == 800 and run["step"] == 800
    if state == "finished":
        assert "epoch_1_step_800" in run["evidence"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60)


# --- a writer that opens its log for each record ------------------------------------------------------------------

APPEND_AND_CLOSE = """
import sys, time
path, every = sys.argv[1], float(sys.argv[2])
step = 0
while True:
    step += 10
    with open(path, "a") as log:
        log.write("step %d: {'loss': %.2f, 'acc': 0.5}\\n" % (step, 3.0 - step / 1000))
    time.sleep(every)
"""


def test_the_one_shot_never_calls_a_live_append_and_close_writer_dead(tmp_path):
    """Issue 46 item 3: a trainer that opens, appends and closes its log for each record (as on shared storage written
    from another node) has no process holding the log.  4 s into the run the one-shot said DIED; it takes its second
    look now, sees the log grow, and says running."""
    log = tmp_path / "app.log"
    log.write_text("")
    writer = subprocess.Popen([sys.executable, "-c", APPEND_AND_CLOSE, str(log), "0.5"], start_new_session=True)
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.app]\nhost = "here"\nlog = "{log}"\n')
    try:
        time.sleep(2.0)
        look = run_cli("runs", "app", "--json", "-c", str(config))
        one = run_cli("runs", "app", "--json", "--no-wait", "-c", str(config))
    finally:
        writer.kill()
        writer.wait()
    [run] = json.loads(look.stdout)["runs"]
    assert run["state"] == "running" and "grew" in run["evidence"] and look.returncode == 0, run["evidence"]
    [run] = json.loads(one.stdout)["runs"]
    assert run["state"] not in ("died", "ended", "finished", "crashed")  # one look cannot end it
    assert any("from one look" in n for n in run["notes"]), run


# --- when it ended: the event's time, not the look's --------------------------------------------------------------

def test_the_time_of_a_death_is_between_its_last_sign_of_life_and_the_first_look_that_found_it_gone(tmp_path):
    """Issue 46 item 6: "gone at" was the time of the call.  Killed at K: the state says it ended after its last sign of
    life (<= K) and before the first look that found it gone (>= K), and later looks do not move either."""
    from cockpit.runs.spec import RunSpec
    from cockpit.runs.watch import RunWatcher
    from helpers import LogWriter

    log = tmp_path / "train.log"
    log.write_text("step 10: {'loss': 3.0, 'acc': 0.1}\n")

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(log), total_steps=100), local())
        trainer = LogWriter(log)
        status, _ = await watcher.poll()
        assert status.state == "running"
        killed = time.time()
        trainer.kill(9)
        await asyncio.sleep(0.3)
        first, _ = await watcher.poll()
        second, events = await watcher.poll()
        await asyncio.sleep(1.2)
        later, _ = await watcher.poll()
        return killed, first, second, events, later

    killed, first, second, events, later = asyncio.run(go())
    assert first.state == "unknown" and second.state == "died" and [e.kind for e in events] == ["died"]
    last_sign, found_gone = second.ended_between
    assert last_sign <= killed <= found_gone <= killed + 5
    assert later.state == "died" and later.ended_between == second.ended_between
    assert time.strftime("%H:%M:%S", time.localtime(found_gone)) in later.evidence


# --- no stale words ---------------------------------------------------------------------------------------------

async def test_a_relaunch_resets_the_server_logs_search_and_follows_its_start_up(tmp_path):
    """Issue 46 item 8: after `f` relaunched, the server log kept the old search and stayed paused, so the new
    start-up was not followed."""
    from cockpit.config import parse_config
    from cockpit.serving.logread import LogReport
    from cockpit.serving.server import ServerStatus
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.widgets.bounded_log import BoundedRichLog
    from cockpit.ui.widgets.server_log import ServerLogPane

    config = parse_config(f"""[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n
[runbook]\nname = "relaunch-{os.getpid()}"\n\n[[runbook.steps]]\nname = "launch"\nkind = "serve_launch"\nhost = "here"
model_path = "/m"\ndraft_path = "/d"\nlog = "{tmp_path}/server.log"\n""")
    app = CockpitApp(config)
    app.runbook.store.root = tmp_path / "state"
    app.runbook.store.path = tmp_path / "state" / "r.json"
    app.runbook.store.audit_path = tmp_path / "state" / "r.audit.jsonl"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        await pilot.pause(0.2)
        pane = app.query_one(ServerLogPane)
        pane.follow("launch @here")
        pane.show(ServerStatus("loading", True, LogReport(), [f"line {n} of the first server" for n in range(200)]))
        lines = pane.query_one(BoundedRichLog)
        lines.set_search("line 1\\d of")
        await pilot.pause(0.2)
        assert lines.search is not None and not lines.following
        pane.follow("launch @here")  # the relaunch: a new server, followed from its start
        pane.show(ServerStatus("loading", True, LogReport(), ["the new server starts"]))
        await pilot.pause(0.2)
        assert lines.search is None and lines.following and "following" in lines.state_line


@pytest.mark.parametrize("layout", ["one-line", "absent", "multi-line", "no-step"])
def test_a_fix_is_written_to_the_config_file_whole_or_not_at_all(tmp_path, layout):
    """The fix pressed with f (or `plan fix`) is written to the step's extra_args in the file the user keeps: the old
    line kept as a comment, every other table as it was; a layout it cannot rewrite safely is left untouched, said why."""
    import tomllib

    from cockpit.config import rewrite_step_list

    extra = {"one-line": 'extra_args = ["--num-speculative-tokens", "16"]  # the habit\n', "absent": "",
             "multi-line": 'extra_args = [\n  "--num-speculative-tokens",\n  "16",\n]\n', "no-step": ""}[layout]
    name = "other" if layout == "no-step" else "launch"
    text = (f'[hosts.here]\nlocal = true\n\n[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "here"\n\n'
            f'[[runbook.steps]]\nname = "{name}"\nkind = "serve_launch"\nhost = "here"\nmodel_path = "/m"\n{extra}tp = 8\n')
    path = tmp_path / "deploy.toml"
    path.write_text(text)
    path.chmod(0o640)
    problem = rewrite_step_list(path, "launch", "extra_args", ["--speculative-num-steps", "16"], "cockpit: fixed it")
    after = path.read_text()
    if layout in ("multi-line", "no-step"):
        assert problem is not None and after == text  # untouched, and said why
        return
    assert problem is None and (path.stat().st_mode & 0o777) == 0o640
    steps = tomllib.loads(after)["runbook"]["steps"]
    assert steps[0] == tomllib.loads(text)["runbook"]["steps"][0]
    assert steps[1]["extra_args"] == ["--speculative-num-steps", "16"] and steps[1]["tp"] == 8
    assert "# cockpit: fixed it" in after and ("# was: extra_args" in after) == (layout == "one-line")


# --- the cockpit's own actions are evidence -------------------------------------------------------------------

def test_a_trainer_killed_from_the_process_table_reads_stopped_by_you(tmp_path):
    """Issue 46: a kill from the process table is the cockpit's own action: the run it ended reads "stopped by you"
    (no alarm, no alert, exit 0), in the watching TUI's core and in the one-shot CLI alike, never died."""
    from cockpit.config import parse_config
    from cockpit.context import Context
    from cockpit.runs.report import exit_code
    from cockpit.runs.watch import RunWatcher
    from helpers import LogWriter

    log = tmp_path / "train.log"
    log.write_text("step 10: {'loss': 3.0, 'acc': 0.1}\n")
    config = parse_config(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n\n[storage]\ndir = "{tmp_path}/state"\n\n'
                          f'[runs.r]\nhost = "here"\nlog = "{log}"\ntotal_steps = 100\n', str(tmp_path / "c.toml"))
    trainer = LogWriter(log)

    async def go():
        ctx = Context.of(config)
        try:
            actions = ctx.actions
            watcher = RunWatcher(ctx.runs["r"], ctx.pool.get("here"), own_kills=actions.store.kills)
            status, _ = await watcher.poll()
            assert status.state == "running"

            async def yes(_text: str) -> bool:
                return True

            killed = await actions.kill_processes("here", [trainer.pid], yes)
            assert killed.state.value == "passed", killed.message
            states, events = [], []
            for _ in range(3):
                status, new = await watcher.poll()
                states.append(status.state)
                events += new
            return status, states, events
        finally:
            await ctx.close()

    try:
        status, states, events = asyncio.run(go())
    finally:
        trainer.kill()
    assert "died" not in states and status.state == "stopped" and "stopped by you at" in status.evidence, states
    assert "the process table's kill" in status.evidence and events == [] and exit_code([status]) == 0


async def test_many_runs_read_at_once_over_one_ssh_connection_share_its_sftp_session(sshd, tmp_path):
    """Found by the endings matrix over SSH: 16 runs read at once each started an SFTP session of their own on the one
    connection, past sshd's MaxSessions ('open failed', a traceback out of `cockpit runs`).  One session is shared."""
    from cockpit.config import parse_config
    from cockpit.hosts.pool import TransportPool

    logs = []
    for n in range(24):
        logs.append(tmp_path / f"run{n}.log")
        logs[-1].write_text("step 10: {'loss': 3.0}\n")
    pool = TransportPool(parse_config(sshd.config_toml(sshd.host_toml("box"))))
    try:
        transport = pool.get("box")
        stats = await asyncio.gather(*(transport.stat(str(log)) for log in logs))
        assert all(s is not None and s.size > 0 for s in stats)
    finally:
        await pool.close()


# --- one lifecycle ----------------------------------------------------------------------------------------------

def test_one_lifecycle_says_every_state_and_readme_shows_it():
    """Every state a run or a server can be told is the core's (cockpit/lifecycle.py), and the documented table of states
    (docs/configuration.md, where README points) is that table, word for word."""
    from pathlib import Path

    from cockpit import lifecycle
    from cockpit.runs.watch import ENDED_STATES, STATES

    assert set(STATES) <= set(lifecycle.BY_NAME) and set(ENDED_STATES) == set(lifecycle.TERMINAL)
    root = Path(__file__).resolve().parents[1]
    assert lifecycle.readme_table() in (root / "docs" / "configuration.md").read_text()
    assert "docs/configuration.md#states-of-a-run-or-a-server" in (root / "README.md").read_text()
    # a server's end is said in the same words
    from cockpit.serving.server import server_end

    ends = [server_end({"at": 1.0, "by": "you", "pids": [1]}, 1, "h"), server_end(None, 1, "h"),
            server_end(None, 1, "h", errors=[__import__("cockpit.diagnosis", fromlist=["Diagnosis"]).Diagnosis("x", "boom")])]
    assert [e["state"] for e in ends] == ["stopped", "died", "crashed"] and all(lifecycle.known(e["state"]) for e in ends)


def test_the_watching_cli_prints_each_change_and_ends_on_ctrl_c(tmp_path):
    """`cockpit runs --watch`: the loop the TUI runs, a line a change (running, then the end, confirmed), nothing on
    stderr, and Ctrl-C's 130 at the end."""
    import signal

    from helpers import LogWriter

    log = tmp_path / "train.log"
    log.write_text("step 10: {'loss': 3.0, 'acc': 0.1}\n")
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n\n'
                      f'[runs.r]\nhost = "here"\nlog = "{log}"\ntotal_steps = 100\npoll_s = 0.5\n')
    trainer = LogWriter(log)
    watching = subprocess.Popen([sys.executable, "-m", "cockpit", "runs", "--watch", "-c", str(config)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        first = watching.stdout.readline()
        assert " r: RUNNING" in first, first
        trainer.kill(9)
        lines = [watching.stdout.readline() for _ in range(2)]  # one look: unknown; the next: died
    finally:
        trainer.kill()
        watching.send_signal(signal.SIGINT)
        out, err = watching.communicate(timeout=30)
    assert "UNKNOWN" in lines[0] and "one look" in lines[0] and " r: DIED" in lines[1], lines
    assert watching.returncode == 130 and err == ""


def test_a_look_awaiting_confirmation_gives_way_to_what_the_next_look_reads(tmp_path):
    """A look that found the trainer gone awaits the next; when that next look reads something else (a crash in the log),
    the waiting ends with it: the crash is told, and alerts, and the watcher no longer polls at the confirming pace."""
    from cockpit.runs.spec import RunSpec
    from cockpit.runs.watch import RunWatcher
    from helpers import LogWriter

    log = tmp_path / "train.log"
    log.write_text("step 10: {'loss': 3.0, 'acc': 0.1}\n")

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(log), total_steps=100), local())
        trainer = LogWriter(log)
        assert (await watcher.poll())[0].state == "running"
        trainer.kill(9)
        first, _ = await watcher.poll()
        assert first.state == "unknown" and watcher.confirming
        with open(log, "a") as handle:
            handle.write("Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n")
        second, events = await watcher.poll()
        return second, events, watcher.confirming

    second, events, confirming = asyncio.run(go())
    assert second.state == "crashed" and [e.kind for e in events] == ["crashed"] and not confirming
