"""The benchmark pane: a sweep's progress and its charts (throughput and acceptance per depth,
latency percentiles, throughput against concurrency), updated as runs arrive."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text
from textual import events
from textual.containers import Vertical, VerticalScroll
from textual.widgets import ProgressBar, Static

from cockpit.format import plural, time_left
from cockpit.serving.depth import DepthConfig
from cockpit.ui.actions import bindings
from cockpit.ui.widgets.chart import Chart

VIEWS = ("decision", "throughput", "acceptance", "latency", "concurrency")


def short(run: dict) -> str:
    """A config as a chart axis shows it: 'd16' is depth 16 (steps 16, topk 1, 17 draft tokens); 'base'."""
    from cockpit.bench.decision import depth_of_run

    return depth_of_run(run).short if "steps" in run else str(run.get("config") or run.get("label") or "?")


def by_config(runs: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for run in runs:
        groups.setdefault(run.get("config") or run.get("label") or "?", []).append(run)
    return groups


class SweepProgressBar(ProgressBar):
    """Textual's ProgressBar without its once-a-second timer: that timer only moves the ETA, which
    is not shown here (the sweep's own estimate is on the line above), and it woke the TUI every
    second, sweep or not, pane shown or not."""

    def on_mount(self, event: events.Mount) -> None:  # type: ignore[override]  # the event, to stop ProgressBar's own
        event.prevent_default()  # ProgressBar.on_mount would start the timer
        self.update()


class BenchPane(Vertical, can_focus=True):
    DEFAULT_CSS = """
    BenchPane {
        height: 1fr;
        min-height: 14;
        border: round $primary-darken-2;
    }
    BenchPane:focus {
        border: heavy $accent;
    }
    BenchPane #bench-progress-line {
        height: 1;
    }
    BenchPane ProgressBar {
        height: 1;
    }
    BenchPane #bench-decision-scroll {
        height: 1fr;
    }
    """

    BINDINGS = bindings("bench")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.runs: list[dict] = []
        self.view = 1  # throughput while a sweep runs; the decision when it is done
        self.border_title = "benchmarks"

    def compose(self):
        yield Static(Text("no sweep yet: run the bench_sweep step, or `cockpit bench sweep`", style="dim"), id="bench-progress-line")
        bar = SweepProgressBar(total=1, show_eta=False, id="bench-progress")
        bar.display = False  # only while a sweep reports progress: an empty bar at 0 % says something false
        yield bar
        with VerticalScroll(id="bench-decision-scroll", can_focus=False):
            yield Static("", id="bench-decision")
        yield Chart(id="bench-chart")

    def on_mount(self) -> None:
        self.draw()

    def on_resize(self) -> None:
        self.call_after_refresh(self.draw)  # which bars have room for their values depends on the width

    def progress(self, state: dict) -> None:
        left = time_left(state.get("eta_s"), state.get("done"), state.get("total"))
        eta = f" · {left}" if left else ""
        self.query_one("#bench-progress-line", Static).update(
            Text(f"{state['done']}/{state['total']} · {state['text']}{eta}"))
        bar = self.query_one(ProgressBar)
        bar.update(total=max(1, state["total"]), progress=state["done"])
        bar.display = True
        if state.get("runs") is not None and len(state["runs"]) != len(self.runs):
            self.runs = list(state["runs"])
            self.draw()
        if str(state.get("text", "")).startswith("sweep done") and self.view != 0:
            self.view = 0
            self.draw()

    def show_runs(self, runs: list[dict]) -> None:
        self.runs = list(runs)
        self.view = 0 if runs else 1
        if runs:
            configs = len(by_config(self.runs))
            self.query_one("#bench-progress-line", Static).update(Text(f"{plural(len(runs), 'stored run')} of {plural(configs, 'config')}", style="dim"))
        self.draw()

    def decision_text(self):
        """The decision in sentences (they wrap), the acceptance as a table of short config names
        (it fits 80 columns), the names explained once."""
        from rich.console import Group
        from rich.table import Table

        from cockpit.bench.report import measured_at, measured_columns, render_decisions
        from cockpit.bench.sweep import SweepResult
        from cockpit.format import num

        if not self.runs:
            return Text("no runs yet: the decision comes when a sweep has measured its configs", style="dim")
        result = SweepResult.from_runs(self.runs)
        data = result.to_json()
        parts: list[RenderableType] = [Text(render_decisions(result.decisions(), result.recommendation()), style="bold")]
        if data["acceptance"]:
            columns = measured_columns(data["acceptance"])
            table = Table(title="acceptance length: the drafter's estimate (topk-1 chain) and the median measured at each concurrency",
                          title_justify="left", box=None, padding=(0, 1), title_style="")
            for column in ("config", "estimate +bonus", "estimate", *(f"measured c{c}" for c in columns)):
                table.add_column(column, justify="left" if column == "config" else "right")
            for row in data["acceptance"]:
                name = DepthConfig.chain(row["steps"]).short if row["topk"] == 1 else row["config"]
                table.add_row(name, num(row["estimate_with_bonus"], "{:.2f}"), num(row["estimate_without_bonus"], "{:.2f}"),
                              *(num(measured_at(row, c), "{:.2f}") for c in columns))
            parts += [Text(""), table]
        parts.append(Text("\nd16 = depth 16: 16 steps of a topk-1 chain, 17 draft tokens; +bonus counts the verified token "
                          "(the engine's accept length); c8 = concurrency 8.  `cockpit bench report --format md` writes it all.",
                          style="dim"))
        return Group(*parts)

    def action_scroll(self, rows: int) -> None:
        self.query_one("#bench-decision-scroll").scroll_relative(y=rows, animate=False)

    def cycle(self, step: int = 1) -> None:
        self.view = (self.view + step) % len(VIEWS)
        self.draw()

    def draw(self) -> None:
        chart = self.query_one(Chart)
        decision = self.query_one("#bench-decision", Static)
        name = VIEWS[self.view]
        self.border_title = f"benchmarks · {name}  ([ ] other views)"
        groups = by_config(self.runs)
        chart.display = name != "decision"
        self.query_one("#bench-decision-scroll").display = name == "decision"
        if name == "decision":
            decision.update(self.decision_text())
            return
        if not groups:
            chart.empty(name, "no runs yet")
            return
        labels = list(groups)
        names = {label: short(runs[0]) for label, runs in groups.items()}
        top_concurrency = max(r.get("concurrency") or 0 for r in self.runs)
        at_top = {k: [r for r in v if (r.get("concurrency") or 0) == top_concurrency] or v for k, v in groups.items()}
        if name == "throughput":
            chart.bars(f"output tok/s, median, concurrency {top_concurrency}", [names[l] for l in labels],
                       [statistics.median([r["output_throughput_tok_s"] for r in at_top[l]]) for l in labels])
        elif name == "acceptance":
            measured = [statistics.median([r.get("accept_length") or 1.0 for r in at_top[l]]) for l in labels]
            accuracies = next((r.get("drafter_accuracy") for r in self.runs if r.get("drafter_accuracy")), None)
            if accuracies:
                from cockpit.drafter.acceptance import estimate

                said = [estimate(accuracies, groups[l][0].get("steps")) if groups[l][0].get("steps") else None for l in labels]
                predicted = [e.with_bonus if e is not None else 1.0 for e in said]
                chart.grouped_bars(f"acceptance length at concurrency {top_concurrency}: measured (median) vs estimated "
                                   "(+bonus, topk-1 chain)", [names[l] for l in labels], {"measured": measured, "estimated": predicted})
            else:
                chart.bars(f"acceptance length at concurrency {top_concurrency} (tokens per verify step, median)",
                           [names[l] for l in labels], measured)
        elif name == "latency":
            series = {}
            for key in ("ttft_ms", "itl_ms"):
                for q in ("p50", "p99"):
                    series[f"{key[:-3].upper()} {q}"] = [statistics.median([(r[key][q] or 0) for r in at_top[l]]) for l in labels]
            chart.grouped_bars("latency percentiles, ms", [names[l] for l in labels], series)
        else:
            curves: dict[str, tuple[Sequence[float], Sequence[float]]] = {}
            for label, runs in groups.items():
                points: dict[int, list[float]] = {}
                for run in runs:
                    points.setdefault(run.get("concurrency") or 0, []).append(run["output_throughput_tok_s"])
                xs = sorted(points)
                curves[names[label]] = (xs, [statistics.median(points[x]) for x in xs])
            chart.lines("output tok/s against concurrency", curves, "concurrency", "tok/s")
