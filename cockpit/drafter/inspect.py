"""Is an EAGLE-3 draft directory ready for SGLang, or for vLLM?  Headers only, with a verdict per
engine and version range.

This module reads the draft and names what it finds (a finding's code); which releases of which engine each finding
breaks is the engine's to say (Engine.draft_loading: sglang/draftload.py, vllm/draftload.py, from sglang-facts §3 and
vllm-facts §3), so no engine is named here to decide anything.  A finding whose effect on an engine is not known from its
source is not listed by that engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.drafter.files import JOURNAL_SUFFIX, weight_files
from cockpit.drafter.header import Header, HeaderError, read_header
from cockpit.format import plural, size
from cockpit.serving.engine import DraftLoading

# the name vLLM 0.9-0.10.1's registry has for a Llama EAGLE-3 draft (its fix: both names in architectures)
VLLM_LLAMA_EAGLE3 = "Eagle3LlamaForCausalLM"
# the findings whose effect depends on the loader and its release: each engine says which of its ranges each breaks
# (Engine.draft_loading.breaks); every other finding breaks every range of every engine
LOADER_FINDINGS = ("no_eagle3", "layers0_keys", "missing_t2d", "speculators_config", "architecture_unsupported",
                   "wrong_architecture", "architecture_name", "num_hidden_layers", "draft_vocab_size_missing", "t2d_vocab",
                   "d2t_dtype", "t2d_dtype")
MLA_ARCHITECTURES = {"Eagle3DeepseekV2ForCausalLM"}  # Kimi-K2.5 / DeepSeek targets: SGLang 0.5.12 on (kimi_k25_eagle3.py)
EAGLE3_ARCHITECTURES = {"LlamaForCausalLMEagle3", "Eagle3DeepseekV3ForCausalLM"} | MLA_ARCHITECTURES
LAYER_KEYS = ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight",
              "hidden_norm.weight", "post_attention_layernorm.weight")
GQA_ATTENTION = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight")
MLA_ATTENTION = ("self_attn.q_a_proj.weight", "self_attn.q_b_proj.weight", "self_attn.kv_a_proj_with_mqa.weight",
                 "self_attn.kv_b_proj.weight", "self_attn.o_proj.weight")
MIDLAYER_KEYS = tuple("midlayer." + k for k in GQA_ATTENTION + LAYER_KEYS)
TOP_KEYS = ("fc.weight", "norm.weight", "lm_head.weight", "d2t", "t2d")


def loaders() -> dict[str, DraftLoading]:
    """Every engine's draft loader, by the engine's config word, the default engine's first."""
    from cockpit.serving import engines

    return {e.name: e.draft_loading for e in engines.engines()}


def default_loader() -> str:
    from cockpit.serving import engines

    return engines.DEFAULT


def every() -> tuple[str, ...]:
    """Every range of every engine: what a finding no loader takes breaks."""
    return tuple(r for loading in loaders().values() for r in loading.ranges)


def broken(code: str) -> tuple[str, ...]:
    """The ranges a loader-dependent finding breaks, each engine's as it says."""
    assert code in LOADER_FINDINGS, code
    return tuple(r for loading in loaders().values() for r in loading.breaks.get(code, ()))


def ranges_of(engine: str | None = None, version: str | None = None) -> tuple[str, ...]:
    """The version ranges a verdict is given for: one engine's (all of them, or the one of `version`), or, for
    "both" (every engine), all of every engine's."""
    loading = loaders().get(engine or default_loader())
    if loading is None:
        return every()
    return (loading.range_of(version),) if version else loading.ranges


def range_label(version_range: str) -> str:
    """A range with its engine's name: `SGLang >=0.5.12`, `vLLM 0.9-0.10.1` (vLLM's ranges carry it already)."""
    for loading in loaders().values():
        if version_range in loading.ranges:
            return version_range if version_range.startswith(loading.label) else f"{loading.label} {version_range}"
    return version_range


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    ranges: tuple[str, ...]  # the version ranges it breaks (every engine's, as Engine.draft_loading says)
    fix: str | None = None

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message, "ranges": list(self.ranges), "fix": self.fix}


@dataclass
class DraftReport:
    path: str
    layout: str = ""  # which trainer's (or exporter's) layout the keys and config.json follow
    files: list[str] = field(default_factory=list)
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {dtype, shape, file}
    total_bytes: int = 0
    config: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target: dict[str, Any] | None = None  # the target it was checked against (drafter/target.py): where, and what it says

    def verdicts(self, version: str | None = None, engine: str | None = None) -> dict[str, list[Problem]]:
        return {r: [p for p in self.problems if r in p.ranges] for r in ranges_of(engine, version)}

    def ready(self, version: str | None = None, engine: str | None = None) -> bool:
        return not any(self.verdicts(version, engine).values())

    def to_json(self, version: str | None = None, engine: str | None = None) -> dict:
        engine = engine or default_loader()
        return {
            "path": self.path, "files": self.files, "total_bytes": self.total_bytes, "tensor_count": len(self.tensors),
            "tensors": self.tensors, "config": self.config, "layout": self.layout, "ready": self.ready(version, engine),
            "engine": engine, (engine if engine in loaders() else default_loader()): version,
            "verdicts": {r: {"ready": not ps, "problems": [p.to_json() for p in ps]} for r, ps in self.verdicts(version, engine).items()},
            "problems": [p.to_json() for p in self.problems], "notes": self.notes,
        }


def read_headers(path: Path) -> list[Header]:
    return [read_header(f) for f in weight_files(path)]


def inspect_draft(path: str | Path) -> DraftReport:
    """Raises CockpitError (exit 2) when the weights cannot be read at all; problems otherwise."""
    path = Path(path)
    journals = [Path(str(f) + JOURNAL_SUFFIX) for f in weight_files(path)]
    journals = [j for j in journals if j.exists()]
    fix = f"cockpit drafter fix-keys {path}   (finishes or undoes the interrupted fix first)"
    try:
        headers = read_headers(path)
    except HeaderError as exc:
        if journals:
            raise HeaderError(f"{exc}; an interrupted fix-keys left {journals[0]}: run `{fix.split('   ')[0]}` to repair it") from None
        raise
    directory = path if path.is_dir() else path.parent
    config_path = directory / "config.json"
    config_text = config_path.read_bytes().decode("utf-8", errors="replace") if config_path.exists() else None
    report = build_report(str(path), headers, config_text, str(config_path))
    for journal in journals:
        report.problems.insert(0, Problem("interrupted_fix", f"{journal}: an interrupted `cockpit drafter fix-keys` left its "
                                          "journal; the header may be half written", every(), fix=fix))
    return report


def build_report(path: str, headers: list[Header], config_text: str | None, config_name: str) -> DraftReport:
    """The checks, on headers and config.json text from wherever they were read (disk or SFTP)."""
    report = DraftReport(path)
    for header in headers:
        report.files.append(Path(header.path).name)
        report.total_bytes += header.file_size
        for name, info in header.tensors.items():
            if name in report.tensors:
                report.problems.append(Problem("duplicate_key", f"'{name}' is in two shards", every()))
            report.tensors[name] = {"dtype": info.dtype, "shape": list(info.shape), "file": Path(header.path).name}
    if config_text is not None:
        try:
            report.config = json.loads(config_text)
        except ValueError as exc:
            report.problems.append(Problem("config_unreadable", f"{config_name}: not valid JSON ({exc})", every()))
    else:
        report.problems.append(Problem("config_missing", f"{config_name} is missing: SGLang and vLLM read the draft's settings from it", every()))
    _check_config(report)  # the config first: SGLang reads it before a single weight
    _check_keys(report)
    _check_shapes(report)
    report.problems.append(Problem("no_eagle3", "vLLM before 0.8.5 has no EAGLE-3 (method eagle3 came in 0.8.5)", broken("no_eagle3"),
                                   fix="vLLM 0.8.5 or later"))
    report.layout = layout_of(report)
    return report


def is_speculators(config) -> bool:
    """vLLM speculators' config.json (the format vLLM and TorchSpec's vLLM export use): no model_type,
    the layer's settings nested in transformer_layer_config."""
    return isinstance(config, dict) and ("speculators_model_type" in config or "transformer_layer_config" in config)


def effective_config(config) -> dict:
    """The settings SGLang would read, wherever the format keeps them (nested for speculators)."""
    if not isinstance(config, dict):
        return {}
    if is_speculators(config):
        nested = raw if isinstance(raw := config.get("transformer_layer_config"), dict) else {}
        return {**nested, **{k: v for k, v in config.items() if k not in ("transformer_layer_config",) and k not in nested}}
    return config


def layout_of(report: DraftReport) -> str:
    names = set(report.tensors)
    architectures = (effective_config(report.config).get("architectures") or []) if isinstance(report.config, dict) else []
    old = any(n.startswith("layers.0.") for n in names)
    if any(a in MLA_ARCHITECTURES for a in architectures):
        return "MLA draft for DeepSeek / Kimi-K2.5 targets (Eagle3DeepseekV2ForCausalLM" + (", layers.0.* keys)" if old else ")")
    if is_speculators(report.config):
        return "vLLM speculators format (layers.0.* keys, speculators config.json: vLLM, TorchSpec's vLLM export)"
    if old:
        return "layers.0.* keys with an EAGLE-3 config.json (a vLLM-style export, or a trainer that names the layer so)"
    if any(n.startswith("midlayer.") for n in names):
        return "SGLang layout, midlayer.* (SpecForge, the EAGLE repo's trainer, ModelOpt's HF export)"
    return "unrecognised"


def _check_keys(report: DraftReport) -> None:
    names = set(report.tensors)
    config = effective_config(report.config)
    mla = any(a in MLA_ARCHITECTURES for a in (config.get("architectures") or []))
    old = sorted(n for n in names if n.startswith("layers.0."))
    if old and not mla:  # an MLA draft maps layers.0. to midlayer. itself (SGLang 0.5.12 on; older ones refuse its config)
        report.problems.append(Problem(
            "layers0_keys", f"{len(old)} keys are named layers.0.* (e.g. {old[0]}): SGLang up to 0.4.8 crashes on them, "
            "0.4.9-0.5.11 silently skip them (acceptance length 1.00)", broken("layers0_keys"),
            fix="cockpit drafter fix-keys PATH   (renames layers.0. to midlayer., header only)"))
    layer = tuple("midlayer." + k for k in (MLA_ATTENTION if mla else GQA_ATTENTION) + LAYER_KEYS)
    present = names | {"midlayer." + n[len("layers.0."):] for n in old}
    for key in layer:
        if key not in present:
            report.problems.append(Problem("missing_key", f"required key '{key}' is missing", every()))
    draft_vocab, vocab = config.get("draft_vocab_size"), config.get("vocab_size")
    full_vocab = draft_vocab is None or (vocab is not None and draft_vocab == vocab)
    for key in TOP_KEYS:
        if key in names:
            continue
        if key in ("d2t", "t2d") and full_vocab:
            # SGLang's and vLLM's EAGLE-3 load_weights read d2t only to map a reduced draft vocabulary onto the
            # target's (hot_token_id); with the full vocabulary there is nothing to map and neither is needed
            note = "no d2t/t2d: fine, the draft's vocabulary is the target's (nothing to map)"
            if note not in report.notes:
                report.notes.append(note)
            continue
        why = (f" (draft_vocab_size {draft_vocab} is not the target's {vocab}: d2t maps the draft's tokens onto the target's)"
               if key in ("d2t", "t2d") else "")
        # vLLM ignores t2d; without d2t a reduced vocabulary maps onto the wrong target tokens (0.8.5: zeros, silently)
        report.problems.append(Problem("missing_key", f"required key '{key}' is missing{why}",
                                       broken("missing_t2d") if key == "t2d" else every()))
    prefixed = sorted(n for n in names if n.startswith(("draft_model.", "model.", "module.")))
    if prefixed:
        report.problems.append(Problem("prefixed_keys", f"{len(prefixed)} keys carry a training prefix (e.g. {prefixed[0]}): SGLang "
                                       "and vLLM expect them unprefixed", every(), fix="cockpit drafter fix-keys PATH --rule draft_model.="))
    if "embed_tokens.weight" not in names:
        report.notes.append("no embed_tokens.weight: fine, SGLang uses the target's embedding")
    elif not mla:
        report.notes.append("embed_tokens.weight is in the checkpoint: SGLang replaces it with the target's embedding")


def _check_config(report: DraftReport) -> None:
    if not isinstance(report.config, dict):
        return
    if is_speculators(report.config):
        report.problems.append(Problem(
            "speculators_config", "config.json is in vLLM speculators format (no model_type; the layer's settings nested in "
            "transformer_layer_config): SGLang stops on it with `Unrecognized model ... Should have a model_type key`, and vLLM "
            "reads it only from 0.10.2", broken("speculators_config"),
            fix="cockpit drafter convert PATH   (rewrites config.json for SGLang and renames the keys, header only)"))
    config = effective_config(report.config)
    architectures = config.get("architectures") or []
    if any(a in MLA_ARCHITECTURES for a in architectures):
        report.problems.append(Problem("architecture_unsupported", f"{architectures[0]} (an MLA draft for DeepSeek / Kimi-K2.5 "
                                       "targets) is served from SGLang 0.5.12 and vLLM 0.34.0 on: older versions do not know the "
                                       "architecture", broken("architecture_unsupported")))
    elif not is_speculators(report.config) and not any(a in EAGLE3_ARCHITECTURES for a in architectures):
        report.problems.append(Problem("wrong_architecture", f"architectures is {architectures}, not an EAGLE-3 draft class "
                                       f"({', '.join(sorted(EAGLE3_ARCHITECTURES))}): SGLang fails with KeyError "
                                       "'midlayer.self_attn.qkv_proj.weight'", broken("wrong_architecture")))
    if "LlamaForCausalLMEagle3" in architectures and VLLM_LLAMA_EAGLE3 not in architectures:
        fixed = [*architectures, VLLM_LLAMA_EAGLE3]
        report.problems.append(Problem(
            "architecture_name", "architectures is ['LlamaForCausalLMEagle3']: vLLM 0.9 to 0.10.1 do not load that name (0.9 "
            "looks for Eagle3LlamaForCausalLMEagle3; 0.10.1.1 has LlamaForCausalLMEagle3 commented out of its registry) and stop "
            "with `Model architectures [...] are not supported for now`", broken("architecture_name"),
            fix=f"set \"architectures\": {json.dumps(fixed)} in config.json (SGLang loads the first name, vLLM 0.9 on the "
                "second), or serve with vLLM 0.10.2 or later"))
    layers = config.get("num_hidden_layers")
    if layers != 1:
        report.problems.append(Problem("num_hidden_layers", f"num_hidden_layers is {layers}: SGLang up to 0.5.11 supports only 1 "
                                       "(ValueError: EAGLE3 currently only supports 1 layer), vLLM up to 0.33 builds one decoder "
                                       "layer", broken("num_hidden_layers")))
    if config.get("draft_vocab_size") is None:
        report.problems.append(Problem("draft_vocab_size_missing", "config.json has no draft_vocab_size", broken("draft_vocab_size_missing")))


def _check_shapes(report: DraftReport) -> None:
    config = effective_config(report.config)
    tensors = report.tensors
    hidden = config.get("hidden_size")
    target_hidden = config.get("target_hidden_size") or hidden
    fc = tensors.get("fc.weight")
    if fc and target_hidden and len(fc["shape"]) == 2 and fc["shape"][1] != 3 * target_hidden:
        report.problems.append(Problem("fc_shape", f"fc.weight takes {fc['shape'][1]} inputs, 3 x target hidden = {3 * target_hidden}",
                                       every()))
    lm_head = tensors.get("lm_head.weight")
    d2t = tensors.get("d2t")
    t2d = tensors.get("t2d")
    draft_vocab = config.get("draft_vocab_size")
    if lm_head and d2t and lm_head["shape"][0] != d2t["shape"][0]:
        report.problems.append(Problem("lm_head_d2t", f"lm_head.weight has {lm_head['shape'][0]} rows but d2t has {d2t['shape'][0]} entries",
                                       every()))
    if lm_head and draft_vocab is not None and lm_head["shape"][0] != draft_vocab:
        report.problems.append(Problem("lm_head_vocab", f"lm_head.weight has {lm_head['shape'][0]} rows, draft_vocab_size is {draft_vocab}",
                                       every()))
    vocab = config.get("vocab_size")
    if t2d and vocab is not None and t2d["shape"][0] != vocab:
        report.problems.append(Problem("t2d_vocab", f"t2d has {t2d['shape'][0]} entries, vocab_size is {vocab}", broken("t2d_vocab")))
    if d2t and d2t["dtype"] != "I64":
        report.problems.append(Problem("d2t_dtype", f"d2t is {d2t['dtype']}, SGLang expects int64", broken("d2t_dtype")))
    if t2d and t2d["dtype"] != "BOOL":
        report.problems.append(Problem("t2d_dtype", f"t2d is {t2d['dtype']}, SGLang expects bool", broken("t2d_dtype")))


def render_report(report: DraftReport, version: str | None = None, keys: bool = False, engine: str | None = None) -> str:
    lines = [f"{report.path}: {plural(len(report.tensors), 'tensor')} in {plural(len(report.files), 'file')}, {size(report.total_bytes)}",
             f"layout: {report.layout}"]
    if keys:
        for name, info in sorted(report.tensors.items()):
            lines.append(f"  {name:<50} {info['dtype']:<5} {info['shape']}")
    verdicts = report.verdicts(version, engine)
    for loader in loaders().values():
        mine = {r: ps for r, ps in verdicts.items() if r in loader.ranges}
        if mine:
            lines.append(loader.label + " " + ";  ".join(f"{r.removeprefix(loader.label + ' ')}: " + ("ready" if not ps else plural(len(ps), "problem"))
                                                  for r, ps in mine.items()))
    shown = [p for p in report.problems if any(r in verdicts for r in p.ranges)]
    for problem in shown:  # each problem once, with the versions it breaks
        ranges = [r for r in problem.ranges if r in verdicts]
        where = "" if len(ranges) == len(verdicts) else "[" + ", ".join(range_label(r) for r in ranges) + "] "
        lines.append(f"  - {where}{problem.message}")
        if problem.fix:
            lines.append(f"    fix: {problem.fix}")
    for note in report.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines)


__all__ = ["inspect_draft", "DraftReport", "Problem", "HeaderError", "render_report", "loaders", "default_loader", "every",
           "broken", "range_label", "ranges_of"]
