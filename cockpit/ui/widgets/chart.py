"""The one chart widget of the cockpit: plotext (pinned < 6) behind a small interface of our own,
so a plotext upgrade touches this file only.  Data are copied in; plotext's state is per widget."""

from __future__ import annotations

from collections.abc import Sequence

from textual_plotext import PlotextPlot


class Chart(PlotextPlot):
    DEFAULT_CSS = """
    Chart {
        height: 1fr;
        min-height: 8;
    }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.title = ""
        self.series_labels: list[str] = []

    def _start(self, title: str, xlabel: str = "", ylabel: str = ""):
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        if xlabel:
            plt.xlabel(xlabel)
        if ylabel:
            plt.ylabel(ylabel)
        self.title = title
        return plt

    def _rows(self) -> int:
        """The plot's own rows (the widget less the title, the x axis and its labels, the borders)."""
        return max(4, (self.size.height or 16) - 6)

    @staticmethod
    def nice_ticks(top: float, most: int) -> list[float]:
        """Ticks from 0 at one step of 1, 2, 2.5 or 5 x 10^k, at most `most` of them above 0, the last
        at or above `top`: evenly spaced values that read as such (plotext's own skipped some)."""
        import math

        top = top if top > 0 else 1.0
        most = max(1, most)
        raw = top / most
        power = 10 ** math.floor(math.log10(raw))
        step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
        count = math.ceil(top / step - 1e-9)
        return [round(i * step, 10) for i in range(count + 1)]

    def _y_axis(self, top: float, legend_rows: int = 0, label_row: bool = False) -> float | None:
        """The y axis from 0, with room above the tallest value for a row of values (`label_row`) and
        the legend's rows (plotext draws the legend inside the plot, top left), and nice ticks.
        Returns the height of one row in y units (None: no room for the values)."""
        rows = self._rows()
        reserved = legend_rows + (1 if label_row else 0) + 1
        room = rows - reserved
        top = top if top > 0 else 1.0
        fits = room >= 2
        ticks = self.nice_ticks(top * rows / room if fits else top * 1.2, max(2, min(6, rows // 2)))
        plt = self.plt
        plt.ylim(0, ticks[-1])
        plt.yticks(ticks, [self.value_text(t) if not float(t).is_integer() else str(int(t)) for t in ticks])
        return ticks[-1] / rows if fits else None

    @staticmethod
    def value_text(value: float) -> str:
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"

    def bars(self, title: str, labels: list[str], values: list[float], ylabel: str = "") -> None:
        """Bars with their values written above them."""
        plt = self._start(title, ylabel=ylabel)
        numbers = [float(v or 0) for v in values]
        if labels:
            plt.bar(list(labels), numbers)
            row = self._y_axis(max(numbers), label_row=True)
            if row is not None:
                for position, value in enumerate(numbers, start=1):
                    plt.text(self.value_text(value), x=position, y=value + row, alignment="center")
        self.series_labels = list(labels)
        self.refresh()

    def grouped_bars(self, title: str, labels: list[str], groups: dict[str, list[float]], ylabel: str = "") -> None:
        """Groups of bars (one colour per series); the legend sits in the rows kept free above them."""
        plt = self._start(title, ylabel=ylabel)
        if labels and groups:
            series = [[float(v or 0) for v in vs] for vs in groups.values()]
            plt.multiple_bar(list(labels), series, labels=list(groups))
            top = max(max(s) for s in series)
            # values above the bars where a bar is wide enough to hold them (plotext puts bar i of a
            # group at offset -1/2 + (2i + 1)/(2n) from the group's position)
            n = len(series)
            bar_columns = max(0, (self.size.width or 80) - 10) / len(labels) * 0.8 / n
            texts = [[self.value_text(v) for v in s] for s in series]
            wide_enough = all(len(t) + 1 <= bar_columns for ts in texts for t in ts)
            row = self._y_axis(top, legend_rows=n, label_row=wide_enough)
            if wide_enough and row is not None:
                for i, (values, words) in enumerate(zip(series, texts)):
                    for position, word in enumerate(words, start=1):
                        tallest = max(s[position - 1] for s in series)  # one row for the group: no value on a neighbour's bar
                        plt.text(word, x=position - 0.5 + (2 * i + 1) / (2 * n), y=tallest + row, alignment="center")
        self.series_labels = list(groups)
        self.refresh()

    def lines(self, title: str, series: dict[str, tuple[Sequence[float], Sequence[float]]], xlabel: str = "", ylabel: str = "") -> None:
        """Lines over categories (e.g. concurrency 1, 8, 32 evenly spaced, labelled as they are)."""
        plt = self._start(title, xlabel, ylabel)
        categories = sorted({x for xs, _ in series.values() for x in xs})
        top = 0.0
        for label, (xs, ys) in series.items():
            if xs:
                plt.plot([categories.index(x) + 1 for x in xs], list(ys), label=label, marker="hd")
                top = max(top, max(ys))
        if categories:
            plt.xticks(list(range(1, len(categories) + 1)), [self.value_text(c) if not float(c).is_integer() else str(int(c))
                                                              for c in categories])
            plt.xlim(0.5, len(categories) + 0.5)
            self._y_axis(top, legend_rows=len(series))
        self.series_labels = list(series)
        self.refresh()

    def empty(self, title: str, message: str) -> None:
        """No data: the message, and no axis that says something (plotext's default is -1..1)."""
        plt = self._start(title)
        plt.xlim(0, 1)
        plt.ylim(0, 1)
        plt.xticks([], [])
        plt.yticks([], [])
        plt.text(message, 0.5, 0.5, alignment="center")
        self.series_labels = []
        self.refresh()
