"""Training checkpoint (pytorch_model.bin, a .pt state dict, or a directory of them) to an
SGLang-ready safetensors draft: key rules applied, dtype kept or cast, config.json checked.
Needs torch (the `torch` extra); a jump box without it gets a clear message."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cockpit.drafter.fixkeys import rename
from cockpit.errors import CockpitError

CONVERT_RULES = (("draft_model.", ""), ("module.", ""), ("layers.0.", "midlayer."))
DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "half": "float16",
          "fp32": "float32", "float32": "float32", "float": "float32"}


INSTALL = "pip install 'cockpit[torch]' (in a checkout: pip install '.[torch]')"


def _torch():
    """torch, and numpy that safetensors' torch writer uses; a clear message when either is missing."""
    try:
        import torch
    except ImportError:
        raise CockpitError(f"drafter convert reads .bin/.pt checkpoints with torch, which is not installed: {INSTALL}") from None
    try:
        import numpy  # noqa: F401 - safetensors.torch.save_file needs it
    except ImportError:
        raise CockpitError(f"drafter convert writes with safetensors' torch writer, which needs numpy: {INSTALL}") from None
    return torch


def _load(path: Path, torch) -> dict[str, Any]:
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickles fail in many ways
        raise CockpitError(f"{path}: not a loadable torch checkpoint ({type(exc).__name__}: {exc})") from None
    for key in ("state_dict", "model", "module"):
        if isinstance(data, dict) and key in data and isinstance(data[key], dict):
            data = data[key]
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise CockpitError(f"{path}: holds no state dict (a mapping of names to tensors)")
    return data


def checkpoint_files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise CockpitError(f"{src}: no such file or directory")
    files = sorted(p for p in src.iterdir() if p.suffix in (".bin", ".pt", ".pth") and p.is_file())
    if not files:
        raise CockpitError(f"{src}: no .bin, .pt or .pth checkpoint in this directory")
    return files


def convert(src: str | Path, dst: str | Path, dtype: str | None = None, rules=CONVERT_RULES, overwrite: bool = False) -> dict[str, Any]:
    torch = _torch()
    from safetensors.torch import save_file

    src, dst = Path(src), Path(dst)
    if dst.exists() and any(dst.iterdir()) and not overwrite:
        raise CockpitError(f"{dst}: exists and is not empty (pass --overwrite to replace its weights)")
    target_dtype = None
    if dtype:
        if dtype.lower() not in DTYPES:
            raise CockpitError(f"--dtype {dtype}: choose one of {', '.join(sorted(DTYPES))}")
        target_dtype = getattr(torch, DTYPES[dtype.lower()])
    tensors: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for file in checkpoint_files(src):
        for name, value in _load(file, torch).items():
            if not isinstance(value, torch.Tensor):
                continue
            new = rename(name, rules)
            if new in tensors:
                raise CockpitError(f"{file}: '{name}' becomes '{new}', which {sources[new]} already gave")
            if target_dtype is not None and value.is_floating_point():
                value = value.to(target_dtype)
            tensors[new] = value.contiguous()
            sources[new] = f"{file.name}:{name}"
    if not tensors:
        raise CockpitError(f"{src}: no tensors found")
    dst.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".model.", suffix=".safetensors.tmp", dir=dst)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"format": "pt", "converted_by": "cockpit"})
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, dst / "model.safetensors")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    config_note = _copy_config(src, dst)
    return {"src": str(src), "dst": str(dst / "model.safetensors"), "tensors": len(tensors),
            "renamed": sum(1 for k, v in sources.items() if v.split(":", 1)[1] != k), "config": config_note}


def _copy_config(src: Path, dst: Path) -> str:
    folder = src if src.is_dir() else src.parent
    config = folder / "config.json"
    if not config.exists():
        return "no config.json beside the checkpoint: write one (architectures LlamaForCausalLMEagle3, num_hidden_layers 1, draft_vocab_size)"
    try:
        data = json.loads(config.read_text())
    except ValueError as exc:
        raise CockpitError(f"{config}: not valid JSON ({exc})") from None
    if (dst / "config.json").resolve() != config.resolve():
        shutil.copyfile(config, dst / "config.json")
    problems = []
    if "LlamaForCausalLMEagle3" not in (data.get("architectures") or []) and not any("Eagle3" in a for a in data.get("architectures") or []):
        problems.append(f"architectures is {data.get('architectures')}")
    if data.get("num_hidden_layers") != 1:
        problems.append(f"num_hidden_layers is {data.get('num_hidden_layers')}")
    if data.get("draft_vocab_size") is None:
        problems.append("draft_vocab_size is missing")
    return "config.json copied" + (f"; check it: {'; '.join(problems)}" if problems else "; it looks right")


# --- vLLM speculators format -> SGLang ------------------------------------------------------------

SPECULATORS_BACKUP = "config.speculators.json"
LAYER_SETTINGS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "rms_norm_eps",
                  "max_position_embeddings", "rope_theta", "rope_scaling", "hidden_act", "attention_bias", "mlp_bias",
                  "pretraining_tp", "bos_token_id", "eos_token_id")


def sglang_config(config: dict[str, Any]) -> dict[str, Any]:
    """A speculators config.json as SGLang's EAGLE-3 loader reads one: architectures and model_type at the
    top, the layer's settings flattened out of transformer_layer_config, the target's vocabulary."""
    layer: dict = raw if isinstance(raw := config.get("transformer_layer_config"), dict) else {}
    out: dict[str, Any] = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama"}
    out.update({k: layer[k] for k in LAYER_SETTINGS if k in layer})
    out["num_hidden_layers"] = 1
    out["vocab_size"] = layer.get("vocab_size", config.get("vocab_size"))
    out["draft_vocab_size"] = config.get("draft_vocab_size")
    if config.get("target_hidden_size"):
        out["target_hidden_size"] = config["target_hidden_size"]
    if config.get("eagle_aux_hidden_state_layer_ids"):
        out["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": config["eagle_aux_hidden_state_layer_ids"]}
    out["tie_word_embeddings"] = False
    dtype = config.get("torch_dtype") or config.get("dtype") or layer.get("torch_dtype")
    if dtype:
        out["torch_dtype"] = dtype
    return {k: v for k, v in out.items() if v is not None}


def speculators_plan(folder: Path) -> tuple[dict[str, Any], Any] | None:
    """(the SGLang config, the key fix's dry run) for a speculators-format draft; None when it is not one."""
    from cockpit.drafter.fixkeys import fix_keys
    from cockpit.drafter.inspect import is_speculators

    config_path = folder / "config.json"
    backup = folder / SPECULATORS_BACKUP
    source = backup if backup.exists() else config_path
    try:
        config = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise CockpitError(f"{source}: not readable JSON ({exc})") from None
    if not is_speculators(config):
        return None
    return sglang_config(config), fix_keys(folder, (("layers.0.", "midlayer."),), dry_run=True)


def convert_speculators(folder: str | Path) -> dict[str, Any]:
    """Make a speculators-format draft one SGLang loads, in place: the original config.json kept as
    config.speculators.json, the keys renamed layers.0. -> midlayer. in the headers only (journaled,
    tensors untouched: fix-keys), then config.json rewritten atomically.  Killed at any point, running
    it again finishes the job."""
    from cockpit.drafter.fixkeys import fix_keys
    from cockpit.paths import atomic_write

    folder = Path(folder)
    planned = speculators_plan(folder)
    if planned is None:
        raise CockpitError(f"{folder}: not a vLLM speculators draft (its config.json has no speculators settings)")
    config, _plan = planned
    backup = folder / SPECULATORS_BACKUP
    if not backup.exists():
        atomic_write(backup, (folder / "config.json").read_bytes())
    fixed = fix_keys(folder, (("layers.0.", "midlayer."),))
    atomic_write(folder / "config.json", json.dumps(config, indent=2) + "\n")
    from cockpit.drafter.inspect import read_headers

    tensors = sum(len(h.tensors) for h in read_headers(folder))
    return {"src": str(folder), "dst": str(folder), "format": "speculators", "tensors": tensors, "renamed": fixed.changed,
            "config": f"config.json rewritten for SGLang (the original kept as {SPECULATORS_BACKUP})"}


def converter(src: str, dst: str | None, dtype: str | None = None, rule_texts: list[str] | None = None, overwrite: bool = False):
    """(what an in-place conversion will do, to confirm; None when nothing is changed in place) and
    the function that converts: a vLLM speculators draft in place, a .bin/.pt checkpoint to DST."""
    from cockpit.drafter.fixkeys import describe, parse_rules

    planned = speculators_plan(Path(src)) if Path(src).is_dir() and not dst else None
    if planned is not None:
        return (f"will rewrite {src}/config.json for SGLang and rename:\n{describe(planned[1])}", lambda: convert_speculators(src))
    if not dst:
        raise CockpitError("convert needs DST for a .bin/.pt checkpoint (a speculators draft is converted in place)")
    rules = parse_rules(rule_texts) if rule_texts else CONVERT_RULES
    return None, lambda: convert(src, dst, dtype, rules, overwrite)

