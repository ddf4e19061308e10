"""Where a draft's weights are: the safetensors files of a directory (through its index when it has
one), and the names of the files the cockpit keeps beside them."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.errors import CockpitError
from cockpit.format import shell_words

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
        state = specforge_state(path)
        if state is not None:
            raise CockpitError(f"{path}: {state}")
        torch_files = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
        if torch_files:
            raise CockpitError(f"{path}: holds PyTorch weights ({', '.join(torch_files[:3])}), not safetensors: SGLang's EAGLE-3 "
                               f"loader wants safetensors; convert with `cockpit drafter convert {path} OUT_DIR`")
        raise CockpitError(f"{path}: no .safetensors weights in this directory")
    return files


STATE_FILE = "training_state.pt"  # SpecForge's `specforge train` (E4) checkpoint: rank 0's state, written last and atomically


def specforge_state(path: Path, names: set[str] | None = None) -> str | None:
    """What a SpecForge E4 checkpoint directory (`RUN-stepN/`) is, in words, or None for another kind.  That era's
    checkpoints hold training state and never safetensors: servable weights come from `specforge export`.  Rank
    0's `training_state.pt` is written last, atomically (`*.tmp`, then a rename): without it the save is still
    being written (or was cut short)."""
    names = names if names is not None else {p.name for p in path.iterdir()} if path.is_dir() else set()
    ranks = sorted(n for n in names if n.startswith("training_state_rank") and n.endswith(".pt"))
    temps = sorted(n for n in names if n.startswith("training_state") and n.endswith(".tmp"))
    if STATE_FILE not in names and not ranks and not temps:
        return None
    export = "`" + shell_words(["specforge", "export", "--to", "sglang", "--checkpoint", str(path), "--draft-config", "CONFIG.json",
                                "--output-dir", "OUT"]) + "`"
    if STATE_FILE not in names:
        being = f" ({temps[0]} being written)" if temps else f" ({', '.join(ranks[:2])} there)" if ranks else ""
        return (f"a SpecForge training checkpoint whose save is still in progress, or was cut short: {STATE_FILE} is not "
                f"there yet{being}; it is written last.  This kind of checkpoint never holds safetensors: once saved, {export} "
                "makes the servable draft")
    return f"a SpecForge training checkpoint (training state, no safetensors): {export} makes the servable draft"
