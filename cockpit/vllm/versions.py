"""What each vLLM version takes for speculative decoding.

From 0.8.5 on, by each released minor's own facts (cockpit/vllm/data/versions.json, recorded from its wheel by
tests/fixtures/record/vllm_versions.py: its parser's flags, SpeculativeConfig's keys and methods, how it meets an
unknown key, a Python literal and a dotted flag, whether its mean acceptance length counts the bonus token); a
version not recorded is judged by the nearest recorded one (its own minor's, else the one before it) and says
which.  Before 0.8.5, by the eras read from the wheels 0.7.3, 0.8.0, 0.8.2 and 0.8.3 (vllm-facts §1.2-1.3)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from cockpit.serving.helpschema import FlagSchema

NEWEST_READ = "0.34.0"
READ = ("0.7.3", "0.8.0", "0.8.2", "0.8.3", "0.8.5", "0.10.2", "0.34.0")

# the old separate flags (up to 0.8.2) and the --speculative-config key each became (0.8.2's own translation)
LEGACY_FLAGS = {
    "--speculative-model": "model",
    "--num-speculative-tokens": "num_speculative_tokens",
    "--speculative-draft-tensor-parallel-size": "draft_tensor_parallel_size",
    "-spec-draft-tp": "draft_tensor_parallel_size",
    "--speculative-model-quantization": "quantization",
    "--speculative-max-model-len": "max_model_len",
    "--spec-decoding-acceptance-method": "acceptance_method",
    "--ngram-prompt-lookup-max": "prompt_lookup_max",
    "--ngram-prompt-lookup-min": "prompt_lookup_min",
    "--speculative-disable-by-batch-size": "disable_by_batch_size",
    "--disable-logprobs-during-spec-decoding": "disable_logprobs",
    "--speculative-disable-mqa-scorer": "disable_mqa_scorer",
}
SWITCHES = {"--disable-logprobs-during-spec-decoding", "--speculative-disable-mqa-scorer"}
# what vLLM checks of a value after parsing (its CacheConfig: 0 < gpu_memory_utilization <= 1): flag -> (low, high, low excluded)
RANGES = {"--gpu-memory-utilization": (0.0, 1.0, True)}
INT_KEYS = {"num_speculative_tokens", "draft_tensor_parallel_size", "max_model_len", "prompt_lookup_max", "prompt_lookup_min",
            "disable_by_batch_size"}

_BASE_KEYS = {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "quantization", "max_model_len",
              "revision", "code_revision", "prompt_lookup_max", "prompt_lookup_min"}
ENGINE_FILLED = {"target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config"}


@dataclass(frozen=True)
class Era:
    name: str
    first: tuple[int, ...]  # the first version of the era (as far as read)
    legacy_flags: bool  # the separate --speculative-model ... flags are accepted
    json_config: bool  # --speculative-config is accepted
    json_parser: str  # "none", "literal_eval" (0.8.2: a Python literal, JSON true/false/null fail), "json"
    keys: frozenset[str]
    methods: tuple[str, ...] | None  # None: any string passes the parser
    unknown_keys: str  # "typeerror" (stdlib dataclass), "ignored" (pydantic default), "forbidden" (extra=forbid)
    eagle3_targets: tuple[str, ...] | None  # model_type substrings EAGLE-3 accepts as a target (None: not checked by type)
    dotted: bool  # --speculative-config.KEY VALUE
    bonus_in_mean_length: bool  # the SpecDecoding line's mean acceptance length counts the bonus token


ERAS = (
    Era("<=0.8.0", (0,), True, False, "none", frozenset(), None, "typeerror", None, False, False),
    # 0.8.x: 0.8.5's SpeculativeConfig fields (its wheel's vllm/config.py), taken for 0.8.2-0.8.4 too
    Era("0.8.2", (0, 8, 2), True, True, "literal_eval", frozenset(_BASE_KEYS | {"acceptance_method", "posterior_threshold",
        "posterior_alpha", "disable_mqa_scorer", "disable_logprobs", "disable_by_batch_size", "disable_log_stats", "enable_chunked_prefill"}), None, "typeerror", None, False, False),
    Era("0.8.3-0.8.4", (0, 8, 3), False, True, "json", frozenset(_BASE_KEYS | {"acceptance_method", "posterior_threshold",
        "posterior_alpha", "disable_mqa_scorer", "disable_logprobs", "disable_by_batch_size", "disable_log_stats", "enable_chunked_prefill"}), None, "typeerror", None, False, False),
    Era("0.8.5-0.9", (0, 8, 5), False, True, "json", frozenset(_BASE_KEYS | {"acceptance_method", "posterior_threshold",
        "posterior_alpha", "disable_mqa_scorer", "disable_logprobs", "disable_by_batch_size", "disable_log_stats", "enable_chunked_prefill"}), None, "typeerror", ("llama",),
        False, False),
    # 0.10.2's and 0.34.0's keys: the init fields of SpeculativeConfig in each wheel (less those the engine fills)
    Era("0.10.2-0.33", (0, 10, 0), False, True, "json", frozenset(_BASE_KEYS | {"disable_logprobs", "disable_by_batch_size",
        "speculative_token_tree", "disable_log_stats", "enable_chunked_prefill"}),
        ("ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp", "ernie_mtp", "qwen3_next_mtp"),
        "ignored", ("llama", "qwen"), True, True),
    Era(">=0.34.0", (0, 34, 0), False, True, "json", frozenset(_BASE_KEYS | {
        "attention_backend", "disable_eagle_block_drop", "disable_lookahead_block_hashes", "draft_decode_context_parallel_size",
        "draft_lm_head_quantization", "draft_load_config", "draft_sample_method", "dspark_draft_topk", "enable_adaptive_verification",
        "enforce_eager", "fly_entropy_threshold", "fly_entropy_top_k", "fly_window_size", "index_share_for_mtp_iteration",
        "kv_cache_dtype", "moe_backend", "num_speculative_tokens_per_batch_size", "parallel_drafting", "rejection_sample_method",
        "speculator_options", "suffix_decoding_corpus_tokens", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
        "suffix_decoding_max_tree_depth", "suffix_decoding_min_token_prob", "synthetic_acceptance_length",
        "synthetic_acceptance_rates", "use_local_argmax_reduction", "xpress_topc"}),
        # 0.34.0's own list, as it printed it for an unknown method (tests/fixtures/vllm/bad_method_0.34.0.log); a plugin
        # may register more, and model-specific MTP names come and go: an unknown one is a warning unless it is a typo
        ("bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "deepseek_mtp", "dflash", "dots3_note_mtp", "draft_model", "dspark", "eagle",
         "eagle3", "ernie_mtp", "exaone4_5_mtp", "exaone_moe_mtp", "extract_hidden_states", "gemma4_mtp", "glm4_moe_lite_mtp",
         "glm4_moe_mtp", "glm5_next_mtp", "glm_ocr_mtp", "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp",
         "mimo_mtp", "mimo_v2_mtp", "minimax_m3_mtp", "mtp", "nemotron3_5_transcribe_mtp", "nemotron_h_mtp", "ngram", "ngram_gpu",
         "pangu_ultra_moe_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp", "step5_mtp", "suffix"),
        "forbidden", None, True, True),
)


def parse_version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def version_problem(text: str) -> str | None:
    """Why `text` is not a vLLM version (None: it is one): the same check as every version the config takes."""
    from cockpit.config import version_problem as problem

    return problem(text, "a vLLM version", "e.g. 0.10.2; `vllm --version` prints it")


def _hand_era(parsed: tuple[int, ...]) -> Era:
    chosen = ERAS[0]
    for candidate in ERAS:
        if parsed >= candidate.first:
            chosen = candidate
    return chosen


def _key(version: str) -> tuple[int, ...]:
    from cockpit.serving.releases import version_key

    return version_key(version) or ()


@lru_cache(maxsize=1)
def recorded_facts() -> dict[str, dict]:
    """Every recorded version's facts, oldest first."""
    raw = json.loads(resources.files("cockpit.vllm").joinpath("data/versions.json").read_text())
    return {v: raw[v] for v in sorted(raw, key=_key)}


def recorded() -> tuple[str, ...]:
    return tuple(recorded_facts())


def nearest(version: str) -> str | None:
    """The recorded version a version is judged by: itself, else the newest recorded of its own minor, else the newest
    recorded before it (serving/releases.py, the same rule for every engine); None for one older than every recording
    (the eras read by hand judge those: 0.8.0-0.8.4 differ from 0.8.5)."""
    parsed = parse_version(version)
    if parsed is None or not recorded() or parsed < _key(recorded()[0])[:3]:
        return None  # older than the first recording, even of its minor: 0.8.2's rules are not 0.8.5's
    return releases().nearest(version)


def facts(version: str | None) -> dict | None:
    """The recorded facts `version` is judged by (None: not judged by a recording; None given: the newest)."""
    if version is None:
        return recorded_facts()[recorded()[-1]] if recorded() else None
    chosen = nearest(version)
    return recorded_facts()[chosen] if chosen else None


@lru_cache(maxsize=64)
def _era_of_facts(recorded_version: str) -> Era:
    f = recorded_facts()[recorded_version]
    hand = _hand_era(_key(recorded_version))  # what no recording shows: the target types EAGLE-3 takes
    return Era(recorded_version, _key(recorded_version), bool(f["legacy_flags"]), bool(f["json_config"]), f["json_parser"] or "json",
               frozenset(f["spec_keys"] or hand.keys),
               tuple(f["methods"]) if f["methods"] and f.get("methods_enforced") is not False else None,  # None: any name passes
               f["unknown_keys"] or hand.unknown_keys, hand.eagle3_targets, bool(f["dotted"]),
               bool(f["bonus_in_mean_length"]) if f["bonus_in_mean_length"] is not None else hand.bonus_in_mean_length)


def era(version: str | None) -> Era:
    """The rules `version` is judged by: its own recorded facts, the nearest recorded version's, or (before 0.8.5)
    the era read by hand; None (unknown): the newest recorded."""
    parsed = parse_version(version) if version else None
    if parsed is None:
        return _era_of_facts(recorded()[-1]) if recorded() else ERAS[-1]
    chosen = nearest(version) if version is not None else None
    if chosen is not None:
        return _era_of_facts(chosen)
    return _hand_era(parsed)


def beyond_read(version: str | None) -> bool:
    parsed = parse_version(version) if version else None
    newest = parse_version(recorded()[-1] if recorded() else NEWEST_READ)
    return parsed is not None and newest is not None and parsed > newest


def judged_by(version: str | None) -> str | None:
    """How a version that was not recorded is judged (None: it was, or it is older than the recordings)."""
    if not version:
        return None
    chosen = nearest(version)
    if chosen is None or chosen == version.strip().lstrip("v"):
        return None
    return f"vLLM {version} was not recorded here: judged by {chosen}'s recorded facts, the nearest"


def label(version: str | None, chosen: Era) -> str:
    """How a message names the vLLM it judges: the version given, else the rules it was judged by."""
    return f"vLLM {version}" if version else f"vLLM {chosen.name} (no version given)"


def shipped_schema(version: str | None) -> FlagSchema | None:
    """The flags of `version`'s parser as recorded from its wheel (each flag's own type and choices), or of the nearest
    recorded version (versions.judged_by says which); None for a version older than every recording."""
    chosen = nearest(version) if version else (recorded()[-1] if recorded() else None)
    return schema_of(chosen) if chosen else None


@lru_cache(maxsize=None)  # one per recorded version (identify reads them all)
def schema_of(recorded_version: str) -> FlagSchema:
    return FlagSchema.from_rows("vllm serve", recorded_version, (facts(recorded_version) or {}).get("flags", []))


@lru_cache(maxsize=1)
def releases():
    """The recorded releases as the core reads them (each flag's span; a version's line is its minor)."""
    from cockpit.serving.releases import Releases

    return Releases("vLLM", recorded(), 2, schema_of)


def era_of_host(host: dict, version: str) -> Era:
    """The rules of a host's own vLLM, read there (vllm/hostschema.py SPEC_FACTS): its SpeculativeConfig's keys, methods
    and unknown-key rule over the recorded (or nearest) version's other facts."""
    from dataclasses import replace

    base = era(version)
    keys = frozenset(k for k in host.get("spec_fields") or () if k not in ENGINE_FILLED) or base.keys
    methods = tuple(host["methods"]) if host.get("methods") else base.methods
    said = host.get("unknown_keys")
    unknown = said if isinstance(said, str) and said in ("typeerror", "ignored", "forbidden") else base.unknown_keys
    return replace(base, name=f"{version} (read on its host)", keys=keys, methods=methods, unknown_keys=unknown)
