"""Every statistic against an independent computation: enumeration, brute force, scipy."""

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest

from prover_assets.stats import (
    MissingSamplesError,
    cluster_bootstrap_mean,
    mcnemar_exact,
    mcnemar_power,
    min_discordant_split,
    paired_bootstrap_difference,
    pass_at_k,
    solved_at_k,
    wilson_interval,
)


def pass_at_k_by_enumeration(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n samples (c correct) that contain a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_enumeration_of_all_k_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(pass_at_k_by_enumeration(n, c, k), abs=1e-12)


def test_pass_at_k_is_null_not_zero_when_k_exceeds_n():
    assert pass_at_k(4, 0, 8) is None
    assert pass_at_k(4, 4, 5) is None


def test_pass_at_k_is_stable_for_large_n():
    exact = 1 - Fraction(math.comb(1000 - 3, 500), math.comb(1000, 500))
    assert pass_at_k(1000, 3, 500) == pytest.approx(float(exact), rel=1e-12)


def test_solved_at_k_uses_the_prefix():
    assert solved_at_k([False, False, True, False], 2) is False
    assert solved_at_k([False, False, True, False], 3) is True
    assert solved_at_k({0: False, 1: True, 5: True}, 2) is True


def test_solved_at_k_raises_on_missing_samples():
    with pytest.raises(MissingSamplesError):
        solved_at_k([True], 2)
    with pytest.raises(MissingSamplesError, match=r"missing \[1\]"):
        solved_at_k({0: True, 2: True}, 3)


def mcnemar_brute_force(b: int, c: int) -> float:
    """Sum the probabilities of every split at least as extreme as the observed one."""
    n = b + c
    if n == 0:
        return 1.0
    probability = [Fraction(math.comb(n, i), 2**n) for i in range(n + 1)]
    observed = probability[b]
    return float(min(Fraction(1), sum(p for p in probability if p <= observed)))


@pytest.mark.parametrize(
    ("b", "c"),
    [
        (0, 0),
        (0, 1),
        (1, 1),
        (0, 6),
        (1, 7),
        (2, 9),
        (5, 5),
        (10, 25),
        (31, 40),
        (0, 60),
        (60, 0),
        (17, 3),
    ],
)
def test_mcnemar_matches_brute_force_and_scipy(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(mcnemar_brute_force(b, c), rel=1e-12)
    if b + c:
        assert mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9)


def test_mcnemar_is_symmetric_and_capped_at_one():
    rng = random.Random(0)
    for _ in range(100):
        b, c = rng.randrange(40), rng.randrange(40)
        assert mcnemar_exact(b, c) == mcnemar_exact(c, b) <= 1.0


@pytest.mark.parametrize("m", [0, 1, 5, 6, 7, 10, 20, 33, 50])
def test_min_discordant_split_is_the_boundary_found_by_brute_force(m):
    firing = [t for t in range(m // 2 + 1) if mcnemar_brute_force(t, m - t) < 0.05]
    assert min_discordant_split(m) == (max(firing) if firing else None)


def power_by_enumerating_every_problem(
    n: int, fraction: float, delta: float, alpha: float
) -> float:
    """Each problem independently: candidate only, baseline only, or concordant."""
    p_cand, p_base = (fraction + delta) / 2, (fraction - delta) / 2
    probability = {"cand": p_cand, "base": p_base, "same": 1 - fraction}
    power = 0.0
    for outcome in itertools.product(probability, repeat=n):
        b, c = outcome.count("cand"), outcome.count("base")
        if b > c and mcnemar_brute_force(b, c) < alpha:
            power += math.prod(probability[o] for o in outcome)
    return power


@pytest.mark.parametrize(("n", "fraction", "delta"), [(6, 0.5, 0.3), (8, 0.6, 0.4), (9, 0.9, 0.1)])
def test_power_matches_enumeration_over_every_problem_outcome(n, fraction, delta):
    expected = power_by_enumerating_every_problem(n, fraction, delta, alpha=0.2)
    assert mcnemar_power(n, fraction, delta, alpha=0.2) == pytest.approx(expected, abs=1e-12)


def test_power_without_a_gain_stays_below_half_alpha():
    assert mcnemar_power(244, 0.15, 0.0) <= 0.025


def test_power_grows_with_the_gain():
    powers = [mcnemar_power(244, 0.15, gain / 100) for gain in (2, 4, 6, 8)]
    assert powers == sorted(powers)
    assert powers[-1] > 0.5


@pytest.mark.parametrize(("successes", "n"), [(0, 10), (3, 10), (10, 10), (120, 244), (1, 1)])
def test_wilson_matches_scipy(successes, n):
    expected = binomtest(successes, n).proportion_ci(confidence_level=0.95, method="wilson")
    low, high = wilson_interval(successes, n)
    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-9)


def test_cluster_bootstrap_of_two_problems_has_the_analytic_percentiles():
    """Means of two draws from {0, 1} are 0, 1/2, 1 with chances 1/4, 1/2, 1/4."""
    interval = cluster_bootstrap_mean([0.0, 1.0], resamples=20000, seed=3)
    assert (interval.estimate, interval.low, interval.high) == (0.5, 0.0, 1.0)


def test_cluster_bootstrap_interval_contains_the_estimate_and_is_reproducible():
    values = np.random.default_rng(1).random(244)
    one = cluster_bootstrap_mean(values, resamples=2000, seed=11)
    two = cluster_bootstrap_mean(values, resamples=2000, seed=11)
    assert one == two
    assert one.low < one.estimate < one.high
    # the standard error of a mean of 244 uniform values is about 0.0185: the interval is ~ +-1.96 se
    assert one.high - one.low == pytest.approx(
        2 * 1.96 * values.std(ddof=0) / math.sqrt(244), rel=0.15
    )


def test_paired_bootstrap_of_identical_systems_is_exactly_zero():
    values = [0.0, 0.25, 1.0, 0.5]
    interval = paired_bootstrap_difference(values, values, resamples=1000, seed=1)
    assert (interval.estimate, interval.low, interval.high) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_of_a_constant_shift_is_that_shift():
    base = [0.1, 0.2, 0.3]
    interval = paired_bootstrap_difference(base, [v + 0.25 for v in base], resamples=500, seed=2)
    assert (interval.estimate, interval.low, interval.high) == pytest.approx((0.25, 0.25, 0.25))


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 2, 0)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match=f"got n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


def test_solved_at_k_with_exactly_k_samples_reads_them_all():
    assert solved_at_k([False, True], 2) is True
    assert solved_at_k({0: False, 1: True}, 2) is True


def test_solved_at_k_names_what_is_missing():
    with pytest.raises(MissingSamplesError, match=r"solved@3 needs samples 0\.\.2; missing \[1\]"):
        solved_at_k({0: False, 2: True}, 3)
    with pytest.raises(MissingSamplesError, match="solved@3 needs 3 samples, got 2"):
        solved_at_k([False, True], 3)


@pytest.mark.parametrize(("b", "c"), [(-1, 3), (3, -1)])
def test_mcnemar_refuses_negative_counts(b, c):
    with pytest.raises(ValueError, match=r"^discordant counts are non-negative$"):
        mcnemar_exact(b, c)


@pytest.mark.parametrize(
    ("n", "fraction", "delta"),
    [(6, 1.0, 0.5), (5, 0.6, 0.6), (5, 0.6, -0.6), (5, 1.0, 1.0)],
)
def test_power_at_the_edges_of_the_design_matches_enumeration(n, fraction, delta):
    """Every problem discordant, or every discordant problem on one side."""
    expected = power_by_enumerating_every_problem(n, fraction, delta, alpha=0.2)
    assert mcnemar_power(n, fraction, delta, alpha=0.2) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("fraction", "delta"), [(0.0, 0.0), (1.5, 0.0), (0.2, 0.25), (0.2, -0.25)])
def test_power_refuses_an_impossible_design(fraction, delta):
    with pytest.raises(
        ValueError,
        match=r"^need 0 < discordant_fraction <= 1 and \|delta\| <= discordant_fraction$",
    ):
        mcnemar_power(50, fraction, delta)


def test_wilson_bounds_stay_within_zero_and_one():
    bounds = [wilson_interval(s, n) for n in range(1, 200) for s in (0, n)]
    assert all(0.0 <= low <= high <= 1.0 for low, high in bounds)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="got 3 of 2"):
        wilson_interval(3, 2)


def test_a_bootstrap_records_its_method_resamples_seed_and_confidence():
    cluster = cluster_bootstrap_mean([0.0, 1.0], resamples=30, seed=4, confidence=0.9)
    paired = paired_bootstrap_difference([0.0, 1.0], [1.0, 1.0], resamples=30, seed=4)
    assert (cluster.method, cluster.resamples, cluster.seed, cluster.confidence) == (
        "cluster bootstrap over problems",
        30,
        4,
        0.9,
    )
    assert (paired.method, paired.resamples, paired.seed, paired.confidence) == (
        "paired bootstrap over problems",
        30,
        4,
        0.95,
    )


def test_a_bootstrap_of_one_problem_is_that_problem_and_of_none_is_refused():
    one = cluster_bootstrap_mean([0.5], resamples=10, seed=1)
    assert (one.estimate, one.low, one.high) == (0.5, 0.5, 0.5)
    pair = paired_bootstrap_difference([0.25], [0.5], resamples=10, seed=1)
    assert (pair.estimate, pair.low, pair.high) == (0.25, 0.25, 0.25)
    with pytest.raises(ValueError, match=r"^no problems to bootstrap$"):
        cluster_bootstrap_mean([], resamples=10, seed=1)
    with pytest.raises(
        ValueError, match=r"^paired values must be non-empty and of the same problems$"
    ):
        paired_bootstrap_difference([], [], resamples=10, seed=1)
    with pytest.raises(
        ValueError, match=r"^paired values must be non-empty and of the same problems$"
    ):
        paired_bootstrap_difference([0.1, 0.2], [0.1], resamples=10, seed=1)


def test_the_paired_bootstrap_draws_every_problem_and_is_reproducible():
    """Only problem 0 differs: a resampling that skipped it could never see a difference."""
    base, cand = [0.0] * 3, [1.0, 0.0, 0.0]
    assert paired_bootstrap_difference(base, cand, resamples=2000, seed=5).high > 0.0
    noisy = np.random.default_rng(3).random(50)
    one = paired_bootstrap_difference(np.zeros(50), noisy, resamples=500, seed=5)
    assert one == paired_bootstrap_difference(np.zeros(50), noisy, resamples=500, seed=5)
    assert one != paired_bootstrap_difference(np.zeros(50), noisy, resamples=500, seed=6)


def test_the_percentile_interval_is_symmetric_and_of_normal_width_for_a_smooth_mean():
    """For a mean of 244 uniform values the bootstrap distribution is close to normal: the 95 %
    interval is 2 x 1.96 standard errors wide and centred on the estimate."""
    values = np.random.default_rng(2).random(244)
    se = values.std(ddof=0) / math.sqrt(244)
    for interval in (
        cluster_bootstrap_mean(values, resamples=20000, seed=7),
        paired_bootstrap_difference(np.zeros(244), values, resamples=20000, seed=7),
    ):
        assert interval.high - interval.low == pytest.approx(2 * 1.959964 * se, rel=0.03)
        upper, lower = interval.high - interval.estimate, interval.estimate - interval.low
        assert upper == pytest.approx(lower, rel=0.06)
