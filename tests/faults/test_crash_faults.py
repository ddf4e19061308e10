"""SIGKILL of the cockpit itself at random moments: during a runbook step, a state write, a key fix
and a benchmark.  After each kill the files must be old or new (never torn), nothing confirmed may
be missing, and the restarted cockpit must carry on."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.bench.store import load_run
from harness.faultreport import FaultRow, report
from harness.standin_sglang import start_standin_sglang

RNG = random.Random(int(os.environ.get("COCKPIT_FAULT_SEED", "8")))
CLI_ONLY = "n/a (CLI killed)"


def cli(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def kill_after(argv, delay: float, **popen) -> tuple[int, str]:
    """Start `argv`, SIGKILL it after `delay` seconds (if it is still running); (exit status, stdout)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True, **popen)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    return proc.returncode, out


def timed(fn, *args, **kwargs):
    started = time.monotonic()
    result = fn(*args, **kwargs)
    return result, time.monotonic() - started


# --- a runbook step ------------------------------------------------------------------------------

STEPS = "".join(
    f'\n[[runbook.steps]]\nname = "{name}"\nkind = "command"\nhost = "here"\nargv = ["sleep", "0.4"]\n'
    for name in ("one", "two", "three", "four", "five", "six", "seven", "eight")
)  # 3.2 s of steps: a run killed within 1.6 s cannot finish them all, so at least 2 kills land


def test_sigkill_during_runbook_steps(tmp_path):
    config = tmp_path / "cockpit.toml"
    config.write_text('[hosts.here]\nlocal = true\n\n[runbook]\nname = "crash"\n' + STEPS)
    state_dir = Path(os.environ["XDG_STATE_HOME"]) / "cockpit" / "runbooks"
    passed_before: set[str] = set()
    kills, lost, recoveries = 0, 0, []
    for _ in range(12):
        status, _ = kill_after([sys.executable, "-m", "cockpit", "plan", "run", "--config", str(config)], RNG.uniform(0.5, 1.6))
        if status != -signal.SIGKILL:
            break  # the plan finished before the kill
        kills += 1
        for path in state_dir.glob("crash*.json"):
            json.loads(path.read_text())  # old or new, never torn
        for path in state_dir.glob("crash*.audit.jsonl"):
            for line in path.read_text().splitlines():
                json.loads(line)
        shown, seconds = timed(cli, "plan", "show", "--json", "--config", str(config))
        recoveries.append(seconds)
        assert shown.returncode in (0, 1), shown.stderr
        steps = {s["name"]: s for s in json.loads(shown.stdout)["steps"]}
        passed = {name for name, s in steps.items() if s["state"] == "passed"}
        lost += len(passed_before - passed)  # a step that had passed must stay passed
        passed_before = passed
        running = [s for s in steps.values() if s["result"] and "interrupted" in (s["result"].get("message") or "")]
        assert all(s["state"] == "failed" for s in running)
    final = cli("plan", "run", "--json", "--config", str(config))
    assert final.returncode == 0, final.stderr
    shown = json.loads(cli("plan", "show", "--json", "--config", str(config)).stdout)["steps"]
    report(FaultRow("SIGKILL during runbook steps", kills, CLI_ONLY, lost, recoveries,
                    note="recovery: restarted `plan show` answers; the next run resumes"))
    assert lost == 0 and kills >= 2
    assert [s["state"] for s in shown] == ["passed"] * 8


# --- a state write -------------------------------------------------------------------------------

WRITER = r"""
import sys
from cockpit.runbook.model import StepResult, StepState
from cockpit.runbook.store import StateStore

store = StateStore("crash", root=sys.argv[1])
results = store.load()
n = int(results["counter"].message) if "counter" in results else 0
print("loaded", n, flush=True)
pad = {f"step{i}": StepResult(StepState.PASSED, message="x" * 3000) for i in range(60)}  # ~200 KB per write
while True:
    n += 1
    store.audit("saved", n=n)  # the engine's order: the record first, then the state
    store.save({"counter": StepResult(StepState.PASSED, message=str(n)), **pad})
    print(n, flush=True)
"""


def test_sigkill_during_state_writes(tmp_path):
    from cockpit.runbook.store import StateStore

    root = tmp_path / "state"
    store = StateStore("crash", root=root)
    kills, lost, recoveries, confirmed = 0, 0, [], 0
    for _ in range(20):
        status, out = kill_after([sys.executable, "-c", WRITER, str(root)], RNG.uniform(0.15, 0.5))
        assert status == -signal.SIGKILL
        kills += 1
        lines = out.split("\n")
        loaded = int(lines[0].split()[1]) if lines[0].startswith("loaded") else None
        printed = [int(x) for x in lines[1:] if x.strip().isdigit()]
        if loaded is not None:
            assert loaded in (confirmed, confirmed + 1), (loaded, confirmed)  # the restart found old or new
        confirmed = printed[-1] if printed else max(confirmed, loaded or 0)
        state, seconds = timed(store.load)  # parses: never torn
        recoveries.append(seconds)
        n = int(state["counter"].message)
        assert n in (confirmed, confirmed + 1), (n, confirmed)
        audited = [r["n"] for r in store.audit_records() if r["event"] == "saved"]
        torn = len(store.audit_path.read_bytes().splitlines()) - len(store.audit_records())
        lost += torn + len(set(range(1, n + 1)) - set(audited))  # every state written has its record
    leftovers = list(root.glob(".crash.json.*.tmp"))
    report(FaultRow("SIGKILL during state writes", kills, CLI_ONLY, lost, recoveries, note=f"{confirmed} writes confirmed; "
                    f"{len(leftovers)} temp files left (never read; swept after 60 s); recovery: loading the state"))
    assert lost == 0 and confirmed > 40


# --- a key fix -----------------------------------------------------------------------------------

def big_draft(folder: Path) -> Path:
    """An EAGLE-3 head with the `layers.0.` keys, and a 192 MiB tensor so a growing copy takes a while."""
    from drafter_files import T, eagle3_config, eagle3_tensors, save_file

    folder.mkdir(parents=True)
    tensors = eagle3_tensors("layers0")
    counting = b"".join(i.to_bytes(2, "little") for i in range(65536))  # int16 0..65535, as bf16 bits
    tensors["embed_tokens.weight"] = T.of("BF16", (96 * 1024, 1024), counting * (96 * 1024 * 1024 // 65536))
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(eagle3_config()))
    return folder


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sigkill_during_key_fixes(tmp_path):
    """Kills at the journal's three points (in place) and at random moments of a growing copy."""
    from drafter_files import load_file

    folder = big_draft(tmp_path / "draft")
    file = folder / "model.safetensors"
    original = load_file(file)
    old_sha = sha(file)
    kills, lost, recoveries = 0, 0, []

    def same_tensors(prefix_from: str, prefix_to: str) -> int:
        now = load_file(file)
        wanted = {k.replace(prefix_from, prefix_to): v for k, v in original.items()}
        return sum(1 for k, v in wanted.items() if k not in now or now[k] != v)

    # in place (same-length rename), killed at each point of the journaled write
    for point in ("journal_written", "torn_header", "header_written"):
        env = {**os.environ, "COCKPIT_FAULT_AT": point}
        killed = subprocess.run([sys.executable, "-m", "cockpit", "drafter", "fix-keys", str(folder), "--yes"],
                                env=env, capture_output=True, text=True, timeout=120)
        assert killed.returncode == -signal.SIGKILL
        kills += 1
        seen = cli("drafter", "inspect", str(folder), "--json")
        assert "Traceback" not in seen.stderr and "interrupted fix" in seen.stdout + seen.stderr, seen
        # what a restart shows before it touches anything is the plan for the file as it will be
        planned = json.loads(cli("drafter", "fix-keys", str(folder), "--dry-run", "--json").stdout)
        assert planned["renamed"] == (0 if point == "header_written" else 10), planned
        # restart: the next run finishes or undoes the interrupted fix, then fixes
        done, seconds = timed(cli, "drafter", "fix-keys", str(folder), "--yes", "--json")
        assert done.returncode == 0, done.stderr
        recoveries.append(seconds)
        lost += same_tensors("layers.0.", "midlayer.")
        # back to the old keys for the next point (a fix with the reverse rule, itself checked)
        undo = cli("drafter", "fix-keys", str(folder), "--rule", "midlayer.=layers.0.", "--yes")
        assert undo.returncode == 0, undo.stderr
        assert sha(file) == old_sha
    # a growing copy (longer names), killed at random moments: the original stays until the rename
    rule = ("--rule", "layers.0.=draft_model.midlayer.")
    pristine = tmp_path / "pristine.safetensors"
    shutil.copyfile(file, pristine)
    landed = 0
    for _ in range(15):
        status, _ = kill_after([sys.executable, "-m", "cockpit", "drafter", "fix-keys", str(folder), *rule, "--yes"],
                               RNG.uniform(0.15, 0.9))
        renamed = sha(file) != old_sha  # the original stays byte for byte until the rename
        if status == -signal.SIGKILL:
            landed += 1
            kills += 1
        else:
            assert status == 0 and renamed
        if renamed:  # then the new file is whole; put the original back for the next try
            lost += same_tensors("layers.0.", "draft_model.midlayer.")
            shutil.copyfile(pristine, file)
        if landed >= 6:
            break
    done, seconds = timed(cli, "drafter", "fix-keys", str(folder), *rule, "--yes")
    assert done.returncode == 0, done.stderr
    recoveries.append(seconds)
    lost += same_tensors("layers.0.", "draft_model.midlayer.")
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    report(FaultRow("SIGKILL during key fixes", kills, CLI_ONLY, lost, recoveries,
                    note=f"3 journal points + {landed} random kills in a 192 MiB copy; recovery: the rerun"))
    assert lost == 0 and landed >= 3
    assert leftovers == []


# --- a benchmark ---------------------------------------------------------------------------------

@pytest.fixture
def standin_sglang():
    """The stand-in SGLang server (tests/standin/sglang): real wire format, scripted timings."""
    proc, endpoint = start_standin_sglang({"ttft_ms": 20, "itl_ms": 4, "chunk_tokens": [3]}, "--speculative-algorithm", "EAGLE3")
    yield endpoint
    proc.kill()
    proc.wait()


def test_sigkill_during_benchmarks(standin_sglang):
    from cockpit.bench.store import runs_dir

    run = [sys.executable, "-m", "cockpit", "bench", "run", "--endpoint", standin_sglang, "--requests", "40",
           "--concurrency", "4", "--max-tokens", "200", "--json"]
    first = subprocess.run(run + ["--label", "kept"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    kept = Path(json.loads(first.stdout)["file"])
    kept_sha = sha(kept)
    kills, lost, recoveries, completed = 0, 0, [], 0
    for _ in range(6):
        status, _ = kill_after(run + ["--label", "killed"], RNG.uniform(0.4, 2.0))
        if status != -signal.SIGKILL:
            completed += 1  # it finished before the kill: stored whole, as it should be
            continue
        kills += 1
        for path in runs_dir().glob("*.jsonl"):
            summary = load_run(path)  # every stored run is whole: a summary and all its requests
            requests = [json.loads(line) for line in path.read_text().splitlines()[1:]]
            lost += summary["requests"] + summary.get("warmup", 0) - len(requests) if "warmup" in summary else 0
        lost += 0 if kept.exists() and sha(kept) == kept_sha else 1
        listed, seconds = timed(cli, "bench", "report", *map(str, sorted(runs_dir().glob("*.jsonl"))), "--json")
        assert listed.returncode == 0, listed.stderr
        recoveries.append(seconds)
    after = subprocess.run(run + ["--label", "after"], capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    labels = sorted(load_run(p)["label"] for p in runs_dir().glob("*.jsonl"))
    report(FaultRow("SIGKILL during benchmarks", kills, CLI_ONLY, lost, recoveries,
                    note="a killed run stores nothing; stored runs untouched; recovery: `bench report` answers"))
    assert labels == ["after", "kept"] + ["killed"] * completed and kills >= 3 and lost == 0
    assert not list(runs_dir().glob(".*"))
