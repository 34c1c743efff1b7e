"""Bootstrap intervals over problems (the independent units), with fixed, recorded seeds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "cluster_bootstrap_mean", "paired_bootstrap_difference"]


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval and how it was computed."""

    estimate: float
    low: float
    high: float
    method: str
    resamples: int
    seed: int
    confidence: float


def _percentiles(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def cluster_bootstrap_mean(
    values: Sequence[float], *, resamples: int, seed: int, confidence: float = 0.95
) -> Interval:
    """The mean of per-problem values (e.g. each problem's c/n for pass@1), with a percentile
    interval from resampling problems with replacement: samples of one problem stay together."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no problems to bootstrap")
    rng = np.random.default_rng(seed)
    draws = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    low, high = _percentiles(draws, confidence)
    return Interval(
        float(data.mean()),
        low,
        high,
        "cluster bootstrap over problems",
        resamples,
        seed,
        confidence,
    )


def paired_bootstrap_difference(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    resamples: int,
    seed: int,
    confidence: float = 0.95,
) -> Interval:
    """candidate - baseline of per-problem values, resampling the same problems for both."""
    base = np.asarray(baseline, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if base.shape != cand.shape or base.size == 0:
        raise ValueError("paired values must be non-empty and of the same problems")
    rng = np.random.default_rng(seed)
    index = rng.integers(0, base.size, size=(resamples, base.size))
    draws = cand[index].mean(axis=1) - base[index].mean(axis=1)
    low, high = _percentiles(draws, confidence)
    return Interval(
        float(cand.mean() - base.mean()),
        low,
        high,
        "paired bootstrap over problems",
        resamples,
        seed,
        confidence,
    )
