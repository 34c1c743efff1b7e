"""A registered comparison written as the report's section: its label and why, what the
systems solved, the decision, every problem, and the comparison without defects."""

from __future__ import annotations

from prover_assets.report.analysis import INVALID
from prover_assets.report.comparison_section import comparison_part
from prover_assets.report.summary import (
    DefectFreeSummary,
    DefectiveProblem,
    DefectListRef,
    FoundByLean,
    MadeBy,
    McNemarTable,
    RunProvenance,
)
from prover_assets_tests.factories import make_comparison, make_interval, make_paired, make_side


def registered(**overrides):
    return make_comparison(**({"endpoint": None, "without_known_defects": None} | overrides))


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
    assert (
        '<span style="color:red">**INVALID: a validity condition failed.** The test below '
        "answers nothing; the pre-registration calls this run pair invalid, not negative."
        "</span>\n\n"
    ) in text
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
        make_paired("p3", (2, 8, True), (0, 8, False), "baseline_only"),
    ]
    text = comparison_part(registered(per_problem=rows))
    assert "Per problem (3 problems):" in text
    assert "| `p1` | 0/8 | no | 3/8 | yes | **candidate only** |" in text
    assert "| `p2` | 8/8 | yes | 8/8 | yes |  |" in text
    assert "| `p3` | 2/8 | yes | 0/8 | no | **baseline only** |" in text


def test_without_a_defect_list_or_audit_the_defect_free_comparison_is_said_not_judged():
    text = comparison_part(registered())
    assert text.endswith(
        "#### Without the statements known or found to be defective (secondary)\n\n"
        "Not judged: no defect list or statement audit was given.\n"
    )


def test_the_whole_section_reads_as_written_here():
    """A secondary comparison with an endpoint, an override and one discordant problem,
    written out by hand: every line of its section."""
    comparison = registered(
        endpoint="S1",
        secondary_reasons=["k = 1, registered 8"],
        design_override="a reason",
        p_value=0.5,
        per_problem=[make_paired("p1", (0, 8, False), (3, 8, True), "candidate_only")],
        pass1_difference=make_interval(0.041, -0.008, 0.09),
        solved_difference=make_interval(0.25, 0.0, 0.5),
    )
    expected = [
        "### minif2f, cap 64: solved@2 — **secondary**",
        "",
        "Endpoint (as the config names it): S1.",
        "",
        "Secondary because:",
        "- k = 1, registered 8",
        "",
        "| system | model revision | generated | verified |",
        "|---|---|---|---|",
        "| baseline | `r` | t0 to t1 | t0 to t1 |",
        "| candidate | `r` | t0 to t1 | t0 to t1 |",
        "",
        "|  | candidate solved | candidate not solved |",
        "|---|---|---|",
        "| baseline solved | 2 | 0 |",
        "| baseline not solved | 0 | 2 |",
        "",
        "Discordant problems: 0 (candidate only 0, baseline only 0). Exact two-sided McNemar "
        "p = 0.5 (alpha 0.05).",
        "",
        "**Decision (applied by code): no detectable improvement.**",
        "",
        "- pass@1 difference (candidate - baseline): +4.1 points [-0.8, +9.0] (paired cluster "
        "bootstrap, 100 resamples, seed 1)",
        "- solved@2 difference (candidate - baseline): +25.0 points [+0.0, +50.0] (paired "
        "cluster bootstrap, 100 resamples, seed 1)",
        "",
        "Design mismatch overridden: a reason",
        "",
        "![solved@2, minif2f cap 64](plots/solved_minif2f_c64.png)",
        "",
        "![discordance, minif2f cap 64](plots/discordance_minif2f_c64.png)",
        "",
        "Per problem (1 problems):",
        "",
        "| problem | baseline accepted c/n | baseline solved@2 | candidate accepted c/n "
        "| candidate solved@2 | discordant |",
        "|---|---|---|---|---|---|",
        "| `p1` | 0/8 | no | 3/8 | yes | **candidate only** |",
        "",
        "#### Without the statements known or found to be defective (secondary)",
        "",
        "Not judged: no defect list or statement audit was given.",
        "",
    ]
    assert comparison_part(comparison).split("\n") == expected


def defect_free(**overrides) -> DefectFreeSummary:
    fields = {
        "problems": 3,
        "excluded": 1,
        "table": McNemarTable(both=1, baseline_only=0, candidate_only=1, neither=1),
        "p_value": 1.0,
        "decision": "no detectable improvement",
        "registered_decision": "success",
        "baseline_solved": 1,
        "candidate_solved": 2,
        "defective": (
            DefectiveProblem(
                problem_id="p4",
                kinds=("false", "vacuous"),
                descriptions=("its claim is false",),
                sources=("known list", "audit"),
                baseline_solved=False,
                candidate_solved=True,
            ),
        ),
        "known_list": DefectListRef(file="defects.jsonl", sha256="c" * 64),
        "known": 1,
        "audit": "d" * 64,
        "found_by_lean": [
            FoundByLean(problem_id="p4", kind="vacuous", check="exfalso", description="x")
        ],
        "found_applied": True,
    }
    return DefectFreeSummary(**(fields | overrides))


def defect_part(found: DefectFreeSummary) -> list[str]:
    text = comparison_part(registered(without_known_defects=found))
    return text[text.index("#### Without") :].split("\n")


def test_the_comparison_without_defects_reads_as_written_here():
    assert defect_part(defect_free()) == [
        "#### Without the statements known or found to be defective (secondary)",
        "",
        f"- Known: 1 from `defects.jsonl` (sha256 `{'c' * 12}`).",
        f"- Found by Lean: 1 by the statement audit (sha256 `{'d' * 12}`).",
        "",
        "3 problems with no known or found defect (1 left out): baseline solved@2 1, candidate "
        "2; discordant candidate only 1, baseline only 0; exact McNemar p = 1; decision no "
        "detectable improvement. This does not replace the registered decision above.",
        "",
        "**Without the defective problem the decision changes: success -> no detectable "
        "improvement.**",
        "",
        "| problem | defect | baseline solved@2 | candidate solved@2 | source |",
        "|---|---|---|---|---|",
        "| `p4` | false, vacuous | no | yes | known list; audit |",
        "",
    ]


def test_without_a_shipped_list_or_an_audit_the_sources_say_so():
    lines = defect_part(defect_free(known_list=None, audit=None))
    assert lines[2:4] == [
        "- Known: no defect list is shipped for this eval set's copy (by its sha256).",
        "- Found by Lean: the statement audit was not given.",
    ]


def test_an_audit_on_the_simulated_verifier_is_listed_and_not_applied():
    lines = defect_part(defect_free(found_applied=False))
    assert lines[3] == (
        f"- Found by Lean: the statement audit (sha256 `{'d' * 12}`) ran on the SIMULATED "
        "verifier; its 1 findings are listed in its asset and NOT applied (the simulated rule "
        "decides nothing about statements)."
    )
