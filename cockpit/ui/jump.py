"""`:` jumps anywhere (as k9s's command prompt): every host, step, run and pane by fuzzy name, through Textual's command
palette with a provider of its own."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cockpit.ui.layout import NAMES, VIEWS


class JumpProvider(Provider):
    """The places of the cockpit: hosts (focused in the hosts view), steps (selected in the checklist), training
    runs (the runs pane), and the panes themselves."""

    def _places(self) -> list[tuple[str, str, object]]:
        app = self.app
        places: list[tuple[str, str, object]] = []
        for host in app.config.hosts:  # type: ignore[attr-defined]
            places.append((f"host {host.name}", "its GPUs and processes", partial(app.jump_to_host, host.name)))  # type: ignore[attr-defined]
        runbook = app.runbook  # type: ignore[attr-defined]
        if runbook is not None:
            for view in runbook.views():  # the step's own words (its title), never its kind's internal name
                places.append((f"step {view.spec.name}", view.title, partial(app.jump_to_step, view.spec.name)))  # type: ignore[attr-defined]
        for name in app.context.runs:  # type: ignore[attr-defined]
            places.append((f"run {name}", "the training runs pane", partial(app.press_view, "runs")))  # type: ignore[attr-defined]
        available = app._panes()  # type: ignore[attr-defined]
        for view, key in VIEWS:
            if view in available:
                places.append((f"pane {NAMES.get(view, view)}", f"key {key}", partial(app.press_view, view)))  # type: ignore[attr-defined]
        return places

    async def discover(self) -> Hits:
        for title, help_text, go in self._places():
            yield DiscoveryHit(title, go, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, go in self._places():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), go, help=help_text)  # type: ignore[arg-type]
