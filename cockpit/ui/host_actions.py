"""The hosts in the TUI: new samples painted once a second, the fleet view's filter and opening a
host, zoom (a host, then one GPU), moving between hosts, reconnecting now."""

from __future__ import annotations

from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.mixins import HostsApp


class HostActions(HostsApp):
    """Mixed into CockpitApp; what it needs of the app is HostsApp (ui/mixins.py): its hub, hosts_view, panes, notify."""

    def _queue_snapshot(self, snapshot) -> None:
        """A host's new sample, from the hub (on this event loop): kept until the paint timer draws
        it.  Hosts sample at staggered moments; painting each as it comes would cost a frame per
        host per second, and a message per sample costs a dispatch for a dict write.  No widget
        is touched here."""
        if snapshot.name in self.panes or self.hosts_view.fleet is not None:
            self.updates_handled += 1
            self._pending[snapshot.name] = snapshot

    def _paint_pending(self) -> None:
        pending, self._pending = self._pending, {}
        fleet = self.hosts_view.fleet
        in_view = self.hosts_view.panes_in_view() if pending else set()
        with self.batch_update():
            for name, snapshot in pending.items():
                if name in self.panes:
                    self.panes[name].show(snapshot, self.hub.history.get(name), name in in_view)
                if fleet is not None:
                    fleet.update(snapshot)
            for name, pane in self.panes.items():
                if name not in pending and pane.display:
                    pane.tick()
            if fleet is not None and fleet.display:
                fleet.tick()

    def on_fleet_table_open(self, message) -> None:
        pane = self.hosts_view.open_host(message.host)
        snapshot = self.hub.latest.get(message.host)
        if snapshot is not None:
            pane.show(snapshot, self.hub.history.get(message.host))
        pane.focus()
        self.show_keys()

    def on_fleet_table_filter(self, message) -> None:
        self.hosts_view.show_filter()

    def on_input_changed(self, event) -> None:
        if event.input.id == "fleet-filter" and self.hosts_view.fleet is not None:
            self.hosts_view.fleet.set_filter(event.value)

    def on_input_submitted(self, event) -> None:
        if event.input.id == "fleet-filter" and self.hosts_view.fleet is not None:
            event.input.display = False
            self.hosts_view.fleet.focus()

    def on_key(self, event) -> None:
        focused = self.screen_stack[0].focused if self.screen_stack else None
        if event.key == "escape" and focused is not None and focused.id == "fleet-filter" and self.hosts_view.fleet is not None:
            focused.display = False
            self.hosts_view.fleet.set_filter("")
            self.hosts_view.fleet.focus()
            event.stop()

    def _focused_host(self) -> HostPane | None:
        return self.focused if isinstance(self.focused, HostPane) else None

    @property
    def zoomed(self) -> str | None:
        return self.hosts_view.zoomed

    def _say(self, problem: str | None) -> None:
        if problem:
            self.notify(problem, severity="warning")

    def action_zoom_gpu(self, index: int) -> None:
        self._say(self.hosts_view.zoom_gpu(index))

    def action_zoom(self, _shown: str = "") -> None:
        if self._focused_host() is None and self.zoomed is None:
            self._say(f"z zooms a host, and {self._focused_view()} has the focus: h (or tab) moves to the hosts")
            return
        self._say(self.hosts_view.toggle_zoom(self._focused_host()))

    def action_focus_next_host(self) -> None:
        self.hosts_view.move_focus(self._focused_host(), 1)

    def action_focus_previous_host(self) -> None:
        self.hosts_view.move_focus(self._focused_host(), -1)

    def action_reconnect(self) -> None:
        pane = self._focused_host()
        woken = self.hub.retry_now([pane.host.name] if pane is not None else None)
        if woken:
            self.notify(f"reconnecting {', '.join(woken)} now", timeout=4)
        else:
            self.notify("no host is waiting to reconnect" if pane is None else f"{pane.host.name} is not waiting to reconnect",
                        severity="warning", timeout=4)
