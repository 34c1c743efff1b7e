"""What the round cost, in the summary: each run's steps (used and done), each step of the
round, the costs per solved problem and per accepted proof (derived, never copied), and the
`eta` beside what was measured."""

from __future__ import annotations

from typing import Literal

from prover_assets.records.usage import AttemptUsage, StepUsage
from prover_assets.report.summary.base import SummaryModel

__all__ = [
    "CostRow",
    "EtaBesideMeasured",
    "EtaRow",
    "RunCost",
    "StepCost",
    "gpu_seconds",
    "lean_runs",
]


class RunCost(SummaryModel):
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


class StepCost(SummaryModel):
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


class EtaRow(SummaryModel):
    """One measured step: the `eta`'s (low, central, high) seconds, the wall it took (every
    attempt's), and their ratio to the central estimate (None where that is 0)."""

    step: str
    eta_s: tuple[float, float, float]
    measured_s: float
    ratio: float | None


class EtaBesideMeasured(SummaryModel):
    """The `eta` asset's estimate beside what the round took: each step the report measured,
    the totals over them, and the estimate's whole round."""

    materialized_at: str
    sources: dict[str, int]  # how many steps each source estimated
    round_total_s: tuple[float, float, float]
    rows: list[EtaRow]
    eta_s: float
    measured_s: float
    ratio: float | None
