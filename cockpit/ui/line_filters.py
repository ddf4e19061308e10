"""The app's line filters applied to a row once per style, not once per segment per frame.

Textual passes every line it draws through the app's line filters (ANSI colours to true colour, and
under NO_COLOR or TEXTUAL_FILTERS a monochrome, no-colour or dim filter); each makes a new segment
and looks its style up in a cache, for every segment of every line, every time. A host pane's GPU
rows are made from a few dozen styles and are drawn again each second; `FilteredStyles` keeps the
filtered style of each style it has seen, for one set of filters on one background.

Textual's own filters change only a segment's style, whatever its text: those are the ones known
here, with ASCII mode's (ui/ascii.py), which changes only the text.  A line filter of another kind
is applied the way Textual applies it.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.filter import ANSIToTruecolor, DimFilter, Monochrome, NoColor

from cockpit.ui.ascii import AsciiOnly, to_ascii
from cockpit.ui.textual_internals import terminal_theme_of

PER_STYLE_FILTERS = (ANSIToTruecolor, DimFilter, Monochrome, NoColor)


def _filters_key(filters, background) -> tuple:
    # a filter's identity, and what it reads besides the style: the terminal theme, the dim factor
    return (tuple((id(f), id(terminal_theme_of(f)), getattr(f, "dim_factor", None)) for f in filters),
            background)


class FilteredStyles:
    """Call `prepare` with the filters and background once per draw, then `apply` to each row."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._filters: list = []
        self._background = None
        self._styles: dict = {}
        self._per_style = True
        self._ascii = False

    def prepare(self, filters, background) -> "FilteredStyles":
        """The filters and background the next rows are drawn with (the styles kept are dropped
        when either changed)."""
        key = _filters_key(filters, background)
        if key != self._key:
            self._key = key
            self._styles = {}
            self._per_style = all(type(f) in PER_STYLE_FILTERS or isinstance(f, AsciiOnly) for f in filters)
            self._ascii = any(isinstance(f, AsciiOnly) for f in filters)
        self._filters, self._background = [f for f in filters if not isinstance(f, AsciiOnly) or not self._per_style], background
        return self

    def apply(self, segments) -> list[Segment]:
        """`segments` through the prepared filters, as Textual's filters would make them."""
        filters, background = self._filters, self._background
        if not filters:
            return [Segment(to_ascii(t), s, c) for t, s, c in segments] if self._ascii else list(segments)
        if not self._per_style:
            segments = list(segments)
            for line_filter in filters:
                segments = line_filter.apply(segments, background)
            return segments
        # By identity: a row's styles are the same cached objects frame after frame, and a Style's
        # hash is a Python call.  Each entry keeps its style alive, so an id is never reused under it.
        styles = self._styles
        out = []
        for text, style, _control in segments:
            entry = styles.get(id(style))
            if entry is None or entry[0] is not style:
                one = [Segment(" ", style)]
                for line_filter in filters:
                    one = line_filter.apply(one, background)
                entry = styles[id(style)] = (style, one[0].style)
                if len(styles) > 4096:  # bounded: styles made afresh each time cannot grow it
                    styles.clear()
                    styles[id(style)] = entry
            out.append(Segment(to_ascii(text) if self._ascii else text, entry[1]))
        return out
