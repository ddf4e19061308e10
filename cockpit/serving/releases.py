"""Which recorded release judges a version, for any engine, and each flag's span of releases.

An engine ships the facts of the releases recorded from their wheels (vllm/data, sglang/data).  A version given by a user
is judged by: its own recording; else the newest recorded of its own release line (a patch, a post release or a release
candidate of a recorded line: vLLM's line is its minor, 0.10 for 0.10.1.1; SGLang's its third number, 0.5.5 for
0.5.5.post1), saying so; else the newest recorded before it, saying so; a version newer than every recording is judged
by the newest, with a note.  Each option string's span is the first and the last recorded release that takes it, so
that a flag too new or too old for the release is named as such, with what that release takes instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cockpit.diagnosis import Diagnosis

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
    options_of: Callable[[str], Iterable[tuple[str, ...]]] | None = field(default=None, compare=False, hash=False)
    choices_of: Callable[[str, str], tuple[str, ...] | None] | None = field(default=None, compare=False, hash=False)

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
    def spans(self) -> dict[str, tuple[str, str]]:
        """option string -> (the first, the last) recorded release that takes it."""
        return _spans(self)

    def groups(self) -> dict[str, tuple[str, ...]]:
        """option string -> the option strings of its flag in the newest release that has it (-sc -> --speculative-config)."""
        return _groups(self)

    def span_words(self, option: str, version: str | None) -> str | None:
        """When `option` came or went, as seen from the release judging `version` ("arrived after 0.18.1 (first recorded
        in 0.19.1)", "was last recorded in 0.9.2, gone by 0.10.2", "is missing from 0.5.6.post2, though 0.5.5.post3 and 0.5.7
        take it"); None: that release takes it, or no recorded one does."""
        span = self.spans().get(option)
        chosen = self.nearest(version)
        if span is None or chosen is None or option in self.members(chosen):
            return None
        first, last = span
        at, index = self.key(chosen), {v: i for i, v in enumerate(self.versions)}
        if self.key(first) < at < self.key(last):  # taken before and after, not by this one
            having = [v for v in self.versions if option in self.members(v)]
            earlier = max((v for v in having if self.key(v) < at), key=self.key)
            later = min((v for v in having if self.key(v) > at), key=self.key)
            return f"is missing from {chosen}, though {earlier} and {later} take it"
        if at < self.key(first):
            before = self.versions[index[first] - 1] if index[first] > 0 else None
            return f"arrived after {before} (first recorded in {first})" if before else f"arrived by {first}"
        if at > self.key(last):
            after = self.versions[index[last] + 1] if index[last] + 1 < len(self.versions) else None
            return f"was last recorded in {last}" + (f", gone by {after}" if after else "")
        return None

    def out_of_range(self, option: str, version: str | None) -> Diagnosis | None:
        """`option` is unknown to the release judging `version` but some recorded release takes it: when it came or went,
        and what this release takes instead (None: no recorded release takes it, or this one does)."""
        when = self.span_words(option, version)
        if when is None:
            return None
        chosen = self.nearest(version) or ""
        shown = version or chosen
        instead = [o for o in self.groups().get(option, ()) if o != option and self._takes(chosen, o)]
        arrived = when.startswith("arrived")
        text = f"{option} is not a flag of {self.engine} {shown}: it {when}" + (
            f"; {shown} takes {instead[0]}" if instead else ": upgrade, or leave it out" if arrived else ": leave it out")
        return Diagnosis("flag_not_in_release", text, option, None, tuple(instead[:1]), replacement=(instead[0],) if instead else None)

    def choice_words(self, option: str, value: str, version: str | None) -> str | None:
        """When a flag's value came or went, as seen from the release judging `version` (EAGLE3 for
        --speculative-algorithm on SGLang 0.4.2: "arrived after 0.4.3.post4 (first recorded in 0.4.4.post4)"); None: no
        recorded release takes it either."""
        if self.choices_of is None:
            return None
        folded = value.casefold()  # eagle3 for EAGLE3: the same value in another case
        having = [v for v in self.versions if folded in {c.casefold() for c in self.choices_of(v, option) or ()}]
        chosen = self.nearest(version)
        if not having or chosen is None:
            return None
        if chosen in having:
            return None
        index, at = {v: i for i, v in enumerate(self.versions)}, self.key(chosen)
        if at < self.key(having[0]):
            before = self.versions[index[having[0]] - 1] if index[having[0]] > 0 else None
            return f"arrived after {before} (first recorded in {having[0]})" if before else f"arrived by {having[0]}"
        if at > self.key(having[-1]):
            return f"was last recorded in {having[-1]}"
        before = max((v for v in having if self.key(v) < at), key=self.key)
        after = min((v for v in having if self.key(v) > at), key=self.key)
        return f"is missing from {chosen}, though {before} and {after} take it"

    def members(self, version: str) -> frozenset[str]:
        """Every option string the recorded release `version` takes."""
        return _members(self, version)

    def _takes(self, version: str, option: str) -> bool:
        return option in self.members(version)


_SPANS: dict[tuple[str, tuple[str, ...]], dict[str, tuple[str, str]]] = {}
_MEMBERS: dict[tuple[str, str], frozenset[str]] = {}


def _members(releases: Releases, version: str) -> frozenset[str]:
    memo = (releases.engine, version)
    if memo not in _MEMBERS:
        _MEMBERS[memo] = frozenset(o for options in (releases.options_of(version) if releases.options_of else ()) for o in options)
    return _MEMBERS[memo]
_GROUPS: dict[tuple[str, tuple[str, ...]], dict[str, tuple[str, ...]]] = {}


def _spans(releases: Releases) -> dict[str, tuple[str, str]]:
    memo = (releases.engine, releases.versions)
    if memo not in _SPANS:
        out: dict[str, tuple[str, str]] = {}
        for version in releases.versions:
            for options in releases.options_of(version) if releases.options_of else ():
                for option in options:
                    out[option] = (out[option][0], version) if option in out else (version, version)
        _SPANS[memo] = out
    return _SPANS[memo]


def _groups(releases: Releases) -> dict[str, tuple[str, ...]]:
    memo = (releases.engine, releases.versions)
    if memo not in _GROUPS:
        out: dict[str, tuple[str, ...]] = {}
        for version in releases.versions:  # oldest first: the newest release's grouping wins
            for options in releases.options_of(version) if releases.options_of else ():
                longs = tuple(sorted(options, key=lambda o: (not o.startswith("--"), options.index(o))))
                for option in options:
                    out[option] = longs
        _GROUPS[memo] = out
    return _GROUPS[memo]
