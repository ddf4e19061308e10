"""Which recorded release judges a version, for any engine, and each flag's span of releases.

An engine ships the facts of the releases recorded from their wheels (vllm/data, sglang/data).  A version given by a user
is judged by: its own recording; else the newest recorded of its own release line (a patch, a post release or a release
candidate of a recorded line: vLLM's line is its minor, 0.10 for 0.10.1.1; SGLang's its third number, 0.5.5 for
0.5.5.post1), saying so; else the newest recorded before it, saying so; a version newer than every recording is judged
by the newest, with a note.  Each option string's span is the first and the last recorded release that takes it, so
that a flag too new or too old for the release is named as such, with what that release takes instead."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from cockpit.diagnosis import Diagnosis
from cockpit.serving.helpschema import FlagSchema

_NUMBERS = re.compile(r"^v?(\d+(?:\.\d+)*)")


def version_key(text: str) -> tuple[int, ...] | None:
    """The release numbers of a version (0.10.1.1 -> (0, 10, 1, 1); 0.8.5.post1 -> (0, 8, 5, 1); 0.9.0rc1 -> (0, 9, 0));
    None for text that is no version."""
    text = text.strip()
    m = _NUMBERS.match(text)
    if not m:
        return None
    numbers = tuple(int(n) for n in m.group(1).split("."))
    post = re.match(r"\.?post(\d+)", text[m.end():])
    return numbers + (int(post.group(1)),) if post else numbers


def _plain(text: str) -> str:
    return text.strip().lstrip("v").split("+", 1)[0]


@dataclass(frozen=True)
class Releases:
    """The releases of one engine recorded here, oldest first, and how many leading numbers make a release line."""

    engine: str  # as messages name it: "vLLM", "SGLang"
    versions: tuple[str, ...]
    line: int  # 2 for vLLM (0.10), 3 for SGLang (0.5.5)
    schema_of: Callable[[str], FlagSchema] | None = field(default=None, compare=False, hash=False)  # a release's recorded flags

    def key(self, version: str) -> tuple[int, ...]:
        return version_key(version) or ()

    def nearest(self, version: str | None) -> str | None:
        """The recorded release that judges `version` (None given: the newest; None back: older than every recording)."""
        if not self.versions:
            return None
        if version is None:
            return self.versions[-1]
        wanted = self.key(version)
        if not wanted:
            return None
        plain = _plain(version)
        if plain in self.versions:
            return plain
        same_line = [v for v in self.versions if self.key(v)[: self.line] == wanted[: self.line]]
        if same_line:
            return same_line[-1]
        before = [v for v in self.versions if self.key(v) < wanted]
        return before[-1] if before else None

    def beyond(self, version: str | None) -> bool:
        """Newer than the newest recorded release line."""
        if not version or not self.versions:
            return False
        wanted = self.key(version)
        return bool(wanted) and wanted[: self.line] > self.key(self.versions[-1])[: self.line]

    def judged_by(self, version: str | None) -> str | None:
        """How a version that was not itself recorded is judged, in words (None: it was recorded, or none given)."""
        if not version:
            return None
        chosen = self.nearest(version)
        if chosen is None:
            return f"{self.engine} {version} is older than every release recorded here (the oldest is {self.versions[0]})"
        if chosen == _plain(version):
            return None
        if self.beyond(version):
            return (f"{self.engine} {version} is newer than every release recorded here: judged by the newest, {chosen}; "
                    "its own --help (--host, --help-text) settles the flags")
        if self.key(chosen)[: self.line] == self.key(version)[: self.line]:
            return f"{self.engine} {version} was not recorded here: judged by {chosen}, the recorded release of its line"
        return f"{self.engine} {version} was not recorded here: judged by {chosen}, the nearest recorded before it"

    def note(self, version: str | None) -> Diagnosis | None:
        how = self.judged_by(version)
        return Diagnosis("version_nearest", how, None, version, severity="info") if how else None

    # --- each flag's span ----------------------------------------------------------------------------
    @cached_property
    def _members(self) -> dict[str, frozenset[str]]:
        """Every option string each recorded release takes (read once: the spans, the groups and the checks share it)."""
        return {v: frozenset(self.schema_of(v).options) if self.schema_of else frozenset() for v in self.versions}

    def members(self, version: str) -> frozenset[str]:
        """Every option string the recorded release `version` takes."""
        return self._members.get(version, frozenset())

    @cached_property
    def _spans(self) -> dict[str, tuple[str, str]]:
        out: dict[str, tuple[str, str]] = {}
        for version in self.versions:
            for option in self._members[version]:
                out[option] = (out[option][0], version) if option in out else (version, version)
        return out

    def spans(self) -> dict[str, tuple[str, str]]:
        """option string -> (the first, the last) recorded release that takes it."""
        return self._spans

    @cached_property
    def _groups(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for version in self.versions if self.schema_of else ():  # oldest first: the newest release's grouping wins
            for flag in self.schema_of(version).flags:  # type: ignore[misc]
                options = flag.option_strings
                longs = tuple(sorted(options, key=lambda o: (not o.startswith("--"), options.index(o))))
                for option in options:
                    out[option] = longs
        return out

    def groups(self) -> dict[str, tuple[str, ...]]:
        """option string -> the option strings of its flag in the newest release that has it (-sc -> --speculative-config)."""
        return self._groups

    def _when(self, having: list[str], version: str | None) -> str | None:
        """When something the releases `having` take came or went, as seen from the release judging `version`; None:
        that release has it too, or none has it."""
        chosen = self.nearest(version)
        if not having or chosen is None or chosen in having:
            return None
        index, at = {v: i for i, v in enumerate(self.versions)}, self.key(chosen)
        first, last = having[0], having[-1]
        if at < self.key(first):
            before = self.versions[index[first] - 1] if index[first] > 0 else None
            return f"arrived after {before} (first recorded in {first})" if before else f"arrived by {first}"
        if at > self.key(last):
            after = self.versions[index[last] + 1] if index[last] + 1 < len(self.versions) else None
            return f"was last recorded in {last}" + (f", gone by {after}" if after else "")
        earlier = max((v for v in having if self.key(v) < at), key=self.key)
        later = min((v for v in having if self.key(v) > at), key=self.key)
        return f"is missing from {chosen}, though {earlier} and {later} take it"

    def span_words(self, option: str, version: str | None) -> str | None:
        """When `option` came or went, as seen from the release judging `version` ("arrived after 0.18.1 (first recorded
        in 0.19.1)", "was last recorded in 0.9.2, gone by 0.10.2", "is missing from 0.5.6.post2, though 0.5.5.post3 and 0.5.7
        take it"); None: that release takes it, or no recorded one does."""
        return self._when([v for v in self.versions if option in self._members[v]], version)

    def choice_words(self, option: str, value: str, version: str | None) -> str | None:
        """When a flag's value came or went, as seen from the release judging `version` (EAGLE3 for
        --speculative-algorithm on SGLang 0.4.2: "arrived after 0.4.3.post4 (first recorded in 0.4.4.post4)"); None: no
        recorded release takes it either, or this one does (in another case: eagle3 for EAGLE3)."""
        if self.schema_of is None:
            return None
        folded = value.casefold()

        def takes(version: str) -> bool:
            flag = self.schema_of(version).get(option)  # type: ignore[misc]
            return flag is not None and folded in {c.casefold() for c in flag.choices or ()}

        return self._when([v for v in self.versions if takes(v)], version)

    def out_of_range(self, option: str, version: str | None) -> Diagnosis | None:
        """`option` is unknown to the release judging `version` but some recorded release takes it: when it came or went,
        and what this release takes instead (None: no recorded release takes it, or this one does)."""
        when = self.span_words(option, version)
        if when is None:
            return None
        chosen = self.nearest(version) or ""
        shown = version or chosen
        instead = [o for o in self.groups().get(option, ()) if o != option and o in self.members(chosen)]
        arrived = when.startswith("arrived")
        text = f"{option} is not a flag of {self.engine} {shown}: it {when}" + (
            f"; {shown} takes {instead[0]}" if instead else ": upgrade, or leave it out" if arrived else ": leave it out")
        return Diagnosis("flag_not_in_release", text, option, None, tuple(instead[:1]), replacement=(instead[0],) if instead else None)
