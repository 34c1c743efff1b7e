"""The registered comparison again without the statements known or found to be defective:
secondary, beside the registered result and never instead of it.

A result on statements some of which are false, trivial or vacuous means less than its p-value
says. For each comparison the report adds: the paired table, exact McNemar and the decision on
the problems with no known defect (the eval copy's shipped list, `problems/defects.py`) and no
defect Lean found (the statement audit, `verify/audit.py`); each defective problem with what
each system solved of it; and whether the decision changes without them. An INVALID comparison
stays INVALID here: the validity conditions judged the runs, not the problems. An audit the
simulated verifier ran is listed and never applied: its rule decides nothing about statements.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from prover_assets.problems.defects import DefectKind, DefectList
from prover_assets.records import sha256_file
from prover_assets.report.analysis import INVALID, decide, mcnemar_table
from prover_assets.report.summary import (
    Comparison,
    DefectFreeComparison,
    DefectFreeSummary,
    DefectiveProblem,
    DefectListRef,
    FoundByLean,
)
from prover_assets.stats import mcnemar_exact
from prover_assets.verify.audit import AuditFinding

__all__ = [
    "EvalSetDefects",
    "defect_free_summary",
    "without_known_defects",
]


class Defect(Protocol):
    """A defect of one problem, known from a public source or found by Lean."""

    @property
    def problem_id(self) -> str: ...
    @property
    def kind(self) -> DefectKind: ...
    @property
    def description(self) -> str: ...
    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class EvalSetDefects:
    """What the report knows of an eval set's defects: the shipped list of its copy (None when
    none is shipped) and the statement audit's file and findings."""

    known: DefectList | None
    audit: Path | None
    found: tuple[AuditFinding, ...] = ()
    found_simulated: bool = False

    @property
    def applied(self) -> tuple[Defect, ...]:
        """The defects the secondary comparison leaves out: the known ones, and those Lean found
        unless a simulated verifier "found" them."""
        known = self.known.defects if self.known is not None else ()
        return (*known, *(() if self.found_simulated else self.found))

    @property
    def files(self) -> list[Path]:
        """The files the defects come from (inputs of the report, hashed)."""
        return [p for p in (self.known and self.known.path, self.audit) if p is not None]


def without_known_defects(
    comparison: Comparison, defects: Sequence[Defect]
) -> DefectFreeComparison:
    """`comparison` recomputed on its problems that no entry of `defects` names (defects of
    problems outside the comparison are ignored: an eval set's limit keeps some problems only)."""
    by_problem: dict[str, list[Defect]] = defaultdict(list)
    for defect in defects:
        by_problem[defect.problem_id].append(defect)
    kept = [row for row in comparison.per_problem if row.problem_id not in by_problem]
    table = mcnemar_table(kept)
    p_value = mcnemar_exact(table.candidate_only, table.baseline_only)
    decision = (
        INVALID
        if comparison.decision == INVALID
        else decide(table.candidate_only, table.baseline_only, p_value, comparison.alpha)
    )
    defective = tuple(
        DefectiveProblem(
            problem_id=row.problem_id,
            kinds=tuple(d.kind.value for d in by_problem[row.problem_id]),
            descriptions=tuple(d.description for d in by_problem[row.problem_id]),
            sources=tuple(d.source for d in by_problem[row.problem_id]),
            baseline_solved=row.baseline.solved,
            candidate_solved=row.candidate.solved,
        )
        for row in comparison.per_problem
        if row.problem_id in by_problem
    )
    return DefectFreeComparison(
        problems=len(kept),
        excluded=len(defective),
        table=table,
        p_value=p_value,
        decision=decision,
        registered_decision=comparison.decision,
        baseline_solved=sum(row.baseline.solved for row in kept),
        candidate_solved=sum(row.candidate.solved for row in kept),
        defective=defective,
    )


def defect_free_summary(comparison: Comparison, defects: EvalSetDefects) -> DefectFreeSummary:
    """The summary's entry for `comparison`: the comparison without its eval set's applied
    defects, where the defects came from, and the audit's findings (applied or, from a
    simulated verifier, only listed)."""
    found = without_known_defects(comparison, defects.applied)
    known = defects.known
    return DefectFreeSummary(
        **dict(found),
        known_list=None
        if known is None
        else DefectListRef(file=known.path.name, sha256=sha256_file(known.path)),
        known=0 if known is None else len(known.defects),
        audit=None if defects.audit is None else sha256_file(defects.audit),
        found_by_lean=[
            FoundByLean(
                problem_id=f.problem_id, kind=f.kind.value, check=f.check, description=f.description
            )
            for f in defects.found
        ],
        found_applied=not defects.found_simulated,
    )
