"""Training runs watched: the real SpecForge recordings (tests/fixtures/training) replayed through a
real sshd as a growing log, checkpoints written the way the trainer writes them, every flag."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import parse_config
from cockpit.errors import ConfigError
from cockpit.hosts.commandlog import CommandLog
from cockpit.hosts.follow import LogFollower, clean
from cockpit.runs.parse import TrainingLog
from cockpit.runs.spec import RunSpec
from cockpit.runs.tfevents import EventReader, encode_record
from cockpit.runs.watch import RunWatcher, look_once
from helpers import LogWriter
from harness.builders import TRAINING, lines_of, local, write_checkpoint  # noqa: F401

def parsed(name: str, clock=lambda: 1000.0) -> TrainingLog:
    log = TrainingLog(clock=clock)
    log.feed(lines_of(TRAINING / name / "train.log"))
    return log


# --- each era's log, parsed ------------------------------------------------------------------------


def test_e1_progress_positions_and_the_eval_bug():
    log = parsed("E1")
    assert (log.step, log.total, log.num_epochs) == (800, 800, 2)
    assert log.per_position["train"] == [0.16, 0.15, 0.13, 0.13, 0.12, 0.12, 0.12]  # "Train Epoch [2/2], position i,  Acc"
    assert "eval" not in log.per_position  # v0.1.0 printed the train lists as "Eval": not shown as eval
    assert any("equal the train numbers" in n for n in log.notes)
    assert log.state() == "finished" and "epoch_1" in log.finished
    assert log.flags == []


def test_e2_postfix_total_steps_and_a_crash_after_the_last_checkpoint():
    log = parsed("E2-early")
    assert log.loss == 2.20 and log.acc == 0.09  # the last bar's postfix
    assert log.num_epochs == 2 and log.step == 800
    assert log.per_position["eval"][0] == 0.13
    assert log.state() == "crashed"
    [flag] = log.flags
    assert flag.kind == "traceback" and "Invalid process group specified" in flag.message
    assert flag.line.endswith("ValueError: Invalid process group specified")  # the line that shows it
    assert log.saved[-1].endswith("epoch_1")  # what was saved before it


def test_e4_estimate_equals_specforges_own_simulated_acceptance_length():
    log = parsed("E4-report-none")
    meta = json.loads((TRAINING / "E4-report-none" / "outputs__tiny-llama-eagle3-offline__tiny-llama-eagle3-offline.best_meta.json").read_text())
    from cockpit.drafter.acceptance import estimate

    positions, source = log.positions()
    assert source == "eval" and positions == meta["metrics"]["eval/per_position_acc"]
    e = estimate(positions)
    assert e.without_bonus == pytest.approx(meta["metrics"]["eval/simulated_acc_len"], rel=1e-9)  # SpecForge excludes the bonus
    assert e.with_bonus == pytest.approx(1 + meta["metrics"]["eval/simulated_acc_len"], rel=1e-9)
    assert log.step == 800 and log.state() == "finished" and "lr 0.0" in log.finished
    # every rank prints the same line: de-duplicated on step
    log.feed([line for line in lines_of(TRAINING / "E4-report-none" / "train.log") if line.startswith("step 800:")])
    assert [p.step for p in log.history].count(800) == 1


def test_a_failed_startup_is_a_crash_with_its_exception():
    log = TrainingLog(clock=lambda: 0.0)
    log.feed(lines_of(TRAINING / "failed-startup" / "E1.train.log"))
    assert log.state() == "crashed"
    assert [f.kind for f in log.flags] == ["traceback"]  # torchrun's ChildFailedError summary is not a second crash
    assert "ImportError: cannot import name 'VideoReader'" in log.flags[0].message


@pytest.mark.parametrize("line, kind", [
    # the texts of runs-facts a.7, as torch prints them
    ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB "
     "of which 1.02 GiB is free.", "oom"),
    ("[rank3]:[E1203 10:00:00.000 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600046 milliseconds before timing out.",
     "nccl_timeout"),
    ("  exitcode  : -9 (pid: 4242)", "killed_rank"),
])
def test_crash_signatures_are_flagged_with_their_line(line, kind):
    log = parsed("E2-early")
    log.reset()
    log.feed(["Training Epoch 0:  10%|█         | 40/400 [00:04<00:36, 10.00it/s, loss=2.50, acc=0.10]", line])
    assert log.state() == "crashed"
    assert [(f.kind, f.line) for f in log.flags] == [(kind, line.strip())]


def test_flat_zero_and_nan_are_flagged_but_a_bar_starting_at_zero_is_not():
    bar = "Training Epoch 0:   6%|███      | {n}/2484 [09:06<2:14:55,  3.48s/it, loss={loss}, acc={acc}, time=3.46s]"
    log = TrainingLog(clock=lambda: 0.0)
    log.feed([bar.format(n=n, loss="0.00", acc="0.00") for n in range(1, 10)] + [bar.format(n=10, loss="4.10", acc="0.21")])
    assert log.flags == []  # a few zeros at the start are not a flat run
    log.feed([bar.format(n=n, loss="0.00", acc="0.00") for n in range(11, 80)])
    assert [f.kind for f in log.flags] == ["flat_zero"] and "loss=0.00, acc=0.00" in log.flags[0].line
    assert log.step == 79 and log.total is None and log.rate == pytest.approx(1 / 3.48)

    e4 = TrainingLog(clock=lambda: 0.0)
    e4.feed(["step 20: {'acc_0': 0.5, 'acc': 0.5, 'loss': nan, 'lr': 1e-4}"])  # Python's repr of a NaN: bare `nan`
    assert [f.kind for f in e4.flags] == ["nan"] and e4.step == 20 and math.isnan(e4.loss)


def test_a_stall_is_flagged_after_the_configured_minutes_and_progress_clears_it():
    now = [1000.0]
    log = TrainingLog(clock=lambda: now[0], stall_after_s=300)
    log.feed(["Training Epoch 0:  10%|█         | 40/400 [00:04<00:36, 10.00it/s, loss=2.50, acc=0.10]"])
    now[0] += 299
    assert log.state() == "running"
    now[0] += 2
    assert log.state() == "stalled" and [f.kind for f in log.current_flags()] == ["stalled"]
    log.feed(["Training Epoch 0:  10%|█         | 41/400 [05:05<36:00, 10.00it/s, loss=2.40, acc=0.10]"])
    assert log.state() == "running" and log.current_flags() == []


def test_garbage_is_ignored_never_flagged():
    log = TrainingLog(clock=lambda: 0.0)
    junk = [clean(bytes(range(256)) * 3), "Training Epoch 0:  10%|█  | 40/4", "step 12: {'acc_0': 0.5, 'lo", "Eval Epoch [1/2], position x,  Acc: ?",
            "step 5: [1, 2]", "Train Epoch [1/2], position 0,  Acc: zz", "Traceback (most recent call last):", "  File \"x.py\", line 1"]
    log.feed(junk)
    assert log.flags == [] and log.state() == "unknown" and log.step is None


# --- TensorBoard ------------------------------------------------------------------------------------


def test_tensorboard_events_read_whole_and_cut_anywhere_give_the_same_scalars():
    data = (TRAINING / "E2-early" / "outputs__tiny-llama-eagle3__runs__events.out.tfevents.1796290427.vm.684.0").read_bytes()
    whole = EventReader().feed(data)
    assert len(whole) == 206 and {s.tag for s in whole} >= {"train/acc_0", "eval/epoch_acc_6", "train/lr"}
    for cut in (1, 7, 13, 500, len(data) // 2, len(data) - 1):
        reader = EventReader()
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == whole and reader.corrupt == 0
    reader = EventReader()
    damaged = bytearray(data)
    damaged[300] ^= 0xFF  # a flipped byte inside one record: that record is dropped, the rest read
    got = reader.feed(bytes(damaged))
    assert reader.corrupt >= 1 and 150 < len(got) < len(whole)
    log = TrainingLog(clock=lambda: 0.0)
    log.feed_scalars(whole)
    console = parsed("E2-early").per_position["eval"]  # the same run's "Eval Epoch [2/2], position i,  Acc: 0.13" lines
    assert [round(a, 2) for a in log.per_position["eval"]] == console and len(console) == 7


def test_an_event_file_with_nan_is_flagged():
    # an Event{step=5, summary{value{tag='train/loss', simple_value=nan}}} framed as TensorBoard does
    tag = b"train/loss"
    value = b"\x0a" + bytes([len(tag)]) + tag + b"\x15" + struct.pack("<f", float("nan"))
    summary = b"\x0a" + bytes([len(value)]) + value
    event = b"\x09" + struct.pack("<d", 1.0) + b"\x10\x05" + b"\x2a" + bytes([len(summary)]) + summary
    scalars = EventReader().feed(encode_record(event))
    log = TrainingLog(clock=lambda: 0.0)
    log.feed_scalars(scalars)
    assert [f.kind for f in log.flags] == ["nan"]


# --- following a log ------------------------------------------------------------------------------


def test_the_follower_survives_truncation_rotation_and_a_vanishing_file(tmp_path):
    path = tmp_path / "train.log"
    follower = LogFollower(local(), str(path))

    async def go():
        assert (await follower.poll()).event == "missing"
        path.write_bytes(b"one\rtwo\npartial")
        update = await follower.poll()
        assert update.lines == ["one", "two"] and update.partial == "partial"  # a trainer's bar: each redraw a record
        with open(path, "ab") as handle:
            handle.write(b" bar\r\n")
        assert (await follower.poll()).lines == ["partial bar"]
        path.write_bytes(b"new\n")  # truncated: shorter than what was read
        update = await follower.poll()
        assert update.event == "truncated" and update.lines == ["new"]
        path.write_bytes(b"NEW FILE, longer than before\n")  # rotated: same name, other first bytes
        update = await follower.poll()
        assert update.event == "rotated" and update.lines == ["NEW FILE, longer than before"]
        path.unlink()
        assert (await follower.poll()).event == "missing"

    asyncio.run(go())


# --- a run followed over SSH as it grows ------------------------------------------------------------


def test_a_growing_run_over_ssh_progress_positions_checkpoints_and_events(tmp_path, sshd):
    from cockpit.context import Context

    out = tmp_path / "outputs"
    log_path = tmp_path / "train.log"
    config = parse_config(sshd.config_toml(sshd.host_toml("trainer")) +
                          f'\n[runs.eagle3-train]\nhost = "trainer"\nlog = "{log_path}"\noutput_dir = "{out}"\ndepth = 5\n',
                          str(tmp_path / "c.toml"))
    ctx = Context.of(config)
    data = (TRAINING / "E2-early" / "train.log").read_bytes()
    cut = data.index(b"Training Epoch 1:")  # the first epoch written, the second not yet

    async def go():
        watcher = RunWatcher(ctx.runs["eagle3-train"], ctx.pool.get("trainer"))
        log_path.write_bytes(data[:cut - 3])  # cut in the middle of a bar update
        trainer = LogWriter(log_path)  # the trainer holds its log open, seen over SSH as on a real host
        try:
            status, events = await watcher.poll(catch_up=True)
            assert status.state == "running" and status.step is not None and status.step <= 400 and status.total == 800
            assert status.process["pids"] == [trainer.pid] and f"pid {trainer.pid}" in status.evidence
            # epoch 1's evaluation was printed before epoch 2's bar began
            assert status.per_position_source == "eval" and len(status.per_position_acc) == 7 and status.latest_checkpoint is None
            first = status.step

            write_checkpoint(out / "epoch_0", "E2-early", "outputs__tiny-llama-eagle3__epoch_0", complete=False)
            status, events = await watcher.poll()
            assert status.checkpoints[0]["complete"] is False and "still being written" in status.checkpoints[0]["why"]
            assert status.latest_checkpoint["complete"] is False and events == []
            write_checkpoint(out / "epoch_0", "E2-early", "outputs__tiny-llama-eagle3__epoch_0")
            status, events = await watcher.poll()
            assert status.latest_checkpoint["complete"] and status.latest_checkpoint["key_layout"] == "midlayer.*"
            assert [e.kind for e in events] == ["checkpoint"]

            with open(log_path, "ab") as handle:
                handle.write(data[cut - 3:])
            write_checkpoint(out / "epoch_1", "E2-early", "outputs__tiny-llama-eagle3__epoch_1")
            status, events = await watcher.poll(catch_up=True)
            assert status.step == 800 > first
            assert status.state == "crashed" and status.flags[0].kind == "traceback"  # its real teardown error
            assert sorted(e.kind for e in events) == ["checkpoint", "crashed"]
            assert status.latest_checkpoint["path"].endswith("epoch_1")
            est = status.estimate
            assert est["source"] == "eval" and est["depth"] == 5 and est["with_bonus"] == pytest.approx(est["without_bonus"] + 1)
        finally:
            trainer.kill()
            await ctx.close()

    asyncio.run(go())


def test_e4_state_dirs_need_an_export_and_temp_files_mean_not_yet(tmp_path):
    out = tmp_path / "out"
    step = out / "run-step200"
    step.mkdir(parents=True)
    (step / "training_state.pt.tmp").write_bytes(b"x" * 100)
    spec = RunSpec("e4", "here", log=None, output_dir=str(out))

    async def go():
        watcher = RunWatcher(spec, local())
        status, _ = await watcher.poll()
        assert status.checkpoints[0]["complete"] is False and "still being written" in status.checkpoints[0]["why"]
        os.replace(step / "training_state.pt.tmp", step / "training_state.pt")
        (out / "run-latest").symlink_to("run-step200")
        status, events = await watcher.poll()
        assert len(status.checkpoints) == 1 and status.latest_checkpoint["needs_export"]
        assert "specforge export" in status.latest_checkpoint["verdict"] and [e.kind for e in events] == ["checkpoint"]

    asyncio.run(go())


def test_layers0_checkpoint_is_judged_per_engine_and_version(tmp_path):
    """A checkpoint with layers.0.* keys (a vLLM-style export): not ready for SGLang 0.5.2, ready for 0.5.14, and
    ready for vLLM 0.10.2 (its loader takes layers.0.* as they are) when the run says vLLM serves it."""
    from cockpit.drafter.header import encode_header
    from cockpit.drafter.inspect import ranges_of

    directory = write_checkpoint(tmp_path / "out" / "epoch_0", "E1", "outputs__tiny-llama-eagle3__epoch_0")
    raw = json.loads((directory / "model.safetensors").read_bytes()[8:8 + struct.unpack("<Q", (directory / "model.safetensors").read_bytes()[:8])[0]])
    renamed = {(k.replace("midlayer.", "layers.0.", 1) if k.startswith("midlayer.") else k): v for k, v in raw.items()}
    header = encode_header(renamed)
    header = struct.pack("<Q", len(header)) + header
    end = max(t["data_offsets"][1] for k, t in renamed.items() if k != "__metadata__")
    with open(directory / "model.safetensors", "wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + end)

    async def go(version, engine="sglang"):
        spec = RunSpec("r", "here", output_dir=str(tmp_path / "out"), versions={engine: version})
        status, _ = await RunWatcher(spec, local()).poll()
        return status.latest_checkpoint

    old, new, vllm = asyncio.run(go("0.5.2")), asyncio.run(go("0.5.14")), asyncio.run(go("0.10.2", "vllm"))
    assert old["key_layout"] == "layers.0.*" and old["verdict"].startswith("not ready for SGLang 0.5.2")
    assert new["verdict"] == "ready for SGLang 0.5.14"
    assert vllm["verdict"] == "ready for vLLM 0.10.2"
    # the reason given is one that breaks the version asked about, never another engine's (vLLM 0.9-0.10.1's name rule
    # was said for SGLang 0.5.2): over every version of each engine's ranges
    for engine, versions in (("sglang", ("0.4.6", "0.5.2", "0.5.14")), ("vllm", ("0.8.4", "0.8.5", "0.9.2", "0.10.1.1", "0.10.2", "0.34.0"))):
        for version in versions:
            said = asyncio.run(go(version, engine))
            why = said["verdict"].split(": ", 1)[1] if said["verdict"].startswith("not ready") else None
            broken = [m for r in ranges_of(engine, version) for m in said["breaks"].get(r, ())]
            assert (why is None) == (not broken), (engine, version, said["verdict"])
            assert why is None or why == broken[0], (engine, version, said["verdict"])
    assert asyncio.run(go(None))["verdict"] == "ready for SGLang >=0.5.12"  # no version: every range it loads in


# --- the CLI ----------------------------------------------------------------------------------------


def run_cli(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_cockpit_runs_json_keys_and_honest_exit_codes(tmp_path):
    e4 = tmp_path / "e4.log"
    e4.write_bytes((TRAINING / "E4-report-none" / "train.log").read_bytes())
    crashed = tmp_path / "crashed.log"
    crashed.write_bytes((TRAINING / "failed-startup" / "E1.train.log").read_bytes())
    for log in (e4, crashed):  # the runs ended ten minutes ago (a log written a moment ago needs its cadence to pass)
        os.utime(log, (time.time() - 600, time.time() - 600))
    final = tmp_path / "outputs" / "tiny-llama-eagle3-offline" / "tiny-llama-eagle3-offline-step800"  # as the real run left it
    final.mkdir(parents=True)
    (final / "training_state.pt").write_bytes(b"state")
    config = tmp_path / "c.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.good]\nhost = "here"\nlog = "{e4}"\ndepth = 3\noutput_dir = "{tmp_path}/outputs"\n\n'
                      f'[runs.bad]\nhost = "here"\nlog = "{crashed}"\n\n[runs.gone]\nhost = "here"\nlog = "{tmp_path}/nope.log"\n\n'
                      f'[runs.unconfirmed]\nhost = "here"\nlog = "{e4}"\n')
    good = run_cli("runs", "good", "--json", "-c", str(config))
    assert good.returncode == 0, good.stderr
    # issue 37: finished rests on evidence of completion: its last step's checkpoint complete.  Without it, the
    # same log (its last step, lr 0.0) and no trainer is `ended`: finished or not cannot be told
    unconfirmed = run_cli("runs", "unconfirmed", "--json", "-c", str(config))
    [run] = json.loads(unconfirmed.stdout)["runs"]
    assert unconfirmed.returncode == 1 and run["state"] == "ended" and "no complete final checkpoint" in run["evidence"], run
    [run] = json.loads(good.stdout)["runs"]
    assert {"name", "state", "step", "total", "eta_s", "loss", "acc", "per_position_acc", "estimated_accept_length",
            "latest_checkpoint", "flags"} <= set(run)
    assert run["state"] == "finished" and run["step"] == 800 and len(run["per_position_acc"]) == 7
    assert run["estimated_accept_length"]["depth"] == 3 and run["estimated_accept_length"]["source"] == "eval"
    assert set(run["estimated_accept_length"]) >= {"with_bonus", "without_bonus", "depth", "source"}
    bad = run_cli("runs", "bad", "--json", "-c", str(config))
    assert bad.returncode == 1
    [flag] = json.loads(bad.stdout)["runs"][0]["flags"]
    assert set(flag) == {"kind", "line", "message"} and flag["kind"] == "traceback"
    gone = run_cli("runs", "gone", "-c", str(config))
    assert gone.returncode == 2 and "nope.log is not there" in gone.stdout
    text = run_cli("runs", "-c", str(config))
    assert text.returncode == 2 and "good on here: FINISHED" in text.stdout and "! traceback" in text.stdout


@pytest.mark.parametrize("table, message", [
    ('[runs.x]\nhost = "nowhere"\nlog = "/a.log"\n', "no host named 'nowhere'"),
    ('[runs.x]\nhost = "here"\n', "needs 'log'"),
    ('[runs.x]\nhost = "here"\nlog = "train.log"\n', "must be an absolute path"),
    ('[runs.x]\nhost = "here"\nlog = "/a.log"\ndepht = 4\n', "did you mean 'depth'"),
    ('[runs.x]\nhost = "here"\nlog = "/a.log"\n\n[runbook]\n[[runbook.steps]]\nname = "w"\nkind = "wait_run"\nhost = "here"\nrun = "y"\n',
     "no [runs.y]"),
    ('[runs.x]\nhost = "here"\nlog = "/a.log"\n\n[runbook]\n[[runbook.steps]]\nname = "d"\nkind = "drafter_check"\nhost = "here"\n'
     'from_step = "w"\n', "'w' is not a step before this one"),
    ('[alerts]\ncommand = "notify-send"\n', "must be a list"),
    ('[alerts]\nurls = ["not a url"]\n', "is not a notification URL"),
])
def test_config_check_rejects_bad_runs_and_alerts_naming_the_line(tmp_path, table, message):
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\n\n' + table)
    result = run_cli("config", "check", str(config))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert re.search(r"c\.toml(:\d+)?", result.stderr)
    with pytest.raises(ConfigError):
        from cockpit.context import check_config

        check_config(parse_config(config.read_text(), str(config)))


def test_e3_lines_built_from_specforges_format_strings():
    """E3 (scripts/train_eagle3.py, 2025-11 to 2026-07) could not be recorded: its lines are built from
    the f-strings of runs-facts a.2 (record_metrcs; the 2026-06 postfix; eval bars nested with ESC[A)."""
    accuracies = [0.71, 0.62, 0.55, 0.49, 0.44, 0.40, 0.37]
    lines = []
    for i, acc in enumerate(accuracies):
        lines.append(f"Eval - Step {5000} [{5000 + 1}/{2}], position {i},  Acc: {acc:.2f}")
        lines.append(f"Eval - Step {5000} [{5000 + 1}/{2}], position {i},  Acceptance Rate: {acc * 0.9:.4f}")
        lines.append(f"Eval - Step {5000} [{5000 + 1}/{2}], position {i}, pLoss: {1.2345678 + i}")
    raw = ("Training Epoch 0:  40%|████      | 5000/12500 [2:05:00<3:07:30,  1.50s/it, loss=1.93, acc=0.71, "
           "acceptance_rate=0.66, time=1.49s, grad_norm=0.84]\n\rEvaluating Epoch 0:  10%|█         | 5/48 [00:01<00:08,  5.00it/s]\x1b[A"
           "\n" + "\n".join(lines) + "\n")
    log = TrainingLog(clock=lambda: 0.0)
    log.feed([clean(p) for p in re.split(rb"\r\n|\r|\n", raw.encode()) if p])
    assert log.step == 5000 and log.loss == 1.93 and log.postfix["grad_norm"] == "0.84" and log.postfix["acceptance_rate"] == "0.66"
    assert log.eta_s == pytest.approx((12500 - 5000) * 1.5)  # s/it: the rate inverted
    assert log.per_position["train"] == accuracies  # "Eval - Step" is printed for train records too: not called eval
    assert log.flags == [] and log.state() == "running"


def test_an_old_log_with_no_writer_is_a_run_that_died_and_with_one_a_stall(tmp_path):
    """The first read of a log last written an hour ago: its progress is an hour old (the file's mtime).
    Nobody holds it: the trainer died with no last word.  Its trainer still there: stalled."""
    path = tmp_path / "train.log"
    path.write_text("Training Epoch 0:  10%|█         | 40/400 [00:04<00:36, 10.00it/s, loss=2.50, acc=0.10]\n")
    hour_ago = os.path.getmtime(path) - 3600
    os.utime(path, (hour_ago, hour_ago))

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(path), stall_after_s=600), local())
        first, _ = await watcher.poll()
        status, events = await watcher.poll()
        return first, status, events

    first, status, events = asyncio.run(go())
    assert first.state == "unknown" and "one look" in first.evidence  # a terminal state rests on two looks
    assert status.state == "died" and status.eta_s is None and events == []  # what the first read finds is not news
    assert "no last word" in status.evidence and "40/400" in status.evidence  # its last line
    assert [f.kind for f in status.flags] == ["died"]
    with LogWriter(path):
        os.utime(path, (hour_ago, hour_ago))
        first, status, events = asyncio.run(go())
    assert first.state == status.state
    assert status.state == "stalled" and status.flags[0].kind == "stalled" and "60 min" in status.flags[0].message
    assert "alive" in status.evidence and status.eta_s is None


E4_LINES = None


def e4_records() -> list[str]:
    return [line for line in lines_of(TRAINING / "E4-report-none" / "train.log")]


def test_sigkill_is_died_at_the_next_poll_and_a_run_is_finished_only_once_its_trainer_exits(tmp_path):
    """Issue 27 items 1 and 2 on the real E4 log: killed mid-run, the state follows the process at
    the next poll (no frozen RUNNING, no ETA); a run whose log says done (lr 0.0) while its trainer
    still runs its final eval is finishing, and finished once the trainer has exited."""
    lines = e4_records()
    cut = next(i for i, line in enumerate(lines) if line.startswith("step 100:")) + 1
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines[:cut]) + "\n")
    spec = RunSpec("r", "here", log=str(path), total_steps=800, output_dir=str(tmp_path / "outputs"))

    async def go():
        watcher = RunWatcher(spec, local())
        trainer = LogWriter(path)
        status, _ = await watcher.poll(catch_up=True)
        assert status.state == "running" and status.step == 100 and status.eta_s is not None
        trainer.kill(9)
        status, events = await watcher.poll()
        assert status.state == "unknown" and status.eta_s is None and events == [] and "one look" in status.evidence
        assert watcher.confirming and watcher.wait_hint_s() < 1  # its writer was seen: the next look decides, soon
        status, events = await watcher.poll()
        assert status.state == "died" and status.eta_s is None and [e.kind for e in events] == ["died"]
        assert status.looks == 2 and status.ended_between[1] >= status.ended_between[0]
        assert "step 100:" in status.evidence  # the last line it wrote

        path.write_text("\n".join(lines) + "\n")  # a new run of it, to its end
        watcher = RunWatcher(spec, local())
        trainer = LogWriter(path)
        status, _ = await watcher.poll(catch_up=True)
        assert status.state == "running" and status.phase == "finishing" and "lr 0.0" in status.evidence
        final = tmp_path / "outputs" / "specforge-run-step800"  # its last save, as E4 writes it (training state only)
        final.mkdir(parents=True)
        (final / "training_state.pt").write_bytes(b"rank 0's state")
        trainer.kill(15)
        trainer.proc.wait()
        status, events = await watcher.poll()
        assert status.state == "unknown" and [e.kind for e in events] == ["checkpoint"]
        status, events = await watcher.poll()
        assert status.state == "finished" and [e.kind for e in events] == ["finished"] and "specforge-run-step800" in status.evidence

    asyncio.run(go())


@pytest.mark.parametrize("saved", [True, False], ids=["final-checkpoint", "no-checkpoint"])
def test_a_last_100_percent_bar_is_finished_once_the_trainer_exits_with_its_final_checkpoint(tmp_path, saved):
    """The scripts/train_eagle3.py era: nested bars, exit 0, the last line the last epoch's 100 % bar, the final
    checkpoint written after it (issue 37 item 2: it read DIED).  The number of epochs comes from the trainer's
    own command line, read while it ran.  Finished rests on evidence of completion: without the final checkpoint,
    the trainer gone after its last bar is `ended` (finished or not cannot be told), never died."""
    path = tmp_path / "train.log"
    path.write_text("Training Epoch 0: 100%|██████████| 200/200 [00:20<00:00, 10.00it/s, loss=2.0, acc=0.3]\n"
                    "Training Epoch 1:  50%|█████     | 100/200 [00:10<00:10, 10.00it/s, loss=1.9, acc=0.3]\n")
    argv = [sys.executable, "-c", "import time; time.sleep(600)", "scripts/train_eagle3.py", "--num-epochs", "2"]
    out = tmp_path / "outputs"
    out.mkdir()

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(path), output_dir=str(out)), local())
        trainer = LogWriter(path, argv)
        status, _ = await watcher.poll()
        assert status.state == "running" and status.total == 400 and status.totals["num_epochs"] == 2
        with open(path, "a") as handle:
            handle.write("Training Epoch 1: 100%|██████████| 200/200 [00:20<00:00, 10.00it/s, loss=1.8, acc=0.3]\n")
        status, _ = await watcher.poll()
        assert status.state == "running"  # its last bar, but the trainer still runs
        if saved:
            write_checkpoint(out / "epoch_1", "E1", "outputs__tiny-llama-eagle3__epoch_1")
        trainer.kill(15)
        status, events = await watcher.poll()
        assert status.state == "unknown" and "one look" in status.evidence  # never a terminal state from one look
        status, more = await watcher.poll()
        events += more
        if saved:
            assert status.state == "finished" and "400/400" in status.finished and "epoch_1" in status.finished
            assert sorted(e.kind for e in events) == ["checkpoint", "finished"]
        else:
            assert status.state == "ended" and "no complete final checkpoint" in status.evidence and [e.kind for e in events] == ["ended"]

    asyncio.run(go())


def test_a_stall_with_the_trainer_alive_resolves_when_it_moves_again(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("step 20: {'loss': 3.0, 'acc': 0.1}\n")
    now = [1000.0]

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(path), stall_after_s=60), local(), clock=lambda: now[0])
        with LogWriter(path):
            status, _ = await watcher.poll()
            assert status.state == "running"
            now[0] += 120
            status, events = await watcher.poll()
            assert status.state == "stalled" and [e.kind for e in events] == ["stalled"] and "alive" in status.evidence
            with open(path, "a") as handle:
                handle.write("step 40: {'loss': 2.5, 'acc': 0.2}\n")
            status, events = await watcher.poll()
            assert status.state == "running" and [e.kind for e in events] == ["resolved"]
            from cockpit.runs.watch import run_alert
            assert run_alert(events[0]).resolves and run_alert(events[0]).key == "run_stalled:r"

    asyncio.run(go())


def test_pid_file_and_command_pattern_and_an_unknown_process(tmp_path):
    from cockpit.hosts.liveness import probe
    from cockpit.hosts.transport import CommandResult

    path = tmp_path / "train.log"
    path.write_text("step 20: {'loss': 3.0, 'acc': 0.1}\n")
    pid_file = tmp_path / "trainer.pid"
    marker = f"cockpit-test-{os.getpid()}-trainer"

    class BusyboxHost(type(local())):  # a host whose find has no -samefile: a STAND-IN for a busybox box
        async def run(self, argv, **kw):
            if argv[0] == "sh":
                return CommandResult(tuple(argv), 0, "#nofind\n", "", 0.0)
            return await super().run(argv, **kw)

    async def go():
        other = LogWriter(tmp_path / "other.log", [sys.executable, "-c", "import time; time.sleep(600)", marker])
        try:
            pid_file.write_text(f"{other.pid}\n")
            status, _ = await RunWatcher(RunSpec("r", "here", log=str(path), pid_file=str(pid_file)), local()).poll()
            assert status.state == "running" and status.process["pids"] == [other.pid]
            status, _ = await RunWatcher(RunSpec("r", "here", log=str(path), process=marker), local()).poll()
            assert status.state == "running" and status.process["pids"] == [other.pid]
            other.kill()
            os.utime(path, (time.time() - 60, time.time() - 60))  # its last record a minute ago
            status = await look_once(RunWatcher(RunSpec("r", "here", log=str(path), pid_file=str(pid_file), total_steps=100), local()))
            assert status.state == "died" and status.looks == 2
            pid_file.unlink()
            assert (await probe(local(), pid_file=str(pid_file))).state == "gone"
        finally:
            other.kill()
        from cockpit.config import HostConfig
        host = BusyboxHost(HostConfig(name="box", local=True), CommandLog())
        minute_ago = time.time() - 60  # (a log written a moment ago would say its writer lives, whoever it is)
        os.utime(path, (minute_ago, minute_ago))
        status, _ = await RunWatcher(RunSpec("r", "box", log=str(path)), host).poll()
        assert status.state == "unknown" and "-samefile" in status.evidence and "pid_file" in status.evidence

    asyncio.run(go())


def test_the_eta_is_smoothed_with_a_spread_where_one_window_jumps():
    """E4's perf/optimizer_steps_per_hour is one 20-step window: at step 220 (an eval and a save in
    it) it drops 4x.  The ETA from the median of the windows moves by the steps done, not 4x."""
    log = TrainingLog(clock=lambda: 0.0, total_hint=800)
    etas, raw = [], []
    for line in e4_records():
        if line.startswith("step ") and "perf/optimizer_steps_per_hour" in line:
            log.feed([line])
            etas.append(log.eta_s)
            per_hour = float(re.search(r"'perf/optimizer_steps_per_hour': ([\d.]+)", line).group(1))
            raw.append((800 - log.step) / (per_hour / 3600))
    jumps = [b / a for a, b in zip(raw[3:], raw[4:]) if a and b]
    assert max(jumps) > 3  # what one window said
    smooth = [b / a for a, b in zip(etas[3:-2], etas[4:-2]) if a and b]
    assert max(smooth) < 1.3  # the median never jumps like that
    assert log.eta_range is None or log.eta_range[0] <= log.eta_s <= log.eta_range[1]
    mid = TrainingLog(clock=lambda: 0.0, total_hint=800)
    mid.feed([l for l in e4_records() if l.startswith("step ")][:12])
    assert mid.eta_range is not None and mid.eta_range[0] < mid.eta_s < mid.eta_range[1]


def test_totals_from_the_command_line_and_the_config_file_it_names(tmp_path):
    from cockpit.runs.totals import from_command, from_yaml

    t = from_command("python -m specforge train -c run.yaml", "/work/run")
    assert t.config == "/work/run/run.yaml" and t.num_epochs is None
    assert from_yaml((TRAINING / "E4-report-none" / "run.yaml").read_text()).num_epochs == 2
    assert from_yaml("training:\n  max_steps: 2400  # the end\n").total_steps == 2400
    assert from_command("torchrun x.py --num-epochs=3 --total-steps 90", None).total_steps == 90

    (tmp_path / "run.yaml").write_text((TRAINING / "E4-report-none" / "run.yaml").read_text())
    path = tmp_path / "train.log"
    path.write_text("step 20: {'loss': 3.0, 'acc': 0.1}\n")

    async def go():
        with LogWriter(path, [sys.executable, "-c", "import time; time.sleep(600)", "train", "-c", "run.yaml"]):
            return await RunWatcher(RunSpec("r", "here", log=str(path)), local()).poll()

    status, _ = asyncio.run(go())
    assert status.totals["num_epochs"] == 2 and status.total is None and status.eta_s is None
    assert any("set total_steps in [runs.r]" in n and "2 epochs" in n for n in status.notes)


@pytest.mark.parametrize("death, state, cause", [("oom", "crashed", "torch.OutOfMemoryError: CUDA out of memory"),
                                                  ("sigkill", "died", "step 40: {")])
def test_real_trainer_deaths_recorded_on_an_h200(tmp_path, death, state, cause):
    """A real CUDA OOM (the real allocator refusing inside a real training loop) is crashed with its
    cause line; a real SIGKILL leaves no last word: died, with the last line the trainer wrote.
    Read as the trainer left them, with the record sharing a line with tqdm's last \\r update."""
    recording = TRAINING / "torch-deaths" / death / "train.log"
    parsed_path = tmp_path / "train.log"
    parsed_path.write_bytes(recording.read_bytes())
    watcher = RunWatcher(RunSpec("r", "here", log=str(parsed_path)), local())
    status = asyncio.run(look_once(watcher))  # the one-shot's two looks: the bar's rate says how soon it is silent for good
    assert status.state == state and cause in status.evidence and status.eta_s is None
    last_record = 60 if death == "oom" else 40
    assert (last_record, False) in watcher.log._dict_steps  # the records printed beside the bars are read
    assert status.step in (last_record, last_record + 1)
    if death == "oom":
        assert [f.kind for f in status.flags] == ["oom"]


def test_the_runs_worker_survives_a_parser_error_in_one_run_and_says_where_it_is_logged(tmp_path, monkeypatch):
    from cockpit.runs.watch import watch_runs

    good, bad = tmp_path / "good.log", tmp_path / "bad.log"
    good.write_text("step 20: {'loss': 3.0, 'acc': 0.1}\n")
    bad.write_text("step 20: {'loss': 3.0, 'acc': 0.1}\n")
    published = []

    def boom(self, lines, now=None):
        if self is watchers_bad[0]:
            raise ValueError("a parser bug")
        return original(self, lines, now)

    original = TrainingLog.feed
    watchers_bad = []

    async def go():
        from cockpit.runs import watch as watch_module

        real = watch_module.RunWatcher

        class Spy(real):
            def __init__(self, spec, transport, **kw):
                super().__init__(spec, transport, **kw)
                if spec.name == "bad":
                    watchers_bad.append(self.log)

        monkeypatch.setattr(watch_module, "RunWatcher", Spy)
        monkeypatch.setattr(TrainingLog, "feed", boom)
        task = asyncio.ensure_future(watch_runs([RunSpec("good", "here", log=str(good), poll_s=0.2),
                                                 RunSpec("bad", "here", log=str(bad), poll_s=0.2)],
                                                lambda _: local(), lambda st, ev: published.append(st)))
        await asyncio.sleep(1.0)
        task.cancel()

    asyncio.run(go())
    assert len(published) >= 3  # it went on polling
    last = {s.name: s for s in published[-1]}
    assert last["good"].step == 20 and last["bad"].state == "unknown" and "a parser bug" in last["bad"].evidence
    log = Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "errors.log"
    assert "watching run bad: ValueError: a parser bug" in log.read_text()


def test_batches_beside_optimizer_steps_are_explained(tmp_path):
    """Issue 30: 'step 800/800' beside the log's own '100 optimizer steps' read as a contradiction: the
    bar counts batches, 8 to an optimizer step (this run's draft_accumulation_steps=8)."""
    path = tmp_path / "train.log"
    path.write_bytes((TRAINING / "E2-early" / "train.log").read_bytes())

    status, _ = asyncio.run(RunWatcher(RunSpec("r", "here", log=str(path)), local()).poll())
    assert status.step == 800 and status.total == 800
    [note] = [n for n in status.notes if "optimizer steps" in n]
    assert note == ("100 optimizer steps (2 epochs x 50); the progress counts batches (800): 8 to an optimizer step "
                    "(gradient accumulation)"), note


async def test_a_specforge_train_checkpoint_caught_mid_save_says_so(tmp_path):
    """Issue 37 item 4: a `*-stepN` checkpoint of `specforge train` (E4) caught mid-save read `incomplete: no
    model.safetensors yet`, though that era's checkpoints never hold one (rank 0's training_state.pt is written
    last); `drafter inspect` on it said nothing of a save in progress."""
    from cockpit.config import HostConfig
    from cockpit.errors import CockpitError
    from cockpit.hosts.commandlog import CommandLog
    from cockpit.hosts.local import LocalTransport
    from cockpit.drafter.inspect import inspect_draft
    from cockpit.runs.checkpoints import scan

    out = tmp_path / "outputs"
    saving = out / "specforge-run-step800"
    saving.mkdir(parents=True)
    (saving / "training_state_rank0.pt").write_bytes(b"rank 0")
    (saving / "training_state_rank1.pt").write_bytes(b"rank 1")
    transport = LocalTransport(HostConfig(name="here", local=True), CommandLog())
    [checkpoint] = await scan(transport, str(out))
    assert not checkpoint.complete and "save in progress: training_state.pt not there yet" in checkpoint.why
    assert "model.safetensors" not in checkpoint.verdict("0.5.2")
    with pytest.raises(CockpitError, match="save is still in progress.*training_state.pt is not there yet"):
        inspect_draft(saving)
    (saving / "training_state.pt").write_bytes(b"rank 0's state")
    [checkpoint] = await scan(transport, str(out))
    assert checkpoint.complete and checkpoint.needs_export
    with pytest.raises(CockpitError, match="specforge export --to sglang"):
        inspect_draft(saving)


@pytest.mark.parametrize("stamp, look_s, state", [
    (-3.0, 0.0, "running"),  # written 3 s before the look: within its cadence
    (0.4, 0.0, "running"),  # written while the look read it (stamped after the look began)
    (1.8, 1.5, "running"),  # a slow look (SSH on a loaded host): a write near its end
    (30.0, 0.0, "unknown"),  # stamped far after the look: another clock, not "0 s ago"
])
def test_a_write_during_the_look_is_a_write_now_for_a_viewer_who_cannot_see_the_trainer(tmp_path, monkeypatch, stamp, look_s, state):
    """CI, an ordinary user's one-shot `runs` over SSH while root's trainer wrote every 0.3 s: the log's last write was
    stamped after the look began, read "no word for -0 s", and the run was unknown while its log grew.  A stamp within the
    look is a write now; one beyond it is another clock's and says so (never a negative silence, never running on it)."""
    import cockpit.runs.watch as watch
    from cockpit.hosts.liveness import Liveness

    path = tmp_path / "train.log"
    path.write_text("step 10: {'loss': 3.0, 'acc': 0.1}\nstep 20: {'loss': 2.9, 'acc': 0.1}\n")
    begun = 1_000_000.0
    os.utime(path, (begun + stamp, begun + stamp))
    ticks = iter([begun] + [begun + look_s] * 20)  # the look's start, then its end for every later reading

    async def hidden(*_args, **_kwargs):
        return Liveness("unknown", f"processes writing {path}", why="another user's processes cannot be read by this user")

    monkeypatch.setattr(watch, "probe", hidden)

    async def go():
        watcher = RunWatcher(RunSpec("r", "here", log=str(path)), local(), clock=lambda: next(ticks))
        status, _ = await watcher.poll(catch_up=True)
        assert status.state == state, status.evidence
        assert "-0 s" not in status.evidence and not re.search(r"no word for -\d", status.evidence), status.evidence
        if state == "unknown":
            assert "ahead of this machine's clock" in status.evidence, status.evidence

    asyncio.run(go())
