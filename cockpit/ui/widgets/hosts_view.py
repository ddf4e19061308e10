"""The hosts: one pane per configured host, with zoom (one host, then one GPU of it) and focus moving
between them.  The app's actions call these; this widget owns the panes and what is zoomed."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.dom import NoScreen
from textual.errors import NoWidget
from textual.widgets import Input, Static

from cockpit.config import HostConfig
from cockpit.ui.widgets.fleet import FleetTable
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.steady_input import SteadyInput

FLEET_AT = 16  # beyond this many hosts: one line per host (the fleet view); enter opens a host's pane


class HostsView(VerticalScroll):
    # its host panes (or the fleet table) take the focus, never the container itself: Tab would stop on it and show
    # nothing moved; focusing a pane scrolls it into view
    can_focus = False

    def __init__(self, hosts: tuple[HostConfig, ...], ascii_only: bool = False, fleet_at: int = FLEET_AT, **kwargs):
        super().__init__(**kwargs)
        self.hosts = hosts
        self.ascii_only = ascii_only
        self.fleet: FleetTable | None = FleetTable(hosts, id="fleet") if len(hosts) > fleet_at else None
        # a fleet builds a host's pane when it is opened, not 128 of them up front
        self.panes: dict[str, HostPane] = {} if self.fleet else {host.name: HostPane(host, ascii_only=ascii_only) for host in hosts}
        self.zoomed: str | None = None

    def compose(self):
        if not self.hosts:
            yield Static("No hosts configured. Add [hosts.NAME] tables to the config "
                         "(`cockpit init --example` prints an annotated one).", id="empty")
        if self.fleet is not None:
            search = SteadyInput(placeholder="filter: a name's part, role:NAME, state:down (enter keeps it, esc clears)", id="fleet-filter")
            search.display = False
            yield search
            yield self.fleet
        yield from self.panes.values()

    def panes_in_view(self) -> set[str]:
        """The hosts whose pane has a line on the screen now: worked out once for all panes (asking
        each pane on its own walks the widget tree per pane)."""
        try:
            screen = self.screen
            viewport = screen.find_widget(self).region
        except (NoScreen, NoWidget):  # not laid out, or hidden (another pane is primary): none is seen
            return set()
        seen = set()
        for name, pane in self.panes.items():
            try:
                if pane.display and screen.find_widget(pane).region.overlaps(viewport):
                    seen.add(name)
            except NoWidget:  # not in the layout (hidden): out of view
                continue
        return seen

    def open_host(self, name: str) -> HostPane:
        """A fleet's host in its own pane (zoomed: the fleet hides until it is closed)."""
        pane = self.panes.get(name)
        if pane is None:
            pane = self.panes[name] = HostPane(next(h for h in self.hosts if h.name == name), ascii_only=self.ascii_only)
            self.mount(pane)
        for other in self.panes.values():
            other.display = other is pane
        if self.fleet is not None:
            self.fleet.display = False
        self.zoomed = name
        return pane

    def show_filter(self) -> Input | None:
        if self.fleet is None:
            return None
        search = self.query_one("#fleet-filter", Input)
        search.display = True
        search.value = self.fleet.filter_text
        search.focus()
        return search

    def on_resize(self) -> None:
        if self.zoomed is not None and self.zoomed in self.panes:
            self.panes[self.zoomed].fill(self.size.height)

    def toggle_zoom(self, pane: HostPane | None) -> str | None:
        """Zoom the given pane (only it shows, filling the rows with its GPUs' histories), or unzoom; a
        reason when there is nothing to zoom."""
        if self.zoomed is not None:
            self.panes[self.zoomed].zoom_gpu(None)
            self.panes[self.zoomed].fill(0)
            self.zoomed = None
            if self.fleet is not None:  # back to the fleet's lines
                for other in self.panes.values():
                    other.display = False
                self.fleet.display = True
                self.fleet.focus()
                return None
            for other in self.panes.values():
                other.display = True
            if pane:
                pane.scroll_visible()
            return None
        if pane is None:
            return "Focus a host pane first (j/k or tab)"
        self.zoomed = pane.host.name
        for other in self.panes.values():
            other.display = other is pane
        pane.fill(self.size.height)
        return None

    def zoom_gpu(self, index: int) -> str | None:
        """One GPU of the zoomed host in detail (the same digit again: all GPUs)."""
        if self.zoomed is None:
            return "Zoom a host first (z), then press a GPU's number"
        pane = self.panes[self.zoomed]
        pane.zoom_gpu(None if pane.zoomed_gpu == index else index)
        return None

    def move_focus(self, current, step: int) -> None:
        panes = [p for p in self.panes.values() if p.display]
        if panes:
            target = panes[((panes.index(current) if current in panes else -1) + step) % len(panes)]
            target.focus()
            target.scroll_visible()
