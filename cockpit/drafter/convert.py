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
