"""What the user meant by a flag SGLang does not know.

First a table of names users carry over from vLLM and from older SGLang versions (with the value
translated where the meaning maps, e.g. `--num-speculative-tokens K` is steps K, topk 1, draft
tokens K+1), then a token-aware similarity over the schema: words in common count more than edit
distance, and a few synonyms (depth ~ steps) bridge the vocabularies.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from cockpit.sglang.schema import FlagSchema


@dataclass(frozen=True)
class Suggestion:
    text: str  # what to write instead, e.g. "--speculative-num-steps 16 --speculative-eagle-topk 1 ..."
    replacement: tuple[str, ...] | None  # argv words that replace the bad flag and its value, when known
    note: str = ""


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _depth_flags(steps: int) -> tuple[str, ...]:
    return ("--speculative-num-steps", str(steps), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(steps + 1))


def _num_speculative_tokens(value: str | None, schema: FlagSchema | None) -> Suggestion:
    k = _int(value)
    if k is None:
        return Suggestion("--speculative-num-steps K --speculative-eagle-topk 1 --speculative-num-draft-tokens K+1", None,
                          "vLLM's num_speculative_tokens K is a chain of K steps in SGLang")
    words = _depth_flags(k)
    return Suggestion(" ".join(words), words, f"vLLM's {k} speculative tokens = {k} steps of a topk-1 chain, {k + 1} draft tokens")


def _speculative_config(value: str | None, schema: FlagSchema | None) -> Suggestion:
    try:
        data = json.loads(value or "")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    words: list[str] = []
    method = str(data.get("method", "")).lower()
    if method in ("eagle3", "eagle"):
        words += ["--speculative-algorithm", method.upper()]
    if data.get("model"):
        words += ["--speculative-draft-model-path", str(data["model"])]
    k = _int(str(data.get("num_speculative_tokens"))) if data.get("num_speculative_tokens") is not None else None
    if k is not None:
        words += list(_depth_flags(k))
    if not words:
        return Suggestion("--speculative-algorithm EAGLE3 --speculative-draft-model-path PATH --speculative-num-steps K "
                          "--speculative-eagle-topk 1 --speculative-num-draft-tokens K+1", None, "SGLang takes separate flags")
    return Suggestion(" ".join(words), tuple(words), "vLLM's --speculative-config as SGLang flags")


def _rename(new: str, note: str = ""):
    def build(value: str | None, schema: FlagSchema | None) -> Suggestion:
        words = (new,) + ((value,) if value is not None else ())
        return Suggestion(" ".join(words), words, note)

    return build


# Names from other engines and older versions -> builder(value) of the SGLang form.
KNOWN = {
    "--num-speculative-tokens": _num_speculative_tokens,
    "--speculative-config": _speculative_config,
    "--speculative-model": _rename("--speculative-draft-model-path", "vLLM's name"),
    "--speculative-draft": _rename("--speculative-draft-model-path", "worked as a prefix in 0.4.x, ambiguous from 0.5.4"),
    "--gpu-memory-utilization": _rename("--mem-fraction-static", "vLLM's name; SGLang's fraction covers weights and KV cache only: start lower (0.8)"),
    "--max-model-len": _rename("--context-length", "vLLM's name"),
    "--max-num-seqs": _rename("--max-running-requests", "vLLM's name"),
    "--enforce-eager": _rename("--disable-cuda-graph", "vLLM's name"),
    "-tp": _rename("--tp-size", "SGLang has no -tp; --tp (a prefix) or --tp-size"),
    "--tensor-parallel": _rename("--tp-size"),
    "--served-model-name": _rename("--served-model-name"),
}

SYNONYMS = {
    "depth": "steps", "step": "steps", "len": "length", "length": "length", "seqs": "requests", "seq": "requests",
    "k": "topk", "top": "topk", "tokens": "tokens", "token": "tokens", "mem": "memory", "gpu": "memory",
    "utilization": "fraction", "util": "fraction", "draft": "draft", "model": "model", "eagle": "eagle",
    "tp": "tp", "tensor": "tp", "parallel": "size", "num": "num", "n": "num", "spec": "speculative",
    "speculation": "speculative", "algo": "algorithm", "method": "algorithm",
}


def _tokens(option: str) -> list[str]:
    words = option.lstrip("-").replace("_", "-").lower().split("-")
    return [SYNONYMS.get(w, w) for w in words if w]


def similarity(wrong: str, candidate: str) -> float:
    a, b = _tokens(wrong), _tokens(candidate)
    if not a or not b:
        return 0.0
    common = len(set(a) & set(b))
    overlap = common / len(set(a) | set(b))
    covered = common / len(set(a))  # how much of what the user wrote is in the candidate
    edit = difflib.SequenceMatcher(None, "-".join(a), "-".join(b)).ratio()
    return 0.45 * covered + 0.3 * overlap + 0.25 * edit


def _token_score(a: set[str], b: set[str]) -> float:
    common = len(a & b)
    return 0.45 * common / len(a) + 0.3 * common / len(a | b) if a and b else 0.0


def similar_flags(wrong: str, schema: FlagSchema | None, limit: int = 3) -> list[str]:
    """Schema flags ranked by similarity.  The cheap word-overlap score picks a shortlist first;
    the edit-distance part (difflib, the costly one) is computed for the shortlist only."""
    if schema is None:
        return []
    mine = set(_tokens(wrong))
    wrong_joined = "-".join(_tokens(wrong))
    cheap = []
    for flag in schema.flags:
        for option in (flag.name, *flag.aliases):
            theirs = set(_tokens(option))
            quick = difflib.SequenceMatcher(None, wrong_joined, "-".join(_tokens(option))).real_quick_ratio()
            cheap.append((_token_score(mine, theirs) + 0.25 * quick, option, flag.name))
    cheap.sort(key=lambda item: -item[0])
    best: dict[str, float] = {}
    for _, option, name in cheap[:40]:
        score = similarity(wrong, option)
        if score > best.get(name, -1.0):
            best[name] = score
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return [name for name, score in ranked[:limit] if score >= 0.35]


def suggest(flag: str, value: str | None, schema: FlagSchema | None) -> list[Suggestion]:
    """Ranked fixes for an unknown flag (with the value the user gave it, if any)."""
    out: list[Suggestion] = []
    normalised = flag.replace("_", "-")
    if flag in KNOWN:
        out.append(KNOWN[flag](value, schema))
    elif normalised != flag and (schema is None or schema.get(normalised)):
        words = (normalised,) + ((value,) if value is not None else ())
        out.append(Suggestion(" ".join(words), words, "SGLang does not turn '_' into '-' in flag names"))
    for name in similar_flags(flag, schema):
        if any(s.text.split(" ")[0] == name for s in out):
            continue
        takes_value = schema is not None and schema.get(name) is not None and schema.get(name).takes_value
        words = (name,) + ((value,) if value is not None and takes_value else ())
        out.append(Suggestion(" ".join(words), words))
    return out


def rank_values(wrong: str, choices: tuple[str, ...]) -> list[str]:
    """Allowed values, the most likely meant first (case and punctuation forgiven)."""
    def key(choice: str) -> float:
        a = "".join(ch for ch in wrong.lower() if ch.isalnum())
        b = "".join(ch for ch in choice.lower() if ch.isalnum())
        return 1.0 if a == b else difflib.SequenceMatcher(None, a, b).ratio()

    return sorted(choices, key=lambda c: -key(c))


NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen".split())}


def numeric_guess(value: str) -> str | None:
    text = value.strip().lower()
    if text in NUMBER_WORDS:
        return str(NUMBER_WORDS[text])
    cleaned = text.replace(",", "").replace("_", "")
    for cast in (int, float):
        try:
            return str(cast(cleaned))
        except ValueError:
            continue
    return None
