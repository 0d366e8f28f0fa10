import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import describe, is_high_variance, median_member, normal_interval, rank, t_interval

X = np.array([0.81, 0.84, 0.79, 0.88, 0.83])


def test_describe_matches_numpy_and_scipy():
    d = describe(X, reps=2_000, seed=0)
    assert d.n == 5
    assert d.mean == pytest.approx(0.83)
    assert d.std == pytest.approx(np.std(X, ddof=1))
    assert d.sem == pytest.approx(sps.sem(X))
    assert (d.median, d.min, d.max) == (0.83, 0.79, 0.88)
    low, high = sps.t.interval(0.95, 4, loc=X.mean(), scale=sps.sem(X))
    assert (d.ci_low, d.ci_high) == (pytest.approx(low), pytest.approx(high))
    # 5 values: no bootstrap-t (below 8, with the reason)
    assert (d.boot_ci_low, d.boot_ci_high) == (None, None)
    assert any("the bootstrap-t interval is null below 8 values" in w for w in d.warnings)
    assert len(d.warnings) == 1


def test_t_interval_closed_form():
    # mean 2, s = 1, n = 4: 2 ± t_{0.975,3} / 2 with t_{0.975,3} = 3.182446
    low, high = t_interval(np.array([1.0, 2.0, 2.0, 3.0]) * np.sqrt(1.5) - 2 * np.sqrt(1.5) + 2)
    assert (low, high) == (pytest.approx(2 - 3.182446 / 2, abs=1e-6),
                           pytest.approx(2 + 3.182446 / 2, abs=1e-6))


def test_high_variance_flag_at_one_percent_of_the_mean():
    assert describe(X, reps=200).high_variance is True  # std 0.034 > 0.0083
    assert describe(np.array([100.0, 100.5, 99.5]), reps=200).high_variance is False  # 0.5 < 1
    assert describe(np.array([100.0, 100.5, 99.5]), reps=200,
                    variance_threshold=0.001).high_variance is True
    assert is_high_variance(0.1, 0.0) is True


def test_single_seed_gives_nulls_and_a_warning():
    d = describe(np.array([0.7]), label="digits/mlp acc")
    assert (d.n, d.mean, d.median, d.min, d.max) == (1, 0.7, 0.7, 0.7, 0.7)
    assert d.std is None and d.sem is None and d.ci_low is None and d.boot_ci_high is None
    assert d.high_variance is None
    assert any("digits/mlp acc: n=1" in w for w in d.warnings)


def test_zero_spread_is_stated_as_such_never_as_a_point_interval():
    # The same value on every seed is not certainty: [0.9, 0.9] would claim 95% coverage.
    d = describe(np.full(5, 0.9))
    assert (d.std, d.sem, d.ci_low, d.ci_high, d.boot_ci_low, d.boot_ci_high) == (
        0.0, 0.0, None, None, None, None)
    assert d.high_variance is False
    assert any("zero observed spread, which is not certainty" in w for w in d.warnings)


def test_nan_values_are_dropped_with_a_warning():
    d = describe(np.array([1.0, np.nan, 3.0]), reps=200)
    assert d.n == 2 and d.mean == 2.0
    assert any("1 NaN" in w for w in d.warnings)


def test_only_nan_gives_all_nulls():
    d = describe(np.array([np.nan, np.nan]))
    assert d.n == 0 and d.mean is None and d.high_variance is None


def test_rank_marks_configs_overlapping_the_best_as_tied():
    means = [0.80, 0.90, 0.85, 0.50]
    lows = [0.78, 0.86, 0.84, 0.45]
    highs = [0.82, 0.94, 0.87, 0.55]
    # Best is index 1; index 2's CI [0.84, 0.87] overlaps [0.86, 0.94]; index 0 does not.
    assert rank(means, lows, highs, "max") == [3, 1, 1, 4]


def test_rank_honours_goal_min():
    means = [0.2, 0.1, 0.3]
    lows = [0.19, 0.09, 0.29]
    highs = [0.21, 0.11, 0.31]
    assert rank(means, lows, highs, "min") == [2, 1, 3]


def test_rank_without_interval_is_not_tied_and_undefined_mean_is_unranked():
    assert rank([1.0, 0.99, None], [0.9, None, None], [1.1, None, None]) == [1, 2, None]


def test_infinite_values_are_dropped_like_nan():
    d = describe(np.array([1.0, np.inf, 3.0, -np.inf]), reps=200)
    assert d.n == 2 and d.mean == 2.0 and d.std == pytest.approx(np.sqrt(2))
    assert any("2 NaN or infinite" in w for w in d.warnings)


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]])
def test_identical_means_share_a_rank_whatever_the_input_order(order):
    # Configs 1 and 2 have identical data, below the best with CIs apart from it.
    means = [0.90, 0.70, 0.70, 0.50]
    lows = [0.88, 0.68, 0.68, 0.48]
    highs = [0.92, 0.72, 0.72, 0.52]
    got = rank([means[i] for i in order], [lows[i] for i in order], [highs[i] for i in order])
    expected = [1, 2, 2, 4]  # scipy.stats.rankdata(-means, method="min")
    assert got == [expected[i] for i in order]
    assert expected == sps.rankdata([-m for m in means], method="min").astype(int).tolist()


def test_means_equal_up_to_rounding_share_a_rank():
    got = rank([0.9, 0.1 + 0.2, 0.3], [0.88, 0.29, 0.29], [0.92, 0.31, 0.31])
    assert got == [1, 2, 2]


def test_normal_interval_is_value_plus_minus_the_normal_quantile_times_se():
    low, high = normal_interval(0.562, 0.014)
    z = sps.norm.ppf(0.975)  # 1.959964...
    assert (low, high) == (pytest.approx(0.562 - z * 0.014, abs=1e-15), pytest.approx(0.562 + z * 0.014, abs=1e-15))
    low90, high90 = normal_interval(10.0, 2.0, confidence=0.90)
    assert (low90, high90) == (pytest.approx(10 - 1.644854 * 2, abs=1e-5), pytest.approx(10 + 1.644854 * 2, abs=1e-5))


@pytest.mark.parametrize(
    ("values", "goal", "expected"),
    [
        ([0.3, 0.1, 0.2], "max", 2),  # odd count: the middle value, 0.2
        ([0.3, 0.1, 0.2], "min", 2),
        ([0.1, 0.4, 0.2, 0.3], "max", 2),  # even: 0.2 and 0.3 in the middle; the worse for max is 0.2
        ([0.1, 0.4, 0.2, 0.3], "min", 3),  # the worse for min is 0.3
        ([5.0, 3.0], "min", 0),  # two seeds: the worse one
        ([0.7, 0.7, 0.7], "max", 1),  # equal values keep their order: the middle position
        ([float("nan"), 0.9, 0.8, float("inf")], "max", 2),  # non-finite values skipped: 0.8 of 0.8, 0.9
    ],
)
def test_median_member_is_the_middle_seed_and_the_worse_of_two(values, goal, expected):
    assert median_member(values, goal) == expected


def test_median_member_of_no_finite_value_is_none():
    assert median_member([], "max") is None
    assert median_member([float("nan")], "min") is None
    with pytest.raises(ValueError, match="goal must be"):
        median_member([1.0], "best")  # type: ignore[arg-type]
