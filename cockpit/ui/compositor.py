"""Textual's compositor, without drawing what cannot be seen.

To repaint the lines that changed, Textual's compositor asks every widget whose clip overlaps the box
around all of them for its whole visible part (`Compositor._get_renders`), then keeps, front to back, the
first piece drawn for each cut of each changed line. A widget behind others is drawn and thrown away:
at 8 hosts x 8 GPUs each second's repaint drew the screen, the main row, the hosts column and its
scrollbar (about 190 lines) to change 33 lines that the host panes in front had already drawn, and
docked widgets such as the header and footer, whose clip is the whole screen, were drawn each time too.

`CoveringCompositor._render_chops` is Textual's (8.x) with one step more: before a widget is drawn, if
every cut it would fill on the lines being repainted is already filled by a widget in front (or it has no
line being repainted), it is skipped. What reaches the terminal is the same by construction (Textual keeps
the front piece); tests/test_quiet_ui.py compares both compositors' pieces update by update.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.screen import Screen

from cockpit.ui.textual_internals import mirrored, plain

try:  # a private module: guarded, and used only on the Textual it was read from
    from textual._compositor import Compositor
except ImportError:  # pragma: no cover - a Textual without it runs its own compositor
    Compositor = object  # type: ignore[assignment,misc]


class CoveringCompositor(Compositor):  # type: ignore[valid-type,misc]
    skipped = 0  # widgets not drawn because nothing of them would show (a figure for tests and profiles)

    def _render_chops(self, crop: Region, is_rendered_line):
        cuts = self.cuts
        chops = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        intersection = Region.intersection
        crop_overlaps = crop.overlaps
        for widget, (region, clip) in self.visible_widgets.items():  # front to back, as Textual draws
            if not crop_overlaps(clip):
                continue
            render_region = intersection(region, clip)
            render_x, render_y, width, height = render_region
            if not (width and height):
                continue
            first_cut, last_cut = render_region.column_span
            lines = [y for y in range(render_y, render_y + height) if is_rendered_line(y)]
            if all(all(chops[y].get(cut) is not None for cut in cuts[y] if first_cut <= cut < last_cut) for y in lines):
                self.skipped += 1
                continue
            strips = widget.render_lines(Region(render_x - region.x, render_y - region.y, width, height))
            for y in lines:
                if y - render_y >= len(strips):  # a widget that drew fewer lines (Textual zips them)
                    break
                strip = strips[y - render_y]
                chops_line = chops[y]
                final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                get_chops_line = chops_line.get
                for cut, piece in zip(final_cuts, strip.divide([cut - render_x for cut in final_cuts[1:]])):
                    if get_chops_line(cut) is None:
                        chops_line[cut] = piece
        return chops


def covering(screen: Screen) -> Screen:
    """`screen` drawing through CoveringCompositor, where this Textual is one it was read from."""
    if mirrored() and not plain("compositor") and Compositor is not object and type(getattr(screen, "_compositor", None)) is Compositor:
        screen._compositor = CoveringCompositor()
    return screen
