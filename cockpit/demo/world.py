"""The demo's world in a folder: replayed hosts, real stale processes, a stand-in training run that
finishes into a real drafter checkpoint with the wrong key names, a replayed SGLang, and the runbook
of the story."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cockpit.config import Config, parse_config
from cockpit.drafter.header import encode_header
from cockpit.errors import CockpitError

# Holds nothing; its command line is what kill_stale matches.  It ends when the demo does, even
# when the demo is killed (its terminal closed): it watches its parent.
STALE = "import os, sys, time\nparent = os.getppid()\nwhile os.getppid() == parent:\n    time.sleep(1)"


@dataclass
class DemoWorld:
    root: Path
    config: Config
    processes: list[subprocess.Popen] = field(default_factory=list)

    def close(self) -> None:
        """Stop everything the demo started: its stale processes and any server it launched."""
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        marker = str(self.root)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    args = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in args and "sglang.launch_server" in args:
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass



@dataclass(frozen=True)
class Story:
    """The story's deployment in one engine's own terms: the habit that crashes (its 16 draft tokens), the
    versions the draft and the checkpoints are judged for, and what the demo's config says of its server."""

    judge: str  # the drafter step's version line
    engine_line: str  # the launch step's engine lines
    habit: Callable[[str], list[str]]  # the story's launch flags for a draft path
    stats_env: str  # env for the stand-in server
    server_words: str
    runs_judge: str  # [runs.X]'s version line


SGLANG_RELEASE = "0.5.2"  # the story's SGLang: one of 0.4.9-0.5.11, which skip a draft's layers.0.* keys silently

STORIES: dict[str, Story] = {
    # vLLM <= 0.8.2's separate flags, on a vLLM 0.10.2 (vLLM logs its figures every 10 s; the demo is in a hurry)
    "vllm": Story('vllm = "0.10.2"                       # vLLM loads layers.0.* keys as they are',
                  'engine = "vllm"\nvllm_version = "0.10.2"\n',
                  lambda draft: ["--speculative-model", draft, "--num-speculative-tokens", "16"],
                  ', VLLM_LOG_STATS_INTERVAL = "2"', "the vLLM server replays vLLM 0.10.2",
                  'vllm = "0.10.2"                       # the serving host\'s vLLM: checkpoints judged for it'),
    "sglang": Story('sglang = "0.5.2"', "",
                    lambda draft: ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", draft,
                                   "--num-speculative-tokens", "16"],
                    "", "the SGLang server is a stand-in for SGLang 0.5.2 (its parser rebuilt from the flags recorded from "
                        "its wheel)",
                    'sglang = "0.5.2"                      # the serving host\'s SGLang: checkpoints judged for it'),
}

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _script(path: Path, lines: list[str]) -> str:
    path.write_text("#!/bin/sh\n" + "\n".join(lines) + "\n")
    path.chmod(0o755)
    return str(path)


def write_draft(folder: Path) -> None:
    """A small but real EAGLE-3 draft, written with the key names of vLLM's converters (layers.0.*)."""
    hidden, inter, vocab, draft_vocab = 64, 128, 1000, 100
    shapes = {
        "layers.0.self_attn.q_proj.weight": ("BF16", [hidden, 2 * hidden]),
        "layers.0.self_attn.k_proj.weight": ("BF16", [hidden // 2, 2 * hidden]),
        "layers.0.self_attn.v_proj.weight": ("BF16", [hidden // 2, 2 * hidden]),
        "layers.0.self_attn.o_proj.weight": ("BF16", [hidden, hidden]),
        "layers.0.mlp.gate_proj.weight": ("BF16", [inter, hidden]),
        "layers.0.mlp.up_proj.weight": ("BF16", [inter, hidden]),
        "layers.0.mlp.down_proj.weight": ("BF16", [hidden, inter]),
        "layers.0.input_layernorm.weight": ("BF16", [hidden]),
        "layers.0.hidden_norm.weight": ("BF16", [hidden]),
        "layers.0.post_attention_layernorm.weight": ("BF16", [hidden]),
        "fc.weight": ("BF16", [hidden, 3 * hidden]),
        "norm.weight": ("BF16", [hidden]),
        "lm_head.weight": ("BF16", [draft_vocab, hidden]),
        "d2t": ("I64", [draft_vocab]),
        "t2d": ("BOOL", [vocab]),
    }
    sizes = {"BF16": 2, "I64": 8, "BOOL": 1}
    raw: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in shapes.items():
        count = 1
        for d in shape:
            count *= d
        raw[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + count * sizes[dtype]]}
        offset += count * sizes[dtype]
    header = encode_header(raw)
    folder.mkdir(parents=True, exist_ok=True)
    data = bytes((i * 37) % 251 for i in range(offset))
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + data)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": hidden, "intermediate_size": inter, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": vocab, "draft_vocab_size": draft_vocab,
        "tie_word_embeddings": False}, indent=2))


def serving_python(root: Path, python: str, sglang: str | None = None) -> str:
    """An interpreter for the demo's serving host: `python -m sglang.launch_server` and `python -m
    vllm.entrypoints.cli.main serve` run the STAND-INs (demo/server.py, demo/vllm_server.py) in it; `sglang`: the
    SGLang release the host has (one recorded: its version, --help and parser everywhere the cockpit asks)."""
    shim = root / "shim" / "sglang"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text('"""cockpit DEMO: a STAND-IN for SGLang (0.5.23\'s recorded texts, or the release '
                                      'SGLANG_STANDIN_VERSION names)."""\nimport os\n'
                                      '__version__ = os.environ.get("SGLANG_STANDIN_VERSION") or "0.5.23"\n')
    (shim / "launch_server.py").write_text("import sys\nfrom cockpit.demo.server import main\nsys.exit(main())\n")
    cli = root / "shim" / "vllm" / "entrypoints" / "cli"  # `python -m vllm.entrypoints.cli.main serve` = `vllm serve`
    cli.mkdir(parents=True, exist_ok=True)
    (root / "shim" / "vllm" / "__init__.py").write_text('"""cockpit DEMO: replays vLLM 0.10.2 (a STAND-IN; a test may name another '
                                                       'recorded version)."""\nimport os\n'
                                                       '__version__ = os.environ.get("VLLM_STANDIN_VERSION", "0.10.2")\n')
    for package in (root / "shim" / "vllm" / "entrypoints", cli):
        (package / "__init__.py").write_text("")
    (cli / "main.py").write_text("import sys\nfrom cockpit.demo.vllm_server import main\nsys.exit(main())\n")
    release = [f"SGLANG_STANDIN_VERSION={shlex.quote(sglang)}", "export SGLANG_STANDIN_VERSION"] if sglang else []
    server_python = _script(root / "python-gpu-server", [
        f"PYTHONPATH={shlex.quote(str(root / 'shim'))}${{PYTHONPATH:+:$PYTHONPATH}}",
        "export PYTHONPATH", *release, f"exec {shlex.quote(python)} \"$@\""])
    return server_python


def afresh(root: Path) -> bool:
    """A demo starts from the story's beginning: an earlier demo's world in `root` (its demo.toml says
    so) is removed first, so that its training log, checkpoints, runbook state and benchmark runs do not
    mix with the new ones.  A folder with anything else in it is refused, never emptied.  Returns
    whether an earlier demo's files were removed."""
    import shutil

    if not root.exists() or not any(root.iterdir()):
        return False
    config = root / "demo.toml"
    if not (config.is_file() and config.read_text(errors="replace").startswith("# cockpit DEMO")):
        raise CockpitError(f"--dir {root}: the folder holds files that are not a cockpit demo's; give an empty or new "
                           "folder (the demo builds its world afresh)")
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    return True


def build(root: Path, engine: str = "sglang") -> DemoWorld:
    """The demo's world in `root`; `engine`: the server the story launches, SGLang 0.5.23 (replayed) or
    vLLM 0.10.2 (replayed: demo/vllm_server.py)."""
    root.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    processes = []
    # the stale processes of the story: a finished training run on the trainer, an old server on gpu-server
    (root / "old_sglang_server.py").write_text(f"# cockpit DEMO: a stale process of the story\n{STALE}\n")
    # the training run of the story (a stand-in): it trains into outputs/, then lingers as the stale trainer
    (root / "train_eagle3.py").write_text("# cockpit DEMO: a STAND-IN training run (cockpit/demo/trainer.py)\n"
                                          "import sys\nfrom cockpit.demo.trainer import main\nmain(sys.argv)\n")
    trainer_stale = subprocess.Popen([python, str(root / "train_eagle3.py"), "--demo"], start_new_session=True)
    server_stale = subprocess.Popen([python, str(root / "old_sglang_server.py"), "--demo"], start_new_session=True)
    processes += [trainer_stale, server_stale]
    for proc in (trainer_stale, server_stale):
        # the demo is their parent (they end with it): when a kill step ends them, they are reaped at once,
        # not left as <defunct> entries all session (a waitpid of their own pid: no other child is touched)
        threading.Thread(target=proc.wait, name=f"reap {proc.pid}", daemon=True).start()
    live = root / "gpu-server-processes"  # a server the demo launches registers its GPU memory here
    scenarios = {
        "trainer": {"gpus": 4, "processes": [{"pid": trainer_stale.pid, "gpu": g, "used_memory": 61234, "name": "python3", "busy": True}
                                              for g in range(4)]},
        "gpu-server": {"gpus": 8, "processes": [{"pid": server_stale.pid, "gpu": 5, "used_memory": 30000, "name": "python3"}],
                       "live_dir": str(live)},
    }
    smi = {}
    for host, scenario in scenarios.items():
        path = root / f"{host}.json"
        path.write_text(json.dumps(scenario))
        smi[host] = _script(root / f"nvidia-smi-{host}", [f"exec {shlex.quote(python)} -m cockpit.demo.replay {shlex.quote(str(path))} \"$@\""])
    story = STORIES.get(engine)
    server_python = serving_python(root, python, SGLANG_RELEASE if engine == "sglang" else None)
    draft = root / "outputs" / "epoch_1"  # the training run's last checkpoint (it writes it as the demo starts)
    # the target's config.json, which the draft is checked against before the launch: a STAND-IN of the story's target
    # at the demo draft's own size (no weights: the stand-in engines read none)
    target = root / "models" / "Llama-3.3-70B-Instruct"
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps({
        "_cockpit_demo": "STAND-IN: the demo's target, at the size of the demo's draft (a real Llama-3.3-70B is 8192 wide)",
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 80, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 1000, "torch_dtype": "bfloat16"},
        indent=2))
    port = _free_port()
    if story is None:
        raise CockpitError(f"the demo tells its story with {' or '.join(STORIES)}; it has none for the engine '{engine}'")
    judge, engine_line, stats_env, server_words, runs_judge = (story.judge, story.engine_line, story.stats_env, story.server_words,
                                                                 story.runs_judge)
    extra = json.dumps(story.habit(str(draft)))
    text = f"""# cockpit DEMO: the deployment of the story, on this machine. Hosts replay nvidia-smi output recorded
# on a real H200; {server_words}. Nothing leaves loopback.

# the demo's runbook state, benchmark runs, alert log and caches live in this folder, never in your own
# (every command given this config reads them: cockpit --config demo.toml plan show)
[storage]
dir = "."

[telemetry]
interval_ms = 1000
processes_interval_s = 1

[hosts.gpu-server]
local = true
telemetry = "smi"
nvidia_smi = {json.dumps(smi['gpu-server'])}
python = {json.dumps(server_python)}
roles = ["serving", "DEMO"]
accent = "red"

[hosts.trainer]
local = true
telemetry = "smi"
nvidia_smi = {json.dumps(smi['trainer'])}
roles = ["training", "DEMO"]

[runs.eagle3-train]
host = "trainer"
log = {json.dumps(str(root / 'train.log'))}
output_dir = {json.dumps(str(root / 'outputs'))}
depth = 16                            # the story's serving depth: the estimate is truncated there
{runs_judge}
poll_s = 1

[runbook]
name = "demo-{os.getpid()}"

[[runbook.steps]]
name = "training-done"
kind = "wait_run"
host = "trainer"
run = "eagle3-train"
timeout_min = 5

[[runbook.steps]]
name = "kill-trainer"
kind = "kill_stale"
host = "trainer"
title = "kill the stale trainer (train_eagle3.py) on trainer"
pattern = {json.dumps(re.escape(str(root / 'train_eagle3.py')))}   # only the demo's own stale trainer, never a real run
grace_s = 2

[[runbook.steps]]
name = "kill-server-leftovers"
kind = "kill_stale"
host = "gpu-server"
gpu_processes = true
grace_s = 2

[[runbook.steps]]
name = "server-gpus-clean"
kind = "gpu_clean"
host = "gpu-server"
expect_gpus = 8

[[runbook.steps]]
name = "draft-ready"
kind = "drafter_check"
host = "gpu-server"
from_step = "training-done"           # the checkpoint the training run finished into
target = {json.dumps(str(root / 'models' / 'Llama-3.3-70B-Instruct'))}   # checked against its config.json
{judge}

[[runbook.steps]]
name = "launch"
kind = "serve_launch"
host = "gpu-server"
{engine_line}model_path = {json.dumps(str(root / 'models' / 'Llama-3.3-70B-Instruct'))}
draft_path = {json.dumps(str(draft))}
tp = 8
port = {port}
log = {json.dumps(str(root / f'{engine}.log'))}
settle_s = 1.0
env = {{ COCKPIT_DEMO_PARENT = "{os.getpid()}", COCKPIT_DEMO_LIVE_DIR = {json.dumps(str(live))}{stats_env} }}
extra_args = {extra}

[[runbook.steps]]
name = "ready"
kind = "serve_ready"
host = "gpu-server"
timeout_s = 60
poll_s = 0.5

[[runbook.steps]]
name = "sweep"
kind = "bench_sweep"
host = "gpu-server"

# Depth N = N steps of a topk-1 chain (N + 1 draft tokens): the story's 16, 10 and 5, and 2; the
# configuration the crash's fix produced (steps 16) is depth 16.
[bench]
launch_step = "launch"
depths = [16, 10, 5, 2]
concurrency = [1, 8]
requests = 8
max_tokens = 64
repeats = 1
after = "recommended"                 # leave the best config for concurrency 8 running
# the drafter's per-position accuracies for the predicted acceptance: from the training run (training-done)
"""
    (root / "demo.toml").write_text(text)
    config = parse_config(text, str(root / "demo.toml"))
    return DemoWorld(root, config, processes)

