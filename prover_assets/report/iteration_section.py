"""The report's expert-iteration section (exploratory): the curve across iterations, the spread
over training seeds, and every exploratory comparison. Computed by `report.iterations`; written
here."""

from __future__ import annotations

from collections.abc import Sequence

from prover_assets.report.markdown import (
    CURVE_PLOT,
    SPREAD_PLOT,
    file_image,
    markdown_table,
    percent,
    points,
)
from prover_assets.report.summary import (
    CurvePoint,
    ExploratoryComparison,
    ReportSummary,
    SeedSpreadRow,
)

__all__ = ["iteration_parts"]


def _exploratory_line(comparison: ExploratoryComparison) -> list[str]:
    table, diff, k = comparison.table, comparison.pass1_difference, comparison.k
    before, after = comparison.baseline, comparison.candidate
    return [
        f"{comparison.what}, {comparison.eval_set} cap {comparison.cap}: **exploratory**",
        f"solved@{k} {before.solved_at_k} -> {after.solved_at_k} of {after.problems} "
        f"(Wilson {percent(after.wilson[0])} to {percent(after.wilson[1])})",
        f"{table.candidate_only} / {table.baseline_only}",
        f"{comparison.p_value:.4g}",
        f"{points(diff.estimate)} [{points(diff.low)}, {points(diff.high)}]",
        comparison.decision,
    ]


def _curve_table(curve: Sequence[CurvePoint], k: int) -> str:
    return markdown_table(
        [
            "iteration",
            "pool problems solved so far",
            "pool samples",
            "pool completion tokens",
            f"eval solved@{k}",
            "95 % Wilson",
        ],
        [
            [
                f"{r.iteration}" + (" (baseline)" if r.iteration == 0 else ""),
                r.pool_solved_cumulative,
                r.pool_samples,
                r.pool_completion_tokens,
                f"{r.solved_at_k} of {r.problems}",
                f"{percent(r.wilson[0])} to {percent(r.wilson[1])}",
            ]
            for r in curve
        ],
    )


def _spread_table(spread: Sequence[SeedSpreadRow]) -> str:
    return markdown_table(
        [
            "iteration",
            *[f"seed {s.seed}" for s in spread[0].seeds],
            "min to max",
            "sd",
        ],
        [
            [
                row.iteration,
                *[f"{s.solved_at_k} ({s.decision})" for s in row.seeds],
                f"{row.min} to {row.max}",
                "n/a" if row.sd is None else f"{row.sd:.2f}",
            ]
            for row in spread
        ],
    )


def iteration_parts(summary: ReportSummary) -> list[str]:
    """The expert-iteration curve, the seed spread and every exploratory comparison."""
    curve, spread = summary.iteration_curve, summary.seed_spread
    if curve is None or spread is None:
        return []
    explored = markdown_table(
        [
            "comparison",
            "solved",
            "discordant (new / lost)",
            "McNemar p",
            "pass@1 difference (points)",
            "decision",
        ],
        [_exploratory_line(c) for c in summary.exploratory or []],
    )
    first = spread[0]
    return [
        "## Expert iterations and training seeds\n",
        "Only the registered comparison above (iteration 1, registered training seed, against "
        "the baseline) answers the registered question. Everything in this section is "
        "exploratory: never PRIMARY, whatever its p-value.\n",
        "### The expert-iteration curve\n",
        _curve_table(curve, summary.k) + "\n",
        file_image(CURVE_PLOT, "expert-iteration curve") + "\n",
        f"### Training-seed spread ({first.eval_set} cap {first.cap}, solved@{first.k} "
        "against the baseline, each seed's decision)\n",
        _spread_table(spread) + "\n",
        *[f"- {row.sentence}" for row in spread],
        "",
        file_image(SPREAD_PLOT, "training-seed spread") + "\n",
        "### Exploratory comparisons\n",
        explored + "\n",
    ]
