"""The footer: Textual's, with the keys it replaced let go, and only the keys that fit.

Textual's Footer builds its keys anew whenever the bindings change, and binds each key's `compact` to
its own (`data_bind`): a watcher on the footer that Textual drops only when `compact` next changes.
Left in a terminal for days, every rebuild's keys stayed alive (about 11 KB each, 18 a rebuild): the
footer rebuilt with every server poll grew the demo by 12 MB a minute.  After each rebuild the footer's
`compact` is marked changed (Textual's public `mutate_reactive`), which drops the watchers of the keys
that were removed; the keys on screen keep theirs.

A narrow terminal cut the last key mid-word (`p pro` at 80 columns): after each rebuild and resize, a key
that would run past the footer's right edge (or under the palette key docked there) is hidden whole, with
every key after it; `?` lists them all.  Only public widget API: children, regions, display."""

from __future__ import annotations

from textual import events
from textual.widgets import Footer


class CockpitFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(Footer.compact)
        self.call_after_refresh(self._fit)

    def on_resize(self, _event: events.Resize) -> None:
        for child in self.children:
            child.display = True
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """Hide, whole, the keys that do not fit (the first that runs past the edge and every one after it)."""
        docked = [c for c in self.children if c.has_class("-command-palette")]
        limit = min([self.region.right, *(c.region.x for c in docked if c.display)])
        full = False
        for child in self.children:
            if child in docked:
                continue
            if full or (child.display and child.region.right > limit):
                child.display = False
                full = True
