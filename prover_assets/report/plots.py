"""Plots as PNG bytes (matplotlib, headless), for the report and the UI's metadata: one style for
all of them (150 dpi, the same colours and markers per system, integer axes where the values are
counts or steps, y from 0 where a bar or share is drawn)."""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from prover_assets.report.summary import CurvePoint, LiftRow, McNemarTable, SeedSpreadRow

__all__ = [
    "DPI",
    "bar_plot",
    "discordance_plot",
    "funnel_plot",
    "iteration_curve_plot",
    "lift_plot",
    "line_plot",
    "pass_at_k_plot",
    "reasons_plot",
    "seed_spread_plot",
    "solved_plot",
    "time_plot",
]

DPI = 150
# Per series, in order: colour, marker, line style (told apart in grey print and when equal).
_STYLES = (
    ("#1f5aa6", "o", "-"),
    ("#d4661f", "s", "--"),
    ("#3a8f3a", "^", ":"),
    ("#8c4fa8", "D", "-."),
)
_ACCEPTED = "accepted"


def _style(index: int) -> tuple[str, str, str]:
    return _STYLES[index % len(_STYLES)]


def _figure(width: float = 6.4, height: float = 3.6, columns: int = 1, **grid: Any):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "legend.frameon": False,
        }
    )
    figure, axes = plt.subplots(1, columns, figsize=(width, height), dpi=DPI, **grid)
    return plt, figure, axes


def _png(plt, figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=DPI)
    plt.close(figure)
    return buffer.getvalue()


def _integer_axis(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _doubling(values: Sequence[int]) -> bool:
    """Whether values double from one to the next (1, 2, 4, 8): then a log2 axis spaces them."""
    return len(values) > 2 and all(b == 2 * a for a, b in itertools.pairwise(values))


def line_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    integer_x: bool = False,
) -> bytes:
    """Named (x, y) series as lines (integer x ticks when `integer_x`)."""
    plt, figure, axes = _figure()
    for index, (label, (x, y)) in enumerate(series.items()):
        colour, marker, line = _style(index)
        axes.plot(
            list(x),
            list(y),
            color=colour,
            linestyle=line,
            marker=marker if len(x) < 30 else None,
            label=label,
        )
    axes.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if integer_x:
        _integer_axis(axes.xaxis)
    if len(series) > 1:
        axes.legend()
    return _png(plt, figure)


def bar_plot(groups: Mapping[str, Mapping[str, float]], *, title: str, ylabel: str) -> bytes:
    """Vertical bars for each category, one colour per group, from 0."""
    plt, figure, axes = _figure(7.0, 3.6)
    categories = list(dict.fromkeys(c for values in groups.values() for c in values))
    width = 0.8 / max(len(groups), 1)
    for index, (label, values) in enumerate(groups.items()):
        positions = [i + index * width for i in range(len(categories))]
        axes.bar(
            positions,
            [values.get(c, 0) for c in categories],
            width=width,
            label=label,
            color=_style(index)[0],
        )
    axes.set_xticks(
        [i + width * (len(groups) - 1) / 2 for i in range(len(categories))],
        categories,
        rotation=30,
        ha="right",
        fontsize=8,
    )
    axes.set(title=title, ylabel=ylabel)
    axes.set_ylim(bottom=0)
    if len(groups) > 1:
        axes.legend()
    return _png(plt, figure)


def pass_at_k_plot(
    series: Mapping[str, Sequence[tuple[int, float, float, float]]], *, title: str
) -> bytes:
    """pass@k per system: (k, estimate, low, high) points, a line through the estimates and
    the cluster-bootstrap band; k ticks are the integers measured (log2 spaced when doubling),
    y from 0 to 1."""
    plt, figure, axes = _figure(5.6, 3.6)
    ks = sorted({k for points in series.values() for k, *_ in points})
    for index, (label, points) in enumerate(series.items()):
        colour, marker, line = _style(index)
        x = [k for k, *_ in points]
        axes.plot(
            x,
            [e for _, e, _, _ in points],
            color=colour,
            marker=marker,
            linestyle=line,
            label=label,
        )
        axes.fill_between(
            x, [lo for *_, lo, _ in points], [hi for *_, hi in points], color=colour, alpha=0.15
        )
    if _doubling(ks):
        axes.set_xscale("log", base=2)
    axes.set_xticks(ks, [str(k) for k in ks])
    axes.minorticks_off()
    axes.set_ylim(0, 1)
    axes.set(title=title, xlabel="k (samples)", ylabel="pass@k (mean over problems)")
    axes.legend(title="band: cluster bootstrap 95%")
    return _png(plt, figure)


def solved_plot(
    systems: Mapping[str, tuple[int, int, float, float]],
    difference: tuple[float, float, float] | None,
    *,
    k: int,
    title: str,
) -> bytes:
    """solved@k per system as bars with Wilson 95% intervals and "solved/n" labels: `systems`
    maps a label to (solved, problems, low, high); beside them, the paired difference
    (candidate - baseline, in points) with its interval."""
    plt, figure, (left, right) = _figure(
        7.2, 3.6, columns=2, gridspec_kw={"width_ratios": [2.2, 1]}
    )
    for index, (solved, problems, low, high) in enumerate(systems.values()):
        share = solved / problems
        left.bar(index, share, color=_style(index)[0], width=0.6)
        left.errorbar(
            index, share, yerr=[[share - low], [high - share]], color="black", capsize=6, lw=1
        )
        left.annotate(
            f"{solved}/{problems}",
            (index, high),
            ha="center",
            va="bottom",
            xytext=(0, 3),
            textcoords="offset points",
        )
    left.set_xticks(range(len(systems)), list(systems))
    left.set_ylim(0, 1.1)
    left.set(title=f"solved@{k} (Wilson 95%)", ylabel="share of problems solved")
    if difference is not None:
        estimate, low, high = (100 * v for v in difference)
        right.errorbar(
            0,
            estimate,
            yerr=[[estimate - low], [high - estimate]],
            fmt="o",
            color="black",
            capsize=8,
        )
        right.axhline(0, color="grey", lw=1)
        right.annotate(
            f"{estimate:+.1f}",
            (0, high),
            ha="center",
            va="bottom",
            xytext=(0, 3),
            textcoords="offset points",
        )
        span = max(abs(low), abs(high), 5.0) * 1.25
        right.set_ylim(-span, span)
    right.set_xticks([0], ["candidate -\nbaseline"])
    right.set_xlim(-1, 1)
    right.set(title="paired difference\n(bootstrap 95%)", ylabel="points")
    figure.suptitle(title)
    return _png(plt, figure)


def discordance_plot(table: McNemarTable, *, title: str) -> bytes:
    """The McNemar 2x2 table drawn as a table: counts in labelled cells, the discordant ones
    (which the test uses) shaded; with none discordant, the title says so."""
    plt, figure, axes = _figure(4.8, 3.4)
    cells = [
        [table.both, table.baseline_only],
        [table.candidate_only, table.neither],
    ]
    discordant = table.discordant
    for row in range(2):
        for column in range(2):
            shaded = row != column
            axes.add_patch(_rectangle(column, 1 - row, "#f3d9b1" if shaded else "#eeeeee"))
            axes.text(
                column + 0.5,
                1.5 - row,
                str(cells[row][column]),
                ha="center",
                va="center",
                fontsize=16,
                weight="bold" if shaded else "normal",
            )
    axes.set_xlim(0, 2)
    axes.set_ylim(0, 2)
    axes.set_xticks([0.5, 1.5], ["candidate solved", "candidate not solved"])
    axes.set_yticks([1.5, 0.5], ["baseline\nsolved", "baseline\nnot solved"])
    axes.tick_params(length=0)
    axes.grid(False)
    for side in ("left", "bottom"):
        axes.spines[side].set_visible(False)
    note = "no discordant problems" if discordant == 0 else f"{discordant} discordant (shaded)"
    axes.set_title(f"{title}\n{note}")
    return _png(plt, figure)


def _rectangle(x: float, y: float, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="white", lw=3)


def reasons_plot(groups: Mapping[str, Mapping[str, int]], *, title: str) -> bytes:
    """Samples by outcome, accepted first then each rejection reason by count, side by side per
    system, as horizontal bars from 0 with their counts."""
    totals: dict[str, int] = {}
    for values in groups.values():
        for reason, count in values.items():
            totals[reason] = totals.get(reason, 0) + count
    reasons = sorted(totals, key=lambda r: (r != _ACCEPTED, -totals[r], r))
    plt, figure, axes = _figure(7.0, 1.2 + 0.32 * len(reasons) * max(len(groups), 1))
    height = 0.8 / max(len(groups), 1)
    for index, (label, values) in enumerate(groups.items()):
        positions = [i + index * height for i in range(len(reasons))]
        counts = [values.get(r, 0) for r in reasons]
        bars = axes.barh(positions, counts, height=height, label=label, color=_style(index)[0])
        axes.bar_label(bars, padding=2, fontsize=7)
    axes.set_yticks(
        [i + height * (len(groups) - 1) / 2 for i in range(len(reasons))], reasons, fontsize=8
    )
    axes.invert_yaxis()
    axes.set_xlim(left=0)
    _integer_axis(axes.xaxis)
    axes.set(title=title, xlabel="samples")
    axes.legend()
    return _png(plt, figure)


def lift_plot(rows: Sequence[LiftRow], *, title: str) -> bytes:
    """Per correction round: problems converted (bars) and solved so far (line), y from 0."""
    plt, figure, axes = _figure(5.6, 3.8)
    rounds = [r.round for r in rows]
    bars = axes.bar(
        rounds,
        [r.converted for r in rows],
        color=_style(0)[0],
        width=0.5,
        label="converted in the round (count on the bar)",
    )
    converted = [r.converted for r in rows]
    axes.bar_label(
        bars,
        labels=[str(c) if c else "" for c in converted],
        label_type="center",
        color="white",
        fontsize=9,
        weight="bold",
    )
    for x, count in zip(rounds, converted, strict=True):
        if not count:  # no bar to write on
            axes.annotate("0", (x, 0), xytext=(0, 3), textcoords="offset points", ha="center")
    cumulative = axes.plot(
        rounds,
        [r.solved_cumulative for r in rows],
        color=_style(1)[0],
        marker=_style(1)[1],
        label="solved so far (cumulative)",
    )
    for x, row in zip(rounds, rows, strict=True):
        axes.annotate(
            str(row.solved_cumulative),
            (x, row.solved_cumulative),
            xytext=(0, 6),
            textcoords="offset points",
            ha="center",
            color=cumulative[0].get_color(),
        )
    axes.set_xticks(rounds, [str(r) for r in rounds])
    top = max([r.solved_cumulative for r in rows] + [1])
    axes.set_ylim(0, math.ceil(top * 1.25) + 1)
    _integer_axis(axes.yaxis)
    axes.set(title=title, xlabel="round (0: first samples; then corrections)", ylabel="problems")
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8)
    return _png(plt, figure)


def funnel_plot(stages: Sequence[tuple[str, int]], *, title: str, unit: str) -> bytes:
    """A funnel: each stage's count as a labelled horizontal bar, first stage on top."""
    plt, figure, axes = _figure(6.4, 1.0 + 0.4 * len(stages))
    labels = [label for label, _ in stages]
    bars = axes.barh(range(len(stages)), [count for _, count in stages], color=_style(0)[0])
    axes.bar_label(bars, labels=[f"{count:,}" for _, count in stages], padding=3, fontsize=8)
    axes.set_yticks(range(len(stages)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(left=0)
    _integer_axis(axes.xaxis)
    axes.set(title=title, xlabel=unit)
    return _png(plt, figure)


def time_plot(steps: Sequence[tuple[str, str, float, float]], *, title: str) -> bytes:
    """Where a round's time went: each step's wall minutes as a horizontal bar, first step on
    top, coloured by what it waits on (GPU, Lean, host), one legend entry each; the wall of its
    earlier attempts (killed or failed, resumed after) stacked after it, hatched grey."""
    plt, figure, axes = _figure(6.4, 1.2 + 0.32 * len(steps))
    sides = list(dict.fromkeys(side for _, side, _, _ in steps))
    first_of = {side: [s for _, s, _, _ in steps].index(side) for side in sides}
    wasted_label = "earlier attempts (killed or failed)"
    for position, (_, side, seconds, wasted) in enumerate(steps):
        axes.barh(
            position,
            seconds / 60,
            color=_style(sides.index(side))[0],
            label=side if position == first_of[side] else None,
        )
        if wasted > 0:
            axes.barh(
                position,
                wasted / 60,
                left=seconds / 60,
                color="0.85",
                hatch="//",
                edgecolor="0.45",
                label=wasted_label,
            )
            wasted_label = None
    axes.set_yticks(range(len(steps)), [step for step, _, _, _ in steps], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(left=0)
    axes.set(title=title, xlabel="wall minutes")
    axes.legend(fontsize=8, loc="best")
    return _png(plt, figure)


def iteration_curve_plot(rows: Sequence[CurvePoint], *, k: int, title: str) -> bytes:
    """The expert-iteration curve, three panels by iteration (0: the baseline): pool problems
    solved so far; evaluation solved@k with 95 % Wilson bars; pool samples and completion
    tokens spent."""
    plt, figure, (pool, evaluation, spent) = _figure(10.5, 3.4, columns=3)
    iterations = [r.iteration for r in rows]
    colour, marker, line = _style(0)
    pool.plot(
        iterations,
        [r.pool_solved_cumulative for r in rows],
        color=colour,
        marker=marker,
        linestyle=line,
    )
    pool.set(title="pool problems solved so far", xlabel="iteration", ylabel="problems")
    pool.set_ylim(bottom=0)
    solved = [r.solved_at_k / r.problems for r in rows]
    low = [s - r.wilson[0] for s, r in zip(solved, rows, strict=True)]
    high = [r.wilson[1] - s for s, r in zip(solved, rows, strict=True)]
    colour, marker, line = _style(1)
    evaluation.errorbar(
        iterations, solved, yerr=[low, high], color=colour, marker=marker, linestyle=line, capsize=3
    )
    evaluation.set(
        title=f"evaluation solved@{k} (95 % Wilson)", xlabel="iteration", ylabel="share solved"
    )
    evaluation.set_ylim(0, 1)
    spent_rows = [r for r in rows if r.iteration > 0]
    x = [r.iteration for r in spent_rows]
    spent.bar(x, [r.pool_samples for r in spent_rows], color=_style(0)[0], width=0.5)
    spent.set(title="pool samples (bars), tokens (line)", xlabel="iteration", ylabel="samples")
    tokens = spent.twinx()
    tokens.plot(x, [r.pool_completion_tokens for r in spent_rows], color=_style(2)[0], marker="^")
    tokens.set_ylabel("completion tokens")
    tokens.set_ylim(bottom=0)
    tokens.grid(False)  # the samples' grid is the panel's; a second one doubled every line
    for axes in (pool, evaluation, spent):
        axes.set_xticks(iterations if axes is not spent else x)
    _integer_axis(pool.yaxis)
    figure.suptitle(title)
    return _png(plt, figure)


def seed_spread_plot(rows: Sequence[SeedSpreadRow], *, k: int, title: str) -> bytes:
    """Solved@k of each training seed, per iteration: one point per seed, the registered seed's
    filled, the range over seeds as a grey bar where they differ (where they agree a bar of no
    length drew a bare grey square), the baseline as a dotted line; y from 0 to the problems."""
    plt, figure, axes = _figure(5.6, 3.4)
    ranged = False
    for row in rows:
        x = row.iteration
        values = [s.solved_at_k for s in row.seeds]
        if max(values) > min(values):
            axes.vlines(
                x,
                min(values),
                max(values),
                color="#999999",
                linewidth=6,
                alpha=0.4,
                label=None if ranged else "range over seeds",
            )
            ranged = True
        for index, seed in enumerate(row.seeds):
            colour, marker, _ = _style(index)
            axes.plot(
                x + 0.06 * (index - (len(values) - 1) / 2),
                seed.solved_at_k,
                marker=marker,
                color=colour,
                markerfacecolor=colour if seed.registered or index == 0 else "white",
                linestyle="none",
                label=f"seed {seed.seed}" if x == rows[0].iteration else None,
            )
    axes.axhline(rows[0].baseline_solved_at_k, color="#555555", linestyle=":", label="baseline")
    axes.set_xticks([row.iteration for row in rows])
    axes.set_xlim(rows[0].iteration - 0.5, rows[-1].iteration + 0.5)
    axes.set_ylim(0, rows[0].problems * 1.06)
    _integer_axis(axes.yaxis)
    axes.set(title=title, xlabel="iteration", ylabel=f"problems solved@{k} (of {rows[0].problems})")
    axes.legend(fontsize=8, loc="lower right")
    return _png(plt, figure)
