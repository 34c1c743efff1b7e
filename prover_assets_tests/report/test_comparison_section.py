"""A registered comparison written as the report's section: its label and why, what the
systems solved, the decision, every problem, and the comparison without defects."""

from __future__ import annotations

from prover_assets.report.analysis import INVALID
from prover_assets.report.comparison_section import comparison_part
from prover_assets.report.summary import MadeBy, RunProvenance
from prover_assets_tests.factories import make_comparison, make_interval, make_paired, make_side


def registered(**overrides):
    return make_comparison(endpoint=None, without_known_defects=None, **overrides)


def test_a_primary_comparison_is_labelled_primary_with_no_reasons():
    text = comparison_part(registered(primary=True, secondary_reasons=[]))
    assert text.startswith("### minif2f, cap 64: solved@2 — **PRIMARY**\n")
    assert "Secondary because" not in text


def test_a_secondary_comparison_lists_every_reason():
    text = comparison_part(registered(secondary_reasons=["k = 1, registered 8", "limit 10"]))
    assert "— **secondary**" in text
    assert "Secondary because:\n- k = 1, registered 8\n- limit 10\n" in text


def test_an_invalid_comparison_says_its_test_answers_nothing_whatever_its_primary_flag():
    text = comparison_part(registered(decision=INVALID, secondary_reasons=["chunk died"]))
    assert "— **INVALID**" in text
    assert "**INVALID: a validity condition failed.**" in text
    assert "Invalid and not PRIMARY because:\n- chunk died\n" in text


def test_the_differences_are_signed_points_with_their_interval_and_method():
    comparison = registered(pass1_difference=make_interval(0.041, -0.008, 0.09))
    assert (
        "- pass@1 difference (candidate - baseline): +4.1 points [-0.8, +9.0] "
        "(paired cluster bootstrap, 100 resamples, seed 1)"
    ) in comparison_part(comparison)


def test_each_system_names_its_revisions_and_the_runs_that_made_it():
    made = MadeBy(run_id="abc", started_at="t0", finished_at="t1")
    baseline = make_side(
        "baseline",
        2,
        model_revs=["r1", "r2"],
        provenance=RunProvenance(
            generations=made, verdicts=MadeBy(run_id=None, started_at="t2", finished_at="t3")
        ),
    )
    text = comparison_part(registered(baseline=baseline))
    assert "| baseline | `r1`, `r2` | run `abc`, t0 to t1 | t2 to t3 |" in text


def test_each_problem_is_a_row_and_a_discordant_one_is_marked():
    rows = [
        make_paired("p1", (0, 8, False), (3, 8, True), "candidate_only"),
        make_paired("p2", (8, 8, True), (8, 8, True), "both"),
    ]
    text = comparison_part(registered(per_problem=rows))
    assert "Per problem (2 problems):" in text
    assert "| `p1` | 0/8 | no | 3/8 | yes | **candidate only** |" in text
    assert "| `p2` | 8/8 | yes | 8/8 | yes |  |" in text


def test_without_a_defect_list_or_audit_the_defect_free_comparison_is_said_not_judged():
    text = comparison_part(registered())
    assert text.endswith(
        "#### Without the statements known or found to be defective (secondary)\n\n"
        "Not judged: no defect list or statement audit was given.\n"
    )
