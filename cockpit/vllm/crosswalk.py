"""The crosswalk: the one module that names both engines (SGLang's flags as data; SGLang's launcher
recognised through the engine registry, never by importing SGLang's package).  The same serving line in the other engine: an SGLang EAGLE-3 launch as the vLLM line that means the
same, and back (vllm-facts §5: a topk-1 chain of N steps in SGLang, N + 1 draft tokens, is vLLM's
`num_speculative_tokens` N; both verify N + 1 positions per step).

Only flags whose meaning is the same in both are translated; every other one is named in a note,
never silently dropped or guessed."""

from __future__ import annotations

import json

from cockpit.vllm.specconfig import dumps

# SGLang flag -> vLLM flag, where the meaning is the same
SAME = {
    "--port": "--port", "--host": "--host", "--tp-size": "--tensor-parallel-size", "--tp": "--tensor-parallel-size",
    "--tensor-parallel-size": "--tensor-parallel-size", "--dp-size": "--data-parallel-size", "--dp": "--data-parallel-size",
    "--context-length": "--max-model-len", "--dtype": "--dtype", "--served-model-name": "--served-model-name",
    "--trust-remote-code": "--trust-remote-code", "--revision": "--revision", "--quantization": "--quantization",
    "--max-running-requests": "--max-num-seqs", "--chat-template": "--chat-template", "--api-key": "--api-key",
    "--seed": "--seed", "--enable-metrics": None,  # vLLM always serves /metrics
}
SWITCH = {"--trust-remote-code", "--enable-metrics"}
SPEC = {"--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps", "--speculative-eagle-topk",
        "--speculative-num-draft-tokens", "--speculative-draft-model-revision"}
NOT_SAME = {"--mem-fraction-static": "--gpu-memory-utilization (SGLang's fraction covers weights and KV cache, vLLM's the whole "
            "GPU: not the same number)"}


def _sglang_args(argv: list[str]) -> list[str]:
    """SGLang's own arguments of a line (its launcher dropped, as its engine reads it)."""
    from cockpit.serving.engines import engine

    return engine("sglang").command_args(argv)


def _pairs(args: list[str]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    position = 0
    while position < len(args):
        word = args[position]
        position += 1
        if not word.startswith("-"):
            out.append(("", word))
            continue
        head, sep, inline = word.partition("=")
        if sep:
            out.append((head, inline))
        elif head in SWITCH or position >= len(args) or args[position].startswith("--"):
            out.append((head, None))
        else:
            out.append((head, args[position]))
            position += 1
    return out


def sglang_to_vllm(args: list[str]) -> tuple[list[str], list[str]]:
    """An SGLang command line (with or without `python -m sglang.launch_server`) as `vllm serve ...`,
    and notes on what was not translated."""
    pairs = _pairs(_sglang_args(args))
    model, spec, out, notes = "MODEL", {}, [], []
    for flag, value in pairs:
        if flag in ("--model-path", "--model"):
            model = value or model
        elif flag in SPEC:
            spec[flag] = value
        elif flag in ("--num-speculative-tokens",):
            spec["--speculative-num-steps"] = value  # the story's flag: vLLM's depth, meant for SGLang
        elif flag in SAME:
            target = SAME[flag]
            if target is None:
                continue
            out += [target] if value is None else [target, value]
        elif flag in NOT_SAME:
            notes.append(f"{flag} {value}: set {NOT_SAME[flag]}")
        elif flag:
            notes.append(f"{flag}{' ' + value if value is not None else ''} not translated")
    algorithm = (spec.get("--speculative-algorithm") or "").upper()
    if spec:
        steps = spec.get("--speculative-num-steps")
        topk = spec.get("--speculative-eagle-topk")
        draft = spec.get("--speculative-num-draft-tokens")
        if steps is None and draft and draft.isdigit():
            steps = str(int(draft) - 1)
        config: dict = {"method": {"EAGLE3": "eagle3", "EAGLE": "eagle", "NEXTN": "mtp"}.get(algorithm, "eagle3")}
        if spec.get("--speculative-draft-model-path"):
            config["model"] = spec["--speculative-draft-model-path"]
        if steps and steps.isdigit():
            config["num_speculative_tokens"] = int(steps)
        if topk and topk != "1":
            notes.append(f"topk {topk} is a tree: vLLM's eagle3 drafts a chain (num_speculative_tokens {steps} is its depth)")
        out += ["--speculative-config", dumps(config)]
    return ["vllm", "serve", model, *out], notes


def vllm_to_sglang(args: list[str], keep_unknown: bool = False) -> tuple[list[str], list[str]]:
    """A vLLM command line as `python -m sglang.launch_server ...`, and notes on what was not translated
    (`keep_unknown`: a line that mixes both engines' flags keeps the ones that are not vLLM's as they are)."""
    from cockpit.vllm.argv import normalise, strip_launcher
    from cockpit.vllm.specconfig import legacy_config

    rest, model, _ = strip_launcher(args)
    config, rest = legacy_config(normalise(rest))
    back = {v: k for k, v in SAME.items() if v and k not in ("--tp", "--dp", "--tensor-parallel-size")}
    out, notes = [], []
    for flag, value in _pairs(rest):
        if flag in ("--model",):
            model = value
        elif flag in ("--speculative-config", "-sc"):
            try:
                config = {**config, **json.loads(value or "{}")}
            except ValueError:
                notes.append(f"--speculative-config {value} is not JSON: not translated")
        elif flag in back:
            out += [back[flag]] if value is None else [back[flag], value]
        elif flag == "--gpu-memory-utilization":
            notes.append(f"--gpu-memory-utilization {value}: set --mem-fraction-static (not the same number: SGLang's covers "
                         "weights and KV cache)")
        elif flag and keep_unknown and flag != "--model-path":
            out += [flag] if value is None else [flag, value]
        elif flag == "--model-path":
            model = value
        elif flag:
            notes.append(f"{flag}{' ' + value if value is not None else ''} not translated")
    line = ["python", "-m", "sglang.launch_server", "--model-path", model or "MODEL", *out]
    given = set(out)

    def add(*words: str) -> None:
        if words[0] not in given:
            line.extend(words)

    if config:
        method = str(config.get("method") or "eagle3")
        algorithm = {"eagle3": "EAGLE3", "eagle": "EAGLE", "mtp": "NEXTN"}.get(method)
        if algorithm is None:
            notes.append(f"method {method} has no SGLang counterpart translated")
        else:
            add("--speculative-algorithm", algorithm)
            if config.get("model"):
                add("--speculative-draft-model-path", str(config["model"]))
            n = config.get("num_speculative_tokens")
            if isinstance(n, int) and n > 0:
                add("--speculative-num-steps", str(n))
                add("--speculative-eagle-topk", "1")
                add("--speculative-num-draft-tokens", str(n + 1))
    return line, notes


def other_engine_line(words: list[str]) -> dict | None:
    """An SGLang line that carries vLLM's speculative flags: the SGLang line that means the same."""
    from cockpit.vllm.versions import LEGACY_FLAGS

    theirs = [w.split("=", 1)[0] for w in words if w.split("=", 1)[0] in {*LEGACY_FLAGS, "--speculative-config", "-sc"}]
    if not theirs:
        return None
    line, notes = vllm_to_sglang(["vllm", "serve", *_sglang_args(words)], keep_unknown=True)
    return {"flags": theirs, "line": line, "notes": notes}
