"""Expert iteration in the summary: the correction-round lift per pool round, each iteration's
training seeds against the baseline, and the curve across iterations."""

from __future__ import annotations

from prover_assets.report.summary.base import SummaryModel

__all__ = ["CurvePoint", "LiftRow", "SeedRow", "SeedSpreadRow"]


class LiftRow(SummaryModel):
    """One pool round: problems unsolved before it, converted in it, samples and tokens."""

    round: int
    problems_entering: int
    converted: int
    solved_cumulative: int
    samples: int
    completion_tokens: int


class SeedRow(SummaryModel):
    """One training seed of an iteration against the baseline."""

    seed: int
    solved_at_k: int
    decision: str
    registered: bool


class SeedSpreadRow(SummaryModel):
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


class CurvePoint(SummaryModel):
    """One iteration of the expert-iteration curve (0: the baseline)."""

    iteration: int
    pool_solved_cumulative: int
    pool_samples: int
    pool_completion_tokens: int
    solved_at_k: int
    wilson: tuple[float, float]
    problems: int
