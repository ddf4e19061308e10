"""Logs as users have them: the one place a log's text becomes the lines the parsers read.

Nobody reads a server's log from a clean file.  It comes through `docker logs --timestamps`,
`kubectl logs --prefix [--timestamps]`, `journalctl -u sglang`, `srun --label`, docker compose's
`service  | `, a coloured terminal or `grep --color=always`, a `tmux capture-pane` of a narrow pane
(long lines hard-wrapped at its width), `tail` (the start gone), or a line pasted into a chat.

What the intake does, for every reader (`parse-log`, `lint-flags --log`, `cockpit server --log`,
the server pane, the training-run parser):
- removes ANSI/OSC escape sequences and other control bytes, and CRs at line ends;
- recognises and strips the per-line prefixes of the common collectors: docker's RFC 3339
  timestamp, kubectl's `[pod/NAME/CONTAINER]`, journald/syslog's `Mon DD HH:MM:SS host proc[pid]:`
  (and its ISO form), Slurm's `N: ` label, and any other constant prefix it can prove by repetition
  (most lines start with it); SGLang's own `[time TPn]` stays: it is part of SGLang's format;
- rejoins lines that a terminal hard-wrapped at its width (evident when several lines are exactly
  the longest length and none is longer);
- keeps each line's original number (1-based) for every message.

`Intake` is the streaming form (a followed log: prefixes only, learnt from what it has seen);
`take_lines` the whole-text form (prefixes, constant prefixes and wrapping).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_ESCAPES = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-?]*[ -/]*[@-~]|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# (name, pattern at the line's start); applied in this order, each at most once
PREFIXES = (
    ("kubectl", re.compile(r"^\[pod/[^/\]\s]+/[^\]\s]+\] ")),
    ("docker", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d) ")),
    ("journald", re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)) "
                            r"\S+ [^\s:\[\]]+(?:\[\d+\])?: ")),
    ("slurm", re.compile(r"^ {0,3}\d{1,5}: ")),
)
# Slurm's label looks like too many ordinary lines ("0: ..."): it is stripped only where most lines carry it
_BY_MAJORITY = {"slurm"}
_LINE_STARTS = re.compile(r"^(?:\[\d{4}-\d\d-\d\d|usage: |Traceback |\S+: error: |step \d+: |Training |Evaluating |INFO|WARNING|ERROR)")


def overprint(text: str) -> str:
    """What a terminal shows of a line redrawn with carriage returns (a progress bar: each redraw starts again at column
    0, over what was there); a trailing CR is no redraw."""
    pieces = text.rstrip("\r").split("\r")
    screen = ""
    for piece in pieces:
        screen = piece + screen[len(piece):]
    return screen


def clean(text: str) -> str:
    """One line's text: escape sequences and control bytes gone (tabs kept), a trailing CR gone, a line redrawn with
    carriage returns as the terminal shows it (overprint)."""
    if "\x1b" in text or "\x9b" in text:
        text = _ESCAPES.sub("", text)
    if "\r" in text:
        text = overprint(text)
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
    return text


@dataclass(frozen=True)
class Line:
    text: str
    number: int  # 1-based, in what was read (a rejoined line: its first piece's)
    source: str = ""  # what a prefix said of where it came from (a pod, a Slurm task, a unit)


class Intake:
    """Lines one at a time (a followed log): cleaned, with the collector prefixes the log has shown
    stripped.  A prefix kind is taken on once it has been seen (Slurm's label: once most of the
    first lines carry it)."""

    def __init__(self) -> None:
        self.kinds: list[str] = []  # the prefixes seen, in PREFIXES order
        self._votes: Counter = Counter()
        self._seen = 0
        self.constant: str | None = None

    def learn(self, texts: list[str]) -> None:
        """Decide from a batch of lines (the first of a log) which prefixes it carries."""
        sample = [t for t in texts[:400] if t.strip()]
        if not sample:
            return
        for name, pattern in PREFIXES:
            hits = sum(1 for t in sample if pattern.match(self._strip_known(t, upto=name)))
            if hits and (name not in _BY_MAJORITY or hits >= 0.6 * len(sample)) and name not in self.kinds:
                self.kinds.append(name)
        self.kinds.sort(key=[n for n, _ in PREFIXES].index)
        if self.constant is None:
            self.constant = constant_prefix([self._strip_known(t) for t in sample])

    def _strip_known(self, text: str, upto: str | None = None) -> str:
        for name, pattern in PREFIXES:
            if name == upto:
                break
            if name in self.kinds:
                m = pattern.match(text)
                if m:
                    text = text[m.end():]
        return text

    def strip(self, text: str) -> tuple[str, str]:
        """(the line without its prefixes, what they said of its source)."""
        source = ""
        for name, pattern in PREFIXES:
            if name in self.kinds or (name not in _BY_MAJORITY and pattern.match(text)):
                m = pattern.match(text)
                if m:
                    if name not in self.kinds:
                        self.kinds.append(name)
                        self.kinds.sort(key=[n for n, _ in PREFIXES].index)
                    if name in ("kubectl", "slurm"):
                        source = m.group(0).strip().strip("[]:")
                    elif name == "journald":
                        source = m.group(0).split()[-1].rstrip(":")
                    text = text[m.end():]
        if self.constant and text.startswith(self.constant):
            text = text[len(self.constant):]
        return text, source

    def line(self, raw: str, number: int) -> Line:
        text, source = self.strip(clean(raw).rstrip("\r"))
        return Line(text, number, source)

    def texts(self, cleaned: list[str]) -> list[str]:
        """A batch of cleaned lines (a follower's new lines) without their prefixes: the first
        batch also teaches it which the log carries."""
        if self._seen == 0 and cleaned:
            self.learn(cleaned)
        self._seen += len(cleaned)
        if not self.kinds and not self.constant:
            return [self.strip(t)[0] if t[:1].isdigit() or t[:1] == "[" else t for t in cleaned]
        return [self.strip(t)[0] for t in cleaned]


def constant_prefix(texts: list[str], share: float = 0.9, minimum: int = 5) -> str | None:
    """A prefix that most lines start with and that ends at a separator (`| `, `: `, `] `, `> `): a
    collector's (docker compose's `sglang-1  | `, a tmux logger's `[gpu-server] `), proved by repetition."""
    lines = [t for t in texts if t.strip()]
    if len(lines) < minimum:
        return None
    heads: Counter = Counter()
    for text in lines:
        m = re.match(r"^(.{1,48}?(?:\s\|\s|\]\s|>\s))", text)
        if m:
            heads[m.group(1)] += 1
    if not heads:
        return None
    head, count = heads.most_common(1)[0]
    if count >= share * len(lines) and not _LINE_STARTS.match(head) and not re.match(r"^\[\d{4}-", head):
        return head
    return None


TERMINAL_WIDTHS = (80, 100, 120, 132, 160, 200)


def wrap_width(texts: list[str]) -> int | None:
    """The width a terminal hard-wrapped these lines at, when that is evident: at least two lines
    are exactly the longest length (40 columns or more), and a piece after one of them does not
    start like a line of its own; or one such line, exactly as wide as a terminal usually is."""
    lengths = [len(t) for t in texts]
    if not lengths:
        return None
    width = max(lengths)
    full = [i for i, n in enumerate(lengths) if n == width and i + 1 < len(texts)]
    if width < 40 or not full:
        return None
    continued = [i for i in full if texts[i + 1] and not _LINE_STARTS.match(texts[i + 1])]
    if len(full) == 1:  # one long line cut once (an argparse error in a tmux pane): only at a terminal's usual width
        return width if width in TERMINAL_WIDTHS and continued else None
    return width if len(continued) >= max(2, len(full) // 2) else None


def take_lines(raw_lines: list[str], first_number: int = 1, numbers: list[int] | None = None) -> tuple[list[Line], dict]:
    """A whole log's lines as the parsers should read them, and what was done (for a note):
    {"prefixes": [...], "constant_prefix": str|None, "wrap_width": int|None, "rejoined": n}.

    A wrapped line is rejoined when the terminal's width is evident (the piece before is exactly that
    wide), or, in a log whose every line carries a collector's prefix, when a piece has none (a
    capture trims the space the cut fell on: then the space comes back)."""
    intake = Intake()
    cleaned = [clean(r).rstrip("\r") for r in raw_lines]
    intake.learn(cleaned)
    intake.constant = None  # proved after rejoining: wrapped pieces are no evidence either way
    width = wrap_width(cleaned)
    widest = max((len(t) for t in cleaned), default=0)
    marked = [(name, pattern) for name, pattern in PREFIXES if name in intake.kinds and name not in _BY_MAJORITY]

    learnt = [(name, pattern) for name, pattern in PREFIXES if name in intake.kinds]

    def prefixed(text: str, kinds=marked) -> bool:
        return any(pattern.match(text) for _, pattern in kinds)

    pieces: list[list] = []  # [text, number, starts with a prefix]
    rejoined = 0
    for index, text in enumerate(cleaned):
        number = numbers[index] if numbers is not None else first_number + index
        before = cleaned[index - 1] if index else ""
        if pieces and width and len(before) == width and not _LINE_STARTS.match(text) and not prefixed(text, learnt):
            pieces[-1][0] += text
            rejoined += 1
        elif pieces and marked and pieces[-1][2] and text.strip() and not prefixed(text) and not _LINE_STARTS.match(text):
            pieces[-1][0] += ("" if len(before) >= (width or widest) else " ") + text.lstrip()
            rejoined += 1
        else:
            pieces.append([text, number, prefixed(text)])
    joined = [p[0] for p in pieces]
    intake.constant = constant_prefix([intake._strip_known(t) for t in joined[:400]])
    lines = []
    for text, number, _ in pieces:
        stripped, source = intake.strip(text)
        lines.append(Line(stripped, number, source))
    return lines, {"prefixes": list(intake.kinds), "constant_prefix": intake.constant, "wrap_width": width or (widest if rejoined else None),
                   "rejoined": rejoined}
