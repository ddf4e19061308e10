"""The training runs pane: per run, its state and progress with ETA, loss, accuracy per TTT position
(a small bar chart), train vs eval, the estimated acceptance length at the serving depth (with and
without the bonus token, labelled), the newest checkpoint with its verdict, and every flag with the
line that shows it."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from cockpit.runs.report import checkpoint_figure, eta_text, shown_choice, where_text
from cockpit.runs.watch import RunStatus
from cockpit.ui import actions
from cockpit.ui.messages import MeasureRequested

BARS = "▁▂▃▄▅▆▇█"
STATE_STYLE = {"running": "bold green", "starting": "green", "finished": "bold cyan", "crashed": "bold white on red",
               "died": "bold white on red", "oom": "bold white on red", "cancelled": "bold yellow", "stopped": "bold", "stalled": "bold black on yellow", "unknown": "dim", "ended": "bold yellow",
               "pending": "cyan"}


def bar(fraction: float, width: int) -> Text:
    filled = int(round(max(0.0, min(1.0, fraction)) * width))
    return Text("━" * filled, style="green") + Text("─" * (width - filled), style="dim")


def positions_chart(values: list[float]) -> Text:
    """Accuracy per position as bars on one line (0 to 1), each with its value."""
    text = Text()
    for index, value in enumerate(values):
        text.append(BARS[min(len(BARS) - 1, int(len(BARS) * max(0.0, min(0.999, value))))], style="cyan")
        text.append(f"{value:.2f}".lstrip("0") + (" " if index < len(values) - 1 else ""), style="dim")
    return text


def loss_spark(history: list[tuple]) -> Text:
    values = [loss for _, loss, _ in history if loss is not None][-24:]
    if len(values) < 2:
        return Text()
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return Text("".join(BARS[min(len(BARS) - 1, int((v - low) / span * (len(BARS) - 1)))] for v in values), style="magenta")


def run_block(status: RunStatus, width: int) -> Group:
    head = Text(no_wrap=True, overflow="ellipsis")
    head.append(f"{status.name} ", style="bold")
    where = where_text(status)
    head.append(f"@{status.host}" + (f" · {where}" if where else "") + "  ", style="dim")
    head.append(f" {status.state.upper()} ", style=STATE_STYLE.get(status.state, ""))
    if status.step is not None:
        head.append(f"  step {status.step}" + (f"/{status.total}" if status.total else ""))
        if status.total:
            head.append("  ")
            head.append_text(bar(status.step / status.total, max(6, min(30, width - len(head.plain) - 22))))
            head.append(f" {100 * status.step / status.total:.0f}%")
        if (eta := eta_text(status)):
            head.append(f"  {eta}", style="bold")
    lines = [head]
    if status.evidence and status.state not in ("running", "crashed"):
        lines.append(Text(f"  {status.evidence}", style="dim", no_wrap=True, overflow="ellipsis"))
    figures = Text(no_wrap=True, overflow="ellipsis")
    figures.append("  ")
    if status.loss is not None:
        figures.append(f"loss {status.loss:.3g} ")
        figures.append_text(loss_spark(status.history))
        figures.append("  ")
    if status.acc is not None:
        figures.append(f"acc {status.acc:.3g}  ")
    if status.eval_loss is not None:
        figures.append(f"eval loss {status.eval_loss:.3g}  ")
    if status.per_position_acc:
        figures.append(f"by position ({status.per_position_source}): ", style="dim")
        figures.append_text(positions_chart(status.per_position_acc))
    if figures.plain.strip():
        lines.append(figures)
    ship = shown_choice(status)
    if ship:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("  checkpoints: ")  # the choice first (a short pane shows it), then each one's figure
        line.append(ship["words"], style="bold yellow" if ship["earlier_better"] else "")
        line.append(" · " + "  ".join(checkpoint_figure(r) for r in ship["rows"][-6:]), style="dim")
        lines.append(line)
    estimate = status.estimate
    if estimate:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("  acceptance ")
        line.append(f"{estimate['with_bonus']:.2f}", style="bold")
        line.append(" with the bonus token (the acceptance length SGLang and vLLM report), ")
        line.append(f"{estimate['without_bonus']:.2f}", style="bold")
        line.append(f" without; topk-1 chain, depth {estimate['depth']}, {estimate['source']} accuracy (an estimate)", style="dim")
        lines.append(line)
    checkpoint = status.latest_checkpoint
    if checkpoint:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("  checkpoint ")
        line.append(checkpoint["path"].rsplit("/", 1)[-1], style="bold")
        line.append(f"  {checkpoint.get('key_layout') or ''}  {checkpoint.get('verdict', '')}",
                    style="green" if checkpoint.get("complete") else "yellow")
        lines.append(line)
    for flag in status.flags:
        if flag.kind in ("died", "stalled"):
            continue  # the evidence line above says it
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"  ! {flag.kind}: {flag.message}", style="bold red")
        lines.append(line)
        if flag.line:
            lines.append(Text(f"    {flag.line}", style="red", no_wrap=True, overflow="ellipsis"))
    if status.read_error:
        lines.append(Text(f"  could not read: {status.read_error}", style="yellow", no_wrap=True, overflow="ellipsis"))
    elif status.notes:
        lines.append(Text(f"  {status.notes[0]}", style="dim", no_wrap=True, overflow="ellipsis"))
    return Group(*lines)


def _lines(block) -> tuple:
    """A block's lines as comparable values (rich Text compares by its text and styles)."""
    return tuple(block.renderables) if isinstance(block, Group) else (block,)


class RunsPane(Static, can_focus=True):
    DEFAULT_CSS = """
    RunsPane {
        height: auto;
        max-height: 10;
        overflow-y: auto;
        border: round $primary-darken-2;
        padding: 0 1;
    }
    RunsPane:focus {
        border: heavy $accent;
    }
    """
    BINDINGS = actions.bindings("runs")

    def __init__(self, names: list[str], **kwargs):
        super().__init__("", **kwargs)
        self.border_title = "training runs"
        self.statuses: dict[str, RunStatus] = {}
        self.names = names
        self._shown: tuple | None = None  # the lines drawn now, to draw again only what changed

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self, event) -> None:
        self._shown = None
        self._draw()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        """a in the footer only where it can measure (not --read-only)."""
        return actions.check_writable(self.app, action, parameters)

    def action_measure(self, _shown: str = "") -> None:
        """Measure the checkpoints of the first run shown that has a complete one (the palette names each run)."""
        if getattr(self.app, "read_only", False):
            self.app.notify("Read-only mode: no server is launched to measure a checkpoint", severity="warning")
            return
        for name in self.names:
            status = self.statuses.get(name)
            if status is not None and any(c.get("complete") for c in status.checkpoints):
                self.post_message(MeasureRequested(name))
                return
        self.app.notify("no run has a complete checkpoint yet", severity="warning")

    def show(self, statuses: list[RunStatus]) -> None:
        for status in statuses:
            self.statuses[status.name] = status
        states = [s.state for s in self.statuses.values()]
        title = "training runs · " + ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
        if title != self.border_title:  # (setting it, even to the same text, draws the pane again)
            self.border_title = title
        self._draw()

    def _draw(self) -> None:
        width = max(20, self.size.width - 2)
        blocks = []
        for name in self.names:
            status = self.statuses.get(name)
            blocks.append(run_block(status, width) if status is not None else Text(f"{name}  reading…", style="dim"))
        shown = tuple(_lines(b) for b in blocks)
        if shown == self._shown:
            return  # a poll a second mostly changes nothing: no new layout for the same lines
        # laid out again only when its number of lines changed (every line is cut at the pane's width, never wrapped)
        layout = self._shown is None or [len(b) for b in shown] != [len(b) for b in self._shown]
        self._shown = shown
        self.update(Group(*blocks) if blocks else Text("no [runs.NAME] in the config", style="dim"), layout=layout)
