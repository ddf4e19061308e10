"""A draft checked against the target it will serve with (issue 51 item 2): the target's config.json only (no weights),
read where it lies, against the draft's config and tensor headers.  What breaks every engine and version, whoever
loads it (an EAGLE-3 draft reads the target's hidden states and speaks the target's vocabulary):

- hidden size: the draft's fc takes three of the target's hidden states (3 x target hidden inputs); its config's
  `target_hidden_size` (SpecForge, when the draft is narrower) or else its `hidden_size` must be the target's;
- vocabulary: the draft's `vocab_size` is the target's (d2t maps the draft's tokens onto it; an embedding it carries has
  one row per target token);
- auxiliary layers: the target layers the draft reads (`eagle_config.eagle_aux_hidden_state_layer_ids`) exist in it;
- an MLA draft (Eagle3DeepseekV2ForCausalLM) needs a DeepSeek/Kimi target.

The dtype is said, never a problem (the engines cast the draft to the target's).  A model with its text model nested
(`text_config`: the VL models) is read from there."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.drafter.inspect import MLA_ARCHITECTURES, DraftReport, Problem, effective_config, every
from cockpit.errors import CockpitError
from cockpit.hosts.transport import Transport, TransportError

MAX_CONFIG = 4 << 20  # a model's config.json is a few KiB
MLA_TARGETS = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "kimi_k25", "kimi_vl")


@dataclass(frozen=True)
class TargetFacts:
    """What the check needs of a target model, from its config.json."""

    source: str  # where its config.json was read
    hidden_size: int | None
    vocab_size: int | None
    num_hidden_layers: int | None
    dtype: str | None
    model_type: str | None
    architectures: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "hidden_size": self.hidden_size, "vocab_size": self.vocab_size,
                "num_hidden_layers": self.num_hidden_layers, "dtype": self.dtype, "model_type": self.model_type,
                "architectures": list(self.architectures)}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def facts_of(config: Any, source: str) -> TargetFacts:
    """The target's facts from its config.json's contents (a text model nested as `text_config` read from there)."""
    if not isinstance(config, dict):
        raise CockpitError(f"{source}: not a model's config.json (a JSON object is expected)")
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else {}
    merged = {**config, **text}
    listed = config.get("architectures")
    arch: list[Any] = listed if isinstance(listed, list) else []
    return TargetFacts(source, _int(merged.get("hidden_size")), _int(merged.get("vocab_size")), _int(merged.get("num_hidden_layers")),
                       str(merged.get("torch_dtype") or merged.get("dtype") or "") or None,
                       str(config.get("model_type") or "") or None, tuple(str(a) for a in arch))


def _facts_of_bytes(data: bytes, given: str, config: str) -> TargetFacts:
    """The one reading of a target's config.json bytes (at most MAX_CONFIG + 1 of them were read), wherever they came
    from; `given` is what the user named, `config` the file read."""
    if not data:
        raise CockpitError(f"target {given}: no config.json there (give the target model's folder or its config.json)")
    if len(data) > MAX_CONFIG:
        raise CockpitError(f"target {given}: {config} is over {MAX_CONFIG >> 20} MiB: not a model's config.json")
    try:
        return facts_of(json.loads(data.decode("utf-8", errors="replace")), config)
    except ValueError as exc:
        raise CockpitError(f"{config}: not valid JSON ({exc})") from None


def read_target(path: str) -> TargetFacts:
    """A target on this machine: its model folder or its config.json."""
    where = Path(path)
    config = where / "config.json" if where.is_dir() else where
    try:
        with config.open("rb") as handle:
            data = handle.read(MAX_CONFIG + 1)  # never a whole weights file read by mistake
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise CockpitError(f"target {path}: {exc.strerror or exc}") from None
    return _facts_of_bytes(data, path, str(config))


async def read_target_on(transport: Transport, path: str) -> TargetFacts:
    """A target on a host: its config.json read over the host's connection (a few KiB; never a weights file)."""
    found = await transport.stat(path)
    config = posixpath.join(path, "config.json") if found is not None and found.is_dir else path
    try:
        data = await transport.read_range(config, 0, MAX_CONFIG + 1)
    except (TransportError, OSError) as exc:
        raise CockpitError(f"target {path} on {transport.name}: {config} cannot be read ({exc})") from None
    return _facts_of_bytes(data, f"{path} on {transport.name}", f"{config} on {transport.name}")


@dataclass
class TargetCheck:
    target: TargetFacts
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_against(report: DraftReport, target: TargetFacts) -> TargetCheck:
    """The draft's config and headers against the target's facts; each sure mismatch a problem for every engine and
    version (nothing loads it into this target), with its fix."""
    check = TargetCheck(target)
    config = effective_config(report.config)
    tensors = report.tensors
    other = f"serve it with the target it was trained for, or train a draft for {target.source.rsplit('/', 2)[-2] if '/' in target.source else 'this target'}"

    def problem(code: str, message: str) -> None:
        check.problems.append(Problem(code, message, every(), fix=other))

    hidden = _int(config.get("target_hidden_size")) or _int(config.get("hidden_size"))
    named = "target_hidden_size" if _int(config.get("target_hidden_size")) else "hidden_size"
    if target.hidden_size and hidden and hidden != target.hidden_size:
        problem("target_hidden", f"the draft was made for a target of hidden size {hidden} (its config's {named}); this target's "
                                 f"is {target.hidden_size}")
    fc = tensors.get("fc.weight")
    if target.hidden_size and fc and len(fc["shape"]) == 2 and fc["shape"][1] != 3 * target.hidden_size:
        problem("target_fc", f"fc.weight takes {fc['shape'][1]} inputs: three hidden states of {fc['shape'][1] // 3}, not of this "
                             f"target's {target.hidden_size} ({3 * target.hidden_size} inputs)")
    vocab = _int(config.get("vocab_size"))
    if target.vocab_size and vocab and vocab != target.vocab_size:
        problem("target_vocab", f"the draft's vocabulary is {vocab} tokens (its config's vocab_size); this target's is "
                                f"{target.vocab_size}: its tokens would map onto the wrong ones")
    embed = tensors.get("embed_tokens.weight") or tensors.get("model.embed_tokens.weight")
    if target.vocab_size and embed and embed["shape"] and embed["shape"][0] != target.vocab_size:
        problem("target_embed", f"embed_tokens.weight has {embed['shape'][0]} rows; this target has {target.vocab_size} tokens")
    t2d = tensors.get("t2d")
    if target.vocab_size and t2d and t2d["shape"] and t2d["shape"][0] != target.vocab_size:
        problem("target_t2d", f"t2d has {t2d['shape'][0]} entries, one per token of a target of that vocabulary; this target has "
                              f"{target.vocab_size}")
    given = config.get("eagle_config")
    eagle: dict[str, Any] = given if isinstance(given, dict) else {}
    layers = eagle.get("eagle_aux_hidden_state_layer_ids")
    if target.num_hidden_layers and isinstance(layers, list):
        beyond = [n for n in layers if isinstance(n, int) and not 0 <= n < target.num_hidden_layers]
        if beyond:
            problem("target_layers", f"the draft reads the hidden states of target layers {layers}; this target has "
                                     f"{target.num_hidden_layers} (0-{target.num_hidden_layers - 1})")
    arch = set(config.get("architectures") or []) if isinstance(config.get("architectures"), list) else set()
    if arch & MLA_ARCHITECTURES and target.model_type and target.model_type not in MLA_TARGETS:
        problem("target_mla", f"an MLA draft ({', '.join(sorted(arch & MLA_ARCHITECTURES))}) is for DeepSeek and Kimi targets; "
                              f"this target is {target.model_type}")
    trained_for = config.get("target_model_type")
    if isinstance(trained_for, str) and target.model_type and trained_for != target.model_type:
        check.notes.append(f"the draft says it was trained for a {trained_for} target (target_model_type); this target is "
                           f"{target.model_type}: it loads if the sizes agree, but its acceptance is that of a draft for another model")
    dtypes = sorted({info["dtype"] for name, info in tensors.items() if name.endswith(".weight")})
    if target.dtype and dtypes:
        check.notes.append(f"the draft's weights are {', '.join(dtypes)}, the target's {target.dtype}: the engines cast the draft "
                           "to the target's dtype")
    if not check.problems:
        check.notes.append(f"fits the target ({target.source}): hidden size {target.hidden_size}, vocabulary {target.vocab_size}, "
                           f"{target.num_hidden_layers} layers")
    return check
