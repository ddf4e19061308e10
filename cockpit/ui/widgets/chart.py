"""The one chart widget of the cockpit: plotext (pinned < 6) behind a small interface of our own,
so a plotext upgrade touches this file only.  Data are copied in; plotext's state is per widget."""

from __future__ import annotations

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

    HEADROOM = 1.3  # the y axis goes this far above the tallest value: room for the values and the legend

    def _above(self, top: float) -> float:
        """How far above a bar its value goes: one text row of the plot (a tenth of the top at least)."""
        rows = max(4, (self.size.height or 16) - 6)
        return max(top * 0.1, top / rows)

    @staticmethod
    def value_text(value: float) -> str:
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"

    def bars(self, title: str, labels: list[str], values: list[float], ylabel: str = "") -> None:
        """Bars with their values written above them."""
        plt = self._start(title, ylabel=ylabel)
        numbers = [float(v or 0) for v in values]
        if labels:
            plt.bar(list(labels), numbers)
            top = max(numbers) or 1.0
            plt.ylim(0, top * self.HEADROOM)
            for position, value in enumerate(numbers, start=1):
                plt.text(self.value_text(value), x=position, y=value + self._above(top * self.HEADROOM), alignment="center")
        self.series_labels = list(labels)
        self.refresh()

    def grouped_bars(self, title: str, labels: list[str], groups: dict[str, list[float]], ylabel: str = "") -> None:
        """Groups of bars (one colour per series); the legend sits in the headroom above them."""
        plt = self._start(title, ylabel=ylabel)
        if labels and groups:
            series = [[float(v or 0) for v in vs] for vs in groups.values()]
            plt.multiple_bar(list(labels), series, labels=list(groups))
            top = max(max(s) for s in series) or 1.0
            plt.ylim(0, top * (self.HEADROOM + 0.4))
            # values above the bars where a bar is wide enough to hold them (plotext puts bar i of a
            # group at offset -1/2 + (2i + 1)/(2n) from the group's position)
            n = len(series)
            bar_columns = max(0, (self.size.width or 80) - 10) / len(labels) * 0.8 / n
            texts = [[self.value_text(v) for v in s] for s in series]
            if all(len(t) + 1 <= bar_columns for ts in texts for t in ts):
                above = self._above(top * (self.HEADROOM + 0.4))
                for i, (values, words) in enumerate(zip(series, texts)):
                    for position, word in enumerate(words, start=1):
                        tallest = max(s[position - 1] for s in series)  # one row for the group: no value on a neighbour's bar
                        plt.text(word, x=position - 0.5 + (2 * i + 1) / (2 * n), y=tallest + above, alignment="center")
        self.series_labels = list(groups)
        self.refresh()

    def lines(self, title: str, series: dict[str, tuple[list[float], list[float]]], xlabel: str = "", ylabel: str = "") -> None:
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
            plt.ylim(0, (top or 1.0) * (self.HEADROOM + 0.4))
        self.series_labels = list(series)
        self.refresh()

    def empty(self, title: str, message: str) -> None:
        plt = self._start(title)
        plt.text(message, 0, 0)
        self.series_labels = []
        self.refresh()
