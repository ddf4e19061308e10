"""ASCII mode: every glyph on the screen is ASCII, whoever drew it.

The cockpit's own renderers choose ASCII glyphs where they have a better ASCII form (sparklines
`_.-=+*#`, memory bars `#.`, `LOCKED`, ` | `).  Everything else (Textual's borders, scrollbars,
progress bars, the header's icon, Rich's ellipsis, plotext's chart cells, a glyph added next year) is
translated here, as the app's last line filter (`App.get_line_filters`, Textual's public hook), so
that no path can leave a non-ASCII glyph on the screen.  A translation keeps the cell width: a
two-cell glyph becomes two ASCII characters, so columns stay where they were.

Box drawing keeps its shape: corners and junctions `+`, lines `-` and `|`, and a heavy horizontal
line `=` (so the focused pane's heavy border still stands out: `+====+`).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from rich.cells import cell_len
from rich.segment import Segment
from textual.filter import LineFilter

_EXACT = {
    "…": "~", "·": "|", "•": "*", "—": "-", "–": "-", "‘": "'", "’": "'", "“": '"', "”": '"', "×": "x",
    "✓": "+", "✔": "+", "✗": "x", "✘": "x", "⚠": "!", "⭘": "o", "●": "*", "○": "o", "◆": "*", "■": "#", "□": "o",
    "▶": ">", "▸": ">", "◀": "<", "◂": "<", "▲": "^", "▴": "^", "▼": "v", "▾": "v", "→": ">", "←": "<", "↑": "^", "↓": "v",
    "≥": ">", "≤": "<", "≈": "~", "°": "o", "µ": "u", "±": "+", "▝": "'", "▘": "'", "▖": ".", "▗": ".", "▀": '"', "▄": "_",
    "▌": "|", "▐": "|", "▞": "/", "▚": "\\", "▙": "#", "▛": "#", "▜": "#", "▟": "#",
    "░": ".", "▒": ":", "▓": "%", "█": "#",
    "▁": "_", "▂": ".", "▃": "-", "▅": "=", "▆": "+", "▇": "*",  # lower blocks, by height (▄ above)
    "╸": "=", "╺": "=", "╹": "|", "╻": "|",  # Textual's progress bar ends
    "▏": "|", "▎": "|", "▍": "|", "▊": "|", "▕": "|", "▉": "#",  # the footer's separator, scrollbar ends
}
_KEYS = {"⏎": "enter", "↑": "up", "↓": "down", "←": "left", "→": "right", "⇥": "tab", "⌫": "backspace", "␣": "space", "⎋": "esc"}


def key_words(shown: str) -> str:
    """A key as the footer shows it, with its symbols as words (`⏎` -> `enter`)."""
    for symbol, word in _KEYS.items():
        shown = shown.replace(symbol, word)
    return to_ascii(shown)


@lru_cache(maxsize=4096)
def glyph(char: str) -> str:
    """The ASCII form of one character, as wide as it is."""
    if char.isascii():
        return char
    if char in _EXACT:
        return _EXACT[char]
    width = max(1, cell_len(char))
    name = unicodedata.name(char, "")
    if name.startswith("BOX DRAWINGS"):
        horizontal, vertical = "HORIZONTAL" in name, "VERTICAL" in name
        if horizontal and not vertical:
            return "=" if "HEAVY" in name or "DOUBLE" in name else "-"
        if vertical and not horizontal:
            return "|"
        return "+"
    if name.startswith("BRAILLE PATTERN"):
        return "." if char == "\u2800" else "*"  # plotext's dots: a point is there
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return ""  # combining marks, zero-width joiners
    if unicodedata.category(char) == "Zs":
        return " " * width
    folded = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()  # é -> e
    if folded and cell_len(folded) == width:
        return folded
    return "?" * width


def to_ascii(text: str) -> str:
    if text.isascii():
        return text
    return "".join(glyph(c) for c in text)


class AsciiOnly(LineFilter):
    """The line filter of ASCII mode: a segment's text in ASCII, its style untouched."""

    def apply(self, segments: list[Segment], background) -> list[Segment]:
        return [segment if segment.control or segment.text.isascii() else Segment(to_ascii(segment.text), segment.style, segment.control)
                for segment in segments]
