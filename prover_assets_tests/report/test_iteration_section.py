"""The expert-iteration section: absent without iterations; else the curve, the seed spread
and each exploratory comparison, as tables."""

from __future__ import annotations

from prover_assets.report.iteration_section import iteration_parts
from prover_assets.report.summary import CurvePoint, ReportSummary, SeedRow, SeedSpreadRow
from prover_assets_tests.factories import make_comparison, make_interval, make_side


def iterations_summary(**fields) -> ReportSummary:
    """Only the fields the section reads (`model_construct`: the rest of a report is not
    this section's)."""
    return ReportSummary.model_construct(k=2, **fields)


def spread_row(seeds, sd) -> SeedSpreadRow:
    return SeedSpreadRow(
        iteration=1,
        eval_set="minif2f",
        cap=64,
        k=2,
        problems=4,
        baseline_solved_at_k=2,
        seeds=[
            SeedRow(seed=s, solved_at_k=n, decision="d", registered=i == 0)
            for i, (s, n) in enumerate(seeds)
        ],
        min=min(n for _, n in seeds),
        max=max(n for _, n in seeds),
        sd=sd,
        agree=True,
        sentence="every seed agrees",
    )


CURVE = [
    CurvePoint(
        iteration=0,
        pool_solved_cumulative=0,
        pool_samples=0,
        pool_completion_tokens=0,
        solved_at_k=2,
        wilson=(0.15, 0.85),
        problems=4,
    ),
    CurvePoint(
        iteration=1,
        pool_solved_cumulative=7,
        pool_samples=40,
        pool_completion_tokens=900,
        solved_at_k=3,
        wilson=(0.3, 0.95),
        problems=4,
    ),
]


# Iteration 2 against iteration 1: 2 -> 3 of 4 solved, pass@1 +5 points [-1, +10].
EXPLORED = make_comparison(
    iteration=2,
    seed=7,
    against="iteration 1",
    what="iteration 2 against iteration 1",
    baseline=make_side("iteration 1", 2),
    candidate=make_side("iteration 2", 3, wilson=(0.3, 0.95)),
    pass1_difference=make_interval(0.05, -0.01, 0.1),
)


def test_a_report_of_one_iteration_has_no_iteration_section():
    assert iteration_parts(iterations_summary(iteration_curve=None, seed_spread=None)) == []


def test_the_curve_marks_the_baseline_and_gives_each_iteration_its_pool_and_eval_figures():
    text = "\n".join(
        iteration_parts(
            iterations_summary(
                iteration_curve=CURVE, seed_spread=[spread_row([(7, 3)], None)], exploratory=[]
            )
        )
    )
    assert "| 0 (baseline) | 0 | 0 | 0 | 2 of 4 | 15.0% to 85.0% |" in text
    assert "| 1 | 7 | 40 | 900 | 3 of 4 | 30.0% to 95.0% |" in text


def test_the_spread_has_a_column_per_seed_and_no_sd_for_one_seed():
    one = iteration_parts(
        iterations_summary(
            iteration_curve=CURVE, seed_spread=[spread_row([(7, 3)], None)], exploratory=[]
        )
    )
    two = iteration_parts(
        iterations_summary(
            iteration_curve=CURVE,
            seed_spread=[spread_row([(7, 3), (8, 1)], 1.4142)],
            exploratory=[],
        )
    )
    assert "| 1 | 3 (d) | 3 to 3 | n/a |" in "\n".join(one)
    assert "| iteration | seed 7 | seed 8 | min to max | sd |" in "\n".join(two)
    assert "| 1 | 3 (d) | 1 (d) | 1 to 3 | 1.41 |" in "\n".join(two)


def test_an_exploratory_comparison_is_one_row_labelled_exploratory():
    text = "\n".join(
        iteration_parts(
            iterations_summary(
                iteration_curve=CURVE,
                seed_spread=[spread_row([(7, 3)], None)],
                exploratory=[EXPLORED],
            )
        )
    )
    assert (
        "| iteration 2 against iteration 1, minif2f cap 64: **exploratory** | solved@2 2 -> 3 "
        "of 4 (Wilson 30.0% to 95.0%) | 0 / 0 | 1 | +5.0 [-1.0, +10.0] | "
        "no detectable improvement |"
    ) in text


def test_the_whole_section_reads_as_written_here():
    """The section for two iterations, two seeds and one exploratory comparison, written out
    by hand: headings, the sentence that says none of it is PRIMARY, the three tables, the
    seeds' sentence and the two plots."""
    summary = iterations_summary(
        iteration_curve=CURVE,
        seed_spread=[spread_row([(7, 3), (8, 1)], 1.4142)],
        exploratory=[EXPLORED],
    )
    expected = [
        "## Expert iterations and training seeds",
        "",
        "Only the registered comparison above (iteration 1, registered training seed, against "
        "the baseline) answers the registered question. Everything in this section is "
        "exploratory: never PRIMARY, whatever its p-value.",
        "",
        "### The expert-iteration curve",
        "",
        "| iteration | pool problems solved so far | pool samples | pool completion tokens "
        "| eval solved@2 | 95 % Wilson |",
        "|---|---|---|---|---|---|",
        "| 0 (baseline) | 0 | 0 | 0 | 2 of 4 | 15.0% to 85.0% |",
        "| 1 | 7 | 40 | 900 | 3 of 4 | 30.0% to 95.0% |",
        "",
        "![expert-iteration curve](plots/iteration_curve.png)",
        "",
        "### Training-seed spread (minif2f cap 64, solved@2 against the baseline, each seed's "
        "decision)",
        "",
        "| iteration | seed 7 | seed 8 | min to max | sd |",
        "|---|---|---|---|---|",
        "| 1 | 3 (d) | 1 (d) | 1 to 3 | 1.41 |",
        "",
        "- every seed agrees",
        "",
        "![training-seed spread](plots/seed_spread.png)",
        "",
        "### Exploratory comparisons",
        "",
        "| comparison | solved | discordant (new / lost) | McNemar p "
        "| pass@1 difference (points) | decision |",
        "|---|---|---|---|---|---|",
        "| iteration 2 against iteration 1, minif2f cap 64: **exploratory** | solved@2 2 -> 3 "
        "of 4 (Wilson 30.0% to 95.0%) | 0 / 0 | 1 | +5.0 [-1.0, +10.0] | "
        "no detectable improvement |",
        "",
    ]
    assert "\n".join(iteration_parts(summary)).split("\n") == expected


def test_a_curve_without_a_spread_has_no_section():
    assert iteration_parts(iterations_summary(iteration_curve=CURVE, seed_spread=None)) == []
