"""Prompts for a benchmark: JSONL of chat messages, in a fixed order (shuffled by a seed when asked)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from cockpit.errors import CockpitError
from cockpit.resources import SAMPLE_PROMPTS, sample

SAMPLE_NAME = "the sample prompts shipped with the cockpit"


def load_prompts(path: str | Path | None = None, seed: int | None = None) -> list[list[dict]]:
    """The prompts of a JSONL file, or the shipped sample (CPython docstrings) when path is None."""
    source = Path(path) if path else sample(SAMPLE_PROMPTS)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CockpitError(f"{path or SAMPLE_NAME}: no such prompts file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CockpitError(f"{path or SAMPLE_NAME}: cannot read prompts ({exc})") from None
    path = path or SAMPLE_NAME
    prompts = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise CockpitError(f"{path}:{number}: not JSON ({exc})") from None
        messages = item.get("messages") if isinstance(item, dict) else item
        if (not isinstance(messages, list) or not messages
                or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)):
            raise CockpitError(f"{path}:{number}: expected {{\"messages\": [{{\"role\": ..., \"content\": ...}}, ...]}}")
        prompts.append(messages)
    if not prompts:
        raise CockpitError(f"{path}: holds no prompts")
    if seed is not None:
        random.Random(seed).shuffle(prompts)
    return prompts
