"""vLLM's `--speculative-config`: read as the version reads it, checked as the version checks it, and
the old separate flags turned into the JSON that replaced them (vllm-facts §1.2-1.4, §2)."""

from __future__ import annotations

import ast
import json

from cockpit.diagnosis import Diagnosis
from cockpit.serving.suggest import most_likely, rank_values
from cockpit.vllm.versions import ENGINE_FILLED, INT_KEYS, LEGACY_FLAGS, SWITCHES, Era, era, label

FLAG = "--speculative-config"


def dumps(config: dict) -> str:
    """The JSON a user writes on a command line (compact, key order kept)."""
    return json.dumps(config, separators=(", ", ": "))


def parse(text: str, chosen: Era) -> tuple[dict | None, str | None]:
    """(the config, None) or (None, why the version refuses it, in its own words)."""
    try:
        value = ast.literal_eval(text) if chosen.json_parser == "literal_eval" else json.loads(text)
    except (ValueError, SyntaxError) as exc:
        if chosen.json_parser == "literal_eval":
            hint = " (vLLM 0.8.2 reads it as a Python literal: True/False/None, not true/false/null)" \
                if any(w in text for w in ("true", "false", "null")) else ""
            return None, f"{type(exc).__name__} while the engine reads --speculative-config{hint}"
        said = ("invalid loads value: " if chosen.name.startswith("0.8") else "Value ") + repr(text)
        return None, f"argument {FLAG}: {said} is not JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"argument {FLAG}: a JSON object is needed ({{\"method\": ...}}), got {type(value).__name__}"
    return value, None


def check(text: str, version: str | None = None, draft_exists: bool | None = None, rules: Era | None = None) -> list[Diagnosis]:
    """Every problem of one `--speculative-config` value for `version` (None: the newest read); `rules`: the host's own
    vLLM's, read there (vllm/hostschema.py), instead of the recorded ones."""
    chosen = rules or era(version)
    out: list[Diagnosis] = []
    if not chosen.json_config:
        return [Diagnosis("unrecognized_argument", f"{label(version, chosen)} has no {FLAG}: it takes the separate flags "
                          "--speculative-model, --num-speculative-tokens, ...", FLAG, text, tuple(legacy_words(text)),
                          replacement=tuple(legacy_words(text)) or None)]
    config, problem = parse(text, chosen)
    if config is None:
        return [Diagnosis("invalid_json", problem or "not a JSON object", FLAG, text, ('{"method": "eagle3", "model": "DRAFT", "num_speculative_tokens": N}',))]
    for key in config:
        if key in ENGINE_FILLED:
            out.append(Diagnosis("engine_filled_key", f"{FLAG}: '{key}' is filled in by the engine; remove it", FLAG, key))
        elif key == "tensor_parallel_size":
            out.append(Diagnosis("unknown_key", f"{FLAG}: 'tensor_parallel_size' is not a valid argument in the speculative_config; "
                                 "use 'draft_tensor_parallel_size'", FLAG, key, ("draft_tensor_parallel_size",),
                                 replacement=(FLAG, dumps(_renamed(config, key, "draft_tensor_parallel_size") or config))))
        elif key not in chosen.keys:
            meant = most_likely(key, tuple(sorted(chosen.keys)))
            fixed = _renamed(config, key, meant) if meant else None
            what = {"typeerror": f"TypeError: SpeculativeConfig.__init__() got an unexpected keyword argument '{key}'",
                    "ignored": "ignored without a word (so the setting never applies)",
                    "forbidden": f"'{key}' / Unexpected keyword argument (a validation error)"}[chosen.unknown_keys]
            out.append(Diagnosis("unknown_key", f"{FLAG}: {label(version, chosen)} has no key '{key}': {what}"
                                 + (f"; did you mean '{meant}'?" if meant else ""), FLAG, key, (meant,) if meant else (),
                                 replacement=(FLAG, dumps(fixed)) if fixed else None,
                                 severity="warning" if chosen.unknown_keys == "ignored" else "error"))
    method = config.get("method")
    if method is None:
        out.append(Diagnosis("method_missing", f"{FLAG}: no 'method': vLLM guesses it from the draft's path"
                             + (" (0.8.5 takes an 'eagle3-' path for EAGLE-1)" if chosen.name.startswith("0.8.5") else "")
                             + '; write "method": "eagle3"', FLAG, None, ('"method": "eagle3"',),
                             replacement=(FLAG, dumps({"method": "eagle3", **config})), severity="warning"))
    elif chosen.methods is not None and method not in chosen.methods:
        meant = most_likely(str(method), chosen.methods)
        words = ("Input should be " + ", ".join(f"'{m}'" for m in chosen.methods) if chosen.unknown_keys == "ignored"
                 else f"Unknown speculative method '{method}'")
        # 0.34 on: plugins register methods of their own; only a near miss of a built-in one is surely wrong
        unsure = chosen.unknown_keys == "forbidden" and not meant
        out.append(Diagnosis("invalid_choice", f"{FLAG}: method '{method}' is not one of {label(version, chosen)}'s ({words})"
                             + (f"; did you mean '{meant}'?" if meant else "")
                             + ("; unless a vLLM plugin registers it" if unsure else ""), FLAG, str(method),
                             tuple(rank_values(str(method), chosen.methods)),
                             replacement=(FLAG, dumps({**config, "method": meant})) if meant else None,
                             severity="warning" if unsure else "error"))
    elif chosen.methods is None and method == "eagle3" and not chosen.name.startswith("0.8.5"):
        out.append(Diagnosis("invalid_choice", f"{FLAG}: {label(version, chosen)} has no EAGLE-3 ('eagle3' came in 0.8.5)", FLAG, "eagle3",
                             ("upgrade vLLM to 0.8.5 or later",)))
    tokens = config.get("num_speculative_tokens")
    if tokens is None:
        if method in ("eagle", "eagle3"):
            said = {"0.10.2-0.33": "TypeError: 'NoneType' object cannot be interpreted as an integer",
                    ">=0.34.0": "A speculative model was provided, but `num_speculative_tokens` was not provided"}.get(
                chosen.name, "num_speculative_tokens must be provided with speculative model")
            meant = next((k for k in config if k not in chosen.keys and isinstance(config[k], int)
                          and most_likely(k, ("num_speculative_tokens",)) == "num_speculative_tokens"), None)
            fixed = _renamed(config, meant, "num_speculative_tokens") if meant else None
            out.append(Diagnosis("missing_value", f"{FLAG}: no num_speculative_tokens (the depth of the chain): "
                                 f"{label(version, chosen)} stops with `{said}`" + (f"; '{meant}' is it misspelt" if meant else ""),
                                 FLAG, None, ('"num_speculative_tokens": N',),
                                 replacement=(FLAG, dumps(fixed)) if fixed else None))
    elif isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
        out.append(Diagnosis("invalid_value", f"{FLAG}: num_speculative_tokens must be a positive integer, got {tokens!r}",
                             FLAG, str(tokens), ("a whole number of draft tokens, e.g. 3",)))
    draft_tp = config.get("draft_tensor_parallel_size")
    if draft_tp is not None and (isinstance(draft_tp, bool) or not isinstance(draft_tp, int) or draft_tp <= 0):
        out.append(Diagnosis("invalid_value", f"{FLAG}: draft_tensor_parallel_size must be a positive integer, got {draft_tp!r}",
                             FLAG, str(draft_tp)))
    if method in ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator") and not config.get("model"):
        out.append(Diagnosis("missing_draft", f"{FLAG}: method {method} needs \"model\": the draft's path", FLAG, None,
                             ('"model": "/path/to/draft"',)))
    elif draft_exists is False:
        out.append(Diagnosis("draft_not_found", f"{FLAG}: the draft {config.get('model')} is not there (or not readable)",
                             FLAG, str(config.get("model"))))
    return out


def _renamed(config: dict, old: str, new: str | None) -> dict | None:
    if not new:
        return None
    return {(new if k == old else k): v for k, v in config.items()}


def legacy_config(argv: list[str]) -> tuple[dict, list[str]]:
    """The old separate flags of `argv` as one --speculative-config dict, and argv without them."""
    config: dict = {}
    rest: list[str] = []
    position = 0
    while position < len(argv):
        word = argv[position]
        position += 1
        head, _, inline = word.partition("=")
        key = LEGACY_FLAGS.get(head.replace("_", "-") if head.startswith("--") else head)
        if key is None:
            rest.append(word)
            continue
        if head in SWITCHES:
            config[key] = True
            continue
        value = inline if "=" in word else (argv[position] if position < len(argv) else "")
        if "=" not in word:
            position += 1
        config[key] = int(value) if key in INT_KEYS and value.lstrip("-").isdigit() else value
    if config.get("model") and "method" not in config:
        # the cockpit's drafts are EAGLE-3; a path that names EAGLE but not EAGLE-3 is an EAGLE-1 draft
        path = str(config["model"]).lower().replace("-", "").replace("_", "")
        config = {"method": "eagle" if "eagle" in path and "eagle3" not in path else "eagle3", **config}
    return config, rest


def legacy_words(text: str) -> list[str]:
    """A --speculative-config value as the separate flags of vLLM <= 0.8.2 (for an old vLLM)."""
    config, problem = parse(text, era(None))
    if config is None:
        return []
    back = {v: k for k, v in LEGACY_FLAGS.items() if k.startswith("--")}
    words: list[str] = []
    for key, value in config.items():
        flag = back.get(key)
        if flag is None:
            continue
        words += [flag] if flag in SWITCHES else [flag, str(value)]
    return words
