"""The checklist pane: the runbook's steps, their states and hosts, and the evidence of the selected one."""

from __future__ import annotations

import textwrap
import time

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.format import age
from cockpit.runbook.model import StepState, StepView
from cockpit.ui.actions import bindings

MARK = {
    StepState.PASSED: ("✔", "[x]", "bold green"),
    StepState.FAILED: ("✘", "[!]", "bold red"),
    StepState.RUNNING: ("⟳", "[~]", "bold cyan"),
    StepState.BLOCKED: ("·", "[ ]", "dim"),
    StepState.PENDING: ("○", "[ ]", "bold"),
    StepState.STALE: ("?", "[?]", "bold yellow"),
}


def render_checklist(views: list[StepView], selected: int, width: int, ascii_only: bool = False, now: float | None = None,
                     where: list[int] | None = None) -> Text:
    """The checklist's text; `where` (when given) gets the line the selected step starts on."""
    now = now or time.time()
    text = Text(no_wrap=True, overflow="ellipsis")
    for number, view in enumerate(views):
        if number == selected and where is not None:
            where.append(text.plain.count("\n"))
        glyph, ascii_glyph, style = MARK[view.state]
        mark = ascii_glyph if ascii_only else glyph
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(">" if number == selected else " ", style="bold reverse" if number == selected else "")
        line.append(f" {mark} ", style=style)
        line.append(f"{number + 1}. {view.spec.name}", style="bold" if number == selected else "")
        group = view.spec.params.get("hosts") or ()
        line.append(f" @{view.spec.host}" + (f"+{len(group) - 1}" if len(group) > 1 else ""), style="cyan")  # a group: rank 0 + the others
        line.append(f"  {view.state.value}", style=style)
        if view.locked:
            line.append("  LOCKED" if ascii_only else "  🔒 locked", style="bold red")
        if view.destructive:
            line.append("  !", style="yellow")
        if view.result is not None and view.result.finished_at:
            when = f"  {age(view.result.finished_at, now)}"
            fresh = view.freshness(now)
            if fresh and line.cell_len + len(when) + len(fresh) + 3 <= width:
                when += f" · {fresh}"
            if line.cell_len + len(when) <= width:  # the age only where it fits: the step's line is never wrapped
                line.append(when, style="dim")
        line.truncate(width, overflow="ellipsis")
        text.append_text(line)
        text.append("\n")
        if number == selected or view.state is not StepState.PASSED or view.warnings:
            # what a step is, for the step in hand and those still to pass: a passed step is its one line, so that
            # eight steps and the evidence of the selected one fit beside two hosts
            for words, style in ((view.title, "dim" if number != selected else ""),
                                 *((f"warning: {w}", "yellow") for w in view.warnings)):
                said = Text(f"     {words}", style=style, no_wrap=True, overflow="ellipsis")
                said.truncate(width, overflow="ellipsis")
                text.append_text(said)
                text.append("\n")
    if not views:
        text.append("No runbook in the config: add [[runbook.steps]] (`cockpit init --example` prints an annotated config).\n", style="dim")
        return text
    view = views[selected]
    text.append("─" * max(10, width - 2) + "\n" if not ascii_only else "-" * max(10, width - 2) + "\n", style="dim")
    text.append(f"{view.spec.name}: ", style="bold")
    text.append(view.why + "\n", style="italic")
    if view.destructive:
        text.append("! it changes the host: it shows exactly what it will do and asks first\n", style="yellow")
    if view.result is None:
        text.append("not run yet\n", style="dim")
    else:
        text.append(view.result.message + "\n", style=MARK[view.result.state][2])
        if view.result.forced_reason:
            text.append(f"gate skipped: {view.result.forced_reason}\n", style="yellow")
        evidence = view.result.evidence
        if evidence:
            for detail in view.details_now():
                # a path or a word longer than the line stays whole (cut at the edge with …), never split into two
                # that read as two (issue 50 item 8: `/tmp/co` `ckpit-demo`): y copies it whole
                for piece in textwrap.wrap(detail, max(20, width - 4), subsequent_indent="    ", break_on_hyphens=False,
                                           break_long_words=False) or [""]:
                    text.append(f"  {piece}\n", style="dim")
            text.append("  (x: the raw evidence)\n", style="dim italic")
        if view.result.output:
            for out_line in view.result.output.strip().splitlines()[-6:]:
                text.append(f"  {out_line}\n", style="dim")
    text.rstrip()
    return text


class ChecklistPane(Widget, can_focus=True):
    """Fed by the app with StepViews; keys move the selection, the app runs steps."""

    DEFAULT_CSS = """
    ChecklistPane {
        border: round $primary-darken-2;
        padding: 0 1;
        height: 1fr;
        overflow-y: auto;
    }
    ChecklistPane:focus {
        border: heavy $accent;
    }
    """
    BINDINGS = bindings("checklist")
    selected: reactive[int] = reactive(0)

    def __init__(self, ascii_only: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.views: list[StepView] = []
        self.ascii_only = ascii_only
        self.border_title = "checklist"

    def show(self, views: list[StepView]) -> None:
        running = [i for i, v in enumerate(views) if v.state is StepState.RUNNING]
        before = {v.spec.name: (v.state, v.result.finished_at if v.result else None) for v in self.views}
        failed = [i for i, v in enumerate(views) if v.state is StepState.FAILED
                  and before.get(v.spec.name) != (v.state, v.result.finished_at if v.result else None)]
        self.views = views
        if running:
            self.selected = running[0]  # follow the step that runs: its evidence is what matters now
        elif failed:
            self.selected = failed[0]  # and the one that just failed: its reason is what matters now
        self.selected = min(self.selected, max(0, len(views) - 1))
        done = sum(v.state is StepState.PASSED for v in views)
        self.border_title = f"checklist · {done}/{len(views)} passed"
        self.refresh()

    def render(self) -> Text:
        """The checklist, its selected step always inside the pane's rows (issue 50: at 100x30 with every pane open the
        checklist had 3 rows and showed steps 1-3 while step 8 ran): the lines above it give way to one line saying so."""
        where: list[int] = []
        text = render_checklist(self.views, self.selected, self.content_region.width or 40, self.ascii_only, where=where)
        rows, line = self.content_region.height, (where[0] if where else 0)
        if rows >= 3 and line + 2 > rows:
            lines = text.split("\n", allow_blank=True)
            cut = line + 3 - rows  # its line and its title in view, below the line that says what is above
            above = Text(f"  ({cut} lines above: k or up)" if self.ascii_only else f"  ↑ {cut} lines above (k or ↑)", style="dim")
            text = Text("\n", no_wrap=True, overflow="ellipsis").join([above, *lines[cut:]])
        return text

    def on_mount(self) -> None:
        self._ages: tuple = ()
        self.set_interval(1.0, self._tick, name="checklist ages")

    def ages_now(self, now: float) -> tuple:
        """Every text of the pane that moves with the clock: the steps' ages, a gate's freshness and
        the selected step's evidence (its 'sampled 12 s ago')."""
        moving: list[tuple[str | None, ...]] = [(age(v.result.finished_at, now), v.freshness(now))
                                                for v in self.views if v.result is not None and v.result.finished_at]
        view = self.selected_view
        if view is not None and view.explain is not None:
            moving.append(view.details_now())
        return tuple(moving)

    def _tick(self) -> None:
        """Ages tick: once a second the pane is drawn again, but only when a text that shows time changed."""
        ages = self.ages_now(time.time())
        if ages != self._ages:
            self._ages = ages
            self.refresh()

    def select(self, step: str) -> None:
        """Show this step's detail (a refused step: its reasons)."""
        for index, view in enumerate(self.views):
            if view.spec.name == step:
                self.selected = index

    def action_toggle_raw(self) -> None:
        """x: the selected step's evidence as raw JSON, in a scrollable view over the panes (where the checklist's own
        detail may be below the fold); a step with none says so."""
        from cockpit.ui.screens.evidence import EvidenceScreen

        view = self.selected_view
        if view is None or view.result is None or not view.result.evidence:
            name = view.spec.name if view is not None else "no step"
            self.app.notify(f"x shows a step's evidence: '{name}' has none yet (run it first)", severity="warning")
            return
        self.app.push_screen(EvidenceScreen(view.spec.name, view.result.evidence))

    def watch_selected(self) -> None:
        self.refresh()

    def action_move(self, step: int) -> None:
        if self.views:
            self.selected = (self.selected + step) % len(self.views)

    class RunRequested(Message):
        """The user asked to run a step; the app decides whether it may."""

        def __init__(self, step: str):
            super().__init__()
            self.step = step

    def action_run_selected(self) -> None:
        if self.views:
            self.post_message(self.RunRequested(self.views[self.selected].spec.name))

    def action_copy_selected(self) -> None:
        """y: the selected step's command line (a launch: the argv it ran or will run, shell-quoted; a path it names),
        else its evidence as JSON, through the app's copy (OSC 52)."""
        import json

        from cockpit.format import shell_words
        from cockpit.ui.messages import CopyRequested

        view = self.selected_view
        if view is None:
            return
        evidence = view.result.evidence if view.result is not None else {}
        argv = evidence.get("argv") or view.spec.params.get("argv")
        path = next((view.spec.params[k] for k in ("path", "draft_path", "log") if isinstance(view.spec.params.get(k), str)), None)
        if isinstance(argv, list) and argv:
            self.post_message(CopyRequested(shell_words([str(w) for w in argv]), f"the command line of '{view.spec.name}'"))
        elif evidence:
            self.post_message(CopyRequested(json.dumps(evidence, indent=1, sort_keys=True, default=str), f"the evidence of '{view.spec.name}'"))
        elif path:
            self.post_message(CopyRequested(path, f"the path of '{view.spec.name}'"))
        else:
            self.app.notify(f"'{view.spec.name}' has no command line, evidence or path to copy yet", severity="warning")

    @property
    def selected_view(self) -> StepView | None:
        return self.views[self.selected] if self.views else None
