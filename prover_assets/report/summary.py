"""The report's contract: what `summary.json` holds, as typed models.

Computed once (`report.analysis`, `report.stages`), written with `model_dump_json`, and read
back with `read_summary` by whatever renders or judges it (the markdown, the plots, the
`eval_report` asset and its headline metadata): one shape, checked where it is read, never a
dictionary indexed by strings across modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from prover_assets.records import Pins
from prover_assets.records.manifest import GitRevision
from prover_assets.records.usage import AttemptUsage, StepUsage
from prover_assets.stats.bootstrap import Interval
from prover_assets.verify.validity import VerifierIdentity

__all__ = [
    "Cell",
    "ComparedSystem",
    "Comparison",
    "Condition",
    "CostRow",
    "CurvePoint",
    "DefectFreeComparison",
    "DefectFreeSummary",
    "DefectiveProblem",
    "EtaBesideMeasured",
    "EtaRow",
    "ExploratoryComparison",
    "JudgedFile",
    "LiftRow",
    "McNemarTable",
    "PairedProblem",
    "PreregSummary",
    "RegisteredComparison",
    "ReportSummary",
    "RunCost",
    "SeedRow",
    "SeedSpreadRow",
    "StepCost",
    "SystemSummary",
    "ValidityJudgement",
    "gpu_seconds",
    "lean_runs",
    "read_summary",
]

Cell = Literal["both", "baseline_only", "candidate_only", "neither"]


class _Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SolvedShare(_Summary):
    """solved@k of one system: the count, its share of the problems, its Wilson interval."""

    solved: int
    share: float
    wilson_low: float
    wilson_high: float


class PooledWilson(_Summary):
    """pass@1 pooled over samples with a Wilson interval (anti-conservative, said in `note`)."""

    estimate: float
    low: float
    high: float
    note: str


class MadeBy(_Summary):
    """Which run made one output, and when (its manifest's record)."""

    run_id: str | None
    started_at: str
    finished_at: str


class RunProvenance(_Summary):
    """Which runs made a system's generations and its verdicts."""

    generations: MadeBy
    verdicts: MadeBy


class ProblemCounts(_Summary):
    """One problem's samples: `n` drawn, `c` accepted."""

    n: int
    c: int


class SystemSummary(_Summary):
    """The per-system table of one run (one system on one eval set at one cap). Maps keyed by
    k hold None where a problem has fewer than k samples."""

    system: str
    eval_set: str
    cap: int
    model_revs: list[str]
    problems: int
    samples: int
    samples_per_problem: int
    solved_at_k: dict[int, SolvedShare | None]
    pass_at_k: dict[int, float | None]
    pass_at_k_cluster: dict[int, Interval | None]
    pass1_cluster: Interval
    pass1_pooled_wilson: PooledWilson
    mean_effective_max_tokens: float
    mean_completion_tokens: float
    accepted_samples: int
    hit_cap_share: float
    context_clipped_share: float
    stages: dict[str, int]
    reasons: dict[str, int]  # by count, most frequent first
    timeouts: int  # after the re-check
    timeouts_before_recheck: int  # every verdict whose first attempt timed out
    verdicts_copied: int
    infrastructure: int
    accepted_but_rewritten: int
    verifier: VerifierIdentity  # the one verifier that judged every sample
    simulated: bool
    per_problem: dict[str, ProblemCounts]
    provenance: RunProvenance

    @property
    def solved_any(self) -> int:
        """Problems solved by any of the system's samples."""
        return sum(1 for counts in self.per_problem.values() if counts.c > 0)


class McNemarTable(_Summary):
    """Problems by (baseline solved@k, candidate solved@k)."""

    both: int
    baseline_only: int
    candidate_only: int
    neither: int

    @property
    def discordant(self) -> int:
        return self.candidate_only + self.baseline_only


class ProblemSide(_Summary):
    """One system on one problem of a comparison: accepted `c` of `n`, and solved@k."""

    c: int
    n: int
    solved: bool


class PairedProblem(_Summary):
    """One problem of a comparison: each side, and its McNemar cell."""

    problem_id: str
    baseline: ProblemSide
    candidate: ProblemSide
    cell: Cell


class ComparedSystem(_Summary):
    """One side of a comparison: which system, which model, solved@k with its Wilson
    interval, and which runs made it."""

    system: str
    model_revs: list[str]
    problems: int
    solved_at_k: int
    wilson: tuple[float, float]
    provenance: RunProvenance


class Comparison(_Summary):
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


class DefectiveProblem(_Summary):
    """A problem of the comparison with a known or found defect, and whether each system
    solved it."""

    problem_id: str
    kinds: tuple[str, ...]
    descriptions: tuple[str, ...]
    sources: tuple[str, ...]
    baseline_solved: bool
    candidate_solved: bool


class DefectFreeComparison(_Summary):
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


class DefectListRef(_Summary):
    """The shipped defect list a comparison applied."""

    file: str
    sha256: str


class FoundByLean(_Summary):
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


class JudgedFile(_Summary):
    """A file a condition read, by path and sha256."""

    path: str
    sha256: str


class Condition(_Summary):
    """One validity condition judged on one subject: held or not, what it found, which files
    (with their sha256) it read."""

    name: str  # the blocking check's name
    subject: str  # what it judged: "baseline on minif2f cap 256", "SFT shards", ...
    held: bool
    found: str
    files: tuple[JudgedFile, ...]


class ValidityJudgement(_Summary):
    """One comparison's validity conditions, judged from the files it read."""

    eval_set: str
    cap: int
    held: bool
    conditions: list[Condition]


class PreregSummary(_Summary):
    """The pre-registration read: its block's sha256 against the recorded one."""

    path: str
    sha256: str
    recorded_sha256: str | None
    hash_matches: bool


class BootstrapSettings(_Summary):
    resamples: int
    seed: int


class LiftRow(_Summary):
    """One pool round: problems unsolved before it, converted in it, samples and tokens."""

    round: int
    problems_entering: int
    converted: int
    solved_cumulative: int
    samples: int
    completion_tokens: int


class SeedRow(_Summary):
    """One training seed of an iteration against the baseline."""

    seed: int
    solved_at_k: int
    decision: str
    registered: bool


class SeedSpreadRow(_Summary):
    """One iteration's seeds on the registered eval set and cap, and whether they agree."""

    iteration: int
    eval_set: str
    cap: int
    k: int
    problems: int
    baseline_solved_at_k: int
    seeds: list[SeedRow]
    min: int
    max: int
    sd: float | None  # n - 1; None with one seed
    agree: bool
    sentence: str


class CurvePoint(_Summary):
    """One iteration of the expert-iteration curve (0: the baseline)."""

    iteration: int
    pool_solved_cumulative: int
    pool_samples: int
    pool_completion_tokens: int
    solved_at_k: int
    wilson: tuple[float, float]
    problems: int


class RunCost(_Summary):
    """One system's run on one eval set at one cap: what its two steps used and did."""

    system: str
    eval_set: str
    cap: int
    generation: StepUsage | None  # None: its manifest predates `usage`
    verification: StepUsage | None
    generation_earlier: list[AttemptUsage]  # attempts before the completing one
    verification_earlier: list[AttemptUsage]
    generation_gpus: int | None  # the GPUs its engines held (0 on the host; None: not said)
    generated: int  # samples in the stream: every attempt's, each once
    tokens_prompted: int
    tokens_generated: int
    hit_cap: int
    verified: int  # verdicts in the stream (Lean's or the cache's)
    accepted: int
    cached: int
    timeouts_rechecked: int
    infrastructure_reverified: int  # set aside and judged again by the completing attempt

    @property
    def lean_runs(self) -> int:
        """The runs of Lean the streams show: each verdict not copied from the cache, each
        timeout run again, each infrastructure verdict verified again (retries inside one are
        not counted)."""
        return lean_runs(
            self.verified, self.cached, self.timeouts_rechecked, self.infrastructure_reverified
        )


def lean_runs(verdicts: int, cached: int, rechecked: int, infrastructure_reverified: int) -> int:
    """The runs of Lean behind a verdict stream: each verdict not copied from the cache, each
    timeout run again, each infrastructure verdict verified again."""
    return verdicts - cached + rechecked + infrastructure_reverified


class StepCost(_Summary):
    """One step of the round and what its completing attempt used; `side`: what its work waits
    on in the registered box (the GPUs, the Lean workers, or the host alone); `gpus`: the GPUs
    it held (0 on the host; None where its manifest does not say)."""

    step: str
    side: Literal["GPU", "Lean", "host"]
    usage: StepUsage | None  # None: its manifest predates `usage`
    earlier: list[AttemptUsage]  # the attempts before the completing one
    gpus: int | None = None
    peak_gpu_gib: float | None = None  # see `peak_gpu_gib`
    tokens_trained: int | None = None  # training: the rows' tokens times the epochs

    @property
    def gpu_s(self) -> float | None:
        """GPU-seconds: the completing attempt's wall times the GPUs it held."""
        return gpu_seconds(self.usage, self.gpus)


def gpu_seconds(usage: StepUsage | None, gpus: int | None) -> float | None:
    """A step's GPU time: its wall times the GPUs it held (None where either is unknown)."""
    return None if usage is None or gpus is None else usage.wall_s * gpus


def _per(seconds: float | None, solved: int) -> float | None:
    return None if seconds is None or solved == 0 else seconds / solved


class CostRow(RunCost):
    """A run's cost beside the problems it solved (by any of its samples), and what each
    solved problem and each accepted proof cost: generation wall, GPU time (wall times the
    GPUs held), Lean CPU (None where unmeasured, or nothing was solved or accepted)."""

    solved: int

    @property
    def generation_gpu_s(self) -> float | None:
        return gpu_seconds(self.generation, self.generation_gpus)

    @property
    def generation_wall_s_per_solved(self) -> float | None:
        return _per(self.generation.wall_s if self.generation else None, self.solved)

    @property
    def gpu_s_per_solved(self) -> float | None:
        return _per(self.generation_gpu_s, self.solved)

    @property
    def lean_cpu_s_per_solved(self) -> float | None:
        return _per(self._lean_cpu_s, self.solved)

    @property
    def gpu_s_per_accepted(self) -> float | None:
        return _per(self.generation_gpu_s, self.accepted)

    @property
    def lean_cpu_s_per_accepted(self) -> float | None:
        return _per(self._lean_cpu_s, self.accepted)

    @property
    def _lean_cpu_s(self) -> float | None:
        return self.verification.children_cpu_s if self.verification else None


class EtaRow(_Summary):
    """One measured step: the `eta`'s (low, central, high) seconds, the wall it took (every
    attempt's), and their ratio to the central estimate (None where that is 0)."""

    step: str
    eta_s: tuple[float, float, float]
    measured_s: float
    ratio: float | None


class EtaBesideMeasured(_Summary):
    """The `eta` asset's estimate beside what the round took: each step the report measured,
    the totals over them, and the estimate's whole round."""

    materialized_at: str
    sources: dict[str, int]  # how many steps each source estimated
    round_total_s: tuple[float, float, float]
    rows: list[EtaRow]
    eta_s: float
    measured_s: float
    ratio: float | None


class ReportSummary(_Summary):
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
