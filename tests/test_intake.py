"""Logs as users get them (issue 28): the real SGLang crash logs through docker, kubectl, journald,
Slurm, docker compose, colour, `script`, an 80-column tmux pane, `tail` and a pasted line
(tests/fixtures/sglang/wrapped/, made by tests/fixtures/record/wrapped_logs.py with the real tools
where they run here), diagnosed as the clean log is; standard input; big logs; a training log
through kubectl."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.intake import Intake, clean, constant_prefix, take_lines, wrap_width
from cockpit.serving.logread import diagnose_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WRAPPED = FIXTURES / "sglang" / "wrapped"
STORY_FIX = ["--speculative-num-steps", "16", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "17"]


def cli(*args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, timeout=120, input=stdin,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("path", sorted(WRAPPED.glob("*_story.log")), ids=lambda p: p.stem)
def test_the_story_crash_through_every_wrapper_is_the_same_diagnosis(path):
    plain = diagnose_file(FIXTURES / "sglang" / "unrecognized_0.5.2.log").diagnoses[0]
    [found] = [d for d in diagnose_file(path).diagnoses if d.severity == "error"]
    assert (found.kind, found.flag, found.value, list(found.replacement)) == (plain.kind, plain.flag, plain.value, STORY_FIX)
    assert found.value == "16"  # no ANSI reset left in it
    # the line number is the file's own: that line (or the piece a terminal wrapped it into) says it
    text = clean(path.read_text(errors="replace").splitlines()[found.line - 1])
    assert "error" in text and "launch_server.py" in text


@pytest.mark.parametrize("path", sorted(WRAPPED.glob("*_eagle4.log")), ids=lambda p: p.stem)
def test_a_wrapped_or_prefixed_invalid_choice_names_the_numbered_sibling(path):
    [found] = [d for d in diagnose_file(path).diagnoses if d.severity == "error"]
    assert found.kind == "invalid_choice" and found.value == "EAGLE4"
    assert found.replacement == ("--speculative-algorithm", "EAGLE3") and "did you mean 'EAGLE3'?" in found.message
    assert found.suggestions[0] == "EAGLE3" and len(found.suggestions) <= 3


def test_what_the_intake_did_is_said_and_line_numbers_are_kept():
    report = diagnose_file(WRAPPED / "tmux80_docker_story.log")
    assert any("docker" in n and "wrapped at 80 columns rejoined" in n for n in report.notes)
    lines, info = take_lines((WRAPPED / "kubectl_story.log").read_text().splitlines())
    assert info["prefixes"] == ["kubectl", "docker"] and lines[0].source == "pod/sglang-0/sglang" and lines[5].number == 6
    assert not lines[0].text.startswith(("[pod", "2026"))


def test_a_choice_cut_inside_its_word_by_the_terminal_is_read_whole():
    """A pane as wide as the cut: 'EAGL' at the end of one row, 'E4' at the start of the next."""
    line = ("launch_server.py: error: argument --speculative-algorithm: invalid choice: 'EAGLE4' (choose from 'EAGLE', "
            "'EAGLE3', 'NEXTN', 'STANDALONE')")
    width = line.index("EAGLE4") + 4
    usage = "usage: launch_server.py [-h] --model-path MODEL_PATH " + " ".join(f"[--flag-{i} X]" for i in range(20))

    def rows(text):
        return [text[i:i + width] for i in range(0, len(text), width)]

    screen = rows(usage) + rows(line)
    assert screen[len(rows(usage))].endswith("'EAGL") and screen[len(rows(usage)) + 1].startswith("E4'")
    lines, info = take_lines(screen)
    assert info["wrap_width"] == width and [l.text for l in lines] == [usage, line]
    [found] = [d for d in diagnose_lines_of(screen) if d.severity == "error"]
    assert found.value == "EAGLE4" and found.replacement == ("--speculative-algorithm", "EAGLE3")


def diagnose_lines_of(lines):
    from cockpit.serving.logread import diagnose_lines

    return diagnose_lines(lines).diagnoses


def test_no_false_wrap_in_an_ordinary_log_and_no_constant_prefix_from_sglangs_own():
    plain = (FIXTURES / "sglang" / "valid_0.5.2.log").read_text().splitlines()
    lines, info = take_lines(plain)
    assert info == {"prefixes": [], "constant_prefix": None, "wrap_width": None, "rejoined": 0}
    assert [l.text for l in lines] == [clean(t) for t in plain]
    sglang_own = [f"[2026-12-04 18:00:{i:02d} TP0] Decode batch, #running-req: 8, accept len: 2.80" for i in range(20)]
    assert constant_prefix(sglang_own) is None and wrap_width(sglang_own) is None


def test_streaming_intake_learns_the_prefixes_of_a_followed_log():
    intake = Intake()
    batch = [f"2026-12-04T18:00:0{i}.000000000Z [2026-12-04 18:00:0{i} TP0] Decode batch, #running-req: 8" for i in range(5)]
    assert intake.texts(batch) == [b.split(" ", 1)[1] for b in batch]
    assert intake.texts(["\x1b[31mplain\x1b[0m"]) == ["\x1b[31mplain\x1b[0m"]  # cleaning is the follower's: prefixes only
    assert clean("\x1b[01;31m\x1b[Kerror\x1b[m\x1b[K: x\x1b]0;title\x07\r") == "error: x"


def test_stdin_big_logs_and_bad_input(tmp_path):
    crash = (FIXTURES / "sglang" / "unrecognized_0.5.2.log").read_bytes()
    piped = cli("parse-log", "-", "--json", stdin=(WRAPPED / "kubectl_story.log").read_bytes())
    assert piped.returncode == 1 and json.loads(piped.stdout)["diagnoses"][0]["replacement"] == STORY_FIX
    journal = cli("parse-log", "-", stdin=(WRAPPED / "journald_story.log").read_bytes())
    assert journal.returncode == 1 and b"fix: --speculative-num-steps 16" in journal.stdout

    # a crash, then more than the 8 MiB read window of the same run's output
    big = tmp_path / "big.log"
    filler = b"[2026-12-04 18:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, #running-req: 3\n"
    big.write_bytes(crash.replace(b"usage:", b"usage:", 1) + filler * (9 * 1024 * 1024 // len(filler)))
    tail = cli("parse-log", str(big))
    assert tail.returncode == 0 and b"pass --all to read all of it" in tail.stdout and b"of 9 MiB" in tail.stdout
    whole = cli("parse-log", "--all", "--json", str(big))
    assert whole.returncode == 1 and json.loads(whole.stdout)["diagnoses"][0]["line"] == crash.count(b"\n")
    assert cli("parse-log", "--all", "-", stdin=big.read_bytes()).returncode == 1

    packed = tmp_path / "server.log.gz"
    packed.write_bytes(gzip.compress(crash))
    out = cli("parse-log", str(packed))
    assert out.returncode == 2 and b"gzip" in out.stderr and b"zcat" in out.stderr and b"Traceback" not in out.stderr
    binary = tmp_path / "b.log"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    assert cli("parse-log", str(binary)).returncode == 2
    latin = tmp_path / "latin.log"
    latin.write_bytes(crash.replace(b"--num-speculative-tokens 16", b"--num-speculative-tokens 16 \xe9"))
    assert cli("parse-log", str(latin)).returncode == 1


def test_a_training_log_through_kubectl_reads_as_the_plain_one(tmp_path):
    """A trainer in a Kubernetes job, its log saved with `kubectl logs --prefix --timestamps`."""
    from cockpit.runs.spec import RunSpec
    from cockpit.runs.watch import RunWatcher
    from harness.builders import local

    source = FIXTURES / "training" / "E4-report-none" / "train.log"
    plain, prefixed = tmp_path / "plain.log", tmp_path / "kubectl.log"
    plain.write_bytes(source.read_bytes())
    prefixed.write_text("".join(f"[pod/eagle3-train-0/trainer] 2026-12-04T18:00:{i % 60:02d}.000000000Z {line}\n"
                                for i, line in enumerate(source.read_text().splitlines())))

    async def read(path):
        status, _ = await RunWatcher(RunSpec("r", "here", log=str(path), total_steps=800), local()).poll(catch_up=True)
        return status

    a, b = asyncio.run(read(plain)), asyncio.run(read(prefixed))
    assert (b.step, b.total, b.loss, b.per_position_acc, b.estimate) == (a.step, a.total, a.loss, a.per_position_acc, a.estimate)
    assert b.step == 800 and b.per_position_acc
