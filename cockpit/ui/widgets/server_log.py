"""The server log pane: the launched server's log, followed from its end, with its start-up
progress, health, and the diagnoses of a crash with the suggested fix."""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

from cockpit.diagnosis import Diagnosis
from cockpit.serving import engines
from cockpit.serving.logread import LogReport
from cockpit.serving.paying import Verdict
from cockpit.serving.server import ServerStatus
from cockpit.ui.widgets.bounded_log import BoundedRichLog
from cockpit.format import shell_words

def status_line(status: ServerStatus | None, target: str) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{target}  ", style="bold")
    if status is None:
        text.append("waiting for the first look…", style="dim")
        return text
    # health first: in a narrow terminal the milestones are what the ellipsis takes
    health_style = {"ready": "bold green", "warming": "yellow", "loading": "cyan"}.get(status.health, "red")
    text.append(f"health: {status.health}  ", style=health_style)
    group = status.group
    if group:
        nodes = group.get("nodes") or []
        if group.get("state") == "failed":
            text.append("GROUP FAILED", style="bold white on red")  # why, below (it wraps there)
            text.append("  ")
            return text
        ready = sum(1 for n in nodes if n.get("state") == "ready")
        text.append(f"group: {group.get('state')} ({ready}/{len(nodes)} nodes ready)  ", style="bold green" if ready == len(nodes) else "cyan")
    ended = status.ended
    if ended is not None and ended.get("state") == "stopped":
        text.append(f"STOPPED BY {str(ended.get('by') or 'you').upper()}", style="bold")  # the cockpit's own stop: no alarm
        text.append("  ")
    elif not status.alive and status.health != "not started":
        text.append(str((ended or {}).get("state") or "process dead").upper(), style="bold white on red")
        text.append("  ")
    seen = {m for m, _ in status.report.milestones}
    engine = status.report.engine
    for name in engines.engine_or_default(engine).start_steps:
        text.append(("✔ " if name in seen else "· ") + name + "  ", style="green" if name in seen else "dim")
    return text


def group_text(group: dict | None) -> Text:
    """A launch group: each node's state, and when it failed, which node and why."""
    text = Text()
    if not group:
        return text
    if group.get("state") == "failed":
        text.append(f"✘ [group] {group.get('cause')}\n", style="bold red")
    for node in group.get("nodes") or []:
        state = node.get("state")
        style = {"ready": "green", "failed": "bold red"}.get(state, "cyan")
        who = f"{node['role']} {node.get('host')}" if node.get("role") else f"rank {node.get('rank')} {node.get('host')}"
        text.append(f"{who}: ", style="bold")  # a Ray cluster's members by what they are
        text.append(f"{state}" + ("" if node.get("alive") else " (process gone)") + "   ", style=style)
    return text


def diagnosis_text(diagnoses: list[Diagnosis]) -> Text:
    text = Text()
    marks = {"error": ("✘", "bold red"), "warning": ("!", "yellow"), "info": ("i", "dim")}
    for d in diagnoses:
        where = f"line {d.line}: " if d.line else ""
        mark, style = marks.get(d.severity, ("✘", "bold red"))
        text.append(f"{mark} [{d.kind}] {where}{d.message}\n", style=style)
        if d.replacement:
            text.append(f"   fix: {shell_words(d.replacement)}\n", style="bold green")
            text.append("   press f to apply it to the launch step and relaunch\n", style="green")
    text.rstrip()
    return text


SPARK = "▁▂▃▄▅▆▇█"


def spark(values: list[float | None], top: float | None = None) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return ""
    high = top or max(known) or 1.0
    return "".join(" " if v is None else SPARK[min(len(SPARK) - 1, int(len(SPARK) * max(0.0, v) / high))] for v in values)


def live_text(figures: dict, verdict: Verdict | None = None) -> Text:
    """The serving server's figures on one line (the flags on their own lines): throughput, requests,
    KV usage, acceptance (window, lifetime) with its recent history; then whether speculation pays at this load
    (serving/paying.py: `verdict`), where there is a load to judge."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if not figures or not figures.get("sources"):
        return text
    def fmt(value, spec):
        return "-" if value is None else spec.format(value)

    accept = figures["accept_length"]
    state = (figures.get("activity") or {}).get("state") or "serving"
    text.append(f"{state} ", style="bold" if state != "hung" else "bold red")
    age = figures.get("figures_age_s")
    if all(figures.get(k) is None for k in ("throughput_tok_s", "running", "queued")) and accept.get("window") is None:
        # no window of its own yet (a server just started, or relaunched by a sweep): say why, not a row of dashes
        why = (figures.get("activity") or {}).get("why") or ""
        text.append(why, style="dim")
        if accept.get("lifetime") is not None:
            text.append(f" · accept (lifetime) {accept['lifetime']:.2f}")
        return text
    if state != "serving" and figures.get("ended"):
        text.append(f"{figures['ended']['why']} · ", style="dim")
    if figures.get("figures_are_last"):  # not serving now: the last figures read, said as the last, with their age
        text.append(f"(its last figures{f', {age:.0f} s old' if age is not None else ''}) ", style="dim")
    text.append(f"{fmt(figures['throughput_tok_s'], '{:.0f}')} tok/s · {fmt(figures['running'], '{}')} running · "
                f"{fmt(figures['queued'], '{}')} queued · KV {fmt(figures['token_usage'], '{:.0%}')} · ")
    if accept.get("window") is None and accept.get("last") is not None:
        # idle: nothing drafted in the newest window; the last acceptance read stays, said as the last one
        text.append(f"accept (last, {accept['last_age_s']:.0f} s ago) {accept['last']:.2f}", style="bold")
    else:
        text.append(f"accept {fmt(accept['window'], '{:.2f}')}", style="bold")
    if accept.get("lifetime") is not None:
        text.append(f" (lifetime {accept['lifetime']:.2f})")
    per_position = (figures.get("spec_decode") or {}).get("per_position") or []
    if per_position:  # vLLM's: how often each draft position was accepted, in its last window
        text.append(" · by position " + " ".join(f"{rate:.2f}".lstrip("0") for rate in per_position[:8])
                    + (" …" if len(per_position) > 8 else ""), style="dim")
    history = [w["accept_length"] for w in figures.get("history") or []][-24:]
    if any(v is not None for v in history):
        text.append("  " + spark(history), style="cyan")
    flagged = {f.get("kind") for f in figures.get("flags") or []}
    if verdict is not None and verdict.state != "idle" and not (verdict.state == "collapsed" and "draft_not_used" in flagged):
        style = {"paying": "bold green", "not_paying": "bold yellow", "collapsed": "bold red", "inactive": "bold red"}.get(verdict.state, "")
        text.append(f"\nspeculation: {verdict.words}", style=style)
    for flag in figures.get("flags") or []:
        text.append(f"\n! {flag['kind']}: {flag['message']}", style="bold red")
    return text


class ServerLogPane(Vertical):
    DEFAULT_CSS = """
    ServerLogPane {
        height: 14;
        border: round $primary-darken-2;
    }
    ServerLogPane:focus-within {
        border: heavy $accent;
    }
    ServerLogPane #server-status {
        height: 1;
    }
    ServerLogPane #server-live {
        height: auto;
        max-height: 4;
    }
    ServerLogPane #server-diagnoses {
        height: auto;
        max-height: 12;
    }
    ServerLogPane RichLog {
        height: 1fr;
    }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.border_title = "server log"
        self.status: ServerStatus | None = None
        self.target = ""
        self.flagged: set[int] = set()
        self._shown: dict[str, Text] = {}  # what each of the pane's lines shows now

    def compose(self):
        yield Static(status_line(None, ""), id="server-status")
        live = Static("", id="server-live")
        live.display = False  # until the server serves: no empty line
        yield live
        yield Static("", id="server-diagnoses")
        yield BoundedRichLog(max_lines=2000, wrap=False, markup=False, id="server-lines")

    def follow(self, target: str) -> None:
        self.target = target
        self.status = None
        self.border_title = f"server log · {target}"
        lines = self.query_one(BoundedRichLog)
        lines.clear()
        # a new server (a relaunch by f, the sweep's): the old log's search and pause are not its; follow its start-up
        lines.set_search(None)
        lines.action_follow()
        self._shown.clear()
        self.query_one("#server-status", Static).update(status_line(None, target))
        self.query_one("#server-diagnoses", Static).update("")
        self.query_one("#server-live", Static).update("")
        self.query_one("#server-live", Static).display = False

    def show(self, status: ServerStatus, verdict: Verdict | None = None) -> None:
        if not self.query("#server-status"):
            return  # the pane is being taken down (the app exits): nothing to show it in
        self.status = status
        lines_log = self.query_one(BoundedRichLog)
        bad_lines = {d.line for d in status.report.diagnoses if d.line}
        for line in status.new_lines:
            style = ""
            if "error" in line.lower() or "Traceback" in line:
                style = "red"
            elif "ready to roll" in line:
                style = "bold green"
            lines_log.write(Text(line, style=style))
        self.flagged = bad_lines
        self._update("#server-status", status_line(status, self.target))
        found = diagnosis_text(status.report.diagnoses)
        if status.group:
            found = group_text(status.group) + (Text("\n") + found if found.plain else Text())
        self._update("#server-diagnoses", found)
        self._update("#server-live", live_text(status.figures, verdict))
        self.query_one("#server-live", Static).display = bool(status.figures.get("sources"))

    def _update(self, selector: str, text: Text) -> None:
        """A line of the pane drawn again only when what it says changed (a poll a second mostly changes nothing),
        and laid out again only when its number of lines changed (the status and figures lines never wrap; the
        diagnoses do, so they are always laid out)."""
        before = self._shown.get(selector)
        if before != text:
            self._shown[selector] = text
            layout = before is None or selector == "#server-diagnoses" or before.plain.count("\n") != text.plain.count("\n")
            self.query_one(selector, Static).update(text, layout=layout)

    def show_failed_launch(self, result, started: bool) -> None:
        """A launch that was refused or whose server died: its diagnoses, read back from the step's evidence."""
        diagnoses = Diagnosis.all_from_json((result.evidence or {}).get("diagnoses"))
        lines = result.output.splitlines() if result.output else []
        if not started and not lines:
            lines = [f"(no log: the server was not started: {result.message})"]
        self.show(ServerStatus("down" if started else "not started", False, LogReport(diagnoses=diagnoses), lines))

    @property
    def top_fix(self) -> Diagnosis | None:
        if self.status is None:
            return None
        for d in self.status.report.diagnoses:
            if d.replacement and d.severity == "error":
                return d
        return None
