"""Which panes show and where the focus goes: the layout for the terminal's size (ui/layout.py),
the view keys, the footer's keys, messages in a small terminal, and saying where a key works."""

from __future__ import annotations


from textual import events
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer

from cockpit import __version__
from cockpit.runbook.model import StepState
from cockpit.ui import actions
from cockpit.ui.layout import Layout, MessageBar, TabLine, ViewBar
from cockpit.ui.widgets.bench_pane import BenchPane
from cockpit.ui.widgets.checklist import ChecklistPane
from cockpit.ui.widgets.command_log import CommandLogPane
from cockpit.ui.widgets.host_pane import HostPane
from cockpit.ui.widgets.runs_pane import RunsPane
from cockpit.ui.widgets.proc_pane import ProcessPane
from cockpit.ui.widgets.server_log import ServerLogPane
from cockpit.ui.mixins import ViewsApp


class ViewActions(ViewsApp):
    """Mixed into CockpitApp; what it needs of the app is ViewsApp (ui/mixins.py): its layout_state, hosts_view, panes, runbook, context, config."""

    def on_resize(self, event: events.Resize) -> None:
        """Textual tells the screens of the terminal's new size 1/120 s after the app (App._on_resize's timer, later on a
        loaded machine): a repaint in between (a pane's new figures) is laid out at the old size and drawn into the
        smaller terminal, which scrolls it.  The screens are told now; Textual's own later word is then no change.
        (Measured: tests/test_layout.py, no frame at a size the terminal no longer has: 1 of ~60 resizes drew one under
        CI's load with the timer alone.)"""
        for screen in self.screen_stack:
            screen.post_message(events.Resize(event.size, event.virtual_size, event.container_size))

    def screen_resized(self, size: Size) -> None:
        """The main screen took a new size (ui/screens/main.py: not the app's resize event, which comes while the screen
        still has the old size)."""
        compact = Layout.is_compact(size.width, size.height)
        if self._laid_out:
            target = self.layout_state.resized(compact, self._view_of_focus())  # the pane in use stays in view
        else:
            self.layout_state.compact, target = compact, None
        self.query_one("#main").set_class(size.width < 130, "-narrow")
        self.apply_layout(size.height)
        if target is not None and self.screen is self.screen_stack[0]:
            self.call_after_refresh(self._focus_view, target)  # and keeps the focus (a pane hidden by the layout loses it)

    def _panes(self) -> dict[str, Widget]:
        found: dict[str, Widget] = {"hosts": self.hosts_view}
        for view, kind in (("checklist", ChecklistPane), ("procs", ProcessPane), ("runs", RunsPane), ("server", ServerLogPane),
                           ("bench", BenchPane), ("log", CommandLogPane)):
            panes = self.query(kind)
            if panes:
                found[view] = panes.first()
        return found

    def apply_layout(self, height: int | None = None) -> None:
        """Show the panes the layout says (small terminal: one; large: side by side, bottom panes
        sharing what the hosts and the checklist leave).  `height`: the terminal's, when it is resizing."""
        state, panes = self.layout_state, self._panes()
        self.set_class(state.compact, "-compact")
        bar = self.query_one(MessageBar)
        # the main screen's size: between the app's resize and the screen's, the screen still lays out at the old one
        screen = self.screen_stack[0].outer_size if self.screen_stack else self.size  # (Screen.size is the app's)
        rows = (height or screen.height or self.size.height) - 2 - bar.rows  # less the title, the footer and the messages
        heights, tabbed = ({}, []) if state.compact else state.shares(rows)
        for view, pane in panes.items():
            if view in ("hosts", "checklist"):
                pane.display = state.shown(view)
                continue
            pane.set_class(not state.shown(view), "hidden")
            if view in heights:  # its share of a large terminal (inline: the compact layout's CSS applies otherwise)
                # never more than its share: a pane's own min-height (the charts' 14 rows) took the hosts' and the
                # checklist's rows at 130x36 (issue 50 item 1)
                pane.styles.min_height = 0
                if view == "runs":
                    pane.styles.max_height = heights[view]  # as tall as its runs need, up to its share
                else:
                    pane.styles.height = heights[view]
            else:
                pane.styles.height = pane.styles.max_height = pane.styles.min_height = None
        tabs = self.query_one(TabLine)
        tabs.show_tabs(next(iter(heights), None), [v for v in tabbed if v in panes])
        self.query_one("#main").display = state.shown("hosts") or state.shown("checklist")
        self.query_one(ViewBar).display = state.compact
        bar.display = bool(bar.messages)
        self._show_views(panes)
        self.sub_title = self._subtitle()
        footer = self.query(Footer)
        if footer:
            footer.first().compact = state.compact
        self.show_keys()

    def _show_views(self, panes: dict | None = None) -> None:
        """The view bar: the views, and how the checklist stands (seen from every view)."""
        progress = ""
        if self.runbook is not None:
            views = self.runbook.views()
            progress = f"{sum(v.state is StepState.PASSED for v in views)}/{len(views)} passed"
        self.query_one(ViewBar).show_state(self.layout_state, set(panes or self._panes()), progress)

    def show_keys(self) -> None:
        """The footer holds the keys that work now: f only while a fix is offered; the view keys in a
        large terminal only (a small one has them in its view bar).  Asked of check_action (Textual's
        public way): this only makes the footer ask again, and only when its answers changed (the footer
        rebuilds every key when asked: once a second with each server poll, it was most of the TUI's CPU
        with a server up).  Textual asks again by itself when the focus moves."""
        shown = tuple(bool(self.check_action(action, ())) for action in actions.conditional_actions())
        if shown != self._keys_shown:
            self._keys_shown = shown
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """Whether a key is in the footer now.  A key shown only at times has two bindings (ui/actions.py):
        the shown one answers while its condition holds, its hidden twin otherwise, so the key always
        does what it does (or says why it cannot) and the footer lists it only when it applies: the
        view keys in a large terminal, f while a fix is offered, z with a host in focus, n with a runbook."""
        rule = actions.visibility_rule(action)
        if not rule:
            return True
        twin = parameters == ("hidden",)
        if rule == "large":
            shown = not self.layout_state.compact and (action != "toggle_runs" or bool(self.context.runs))
        elif rule == "fix":
            panes = self.query(ServerLogPane)
            shown = bool(panes and panes.first().top_fix is not None and not self.read_only)
        elif rule == "host":
            shown = isinstance(self.screen_stack[0].focused, HostPane) or self.zoomed is not None
        elif rule == "writable":
            shown = not self.read_only
        else:  # runbook
            shown = self.runbook is not None and not self.read_only
        return (not shown) if twin else shown

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None, **kwargs) -> None:
        """A message in the bar above the footer, whatever the terminal's size: it takes rows from the panes
        instead of covering their text, as Textual's toasts did (Textual still records it: its toasts are hidden)."""
        super().notify(message, title=title, severity=severity, timeout=timeout, **kwargs)
        bars = self.query(MessageBar)
        if bars:
            import time

            bar = bars.first()
            before = bar.rows
            bar.add(message, title, severity, timeout or self.NOTIFICATION_TIMEOUT, time.time())
            if bar.rows != before and self._laid_out:
                self.apply_layout()

            def expire() -> None:
                shown = bar.rows
                bar.show_now(time.time())
                if bar.rows != shown:
                    self.apply_layout()

            self.set_timer((timeout or self.NOTIFICATION_TIMEOUT) + 0.05, expire)

    def clear_notifications(self) -> None:
        super().clear_notifications()
        bars = self.query(MessageBar)
        if bars and bars.first().messages:
            bars.first().messages = []
            bars.first().show_now(0.0)
            self.apply_layout()

    def _subtitle(self) -> str:
        if self.demo:
            from cockpit.serving import engines

            named = [s.params.get("engine") for s in self.runbook.spec.steps if s.params.get("engine")] if self.runbook else []
            engine = engines.label(named[0] if named else None)
            return "nothing real is deployed" if self.layout_state.compact else \
                f"replayed H200 telemetry and {engine}, nothing real is deployed"
        where = str(self.config.path) if self.config.path else "this machine (no config)"
        return (where if self.layout_state.compact else f"v{__version__} - {where}") + (" - READ-ONLY" if self.read_only else "")

    def press_view(self, view: str) -> None:
        target = self.layout_state.press(view, self._view_of_focus())
        self.apply_layout()
        if self.layout_state.shown(target):
            self._focus_view(target)

    def action_hide_pane(self) -> None:
        """Escape: leave a zoom first; else hide the pane in focus (the hosts and the checklist of a large terminal stay);
        where there is nothing to leave, say so (a key that does nothing says why)."""
        if self.hosts_view.zoomed is not None and self._view_of_focus() == "hosts":
            problem = self.hosts_view.toggle_zoom(self._focused_host())  # the same as z again: every host shown
            if problem:
                self.notify(problem, severity="warning")
            return
        target = self.layout_state.hide(self._view_of_focus())
        if target is not None:
            self.apply_layout()
            self._focus_view(target)
        else:
            self.notify(f"Esc hides a pane: {self._view_of_focus()} stays on a terminal this size", severity="warning")

    def action_toggle_mouse(self) -> None:
        """m: the mouse to the terminal (tmux selects text with it) or back to the cockpit.  Textual has no public way to
        switch it while running: its Linux driver's own switches, on the releases the cockpit was read against
        (ui/textual_internals.py); elsewhere it says how to start without the mouse."""
        from cockpit.ui.textual_internals import mouse_switch

        switch = mouse_switch(self)
        if switch is None:
            self.notify("m cannot switch the mouse with this Textual or terminal: start with --no-mouse (or [ui] mouse = false)",
                        severity="warning")
            return
        self.mouse_on = not self.mouse_on
        switch(self.mouse_on)
        self.notify("mouse on: clicks and the wheel reach the cockpit (m: off)" if self.mouse_on else
                    "mouse off: the terminal selects text with it (m: on again)")

    def action_next_pane(self, direction: int) -> None:
        """Tab / Shift+Tab: the next (previous) widget that takes the focus, as Textual's own focus chain; in a dialog
        its buttons.  Where the focus cannot move (one pane open), say so and how to open another."""
        before = self.focused
        if direction > 0:
            self.screen.focus_next()
        else:
            self.screen.focus_previous()
        if self.focused is before and len(self.screen_stack) == 1:
            self.notify(f"Tab moves between the open panes, and only {self._focused_view()} is open here: c checklist, "
                        "s server, t runs, b bench, p processes, l log open others", severity="warning")

    def _focus_view(self, view: str) -> None:
        pane = self._panes().get(view)
        if view == "hosts":
            pane = self._focused_host() or next((p for p in self.panes.values() if p.display), None)
            fleet = self.hosts_view.fleet
            if pane is None and fleet is not None and fleet.display:
                pane = fleet
        elif pane is not None and not pane.can_focus:  # the server log: its log is what takes the focus
            pane = next((w for w in pane.query("*") if w.can_focus), None)
        if pane is not None:
            pane.focus()

    def reveal(self, view: str) -> None:
        """Something happened in that pane: show it (a small terminal: instead of the others, focused)."""
        if not self.layout_state.shown(view):
            self.layout_state.reveal(view)
            self.apply_layout()
            if self.layout_state.compact and self.screen is self.screen_stack[0]:
                self._focus_view(view)

    def _view_of_focus(self) -> str | None:
        focused = self.screen_stack[0].focused
        for view, pane in self._panes().items():
            if focused is not None and (focused is pane or pane in focused.ancestors):
                return view
        return None

    def _focused_view(self) -> str:
        view = self._view_of_focus()
        return {"log": "the command log", "server": "the server log", "bench": "the benchmarks",
                None: "no pane"}.get(view, f"the {view}")

    def action_elsewhere(self, action_id: str) -> None:
        """A checklist key pressed in another pane: say where it works."""
        action = actions.by_id(action_id)
        self.notify(f"{action.shown_keys}: {action.help or action.description}, in the checklist (c focuses it)",
                    severity="warning", timeout=5)

    def action_toggle_log(self, _terminal: str = "") -> None:
        self.press_view("log")

    def action_focus_hosts(self) -> None:
        self.press_view("hosts")
