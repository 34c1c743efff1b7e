"""The report's contract: what `summary.json` holds, as typed models.

Computed once (`report.analysis`, `report.stages`), written with `model_dump_json`, and read
back with `read_summary` by whatever renders or judges it (the markdown, the plots, the
`eval_report` asset and its headline metadata): one shape, checked where it is read, never a
dictionary indexed by strings across modules.

Its parts live beside it: `systems`, `comparisons`, `validity`, `iterations`, `costs`; every
name is imported from here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from prover_assets.records import Pins
from prover_assets.records.manifest import GitRevision
from prover_assets.report.summary.base import Cell, SummaryModel
from prover_assets.report.summary.comparisons import (
    ComparedSystem,
    Comparison,
    DefectFreeComparison,
    DefectFreeSummary,
    DefectiveProblem,
    DefectListRef,
    ExploratoryComparison,
    FoundByLean,
    McNemarTable,
    PairedProblem,
    ProblemSide,
    RegisteredComparison,
)
from prover_assets.report.summary.costs import (
    CostRow,
    EtaBesideMeasured,
    EtaRow,
    RunCost,
    StepCost,
    gpu_seconds,
    lean_runs,
)
from prover_assets.report.summary.iterations import CurvePoint, LiftRow, SeedRow, SeedSpreadRow
from prover_assets.report.summary.systems import (
    MadeBy,
    PooledWilson,
    ProblemCounts,
    RunProvenance,
    SolvedShare,
    SystemSummary,
)
from prover_assets.report.summary.validity import Condition, JudgedFile, ValidityJudgement

__all__ = [
    "BootstrapSettings",
    "Cell",
    "ComparedSystem",
    "Comparison",
    "Condition",
    "CostRow",
    "CurvePoint",
    "DefectFreeComparison",
    "DefectFreeSummary",
    "DefectListRef",
    "DefectiveProblem",
    "EtaBesideMeasured",
    "EtaRow",
    "ExploratoryComparison",
    "FoundByLean",
    "JudgedFile",
    "LiftRow",
    "MadeBy",
    "McNemarTable",
    "PairedProblem",
    "PooledWilson",
    "PreregSummary",
    "ProblemCounts",
    "ProblemSide",
    "RegisteredComparison",
    "ReportSummary",
    "RunCost",
    "RunProvenance",
    "SeedRow",
    "SeedSpreadRow",
    "SolvedShare",
    "StepCost",
    "SummaryModel",
    "SystemSummary",
    "ValidityJudgement",
    "gpu_seconds",
    "lean_runs",
    "read_summary",
]


class PreregSummary(SummaryModel):
    """The pre-registration read: its block's sha256 against the recorded one."""

    path: str
    sha256: str
    recorded_sha256: str | None
    hash_matches: bool


class BootstrapSettings(SummaryModel):
    """How every bootstrap interval of the report was drawn: resamples and seed."""

    resamples: int
    seed: int


class ReportSummary(SummaryModel):
    """Everything the report says, computed: `summary.json`."""

    experiment: str
    simulated: bool
    prereg: PreregSummary | None
    k: int
    ks: list[int]
    alpha: float
    bootstrap: BootstrapSettings
    validity: list[ValidityJudgement]
    comparisons: list[RegisteredComparison]
    systems: dict[str, list[SystemSummary]]  # by "<eval set> cap <cap>": baseline, candidate
    power: dict[str, dict[str, float]]  # discordant share -> gain in points -> power
    power_problems: int
    correction_lift: list[LiftRow]
    pins: Pins | None  # the verifier's pins, as its verdicts record them
    simulated_rule: str | None
    code: GitRevision
    package_version: str
    preflight_overrides: list[str]
    gate_overrides: list[str]
    costs: list[CostRow]  # each run's (secondary)
    round_costs: list[StepCost]  # each step of the round the report reads
    eta_beside_measured: EtaBesideMeasured | None
    # with several iterations or training seeds only
    exploratory: list[ExploratoryComparison] | None = None
    seed_spread: list[SeedSpreadRow] | None = None
    iteration_curve: list[CurvePoint] | None = None


def read_summary(path: Path) -> ReportSummary:
    """`summary.json` read back and validated; one written by an older version of this
    package is refused with the file named and what to do."""
    try:
        return ReportSummary.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise ValueError(
            f"{path}: not a report summary of this version ({error.error_count()} problems, "
            f"first: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}); a bundle written "
            "by an older prover-assets is reused only as it is: move its folder aside to "
            "rebuild the report"
        ) from error
