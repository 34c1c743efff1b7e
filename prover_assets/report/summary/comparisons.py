"""A paired comparison in the summary: the McNemar table and decision, each problem's row, the
two sides, and the comparison again without the problems known or found to be defective;
registered (PRIMARY or secondary) or exploratory."""

from __future__ import annotations

from prover_assets.report.summary.base import Cell, SummaryModel
from prover_assets.report.summary.systems import RunProvenance
from prover_assets.stats.bootstrap import Interval

__all__ = [
    "ComparedSystem",
    "Comparison",
    "DefectFreeComparison",
    "DefectFreeSummary",
    "DefectListRef",
    "DefectiveProblem",
    "ExploratoryComparison",
    "FoundByLean",
    "McNemarTable",
    "PairedProblem",
    "ProblemSide",
    "RegisteredComparison",
]


class McNemarTable(SummaryModel):
    """Problems by (baseline solved@k, candidate solved@k)."""

    both: int
    baseline_only: int
    candidate_only: int
    neither: int

    @property
    def discordant(self) -> int:
        return self.candidate_only + self.baseline_only


class ProblemSide(SummaryModel):
    """One system on one problem of a comparison: accepted `c` of `n`, and solved@k."""

    c: int
    n: int
    solved: bool


class PairedProblem(SummaryModel):
    """One problem of a comparison: each side, and its McNemar cell."""

    problem_id: str
    baseline: ProblemSide
    candidate: ProblemSide
    cell: Cell


class ComparedSystem(SummaryModel):
    """One side of a comparison: which system, which model, solved@k with its Wilson
    interval, and which runs made it."""

    system: str
    model_revs: list[str]
    problems: int
    solved_at_k: int
    wilson: tuple[float, float]
    provenance: RunProvenance


class Comparison(SummaryModel):
    """Baseline against candidate on one eval set and cap: the table, McNemar, intervals,
    decision."""

    eval_set: str
    cap: int
    k: int
    table: McNemarTable
    p_value: float
    alpha: float
    decision: str
    pass1_difference: Interval
    solved_difference: Interval
    per_problem: list[PairedProblem]
    primary: bool
    secondary_reasons: list[str]
    design_override: str | None
    baseline: ComparedSystem
    candidate: ComparedSystem
    exploratory: bool = False  # past the registered design: another iteration, seed or pairing

    @property
    def label(self) -> str:
        if self.exploratory:
            return "exploratory"
        return "PRIMARY" if self.primary else "secondary"


class DefectiveProblem(SummaryModel):
    """A problem of the comparison with a known or found defect, and whether each system
    solved it."""

    problem_id: str
    kinds: tuple[str, ...]
    descriptions: tuple[str, ...]
    sources: tuple[str, ...]
    baseline_solved: bool
    candidate_solved: bool


class DefectFreeComparison(SummaryModel):
    """The comparison on the problems with no known or found defect (secondary)."""

    problems: int  # kept: the comparison's problems less the defective ones
    excluded: int
    table: McNemarTable
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
        problems = "problem" if self.excluded == 1 else f"{self.excluded} problems"
        if self.decision_changes:
            return (
                f"Without the defective {problems} the decision changes: "
                f"{self.registered_decision} -> {self.decision}."
            )
        return f"Without the defective {problems} the decision is the same: {self.decision}."


class DefectListRef(SummaryModel):
    """The shipped defect list a comparison applied."""

    file: str
    sha256: str


class FoundByLean(SummaryModel):
    """One finding of the statement audit."""

    problem_id: str
    kind: str
    check: str
    description: str


class DefectFreeSummary(DefectFreeComparison):
    """The summary's entry for a comparison without its defective problems: the comparison,
    and where the defects came from."""

    known_list: DefectListRef | None  # the shipped list applied; None: none for this copy
    known: int
    audit: str | None  # the statement audit's sha256
    found_by_lean: list[FoundByLean]
    found_applied: bool  # False: the audit ran on the simulated verifier; listed, not applied


class RegisteredComparison(Comparison):
    """A comparison of the registered pairs (PRIMARY or secondary): what the config calls its
    endpoint, and the comparison without the defective problems."""

    endpoint: str | None
    without_known_defects: DefectFreeSummary | None


class ExploratoryComparison(Comparison):
    """A comparison past the registered design: which iteration and seed, against what."""

    iteration: int
    seed: int
    against: str  # "baseline" or "iteration N"
    what: str  # the comparison in words
