"""The benchmark pane's charts through Pilot, and a snapshot of them."""

from __future__ import annotations

from textual.app import App, ComposeResult

from cockpit.ui.widgets.bench_pane import VIEWS, BenchPane
from cockpit.ui.widgets.chart import Chart


def run(config: str, concurrency: int, tput: float, accept: float | None, ttft: float, itl: float) -> dict:
    return {"config": config, "concurrency": concurrency, "output_throughput_tok_s": tput, "accept_length": accept,
            "ttft_ms": {"p50": ttft, "p90": ttft * 1.2, "p99": ttft * 1.5}, "itl_ms": {"p50": itl, "p90": itl * 1.3, "p99": itl * 2}}


RUNS = [
    run("baseline", 1, 150.0, None, 40.0, 6.5), run("baseline", 8, 900.0, None, 60.0, 8.0),
    run("16 draft tokens (steps 15, topk 1)", 1, 330.0, 2.95, 45.0, 3.1), run("16 draft tokens (steps 15, topk 1)", 8, 1500.0, 2.9, 70.0, 5.0),
    run("10 draft tokens (steps 9, topk 1)", 1, 360.0, 2.8, 44.0, 2.9), run("10 draft tokens (steps 9, topk 1)", 8, 1650.0, 2.7, 66.0, 4.5),
    run("5 draft tokens (steps 4, topk 1)", 1, 300.0, 2.4, 42.0, 3.3), run("5 draft tokens (steps 4, topk 1)", 8, 1600.0, 2.3, 63.0, 4.4),
]


class PaneApp(App):
    def compose(self) -> ComposeResult:
        yield BenchPane(id="bench")

    def on_mount(self) -> None:
        self.query_one(BenchPane).show_runs(RUNS)


async def test_every_chart_renders_at_80x24():
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(BenchPane)
        chart = app.query_one(Chart)
        seen = []
        for _ in VIEWS:
            await pilot.pause()
            rendered = str(chart.render())
            assert chart.title and len(rendered) > 100
            seen.append((chart.title, tuple(chart.series_labels)))
            pane.cycle()
        titles = [t for t, _ in seen]
        assert titles[0].startswith("output tok/s, median, concurrency 8")
        assert titles[1].startswith("acceptance length")
        assert seen[2][1] == ("TTFT p50", "TTFT p99", "ITL p50", "ITL p99")
        assert seen[3][1] == ("baseline", "16 tok", "10 tok", "5 tok")


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
