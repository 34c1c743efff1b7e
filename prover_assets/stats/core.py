"""Exact statistics of the registered comparison: pass@k, solved@k, McNemar, power, Wilson."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache
from statistics import NormalDist

__all__ = [
    "MissingSamplesError",
    "mcnemar_exact",
    "mcnemar_power",
    "min_discordant_split",
    "pass_at_k",
    "solved_at_k",
    "wilson_interval",
]


class MissingSamplesError(ValueError):
    """A problem lacks samples the statistic needs; it is never scored as a failure."""


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased estimator 1 - C(n-c, k) / C(n, k); None (never 0) when k > n.

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which stays accurate where the binomial
    coefficients overflow.
    """
    if not (0 <= c <= n) or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        return None
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def solved_at_k(accepted_by_sample_idx: Mapping[int, bool] | Sequence[bool], k: int) -> bool:
    """At least one accepted among sample_idx 0..k-1 (the prefix); every one of them must exist."""
    if isinstance(accepted_by_sample_idx, Mapping):
        missing = [i for i in range(k) if i not in accepted_by_sample_idx]
        if missing:
            raise MissingSamplesError(f"solved@{k} needs samples 0..{k - 1}; missing {missing}")
        return any(bool(accepted_by_sample_idx[i]) for i in range(k))
    if len(accepted_by_sample_idx) < k:
        raise MissingSamplesError(
            f"solved@{k} needs {k} samples, got {len(accepted_by_sample_idx)}"
        )
    return any(bool(a) for a in accepted_by_sample_idx[:k])


@cache
def _binomial_tail_numerator(n: int, m: int) -> int:
    """sum_{i=0..m} C(n, i), exactly."""
    return sum(math.comb(n, i) for i in range(m + 1))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test: the binomial test of b against c on the b + c discordant
    pairs with p = 1/2; p-value capped at 1, and 1 when there are no discordant pairs."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts are non-negative")
    n = b + c
    if n == 0:
        return 1.0
    tail = _binomial_tail_numerator(n, min(b, c))
    return min(1.0, 2 * tail / 2**n)


@cache
def min_discordant_split(m: int, alpha: float = 0.05) -> int | None:
    """The most lopsided split at which the test can fire on m discordant problems: the largest
    minority count t such that mcnemar_exact(t, m - t) < alpha (the test fires exactly when the
    minority is at most t); None when even an m-to-0 split cannot reach alpha."""
    best = None
    for t in range(m // 2 + 1):
        if mcnemar_exact(t, m - t) < alpha:
            best = t
        else:
            break
    return best


def _binomial_pmf(k: int, n: int, p: float) -> float:
    if p in (0.0, 1.0):
        return float(k == (n if p == 1.0 else 0))
    return math.exp(
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def mcnemar_power(
    n_problems: int, discordant_fraction: float, delta: float, alpha: float = 0.05
) -> float:
    """Probability that the registered test declares success (p < alpha and the candidate
    solves more), unconditionally: enumerated over the number m of discordant problems
    (binomial in n_problems with the discordant fraction) and their split (binomial in m with
    the candidate's share (fraction + delta) / (2 fraction)). `delta` is the true gain in solved
    share (0.04 = four points)."""
    if not 0 < discordant_fraction <= 1 or abs(delta) > discordant_fraction:
        raise ValueError("need 0 < discordant_fraction <= 1 and |delta| <= discordant_fraction")
    share = (discordant_fraction + delta) / (2 * discordant_fraction)
    power = 0.0
    for m in range(n_problems + 1):
        weight = _binomial_pmf(m, n_problems, discordant_fraction)
        threshold = min_discordant_split(m, alpha)
        if threshold is None or weight == 0.0:
            continue
        # success: the candidate's count b has m - b <= threshold, i.e. b >= m - threshold
        power += weight * sum(_binomial_pmf(b, m, share) for b in range(m - threshold, m + 1))
    return power


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion."""
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
