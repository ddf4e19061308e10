"""What differs between SGLang versions, read from each release's own source (data/versions.json,
made by tests/fixtures/record/sglang_versions.py): the speculative algorithms it accepts and the
wording of its crash messages."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:4])


@lru_cache(maxsize=1)
def table() -> dict[str, dict]:
    return json.loads(resources.files("cockpit.sglang").joinpath("data", "versions.json").read_text())


def known(version: str | None) -> str:
    """The recorded version that describes `version`: itself, else the newest recorded before it,
    else the newest of all (no version given, or newer than any recorded)."""
    versions = sorted(table(), key=_key)
    if not version:
        return versions[-1]
    if version in table():
        return version
    before = [v for v in versions if _key(v) <= _key(version)]
    return before[-1] if before else versions[0]


def algorithms(version: str | None = None) -> list[str]:
    return list(table()[known(version)]["speculative_algorithms"])


def messages(version: str) -> dict[str, list[str]]:
    return table()[version]["messages"]
