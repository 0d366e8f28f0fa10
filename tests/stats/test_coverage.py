"""Coverage of every interval benchlab shows, and the verdict's false-positive rate, by
seeded simulation on normal data at the sample sizes people use (n = 5, 10, 30).

Each interval's coverage must lie in [93%, 97%] over 1,000 samples (Monte Carlo
SE ≈ 0.7 points at 95%); the table in docs/statistics.md comes from these runs.
"""

import numpy as np
import pytest

from benchlab.stats import (
    aggregate_many,
    bootstrap_distribution,
    bootstrap_mean_diff_ci,
    compare,
    diff_t_interval,
    is_significant,
    percentile_interval,
    studentized_mean_ci,
    t_interval,
)

TRIALS = 1_000
MU, SIGMA = 3.0, 2.0


def _samples(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(MU, SIGMA, size=(TRIALS, n))


def _coverage(low: np.ndarray, high: np.ndarray, truth: float) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10, 30])
def test_student_t_and_bootstrap_t_intervals_of_the_mean_cover_93_to_97_percent(n):
    x = _samples(n, 100 + n)
    assert 0.93 <= _coverage(*t_interval(x), MU) <= 0.97
    assert 0.93 <= _coverage(*studentized_mean_ci(x, reps=1_000, seed=n), MU) <= 0.97


@pytest.mark.slow
def test_the_percentile_bootstrap_undercovers_at_small_n_which_is_why_it_is_not_the_default():
    # Stated in docs/statistics.md as what it gives: about 85% at n = 5.
    low, high = percentile_interval(bootstrap_distribution(_samples(5, 105), reps=1_000, seed=5))
    assert _coverage(low, high, MU) < 0.90


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10, 30])
def test_intervals_of_the_difference_cover_93_to_97_percent_paired_and_unpaired(n):
    rng = np.random.default_rng(200 + n)
    b = rng.normal(MU, SIGMA, size=(TRIALS, n))
    c = rng.normal(MU + 1.0, 2 * SIGMA, size=(TRIALS, n))  # unequal variances: Welch's case
    paired = np.array([diff_t_interval(b[i], b[i] + (c[i] - MU - 1) / 2 + 1, True)
                       for i in range(TRIALS)])
    welch = np.array([diff_t_interval(b[i], c[i], False) for i in range(TRIALS)])
    assert 0.93 <= _coverage(paired[:, 0], paired[:, 1], 1.0) <= 0.97
    assert 0.93 <= _coverage(welch[:, 0], welch[:, 1], 1.0) <= 0.97
    boot = np.array([bootstrap_mean_diff_ci(b[i], c[i], False, reps=500, seed=i)
                     for i in range(TRIALS)])
    assert 0.93 <= _coverage(boot[:, 0], boot[:, 1], 1.0) <= 0.97


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10])
def test_the_significant_verdict_is_a_false_positive_at_rate_alpha_under_the_null(n):
    trials = 2_000
    rng = np.random.default_rng(300 + n)
    b = rng.normal(MU, SIGMA, size=(trials, n))
    c = b + rng.normal(0.0, 1.0, size=(trials, n))  # paired seeds, no effect
    verdicts = []
    for i in range(trials):
        r = compare(b[i], c[i], paired=True, reps=0)
        verdicts.append(is_significant(r.pvalue, r.diff_ci_low, r.diff_ci_high, 0.05))
    rate = float(np.mean(verdicts))
    se = np.sqrt(0.05 * 0.95 / trials)
    assert abs(rate - 0.05) <= 3 * se, rate


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10, 30])
def test_the_across_task_intervals_cover_93_to_97_percent(n):
    # 5 tasks of n runs, every task N(MU, SIGMA): the across-task mean and IQM are MU.
    tables = list(np.random.default_rng(400 + n).normal(MU, SIGMA, size=(TRIALS, n, 5)))
    results = aggregate_many(tables, reps=500, seed=n)
    for name in ("mean", "iqm"):
        low = np.array([r[name][1] for r in results])
        high = np.array([r[name][2] for r in results])
        assert 0.93 <= _coverage(low, high, MU) <= 0.97, name


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 10, 30])
def test_the_across_task_mean_and_median_of_a_single_task_cover_93_to_97_percent(n):
    # One task: both aggregates are that task's mean, whose true value is MU.
    tables = list(_samples(n, 100 + n)[:, :, None])
    results = aggregate_many(tables, reps=500, seed=n)
    for name in ("mean", "median"):
        low = np.array([r[name][1] for r in results])
        high = np.array([r[name][2] for r in results])
        assert 0.93 <= _coverage(low, high, MU) <= 0.97, name
