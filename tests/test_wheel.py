"""Fresh-machine truth: the wheel, installed (not editable) into a venv of its own, with only what
pyproject declares, run from its console script outside the checkout.

A file left out of the package or an undeclared dependency fails here, whatever the interpreter
running the tests happens to hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from harness.standin_sglang import start_standin_sglang

ROOT = Path(__file__).resolve().parent.parent
# one worker builds the wheel once (its fixture is the module's) and runs every test of it
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("wheel")
    # from a clean copy: a build/ folder left in a checkout would hand setuptools files the package no longer names
    source = work / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", ".venv", ".whl", ".gl"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next((work / "dist").glob("cockpit-*.whl"))
    venv = work / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    return {"wheel": wheel, "venv": venv, "cockpit": str(venv / "bin" / "cockpit"), "work": work}


def isolated_env(base: Path) -> dict[str, str]:
    """A user's machine: its own XDG folders (checked afterwards), no checkout on any path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for var, sub in (("XDG_CONFIG_HOME", "config"), ("XDG_STATE_HOME", "state"), ("XDG_DATA_HOME", "data"),
                     ("XDG_CACHE_HOME", "cache")):
        env[var] = str(base / sub)
    return env


def test_the_wheel_carries_every_file_the_program_reads(wheel_venv):
    names = set(zipfile.ZipFile(wheel_venv["wheel"]).namelist())
    for shipped in ("cockpit/sample_configs/prompts.jsonl", "cockpit/sample_configs/deployment.toml",
                    "cockpit/themes/cockpit-dark.toml", "cockpit/sglang/data/help_0.5.23.txt",
                    "cockpit/demo/data/smi_stream.csv", "cockpit/vllm/data/help_0.10.2.txt"):
        assert shipped in names, f"{shipped} is not in the wheel"


def test_the_installed_command_answers_outside_the_checkout(wheel_venv, tmp_path):
    env = isolated_env(tmp_path)
    run = lambda *a: subprocess.run([wheel_venv["cockpit"], *a], capture_output=True, text=True, timeout=120,  # noqa: E731
                                    cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("cockpit ")
    example = run("init", "--example")
    assert example.returncode == 0 and "[[runbook.steps]]" in example.stdout
    written = run("init", "--example", str(tmp_path / "deploy.toml"))
    assert written.returncode == 0, written.stderr
    checked = run("config", "check", str(tmp_path / "deploy.toml"))
    assert checked.returncode == 0, checked.stderr
    no_config = run("plan", "show")
    assert no_config.returncode == 2 and "cockpit init" in no_config.stderr and "cockpit demo" in no_config.stderr
    vllm = run("lint-flags", "--vllm", "0.34.0", "--json", "--", "vllm", "serve", "/m", "--dtype", "fp16")  # its shipped --help
    assert vllm.returncode == 1 and json.loads(vllm.stdout)["flags_checked"], vllm.stderr


def test_bench_run_with_the_shipped_prompts_against_the_standin(wheel_venv, tmp_path):
    env = isolated_env(tmp_path)
    proc, endpoint = start_standin_sglang({"ttft_ms": 5, "itl_ms": 2, "chunk_tokens": [2]},
                                          "--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "4")
    try:
        out = subprocess.run([wheel_venv["cockpit"], "bench", "run", "--endpoint", endpoint.removeprefix("http://"),
                              "--requests", "8", "--concurrency", "2", "--max-tokens", "16", "--json"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    finally:
        proc.kill()
        proc.wait()
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["requests"] == 8 and summary["failed"] == 0 and Path(summary["file"]).is_relative_to(tmp_path / "data")


def test_the_installed_demo_walks_to_the_charts(wheel_venv, tmp_path):
    from harness.tools import need
    from harness.tmux import tmux, walk_demo

    need("tmux")
    env = isolated_env(tmp_path / "user")
    env_words = {k: env[k] for k in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")}
    session = f"cockpit-wheel-{os.getpid()}-{time.monotonic_ns()}"
    try:
        walk_demo(session, [wheel_venv["cockpit"]], {**env_words, "TERM": "tmux-256color", "PATH": os.environ["PATH"]},
                  tmp_path / "demo")
    finally:
        tmux("kill-session", "-t", session)
    # the demo kept its runbook state and benchmark runs in its own world, not in the user's folders
    for var in ("XDG_STATE_HOME", "XDG_DATA_HOME"):
        assert not Path(env_words[var]).exists() or not any(Path(env_words[var]).rglob("*")), var
    assert list((tmp_path / "demo").rglob("*.jsonl"))  # the sweep's stored runs


def console_scripts(wheel: Path) -> list[str]:
    """The console entry points the wheel installs (its entry_points.txt), not a list kept here."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = zf.read(name).decode()
    scripts, section = [], ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "console_scripts" and "=" in line:
            scripts.append(line.split("=", 1)[0].strip())
    return scripts


def test_a_clean_run_of_every_console_script_writes_nothing_to_stderr(wheel_venv, tmp_path, fixtures):
    """What a new user sees: on a clean run (exit 0) nothing reaches stderr, whatever the dependencies a fresh
    install resolves today say when imported (cryptography 51 made asyncssh print five DSA warnings per command)."""
    from harness.sshd import STANDIN_DIR

    env = isolated_env(tmp_path)
    env["PATH"] = f"{STANDIN_DIR}{os.pathsep}{env['PATH']}"  # the stand-in nvidia-smi: a local host with GPUs
    env["NVIDIA_SMI_STANDIN_DIR"] = str(tmp_path / "scenarios")
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "default.json").write_text(json.dumps({"gpus": 2}))
    train = fixtures / "training" / "E1" / "train.log"
    config = tmp_path / "local.toml"
    config.write_text(f'[hosts.here]\nlocal = true\n\n[runs.e1]\nhost = "here"\nlog = "{train}"\n')
    example = tmp_path / "deploy.toml"
    serving = tmp_path / "sglang.log"  # a healthy server's lines, in SGLang 0.5's words
    serving.write_text("".join(f"[2026-12-06 10:00:{s:02d} TP0] Decode batch, #running-req: 8, #token: 2100, token usage: 0.04, "
                               f"accept len: 2.80, cuda graph: True, gen throughput (token/s): 812.40, #queue-req: 0\n"
                               for s in range(10)))
    clean_runs = [
        ("--version",),
        ("--help",),
        ("init", "--example", str(example)),
        ("config", "check", str(example)),
        ("config", "check", str(config)),
        ("plan", "show", "-c", str(example)),
        ("status", "--once", "-c", str(config)),
        ("status", "--once", "--json", "-c", str(config)),
        ("verify", "here", "-c", str(config)),
        ("runs", "-c", str(config)),
        ("lint-flags", "--help-text", str(fixtures / "sglang" / "help_0.5.2.txt"), "--", "python", "-m", "sglang.launch_server",
         "--model-path", "/m"),
        ("parse-log", str(serving)),
        ("server", "--log", str(serving)),
    ]
    scripts = console_scripts(wheel_venv["wheel"])
    assert scripts, "the wheel names no console script"
    for script in scripts:
        program = str(wheel_venv["venv"] / "bin" / script)
        for args in clean_runs:
            done = subprocess.run([program, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
                                  stdin=subprocess.DEVNULL)
            assert done.returncode == 0, (script, args, done.stdout[-2000:], done.stderr[-2000:])
            assert done.stderr == "", f"{script} {' '.join(args)} wrote to stderr on a clean run:\n{done.stderr[:3000]}"
