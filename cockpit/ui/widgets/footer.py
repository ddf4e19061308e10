"""The footer: Textual's, with the keys it replaced let go.

Textual's Footer builds its keys anew whenever the bindings change, and binds each key's `compact` to
its own (`data_bind`): a watcher on the footer that Textual drops only when `compact` next changes.
Left in a terminal for days, every rebuild's keys stayed alive (about 11 KB each, 18 a rebuild): the
footer rebuilt with every server poll grew the demo by 12 MB a minute.  After each rebuild the footer's
`compact` is marked changed (Textual's public `mutate_reactive`), which drops the watchers of the keys
that were removed; the keys on screen keep theirs."""

from __future__ import annotations

from textual.widgets import Footer


class CockpitFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.mutate_reactive(Footer.compact)
