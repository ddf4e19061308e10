"""What differs between SGLang releases, read from each release's own wheel (data/versions.json): the flags its
launch_server parser takes (tests/fixtures/record/sglang_flags.py: each flag's option strings, type, choices, nargs),
the speculative algorithms it accepts and the wording of its crash messages (tests/fixtures/record/sglang_versions.py).
The newest patch of each release line from 0.4.0 to the newest is recorded; a version between is judged by its line's
recording, or the nearest before it (serving/releases.py), and says so."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from cockpit.serving.helpschema import FlagSchema
from cockpit.serving.releases import Releases, version_key


def _key(version: str) -> tuple[int, ...]:
    return version_key(version) or ()


@lru_cache(maxsize=1)
def table() -> dict[str, dict]:
    raw = json.loads(resources.files("cockpit.sglang").joinpath("data", "versions.json").read_text())
    return {v: raw[v] for v in sorted(raw, key=_key)}


@lru_cache(maxsize=1)
def releases() -> Releases:
    return Releases("SGLang", tuple(table()), 3, _schema_of)


def known(version: str | None) -> str:
    """The recorded release that describes `version`: itself, its line's, else the nearest before it; the newest when none
    is given; the oldest for a version older than every recording."""
    return releases().nearest(version) or next(iter(table()))


def algorithms(version: str | None = None) -> list[str]:
    return list(table()[known(version)]["speculative_algorithms"])


def algorithm_plugins(version: str | None = None) -> bool:
    """Whether the release lets a plugin register a speculative algorithm of its own (an unknown name may be one)."""
    return bool(table()[known(version)].get("algorithm_plugins"))


def messages(version: str) -> dict[str, list[str]]:
    return table()[version]["messages"]


@lru_cache(maxsize=None)
def _schema_of(recorded_version: str) -> FlagSchema:
    return FlagSchema.from_rows("python -m sglang.launch_server", recorded_version, table()[recorded_version].get("flags", ()))


def shipped_schema(version: str | None) -> FlagSchema | None:
    """The flags of the release that judges `version`, as recorded from its wheel (None: older than every recording)."""
    chosen = releases().nearest(version)
    return _schema_of(chosen) if chosen else None
