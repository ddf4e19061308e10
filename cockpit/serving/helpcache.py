"""Where a host's own engine flags are cached: per host, engine version (and image, when the engine is asked inside
one), in the cockpit's cache folder (an engine's `--help` is read once per version, not per launch)."""

from __future__ import annotations

import re
from pathlib import Path

from cockpit import paths


def cache_dir(engine: str = "sglang") -> Path:
    return paths.cache_dir() / f"{engine}-schema"


def cache_name(host: str, number: str, launcher: list[str] | None = None) -> str:
    """A cached --help's file name: per host and version (and image, when the engine is asked inside one)."""
    parts = [host, *([launcher[-1]] if launcher else []), number]
    return "-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", p) for p in parts) + ".json"
