"""A vLLM server's command line, built from a launch step's parameters, and its depth changed for one
run of a sweep: depth N (a topk-1 chain of N steps, serving/depth.py) is `num_speculative_tokens` N."""

from __future__ import annotations

import json

from cockpit.serving.depth import DepthConfig
from cockpit.vllm.specconfig import dumps

SPEC_FLAGS = ("--speculative-config", "-sc", "--speculative_config")


def vllm_argv(python: str, model_path: str, draft_path: str | None, depth: DepthConfig | None, tp: int | None, port: int,
              bind: str | None, extra_args: list[str] | None) -> list[str]:
    """`vllm serve MODEL ...` as the interpreter runs it (`python -m vllm.entrypoints.cli.main serve`: the
    host's `python` setting picks the environment, as it does for SGLang); never a shell string."""
    argv = [python, "-m", "vllm.entrypoints.cli.main", "serve", model_path]
    if tp:
        argv += ["--tensor-parallel-size", str(tp)]
    argv += ["--port", str(port)]
    if bind:
        argv += ["--host", bind]
    if depth is not None and depth.speculative:
        config = {"method": "eagle3", "num_speculative_tokens": depth.steps}
        if draft_path:
            config = {"method": "eagle3", "model": draft_path, "num_speculative_tokens": depth.steps}
        argv += ["--speculative-config", dumps(config)]
    return argv + list(extra_args or [])


def _split(argv: list[str]) -> tuple[list[str], dict | None]:
    """argv without its speculative config, and that config (None: none, or not JSON)."""
    out, config, skip = [], None, False
    for index, word in enumerate(argv):
        if skip:
            skip = False
            continue
        head, sep, value = word.partition("=")
        if head in SPEC_FLAGS:
            if not sep:
                value = argv[index + 1] if index + 1 < len(argv) else ""
                skip = True
            try:
                parsed = json.loads(value)
                config = parsed if isinstance(parsed, dict) else config
            except ValueError:
                pass
            continue
        out.append(word)
    return out, config


def depth_of_argv(argv: list[str]) -> DepthConfig | None:
    """The configuration a vLLM command line runs: its num_speculative_tokens as a chain; none: the baseline."""
    _, config = _split(argv)
    if config is None:
        return DepthConfig()
    tokens = config.get("num_speculative_tokens")
    return DepthConfig.chain(tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None


def vllm_with_draft(argv: list[str], draft_path: str) -> list[str]:
    """The command line with its speculative config's draft model replaced (every other key kept); one without a
    speculative config is left as it is (it names no method or depth to serve a draft with)."""
    rest, config = _split(argv)
    if config is None:
        return argv
    return rest + ["--speculative-config", dumps({**config, "model": draft_path})]


def vllm_with_depth(argv: list[str], depth: DepthConfig) -> list[str]:
    """The command line with its depth replaced (every other key of its speculative config kept); a
    baseline without speculation has no --speculative-config at all."""
    rest, config = _split(argv)
    if not depth.speculative:
        return rest
    return rest + ["--speculative-config", dumps({"method": "eagle3", **(config or {}), "num_speculative_tokens": depth.steps})]
