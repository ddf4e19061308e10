"""`cockpit init`: a short questionnaire that writes a commented config (hosts, model, draft, depths)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from cockpit.config import HOST_NAME_RE, parse_config
from cockpit.errors import CockpitError
from cockpit.paths import atomic_write

Ask = Callable[[str, str], str]


def _ask_stdin(question: str, default: str) -> str:
    shown = f" [{default}]" if default else ""
    try:
        answer = input(f"{question}{shown}: ")
    except EOFError:
        answer = ""
    return answer.strip() or default


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def questionnaire(ask: Ask = _ask_stdin) -> dict:
    answers: dict = {"hosts": []}
    print("A few questions; Enter keeps the default in brackets.", file=sys.stderr)
    count = int(ask("How many GPU hosts (0 = only this machine)", "1") or "0")
    for number in range(count):
        name = ask(f"Host {number + 1}: a short name", "gpu-server" if number == 0 else f"host{number + 1}")
        if not HOST_NAME_RE.match(name):
            raise CockpitError(f"host name '{name}': use letters, digits, '.', '_' and '-'")
        address = ask(f"  {name}: address (IP, DNS name or ~/.ssh/config alias)", name)
        user = ask(f"  {name}: SSH user (empty: from ~/.ssh/config)", "")
        port = ask(f"  {name}: SSH port (empty: 22 or ~/.ssh/config)", "")
        role = ask(f"  {name}: role (serving or training)", "serving" if number == 0 else "training")
        answers["hosts"].append({"name": name, "address": address, "user": user, "port": port, "role": role})
    serving = [h["name"] for h in answers["hosts"] if h["role"] == "serving"]
    answers["serving"] = serving[0] if serving else None
    if answers["serving"]:
        answers["model"] = ask("Target model path on the serving host", "/models/Llama-3.1-8B-Instruct")
        answers["draft"] = ask("EAGLE-3 draft path on the serving host", "/ckpt/eagle3")
        answers["tp"] = ask("Tensor parallel size", "8")
        answers["depths"] = ask("Draft depths to benchmark (draft tokens, comma-separated)", "16,10,5")
    return answers


def render_config(answers: dict) -> str:
    lines = ["# cockpit config, written by `cockpit init`. Reference: README.md, sample_configs/deployment.toml.", ""]
    lines += ["[telemetry]", "interval_ms = 1000          # one nvidia-smi line per GPU per second, over one SSH connection", ""]
    lines += ["[hosts.here]", "local = true                # this machine", ""]
    for host in answers["hosts"]:
        lines.append(f"[hosts.{host['name']}]")
        lines.append(f"address = {_toml_string(host['address'])}   # an IP, a DNS name or an ~/.ssh/config alias")
        if host["user"]:
            lines.append(f"user = {_toml_string(host['user'])}")
        if host["port"]:
            if not host["port"].isdigit():
                raise CockpitError(f"port '{host['port']}' of {host['name']} is not a number")
            lines.append(f"port = {int(host['port'])}")
        lines.append(f"roles = [{_toml_string(host['role'])}]")
        lines.append("")
    serving = answers.get("serving")
    if serving:
        try:
            depths = [int(d) for d in re.split(r"[,\s]+", answers["depths"].strip()) if d]
        except ValueError:
            raise CockpitError(f"depths '{answers['depths']}': give whole numbers, e.g. 16,10,5") from None
        first = depths[0] if depths else 16
        lines += [
            "# The deployment as a checklist: each step is blocked until the ones before it passed.",
            "[runbook]", 'name = "deploy"', "",
            "[[runbook.steps]]", 'name = "gpus-clean"', 'kind = "gpu_clean"        # every GPU of the launch host, and no compute process',
            f"host = {_toml_string(serving)}", "",
            "[[runbook.steps]]", 'name = "draft-ready"', 'kind = "drafter_check"    # headers only; offers the layers.0. -> midlayer. fix',
            f"host = {_toml_string(serving)}", f"path = {_toml_string(answers['draft'])}", "",
            "[[runbook.steps]]", 'name = "launch"', 'kind = "sglang_launch"    # flags checked against the host\'s own SGLang first',
            f"host = {_toml_string(serving)}", f"model_path = {_toml_string(answers['model'])}",
            f"draft_path = {_toml_string(answers['draft'])}", f"draft_tokens = {first}", f"tp = {int(answers['tp'] or 1)}", "",
            "[[runbook.steps]]", 'name = "ready"', 'kind = "sglang_ready"', f"host = {_toml_string(serving)}", "",
            "[bench]", 'launch_step = "launch"', f"depths = [{', '.join(map(str, depths))}]", "concurrency = [1, 8]", "repeats = 3", "",
        ]
    return "\n".join(lines)


def write_config(path: Path, answers: dict, force: bool = False) -> Path:
    text = render_config(answers)
    parse_config(text, str(path))  # what we write must load
    if path.exists() and not force:
        raise CockpitError(f"{path} exists: pass --force to replace it (it is not merged)")
    atomic_write(path, text)
    return path
