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
        print(file=sys.stderr)
        raise CockpitError("no answer (input ended): nothing was written") from None
    return answer.strip() or default


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


Check = Callable[[str], "tuple[object, str | None]"]
MAX_TRIES = 10


def ask_until(ask: Ask, question: str, default: str, check: Check):
    """Ask until the answer is good: a bad one is refused at once, with the reason, and asked again."""
    for _ in range(MAX_TRIES):
        value, problem = check(ask(question, default))
        if problem is None:
            return value
        print(f"  {problem}; try again", file=sys.stderr)
    raise CockpitError(f"no good answer to '{question}' after {MAX_TRIES} tries: nothing was written")


def whole(minimum: int, maximum: int | None = None, empty_ok: bool = False) -> Check:
    def check(text: str):
        text = text.strip()
        if not text and empty_ok:
            return None, None
        if not re.fullmatch(r"\d+", text):
            return None, f"'{text}' is not a whole number"
        value = int(text)
        if value < minimum or (maximum is not None and value > maximum):
            return None, f"{value} is out of range ({minimum}-{maximum})" if maximum else f"{value} is below {minimum}"
        return value, None
    return check


def host_name(taken: set[str]) -> Check:
    def check(text: str):
        if not HOST_NAME_RE.match(text):
            return None, f"'{text}' is not a host name: use letters, digits, '.', '_' and '-'"
        if text in taken:
            return None, f"'{text}' is already a host of this config"
        return text, None
    return check


def word(what: str, empty_ok: bool = False, forbid: str = "") -> Check:
    def check(text: str):
        if not text and empty_ok:
            return "", None
        if not text or text.startswith("-") or any(c.isspace() or c in forbid for c in text):
            return None, f"'{text}' is not {what}"
        return text, None
    return check


def one_of(choices: tuple[str, ...]) -> Check:
    def check(text: str):
        value = text.strip().lower()
        if value not in choices:
            return None, f"'{text}' is not one of: {', '.join(choices)}"
        return value, None
    return check


TRAINER_FORMS = {"slurm": "slurm_job_name", "docker": "container", "podman": "container", "pod": "pod"}


def trainer_place(text: str):
    """Where a training host's trainer is watched: its log's absolute path, or where it runs (slurm:JOB_NAME,
    docker:NAME, podman:NAME, pod:NAMESPACE/NAME), as a [runs.X] table's keys, checked as the config checks them."""
    from cockpit.config import Checker
    from cockpit.errors import ConfigError
    from cockpit.where.placement import parse_placement

    text = text.strip()
    if not text:
        return {}, None
    if text.startswith("/"):
        return ({"log": text}, None) if not any(c.isspace() for c in text) else (None, f"'{text}' has a space: give the log's path")
    form, sep, name = text.partition(":")
    if not sep or form not in TRAINER_FORMS:
        return None, (f"'{text}' is neither a log's absolute path nor slurm:JOB_NAME, docker:NAME, podman:NAME or "
                      "pod:NAMESPACE/NAME")
    table = {TRAINER_FORMS[form]: name, **({"container_engine": "podman"} if form == "podman" else {})}
    try:
        parse_placement(Checker("the answer", ""), ("runs", "train"), table)
    except ConfigError as exc:
        return None, exc.detail
    return table, None


def depth_list(text: str):
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None, f"'{text}' is not a list of positive whole numbers (e.g. 16,10,5)"
    return [int(p) for p in parts], None


def local_gpus() -> bool:
    """Whether this machine has an NVIDIA GPU the cockpit could watch (its driver's devices or nvidia-smi)."""
    import glob
    import shutil

    return bool(glob.glob("/dev/nvidia[0-9]*")) or shutil.which("nvidia-smi") is not None


def questionnaire(ask: Ask = _ask_stdin, here_has_gpus: bool | None = None) -> dict:
    """The answers, each checked as it is given; nothing is written until every answer is good.  This machine
    is one of the hosts only where it has GPUs (a jump box's would be a driver error for ever)."""
    here = local_gpus() if here_has_gpus is None else here_has_gpus
    answers: dict = {"hosts": [], "here": here}
    print("A few questions; Enter keeps the default in brackets.", file=sys.stderr)
    if here:
        count = ask_until(ask, "How many GPU hosts (0 = only this machine)", "1", whole(0, 64))
    else:
        print("This machine has no NVIDIA GPU (no nvidia-smi, no /dev/nvidia*): the config names the GPU hosts it reaches "
              "over SSH.", file=sys.stderr)
        count = ask_until(ask, "How many GPU hosts", "1", whole(1, 64))
    taken = {"here"}
    for number in range(count):
        name = ask_until(ask, f"Host {number + 1}: a short name", "gpu-server" if number == 0 else f"host{number + 1}",
                         host_name(taken))
        taken.add(name)
        address = ask_until(ask, f"  {name}: address (IP, DNS name or ~/.ssh/config alias)", name, word("a host address"))
        user = ask_until(ask, f"  {name}: SSH user (empty: from ~/.ssh/config)", "", word("a user name", empty_ok=True, forbid="@"))
        port = ask_until(ask, f"  {name}: SSH port (empty: 22 or ~/.ssh/config)", "", whole(1, 65535, empty_ok=True))
        role = ask_until(ask, f"  {name}: role (serving or training)", "serving" if number == 0 else "training",
                         one_of(("serving", "training")))
        trainer = ask_until(ask, f"  {name}: its trainer, to watch (its log's absolute path, or slurm:JOB_NAME, docker:NAME, podman:NAME, "
                            "pod:NAMESPACE/NAME; empty: none)", "", trainer_place) if role == "training" else {}
        answers["hosts"].append({"name": name, "address": address, "user": user, "port": port, "role": role, "trainer": trainer})
    serving = [h["name"] for h in answers["hosts"] if h["role"] == "serving"]
    answers["serving"] = serving[0] if serving else None
    if answers["serving"]:
        answers["model"] = ask_until(ask, "Target model path on the serving host", "/models/Llama-3.1-8B-Instruct", word("a path"))
        answers["draft"] = ask_until(ask, "EAGLE-3 draft path on the serving host", "/ckpt/eagle3", word("a path"))
        answers["tp"] = ask_until(ask, "Tensor parallel size", "8", whole(1, 1024))
        answers["depths"] = ask_until(ask, "Depths to benchmark (draft steps of a topk-1 chain, as vLLM's num_speculative_tokens; "
                                      "comma-separated)", "16,10,5", depth_list)
    return answers


def render_config(answers: dict) -> str:
    lines = ["# cockpit config, written by `cockpit init`. Reference: README.md; `cockpit init --example` prints an annotated one.", ""]
    lines += ["[telemetry]", "interval_ms = 1000          # one nvidia-smi line per GPU per second, over one SSH connection", ""]
    if answers.get("here", True):
        lines += ["[hosts.here]", "local = true                # this machine", ""]
    else:
        lines += ["# This machine had no NVIDIA GPU when this was written (a jump box): it is not a host here.", ""]
    for host in answers["hosts"]:
        lines.append(f"[hosts.{host['name']}]")
        lines.append(f"address = {_toml_string(host['address'])}   # an IP, a DNS name or an ~/.ssh/config alias")
        if host["user"]:
            lines.append(f"user = {_toml_string(host['user'])}")
        if host["port"]:
            lines.append(f"port = {int(host['port'])}")
        lines.append(f"roles = [{_toml_string(host['role'])}]")
        lines.append("")
    for host in answers["hosts"]:
        if host.get("trainer"):
            lines += [f"[runs.train-{host['name']}]", f"host = {_toml_string(host['name'])}",
                      *(f"{key} = {_toml_string(value)}" for key, value in host["trainer"].items()),
                      "# output_dir = \"/ckpt/run\"   # its checkpoints and runs/ TensorBoard events, judged as they are written", ""]
    serving = answers.get("serving")
    if serving:
        depths = answers["depths"]
        first = depths[0]
        lines += [
            "# The deployment as a checklist: each step is blocked until the ones before it passed.",
            "[runbook]", 'name = "deploy"', "",
            "[[runbook.steps]]", 'name = "gpus-clean"', 'kind = "gpu_clean"        # every GPU of the launch host, and no compute process',
            f"host = {_toml_string(serving)}", "",
            "[[runbook.steps]]", 'name = "draft-ready"', 'kind = "drafter_check"    # headers only; offers the layers.0. -> midlayer. fix',
            f"host = {_toml_string(serving)}", f"path = {_toml_string(answers['draft'])}", "",
            "[[runbook.steps]]", 'name = "launch"', 'kind = "serve_launch"    # flags checked against the host\'s own SGLang first',
            f"host = {_toml_string(serving)}", f"model_path = {_toml_string(answers['model'])}",
            f"draft_path = {_toml_string(answers['draft'])}", f"depth = {first}                 # steps of a topk-1 chain: {first + 1} draft tokens", f"tp = {answers['tp']}", "",
            "[[runbook.steps]]", 'name = "ready"', 'kind = "serve_ready"', f"host = {_toml_string(serving)}", "",
            "[bench]", 'launch_step = "launch"', f"depths = [{', '.join(map(str, depths))}]        # steps of topk-1 chains; a baseline is measured too", "concurrency = [1, 8]", "repeats = 3", "",
        ]
    return "\n".join(lines)


EXAMPLES = {"deployment": "deployment.toml", "two-node": "two-node.toml"}


def example_text(name: str = "deployment") -> str:
    """An annotated example config shipped with the cockpit: the story's deployment, or the same
    drafter served over two nodes (a launch group)."""
    from cockpit.resources import sample

    return sample(EXAMPLES[name]).read_text(encoding="utf-8")


def write_text(path: Path, text: str, force: bool = False) -> Path:
    """Write a config only when it passes `cockpit config check` whole (what we write must load)."""
    from cockpit.context import check_config

    check_config(parse_config(text, str(path)))
    if path.exists() and not force:
        raise CockpitError(f"{path} exists: pass --force to replace it (it is not merged)")
    atomic_write(path, text)
    return path


def write_config(path: Path, answers: dict, force: bool = False) -> Path:
    return write_text(path, render_config(answers), force)
