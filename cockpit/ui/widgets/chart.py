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

    def bars(self, title: str, labels: list[str], values: list[float], ylabel: str = "") -> None:
        plt = self._start(title, ylabel=ylabel)
        if labels:
            plt.bar(list(labels), [float(v or 0) for v in values])
        self.series_labels = list(labels)
        self.refresh()

    def grouped_bars(self, title: str, labels: list[str], groups: dict[str, list[float]], ylabel: str = "") -> None:
        plt = self._start(title, ylabel=ylabel)
        if labels and groups:
            plt.multiple_bar(list(labels), [[float(v or 0) for v in vs] for vs in groups.values()], labels=list(groups))
        self.series_labels = list(groups)
        self.refresh()

    def lines(self, title: str, series: dict[str, tuple[list[float], list[float]]], xlabel: str = "", ylabel: str = "") -> None:
        plt = self._start(title, xlabel, ylabel)
        for label, (xs, ys) in series.items():
            if xs:
                plt.plot(list(xs), list(ys), label=label, marker="hd")
        self.series_labels = list(series)
        self.refresh()

    def empty(self, title: str, message: str) -> None:
        plt = self._start(title)
        plt.text(message, 0, 0)
        self.series_labels = []
        self.refresh()
