import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import (
    bootstrap_ci,
    bootstrap_distribution,
    bootstrap_mean_diff_ci,
    percentile_interval,
    stratified_bootstrap,
)

SKEWED = np.random.default_rng(7).lognormal(0.0, 1.0, size=25)


def _scipy_ci(data, method, **kw):
    res = sps.bootstrap(data, np.mean, n_resamples=20_000, method=method,
                        random_state=np.random.default_rng(3), **kw)
    return res.confidence_interval.low, res.confidence_interval.high, res.standard_error


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_one_sample_ci_matches_scipy_bootstrap(method):
    low, high, se = _scipy_ci((SKEWED,), method)
    ours = bootstrap_ci(SKEWED, reps=20_000, method=method, seed=11)
    # Two independent Monte Carlo estimates of the same quantile: a fraction of the SE apart.
    assert ours[0] == pytest.approx(low, abs=0.15 * se)
    assert ours[1] == pytest.approx(high, abs=0.15 * se)


def test_bca_differs_from_percentile_on_skewed_data():
    perc = bootstrap_ci(SKEWED, reps=20_000, method="percentile", seed=1)
    bca = bootstrap_ci(SKEWED, reps=20_000, method="bca", seed=1)
    # Right-skewed data: BCa shifts the interval to the right.
    assert bca[1] > perc[1]
    assert bca[0] > perc[0]


def test_paired_mean_diff_ci_matches_scipy_paired_bootstrap():
    rng = np.random.default_rng(5)
    b = rng.normal(10, 2, size=15)
    c = b + rng.normal(0.5, 0.3, size=15)
    res = sps.bootstrap((b, c), lambda x, y, axis: np.mean(y - x, axis=axis), paired=True,
                        n_resamples=20_000, method="percentile", random_state=rng)
    ours = bootstrap_mean_diff_ci(b, c, paired=True, reps=20_000, method="percentile", seed=2)
    se = res.standard_error
    assert ours[0] == pytest.approx(res.confidence_interval.low, abs=0.15 * se)
    assert ours[1] == pytest.approx(res.confidence_interval.high, abs=0.15 * se)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_unpaired_mean_diff_ci_matches_scipy_two_sample_bootstrap(method):
    rng = np.random.default_rng(9)
    b = rng.exponential(1.0, size=12)
    c = rng.exponential(1.5, size=17)
    res = sps.bootstrap((b, c), lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
                        n_resamples=20_000, method=method, random_state=rng)
    ours = bootstrap_mean_diff_ci(b, c, paired=False, reps=20_000, method=method, seed=4)
    se = res.standard_error
    assert ours[0] == pytest.approx(res.confidence_interval.low, abs=0.15 * se)
    assert ours[1] == pytest.approx(res.confidence_interval.high, abs=0.15 * se)


def test_same_seed_same_interval_and_other_seed_differs():
    assert bootstrap_ci(SKEWED, seed=42, method="percentile") == bootstrap_ci(
        SKEWED, seed=42, method="percentile")
    assert bootstrap_ci(SKEWED, seed=42) == bootstrap_ci(SKEWED, seed=42)
    assert bootstrap_ci(SKEWED, seed=42) != bootstrap_ci(SKEWED, seed=43)


def test_distribution_of_constant_sample_is_constant():
    dist = bootstrap_distribution(np.full(6, 2.5), reps=500, seed=0)
    assert dist.shape == (500,)
    assert np.all(dist == 2.5)
    assert bootstrap_ci(np.full(6, 2.5), method="bca") == (2.5, 2.5)


def test_percentile_ci_covers_the_true_mean_95_percent_of_the_time():
    # 1,000 normal samples of 100, each with its own 1,000-resample percentile CI, in one call.
    # (At n=100 the percentile interval's expected coverage is about 94.4%; it runs
    # narrow for small n, about 93.6% at n=30, which would sit on the lower bound.)
    rng = np.random.default_rng(2024)
    samples = rng.normal(3.0, 2.0, size=(1_000, 100))
    low, high = percentile_interval(bootstrap_distribution(samples, reps=1_000, seed=1))
    coverage = np.mean((low <= 3.0) & (3.0 <= high))
    assert 0.93 <= coverage <= 0.97


def test_stratified_resamples_draw_each_task_from_its_own_runs():
    # Task j's runs are 100*j + run: any value shows which task it came from.
    scores = np.arange(4)[:, None] + 100.0 * np.arange(3)[None, :]
    scores[3, 2] = np.nan  # task 2 has only 3 runs
    resamples = stratified_bootstrap(scores, lambda s: s, reps=300, seed=0)
    assert resamples.shape == (300, 4, 3)
    for j in range(3):
        col = resamples[:, :, j]
        valid = col[~np.isnan(col)]
        assert set(np.unique(valid)) <= set(scores[:, j][~np.isnan(scores[:, j])])
    # Task 2 keeps exactly one padding slot per resample and never draws it.
    assert np.all(np.isnan(resamples[:, 3, 2]))
    assert not np.isnan(resamples[:, :3, 2]).any()
    assert len(np.unique(resamples[:, :3, 2])) == 3


@pytest.mark.parametrize("paired", [True, False])
def test_an_unknown_method_is_refused_by_both_intervals(paired):
    x = np.array([1.0, 2.0, 3.0, 4.0])
    message = "method must be one of 'studentized', 'percentile', 'bca', got 'expanded'"
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(x, method="expanded")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        bootstrap_mean_diff_ci(x, x + 1, paired=paired, method="expanded")  # type: ignore[arg-type]


def test_bootstrap_t_interval_matches_the_exactly_enumerated_bootstrap_distribution():
    # n = 5: all 5^5 equally likely resamples, enumerated; the Monte Carlo quantiles of t*
    # converge to this distribution's.
    import itertools

    from benchlab.stats import studentized_mean_ci

    x = np.array([2.0, 3.5, 4.0, 7.0, 11.0])
    n = x.shape[0]
    idx = np.array(list(itertools.product(range(n), repeat=n)))
    res = x[idx]
    se_star = res.std(axis=1, ddof=1) / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = (res.mean(axis=1) - x.mean()) / se_star
    t_star = np.nan_to_num(t_star, nan=0.0, posinf=np.inf, neginf=-np.inf)
    # The q-quantile as the ceil(qB)-th smallest value: the inverse of the empirical CDF.
    q_low, q_high = np.quantile(t_star, [0.025, 0.975], method="inverted_cdf")
    se = x.std(ddof=1) / np.sqrt(n)
    exact = (x.mean() - q_high * se, x.mean() - q_low * se)
    low, high = studentized_mean_ci(x, reps=100_000, seed=0)
    width = exact[1] - exact[0]
    assert float(low) == pytest.approx(exact[0], abs=0.02 * width)
    assert float(high) == pytest.approx(exact[1], abs=0.02 * width)
    # Wider than the percentile interval, which cannot leave [min, max] of the data.
    assert float(low) < bootstrap_ci(x, method="percentile", seed=0)[0]


def test_bootstrap_t_of_a_batch_equals_each_sample_on_its_own():
    from benchlab.stats import studentized_mean_ci

    batch = np.random.default_rng(3).normal(size=(4, 6))
    low, high = studentized_mean_ci(batch, reps=2_000, seed=9)
    for i in range(4):
        one = studentized_mean_ci(batch[i], reps=2_000, seed=9)
        assert (low[i], high[i]) == (pytest.approx(float(one[0])), pytest.approx(float(one[1])))


def test_bootstrap_t_needs_four_values():
    from benchlab.stats import studentized_mean_ci

    with pytest.raises(ValueError, match="needs n >= 4, got 3"):
        studentized_mean_ci(np.array([1.0, 2.0, 4.0]))
