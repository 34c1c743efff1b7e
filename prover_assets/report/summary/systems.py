"""One system's table in the summary: solved@k with its Wilson interval, pass@k, the pooled
pass@1, its samples' outcomes and lengths, the verifier that judged them, and which runs made
them."""

from __future__ import annotations

from prover_assets.report.summary.base import SummaryModel
from prover_assets.stats.bootstrap import Interval
from prover_assets.verify.validity import VerifierIdentity

__all__ = [
    "MadeBy",
    "PooledWilson",
    "ProblemCounts",
    "RunProvenance",
    "SolvedShare",
    "SystemSummary",
]


class SolvedShare(SummaryModel):
    """solved@k of one system: the count, its share of the problems, its Wilson interval."""

    solved: int
    share: float
    wilson_low: float
    wilson_high: float


class PooledWilson(SummaryModel):
    """pass@1 pooled over samples with a Wilson interval (anti-conservative, said in `note`)."""

    estimate: float
    low: float
    high: float
    note: str


class MadeBy(SummaryModel):
    """Which run made one output, and when (its manifest's record)."""

    run_id: str | None
    started_at: str
    finished_at: str


class RunProvenance(SummaryModel):
    """Which runs made a system's generations and its verdicts."""

    generations: MadeBy
    verdicts: MadeBy


class ProblemCounts(SummaryModel):
    """One problem's samples: `n` drawn, `c` accepted."""

    n: int
    c: int


class SystemSummary(SummaryModel):
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
