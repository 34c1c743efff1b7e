"""The registered comparison again without the statements known to be defective: secondary,
beside the registered result and never instead of it.

A result on statements some of which are false, trivial or vacuous means less than its p-value
says. For each comparison on an eval set whose copy has a shipped defect list
(`prover_assets/problems/defects.py`), the report adds: the paired table, exact McNemar and the
decision on the problems with no known defect; each defective problem with what each system
solved of it; and whether the decision changes without them. An INVALID comparison stays
INVALID here: the validity conditions judged the runs, not the problems.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from prover_assets.problems.defects import DefectList, KnownDefect
from prover_assets.records import sha256_file
from prover_assets.report.analysis import INVALID, Comparison, decide
from prover_assets.stats import mcnemar_exact

__all__ = [
    "DefectFreeComparison",
    "DefectiveProblem",
    "defect_free_summary",
    "without_known_defects",
]

CELLS = ("both", "baseline_only", "candidate_only", "neither")


@dataclass(frozen=True)
class DefectiveProblem:
    """A problem of the comparison with a known defect, and whether each system solved it."""

    problem_id: str
    kinds: tuple[str, ...]
    descriptions: tuple[str, ...]
    sources: tuple[str, ...]
    baseline_solved: bool
    candidate_solved: bool


@dataclass(frozen=True)
class DefectFreeComparison:
    """The comparison on the problems with no known defect (secondary)."""

    problems: int  # kept: the comparison's problems less the defective ones
    excluded: int
    table: dict[str, int]
    p_value: float
    decision: str
    registered_decision: str
    baseline_solved: int
    candidate_solved: int
    defective: tuple[DefectiveProblem, ...]

    @property
    def decision_changes(self) -> bool:
        return self.decision != self.registered_decision

    @property
    def sentence(self) -> str:
        """Whether the decision changes without the defective problems, in one sentence."""
        if not self.excluded:
            return "No problem of this comparison has a known defect: nothing changes."
        if self.decision_changes:
            return (
                f"Without the {self.excluded} defective problems the decision changes: "
                f"{self.registered_decision} -> {self.decision}."
            )
        return (
            f"Without the {self.excluded} defective problems the decision is the same: "
            f"{self.decision}."
        )


def without_known_defects(
    comparison: Comparison, defects: Sequence[KnownDefect]
) -> DefectFreeComparison:
    """`comparison` recomputed on its problems that no entry of `defects` names (defects of
    problems outside the comparison are ignored: an eval set's limit keeps some problems only)."""
    by_problem: dict[str, list[KnownDefect]] = defaultdict(list)
    for defect in defects:
        by_problem[defect.problem_id].append(defect)
    kept = [row for row in comparison.per_problem if row["problem_id"] not in by_problem]
    counts = Counter(row["cell"] for row in kept)
    table = {cell: counts[cell] for cell in CELLS}
    p_value = mcnemar_exact(table["candidate_only"], table["baseline_only"])
    decision = (
        INVALID
        if comparison.decision == INVALID
        else decide(table["candidate_only"], table["baseline_only"], p_value, comparison.alpha)
    )
    defective = tuple(
        DefectiveProblem(
            problem_id=row["problem_id"],
            kinds=tuple(d.kind.value for d in by_problem[row["problem_id"]]),
            descriptions=tuple(d.description for d in by_problem[row["problem_id"]]),
            sources=tuple(d.source for d in by_problem[row["problem_id"]]),
            baseline_solved=bool(row["baseline"]["solved"]),
            candidate_solved=bool(row["candidate"]["solved"]),
        )
        for row in comparison.per_problem
        if row["problem_id"] in by_problem
    )
    return DefectFreeComparison(
        problems=len(kept),
        excluded=len(defective),
        table=table,
        p_value=p_value,
        decision=decision,
        registered_decision=comparison.decision,
        baseline_solved=sum(bool(row["baseline"]["solved"]) for row in kept),
        candidate_solved=sum(bool(row["candidate"]["solved"]) for row in kept),
        defective=defective,
    )


def defect_free_summary(comparison: Comparison, listed: DefectList | None) -> dict[str, Any] | None:
    """The summary's entry for `comparison`: None when its eval set's copy has no shipped list
    (its defects are not known here), else the comparison without them, its sentence included."""
    if listed is None:
        return None
    found = without_known_defects(comparison, listed.defects)
    return {
        **asdict(found),
        "decision_changes": found.decision_changes,
        "sentence": found.sentence,
        "list": {"file": listed.path.name, "sha256": sha256_file(listed.path)},
    }
