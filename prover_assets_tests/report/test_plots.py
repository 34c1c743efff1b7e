"""The iteration plots say what they show: solved@k with its k, one grid per panel, and a
seed range bar only where the seeds differ (a bar of no length drew a bare grey square)."""

from __future__ import annotations

import pytest
from matplotlib.collections import LineCollection

from prover_assets.report import plots
from prover_assets.report.summary import CurvePoint, SeedRow, SeedSpreadRow


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions draw, kept instead of closed into PNG bytes."""
    figures = []
    monkeypatch.setattr(plots, "_png", lambda plt, figure: figures.append(figure) or b"")
    return figures


def spread_row(iteration: int, *solved: int) -> SeedSpreadRow:
    """One iteration's seeds (seed 0 registered) against a baseline that solved 2 of 6."""
    return SeedSpreadRow(
        iteration=iteration,
        eval_set="minif2f",
        cap=64,
        k=8,
        problems=6,
        baseline_solved_at_k=2,
        seeds=[
            SeedRow(seed=i, solved_at_k=s, decision="success", registered=i == 0)
            for i, s in enumerate(solved)
        ],
        min=min(solved),
        max=max(solved),
        sd=None,
        agree=True,
        sentence="",
    )


def test_the_seed_range_is_drawn_only_where_seeds_differ_and_named_in_the_legend(drawn):
    rows = [spread_row(1, 3, 3), spread_row(2, 3, 5)]
    plots.seed_spread_plot(rows, k=8, title="t")
    (axes,) = drawn[0].axes
    (bar,) = [c for c in axes.collections if isinstance(c, LineCollection)]
    assert [tuple(map(tuple, s)) for s in bar.get_segments()] == [((2.0, 3.0), (2.0, 5.0))]
    labels = [t.get_text() for t in axes.get_legend().get_texts()]
    assert "range over seeds" in labels and "baseline" in labels
    assert axes.get_ylabel() == "problems solved@8 (of 6)"


def test_the_iteration_curve_names_its_k_and_draws_one_grid_per_panel(drawn):
    rows = [
        CurvePoint(
            iteration=i,
            pool_solved_cumulative=i,
            solved_at_k=2 + i,
            problems=6,
            wilson=(0.1, 0.9),
            pool_samples=3 * i,
            pool_completion_tokens=9 * i,
        )
        for i in (0, 1, 2)
    ]
    plots.iteration_curve_plot(rows, k=8, title="t")
    _, evaluation, spent, tokens = drawn[0].axes
    assert evaluation.get_title() == "evaluation solved@8 (95 % Wilson)"
    assert tokens.get_ylabel() == "completion tokens"
    assert not any(line.get_visible() for line in tokens.yaxis.get_gridlines())
    assert any(line.get_visible() for line in spent.yaxis.get_gridlines())
