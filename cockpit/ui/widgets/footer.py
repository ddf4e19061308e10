"""The footer: Textual's, with the keys it replaced let go, and only the keys that fit.

Textual's Footer builds its keys anew whenever the bindings change, and binds each key's `compact` to
its own (`data_bind`): a watcher on the footer that Textual drops only when `compact` next changes.
Left in a terminal for days, every rebuild's keys stayed alive (about 11 KB each, 18 a rebuild): the
footer rebuilt with every server poll grew the demo by 12 MB a minute.  After each rebuild the footer's
`compact` is marked changed (Textual's public `mutate_reactive`), which drops the watchers of the keys
that were removed; the keys on screen keep theirs.

A narrow terminal cut the last key mid-word (`p pro` at 80 columns): after each rebuild and resize, a key
that would run past the footer's right edge (or under the palette key docked there) is hidden whole, with
every key after it; `?` lists them all.  The widths are measured as the horizontal layout will place the keys
(each key's content width, padding and margins: public widget API), before it does, so no frame shows a key cut
(a footer rebuilt behind a dialog is never laid out until the dialog closes)."""

from __future__ import annotations

from textual import events
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer

_ROOM = Size(1000, 1)


def _width(child: Widget) -> tuple[int, int, int]:
    """(margin left, width, margin right) of a key as the footer's horizontal layout gives it."""
    margin = child.styles.margin
    return margin.left, child.get_content_width(_ROOM, _ROOM) + child.styles.gutter.width, margin.right


class CockpitFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(Footer.compact)
        self._fit(self.size.width)

    def on_resize(self, event: events.Resize) -> None:
        self._fit(event.size.width)

    def _fit(self, width: int) -> None:
        """Show the keys that fit whole in `width` columns; hide the first that does not, and every one after it."""
        if width <= 0:
            return
        docked = [c for c in self.children if c.has_class("-command-palette")]
        limit = width - sum(sum(_width(c)) for c in docked)
        x, full = 0, False
        for child in self.children:
            if child in docked:
                continue
            left, wide, right = _width(child)
            full = full or x + left + wide > limit
            child.display = not full
            x += left + wide + right
