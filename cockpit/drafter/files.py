"""Where a draft's weights are: the safetensors files of a directory (through its index when it has
one), and the names of the files the cockpit keeps beside them."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.errors import CockpitError

INDEX_NAME = "model.safetensors.index.json"
JOURNAL_SUFFIX = ".cockpit-journal"  # beside a file whose header fix-keys is rewriting


def weight_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CockpitError(f"{path}: no such file or directory")
    index = path / INDEX_NAME
    if index.exists():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CockpitError(f"{index}: not a valid safetensors index ({exc})") from None
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (path / n).exists()]
        if missing:
            raise CockpitError(f"{index}: names shards that are not there: {', '.join(missing)}")
        return [path / n for n in names]
    files = sorted(path.glob("*.safetensors"))
    if not files:
        torch_files = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
        if torch_files:
            raise CockpitError(f"{path}: holds PyTorch weights ({', '.join(torch_files[:3])}), not safetensors: SGLang's EAGLE-3 "
                               f"loader wants safetensors; convert with `cockpit drafter convert {path} OUT_DIR`")
        raise CockpitError(f"{path}: no .safetensors weights in this directory")
    return files
