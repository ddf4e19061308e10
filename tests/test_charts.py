"""The benchmark pane's charts through Pilot, and a snapshot of them."""

from __future__ import annotations

import os

from textual.app import App, ComposeResult

from cockpit.ui.widgets.bench_pane import VIEWS, BenchPane
from cockpit.ui.widgets.chart import Chart
from harness.builders import RUNS, bench_run as run  # noqa: F401


CHARTS = [v for v in VIEWS if v != "decision"]


class PaneApp(App):
    def compose(self) -> ComposeResult:
        yield BenchPane(id="bench")

    def on_mount(self) -> None:
        pane = self.query_one(BenchPane)
        pane.show_runs(RUNS)
        pane.cycle()  # from the decision to the throughput chart


async def test_every_chart_renders_at_80x24():
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(BenchPane)
        chart = app.query_one(Chart)
        seen = []
        for _ in CHARTS:
            await pilot.pause()
            rendered = str(chart.render())
            assert chart.title and len(rendered) > 100
            seen.append((chart.title, tuple(chart.series_labels)))
            pane.cycle()
        titles = [t for t, _ in seen]
        assert titles[0].startswith("output tok/s, median, concurrency 8")
        assert titles[1].startswith("acceptance length")
        assert seen[2][1] == ("TTFT p50", "TTFT p99", "ITL p50", "ITL p99")
        assert seen[3][1] == ("base", "d16", "d10", "d5")  # depth N: N steps of a topk-1 chain


async def test_progress_updates_the_charts_live():
    app = PaneApp()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(BenchPane)
        pane.show_runs([])
        pane.progress({"text": "baseline: concurrency 1, run 1/3", "done": 1, "total": 12, "eta_s": 30.0, "runs": RUNS[:1]})
        await pilot.pause()
        assert "1/12" in str(app.query_one("#bench-progress-line").content) and "30 s left" in str(app.query_one("#bench-progress-line").content)
        assert pane.runs == RUNS[:1]
        pane.progress({"text": "done", "done": 12, "total": 12, "eta_s": 0.0, "runs": RUNS})
        await pilot.pause()
        assert len(pane.runs) == len(RUNS)


def test_snapshot_of_the_throughput_chart(snap_compare):
    assert snap_compare(PaneApp(), terminal_size=(80, 24))


async def test_the_decision_view_names_the_best_config_per_concurrency():
    app = PaneApp()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(BenchPane)
        pane.cycle(-1)
        await pilot.pause()
        import io

        from rich.console import Console

        console = Console(width=200, record=True, file=io.StringIO())
        console.print(pane.decision_text())
        text = console.export_text()
        assert "concurrency 1: depth 10 (steps 10, topk 1, draft tokens 11), 360 tok/s, 2.40x the baseline" in text
        assert "concurrency 8: depth 10" in text and "WITHIN NOISE of depth 5" in text  # 1650 vs 1600: 3 %



def chart_text(chart: Chart, width: int) -> list[str]:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=width, record=True, color_system=None, file=sink)
        console.print(chart.render())
    return console.export_text().splitlines()


def test_nice_ticks_are_evenly_spaced_round_values():
    for top, most in ((1347.2, 6), (2.9, 4), (0.37, 5), (98.0, 3), (1.0, 2)):
        ticks = Chart.nice_ticks(top, most)
        steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:])}
        assert ticks[0] == 0 and ticks[-1] >= top and len(steps) == 1 and len(ticks) - 1 <= most, (top, ticks)
        assert f"{steps.pop():g}".lstrip("0.").rstrip("0")[0] in "125"  # 1, 2, 2.5 or 5 x 10^k


async def test_charts_ticks_legend_and_values_do_not_collide_and_an_empty_chart_has_no_axis():
    """Issue 30: y ticks skipped a value (1347.2, 1122.6, 898.1, 449.1), latency values overwrote the
    legend (`54.4TL p56.2`), an empty chart showed -1..1 (negative throughput)."""
    import re

    app = PaneApp()
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(BenchPane)
        chart = app.query_one(Chart)
        for _ in CHARTS:
            await pilot.pause()
            rows = chart_text(chart, chart.size.width)
            ticks = [float(m.group(1)) for row in rows if (m := re.match(r"^\s*(-?[\d.]+)┤", row))]
            assert len(ticks) >= 3 and len({round(a - b, 6) for a, b in zip(ticks, ticks[1:])}) == 1, (chart.title, ticks)
            for label in chart.series_labels if chart.title.startswith(("latency", "output tok/s against")) else ():
                [row] = [r for r in rows if f" {label} " in r or r.rstrip("│ ").endswith(f" {label}")]
                after = row.split(f" {label}", 1)[1]
                assert set(after.rstrip("│").strip()) <= {""}, (label, row)  # nothing written over the legend's row
            pane.cycle()
        pane.cycle()  # from the decision back to a chart
        await pilot.pause()
        chart.empty("output tok/s", "no runs yet: `b` after a sweep")
        await pilot.pause()
        rows = chart_text(chart, chart.size.width)
        assert any("no runs yet" in r for r in rows) and not any(re.search(r"-1|┤", r) for r in rows), rows
