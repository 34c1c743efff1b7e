"""The registered comparison again without the statements known or found to be defective
(secondary): the paired table, exact McNemar and the decision on the other problems, each
defective problem with what each system solved of it, and whether the decision changes; what a
simulated audit found listed, never applied. Every expected value is counted by hand from the
hand-built cells."""

from __future__ import annotations

import json

import pytest

from prover_assets.problems.defects import DefectKind, DefectList, KnownDefect
from prover_assets.records import sha256_file
from prover_assets.report.analysis import INVALID, mcnemar_table
from prover_assets.report.defects import EvalSetDefects, without_known_defects
from prover_assets.report.summary import (
    Comparison,
    PairedProblem,
    ProblemSide,
    RegisteredComparison,
    read_summary,
)
from prover_assets.verify.audit import AuditFinding
from prover_assets_tests.factories import make_comparison
from prover_assets_tests.report.test_analysis import reported

SOLVED = {  # cell -> (baseline solved, candidate solved)
    "both": (True, True),
    "baseline_only": (True, False),
    "candidate_only": (False, True),
    "neither": (False, False),
}
# ten problems: seven the candidate alone solved, one both, two neither
CELLS = {
    **{f"c{i}": "candidate_only" for i in range(1, 8)},
    "b1": "both",
    "n1": "neither",
    "n2": "neither",
}


def comparison(cells: dict[str, str], decision: str = "success") -> Comparison:
    rows = [
        PairedProblem(
            problem_id=problem_id,
            baseline=ProblemSide(c=0, n=4, solved=SOLVED[cell][0]),
            candidate=ProblemSide(c=0, n=4, solved=SOLVED[cell][1]),
            cell=cell,
        )
        for problem_id, cell in cells.items()
    ]
    return make_comparison(
        cap=256, k=4, table=mcnemar_table(rows), decision=decision, per_problem=rows
    )


def defect(problem_id: str, kind: DefectKind = DefectKind.FALSE) -> KnownDefect:
    return KnownDefect(
        problem_id=problem_id, kind=kind, description=f"{problem_id} is wrong", source="o/r#1"
    )


def test_the_decision_without_the_defective_problems_is_recomputed_and_its_change_said():
    # with all ten: 7 discordant to 0, p = 2 / 2**7 = 0.015625 < 0.05: success;
    # without c1, c2 and n1: 5 to 0, p = 2 / 2**5 = 0.0625: no detectable improvement
    found = without_known_defects(
        comparison(CELLS), [defect("c1"), defect("c2", DefectKind.TRIVIAL), defect("n1")]
    )
    assert (found.problems, found.excluded) == (7, 3)
    assert found.table.model_dump() == {
        "both": 1,
        "baseline_only": 0,
        "candidate_only": 5,
        "neither": 1,
    }
    assert found.p_value == pytest.approx(0.0625)
    assert found.decision == "no detectable improvement"
    assert (found.baseline_solved, found.candidate_solved) == (1, 6)
    assert found.decision_changes
    assert found.defective[0].descriptions == ("c1 is wrong",)
    assert found.sentence == (
        "Without the defective 3 problems the decision changes: success -> no detectable "
        "improvement."
    )
    assert [
        (d.problem_id, d.kinds, d.baseline_solved, d.candidate_solved) for d in found.defective
    ] == [
        ("c1", ("false",), False, True),
        ("c2", ("trivial",), False, True),
        ("n1", ("false",), False, False),
    ]


def test_a_decision_that_holds_without_them_is_said_to_be_the_same():
    # without n1 and n2 (no discordance lost): 7 to 0 still, p = 0.015625: success
    found = without_known_defects(comparison(CELLS), [defect("n1"), defect("n2")])
    assert found.decision == "success" and not found.decision_changes
    assert found.sentence == "Without the defective 2 problems the decision is the same: success."


def test_defects_of_problems_outside_the_comparison_are_ignored_and_kinds_gathered():
    found = without_known_defects(
        comparison(CELLS),
        [defect("not_kept"), defect("b1"), defect("b1", DefectKind.MISFORMALISED)],
    )
    assert (found.problems, found.excluded) == (9, 1)
    assert found.defective[0].kinds == ("false", "misformalised")
    assert found.defective[0].sources == ("o/r#1", "o/r#1")


def test_no_known_defect_changes_nothing():
    found = without_known_defects(comparison(CELLS), [])
    assert (found.problems, found.excluded, found.decision) == (10, 0, "success")
    assert found.sentence == "No problem of this comparison has a known defect: nothing changes."


def test_an_invalid_comparison_stays_invalid_without_its_defective_problems():
    found = without_known_defects(comparison(CELLS, decision=INVALID), [defect("n1")])
    assert found.decision == INVALID and not found.decision_changes


def report_with(
    tmp_path, defects: EvalSetDefects | None
) -> tuple[RegisteredComparison, dict[str, str], str]:
    """report/test_analysis's runs at k = 2 (p1 both, p2 candidate only, p3 neither, p4
    baseline only), reported with `defects` for minif2f; hand-built runs with no eval set or SFT
    outputs behind them fail validity: INVALID, and so the secondary too."""
    result = reported(tmp_path, defects=None if defects is None else {"minif2f": defects})
    (compared,) = read_summary(result.folder / "summary.json").comparisons
    inputs = json.loads((result.folder / "manifest.json").read_text())["inputs"]
    hashes = {entry["path"].rsplit("/", 1)[-1]: entry["sha256"] for entry in inputs}
    return compared, hashes, (result.folder / "report.md").read_text()


def shipped_list(tmp_path, *defects: KnownDefect) -> DefectList:
    listing = tmp_path / "list.jsonl"
    listing.write_text("".join(d.model_dump_json() + "\n" for d in defects))
    return DefectList(listing, defects)


def test_the_report_shows_the_secondary_beside_the_registered_one_and_hashes_the_list(
    tmp_path,
):
    listed = shipped_list(tmp_path, defect("p4"))
    compared, inputs, text = report_with(tmp_path, EvalSetDefects(known=listed, audit=None))
    assert compared.table.baseline_only == 1  # the registered comparison is unchanged
    assert compared.decision == INVALID
    found = compared.without_known_defects
    assert found.table.model_dump() == {
        "both": 1,
        "baseline_only": 0,
        "candidate_only": 1,
        "neither": 1,
    }
    assert (found.p_value, found.decision) == (1.0, INVALID)
    assert found.known_list.model_dump() == {
        "file": "list.jsonl",
        "sha256": sha256_file(listed.path),
    }
    assert "#### Without the statements known or found to be defective (secondary)" in text
    assert "Without the defective problem the decision is the same: INVALID." in text
    assert "| `p4` | false | yes | no | o/r#1 |" in text
    assert "- Known: 1 from `list.jsonl`" in text
    assert "- Found by Lean: the statement audit was not given." in text
    assert inputs["list.jsonl"] == sha256_file(listed.path)


def finding(problem_id: str) -> AuditFinding:
    return AuditFinding(problem_id, DefectKind.TRIVIAL, "trivial:norm_num", "norm_num", ())


def test_lean_s_findings_are_left_out_beside_the_known_ones_and_the_audit_hashed(tmp_path):
    audit = tmp_path / "audit.jsonl"
    audit.write_text("{}\n")
    defects = EvalSetDefects(
        known=shipped_list(tmp_path, defect("p4")), audit=audit, found=(finding("p2"),)
    )
    compared, inputs, text = report_with(tmp_path, defects)
    found = compared.without_known_defects
    # p2 (candidate only) and p4 (baseline only) left out: p1 both, p3 neither
    assert found.table.model_dump() == {
        "both": 1,
        "baseline_only": 0,
        "candidate_only": 0,
        "neither": 1,
    }
    assert (found.problems, found.excluded) == (2, 2)
    assert found.found_applied and [f.model_dump() for f in found.found_by_lean] == [
        {
            "problem_id": "p2",
            "kind": "trivial",
            "check": "trivial:norm_num",
            "description": "proved by `norm_num` alone",
        }
    ]
    assert (found.known, found.decision_changes) == (1, False)  # INVALID either way
    assert "| `p2` | trivial | no | yes | statement_audit (trivial:norm_num) |" in text
    assert "- Found by Lean: 1 by the statement audit" in text
    assert inputs["audit.jsonl"] == sha256_file(audit)


def test_a_simulated_audit_s_findings_are_listed_and_never_applied(tmp_path):
    audit = tmp_path / "audit.jsonl"
    audit.write_text("{}\n")
    defects = EvalSetDefects(
        known=None, audit=audit, found=(finding("p2"), finding("p4")), found_simulated=True
    )
    compared, _inputs, text = report_with(tmp_path, defects)
    found = compared.without_known_defects
    assert (found.problems, found.excluded) == (4, 0)
    assert not found.found_applied and len(found.found_by_lean) == 2
    assert found.known == 0  # no list shipped
    assert "ran on the SIMULATED verifier; its 2 findings are listed in its asset and NOT " in text
    assert "- Known: no defect list is shipped for this eval set's copy" in text


def test_a_report_given_no_defects_says_they_were_not_judged(tmp_path):
    compared, _inputs, text = report_with(tmp_path, None)
    assert compared.without_known_defects is None
    assert "Not judged: no defect list or statement audit was given." in text
