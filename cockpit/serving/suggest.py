"""What the user meant by a flag SGLang does not know.

First a table of names users carry over from vLLM and from older SGLang versions (with the value
translated where the meaning maps, e.g. `--num-speculative-tokens K` is steps K, topk 1, draft
tokens K+1), then a token-aware similarity over the schema: words in common count more than edit
distance, and a few synonyms (depth ~ steps) bridge the vocabularies.
"""

from __future__ import annotations

import difflib
import re
import json
from dataclasses import dataclass

from cockpit.serving.helpschema import FlagSchema
from cockpit.format import shell_words


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
    return Suggestion(shell_words(words), words, f"vLLM's {k} speculative tokens = {k} steps of a topk-1 chain, {k + 1} draft tokens")


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
    return Suggestion(shell_words(words), tuple(words), "vLLM's --speculative-config as SGLang flags")


def _rename(new: str, note: str = ""):
    def build(value: str | None, schema: FlagSchema | None) -> Suggestion:
        words = (new,) + ((value,) if value is not None else ())
        return Suggestion(shell_words(words), words, note)

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


# Words that mean opposite things in flag names: a flag about GPU memory is never the one meant for host memory.
CONFLICTS = ({"gpu", "host"}, {"gpu", "cpu"}, {"prefill", "decode"}, {"min", "max"}, {"draft", "target"})


def _conflicting(wrong: str, candidate: str) -> bool:
    a = set(wrong.lstrip("-").replace("_", "-").lower().split("-"))
    b = set(candidate.lstrip("-").replace("_", "-").lower().split("-"))
    return any(len(pair & a) == 1 and len(pair & b) == 1 and pair & a != pair & b for pair in CONFLICTS)


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
    ranked = [(name, score) for name, score in sorted(best.items(), key=lambda item: (-item[1], item[0]))
              if not _conflicting(wrong, name)]
    top = ranked[0][1] if ranked else 0.0
    # close to the best only: a weak runner-up is noise, not a suggestion
    return [name for name, score in ranked[:limit] if score >= max(0.35, top - 0.2)]


def with_similar(out: list[Suggestion], flag: str, value: str | None, schema: FlagSchema | None,
                 underscore_note: str) -> list[Suggestion]:
    """An engine's own fixes for an unknown flag (`out`, its renames first), then what every engine offers: the flag
    written with '-' for '_' when the schema has it, then the closest of the schema's flags that could take the value
    given (a number is never offered to a path, a GPU id or a switch), each with that value; at most three."""
    out = list(out)
    normalised = flag.replace("_", "-")
    if not out and normalised != flag and (schema is None or schema.get(normalised)):
        words = (normalised,) + ((value,) if value is not None else ())
        out.append(Suggestion(shell_words(words), words, underscore_note))
    for name in similar_flags(flag, schema, limit=8):
        if len(out) >= 3:
            break
        if any(s.text.split(" ")[0] == name for s in out):
            continue
        target = schema.get(name) if schema is not None else None
        if target is None or not target.accepts(value):
            continue
        words = (name,) + ((value,) if value is not None else ())
        out.append(Suggestion(shell_words(words), words))
    return out


def suggest(flag: str, value: str | None, schema: FlagSchema | None) -> list[Suggestion]:
    """SGLang's ranked fixes for an unknown flag (with the value the user gave it, if any): the names users carry over
    from vLLM and older SGLang versions (KNOWN), then with_similar."""
    known = [KNOWN[flag](value, schema)] if flag in KNOWN else []
    return with_similar(known, flag, value, schema, "SGLang does not turn '_' into '-' in flag names")


def article(engine: str) -> str:
    """'an SGLang', 'a vLLM' (as the name is said)."""
    return ("an " if engine[:1].upper() in "AEFHILMNORSX" else "a ") + engine


def _alnum(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


# What users write for a value, by what they mean (checked against the version's own choices).
VALUE_ALIASES = {
    "bf16": "bfloat16", "fp16": "float16", "f16": "float16", "half": "float16", "fp32": "float32", "f32": "float32",
    "mtp": "NEXTN", "nextn": "NEXTN", "deepseekmtp": "NEXTN", "eagle2": "EAGLE", "lookahead": "NGRAM",
    "flashattn": "fa3", "flashattention": "fa3", "flashattention3": "fa3", "fa": "fa3", "flashattn3": "fa3",
    "sdpa": "torch_native", "torch": "torch_native", "safetensor": "safetensors", "pytorch": "pt", "bin": "pt",
    "fp8": "fp8_e4m3", "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2",
}


def rank_values(wrong: str, choices: tuple[str, ...]) -> list[str]:
    """Allowed values, the one the user most likely meant first: the same word in another case or
    punctuation, a known alias (bf16 for bfloat16, mtp for NEXTN, flash-attn for fa3), a choice the
    value starts or ends, then the closest spelling."""
    a = _alnum(wrong)
    alias = VALUE_ALIASES.get(a)

    numbered = re.match(r"^(.*?[a-z])(\d+)$", a)

    def key(choice: str) -> tuple[float, float]:
        b = _alnum(choice)
        if a == b:
            return (4.0, 0.0)
        if alias is not None and _alnum(alias) == b:
            return (3.0, 0.0)
        sibling = re.match(r"^(.*?[a-z])(\d+)$", b) if numbered else None
        if sibling and numbered and sibling.group(1) == numbered.group(1):
            # a versioned name (EAGLE4): its nearest numbered sibling (EAGLE3) before the bare stem (EAGLE)
            return (2.5, -abs(int(sibling.group(2)) - int(numbered.group(2))))
        if a and b and (b.startswith(a) or a.startswith(b)):
            return (2.0, -abs(len(a) - len(b)))
        return (1.0, difflib.SequenceMatcher(None, a, b).ratio())

    return sorted(choices, key=lambda c: tuple(-k for k in key(c)))


def most_likely(wrong: str, choices: tuple[str, ...]) -> str | None:
    """The value the user meant, when one stands out (same word, an alias, a prefix, or a close
    spelling); None when nothing is close enough to say."""
    ranked = rank_values(wrong, choices)
    if not ranked:
        return None
    best = ranked[0]
    a, b = _alnum(wrong), _alnum(best)
    if a == b or VALUE_ALIASES.get(a) in choices or (a and b and (b.startswith(a) or a.startswith(b))):
        return best
    stem = re.match(r"^(.*?[a-z])\d+$", a)
    if stem and b.startswith(stem.group(1)) and b[len(stem.group(1)):].isdigit():
        return best  # a numbered sibling
    return best if difflib.SequenceMatcher(None, a, b).ratio() >= 0.6 else None


TYPE_WORDS = {"int": "an integer", "float": "a number"}


def type_words(kind: str) -> str:
    """'an integer', 'a number' (never 'an float')."""
    return TYPE_WORDS.get(kind, f"a value of type {kind}")


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
