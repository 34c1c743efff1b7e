"""Plots as PNG bytes (matplotlib, headless), for the report and the UI's metadata."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

__all__ = ["bar_plot", "interval_plot", "line_plot"]


def _figure(width: float = 6.0, height: float = 3.2):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(width, height), dpi=100)
    return plt, figure, axes


def _png(plt, figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def line_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logy: bool = False,
) -> bytes:
    """A PNG line plot of named (x, y) series (optionally on a log y axis)."""
    plt, figure, axes = _figure()
    for label, (x, y) in series.items():
        axes.plot(list(x), list(y), marker="o" if len(x) < 30 else None, label=label)
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logy:
        axes.set_yscale("log")
    if len(series) > 1:
        axes.legend()
    axes.grid(alpha=0.3)
    return _png(plt, figure)


def bar_plot(groups: Mapping[str, Mapping[str, float]], *, title: str, ylabel: str) -> bytes:
    """Bars for each category, one colour per group (e.g. reason counts per system)."""
    plt, figure, axes = _figure(7.0, 3.4)
    categories = sorted({c for values in groups.values() for c in values})
    width = 0.8 / max(len(groups), 1)
    for index, (label, values) in enumerate(groups.items()):
        positions = [i + index * width for i in range(len(categories))]
        axes.bar(positions, [values.get(c, 0) for c in categories], width=width, label=label)
    axes.set_xticks(
        [i + width * (len(groups) - 1) / 2 for i in range(len(categories))],
        categories,
        rotation=30,
        ha="right",
        fontsize=8,
    )
    axes.set(title=title, ylabel=ylabel)
    if len(groups) > 1:
        axes.legend()
    return _png(plt, figure)


def interval_plot(
    points: Mapping[str, tuple[float, float, float]], *, title: str, ylabel: str
) -> bytes:
    """Estimates with their intervals: label -> (estimate, low, high)."""
    plt, figure, axes = _figure(5.0, 3.2)
    labels = list(points)
    for index, label in enumerate(labels):
        estimate, low, high = points[label]
        axes.errorbar(
            [index], [estimate], yerr=[[estimate - low], [high - estimate]], fmt="o", capsize=6
        )
    axes.set_xticks(range(len(labels)), labels)
    axes.set(title=title, ylabel=ylabel)
    axes.grid(alpha=0.3, axis="y")
    return _png(plt, figure)
