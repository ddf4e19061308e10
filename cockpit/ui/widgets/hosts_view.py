"""The hosts: one pane per configured host, with zoom (one host, then one GPU of it) and focus moving
between them.  The app's actions call these; this widget owns the panes and what is zoomed."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Static

from cockpit.config import HostConfig
from cockpit.ui.widgets.host_pane import HostPane


class HostsView(VerticalScroll):
    def __init__(self, hosts: tuple[HostConfig, ...], ascii_only: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.hosts = hosts
        self.panes: dict[str, HostPane] = {host.name: HostPane(host, ascii_only=ascii_only) for host in hosts}
        self.zoomed: str | None = None

    def compose(self):
        if not self.hosts:
            yield Static("No hosts configured. Add [hosts.NAME] tables to the config "
                         "(`cockpit init --example` prints an annotated one).", id="empty")
        yield from self.panes.values()

    def toggle_zoom(self, pane: HostPane | None) -> str | None:
        """Zoom the given pane (only it shows), or unzoom; a reason when there is nothing to zoom."""
        if self.zoomed is not None:
            self.panes[self.zoomed].zoom_gpu(None)
            self.zoomed = None
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
