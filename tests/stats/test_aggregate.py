import inspect
import json
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import (
    aggregate,
    average_probability_of_improvement,
    iqm,
    mean_of_means,
    median_of_means,
    normalize,
    optimality_gap,
    performance_profile,
)


@pytest.fixture
def rliable(monkeypatch):
    """rliable's ``library`` and ``metrics`` modules, working with arch 7 and arch >= 8."""
    pytest.importorskip("rliable")
    with warnings.catch_warnings():
        # rliable's imports (arch, seaborn) raise third-party deprecations.
        warnings.simplefilter("ignore")
        from arch.bootstrap import IIDBootstrap
        from rliable import library, metrics
    original = IIDBootstrap.__init__
    if "seed" in inspect.signature(original).parameters:
        # arch 8 renamed `random_state` to `seed`; rliable 1.2 still passes `random_state`.
        def init(self, *args, random_state=None, seed=None, **kwargs):
            original(self, *args, seed=seed if seed is not None else random_state, **kwargs)

        monkeypatch.setattr(IIDBootstrap, "__init__", init)
    return library, metrics


# A fixed dataset: 10 runs x 6 tasks of normalised scores, varied spreads.
SCORES = np.random.default_rng(31).normal(
    np.linspace(0.2, 1.3, 6), np.linspace(0.05, 0.4, 6), size=(10, 6))


def test_point_aggregates_match_scipy_and_hand_formulas():
    assert iqm(SCORES) == pytest.approx(sps.trim_mean(SCORES, 0.25, axis=None))
    assert mean_of_means(SCORES) == pytest.approx(SCORES.mean())
    assert median_of_means(SCORES) == pytest.approx(np.median(SCORES.mean(axis=0)))
    assert optimality_gap(SCORES) == pytest.approx(1 - np.minimum(SCORES, 1).mean())


def test_iqm_of_a_small_case_by_hand():
    # 8 values: cut 2 from each end, mean of the middle 4.
    s = np.array([[0.0, 1.0], [10.0, 2.0], [3.0, 4.0], [5.0, 100.0]])
    assert iqm(s) == pytest.approx((2 + 3 + 4 + 5) / 4)


def test_aggregates_ignore_nan_padding_and_weight_tasks_equally():
    s = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, np.nan]])
    assert mean_of_means(s) == pytest.approx((3.0 + 3.0) / 2)
    # Per task, then over tasks: (mean(1, 3, 4) + mean(2, 4)) / 2, not the pooled mean of 5 runs.
    assert optimality_gap(s, gamma=4.0) == pytest.approx(4 - (8 / 3 + 3) / 2)
    # Each task's runs repeated to 6 (the common multiple of 3 and 2 runs), then trimmed.
    repeated = [1, 1, 3, 3, 5, 5, 2, 2, 2, 4, 4, 4]
    assert iqm(s) == pytest.approx(sps.trim_mean(repeated, 0.25))
    assert iqm(s) == pytest.approx(3.0)  # by hand: the middle six are 2, 2, 3, 3, 4, 4


def test_failed_seeds_on_a_hard_task_do_not_raise_the_iqm():
    # A config that lost 3 of 4 seeds on its hard task, against one that completed them all:
    # pooled with equal weight per run, its one surviving hard run was trimmed away and
    # its IQM was that of the easy task alone (0.9).
    lost = np.array([[0.88, 0.27], [0.9, np.nan], [0.92, np.nan], [0.9, np.nan]])
    assert iqm(lost) == pytest.approx(sps.trim_mean([0.88, 0.9, 0.92, 0.9] + [0.27] * 4, 0.25))
    assert iqm(lost) == pytest.approx((0.88 + 0.9 + 0.27 * 2) / 4)  # the middle four by hand
    assert optimality_gap(lost) == pytest.approx(1 - (0.9 + 0.27) / 2)
    value, low, high = aggregate(lost, reps=2_000, seed=1, method="percentile")["iqm"]
    assert value == pytest.approx(0.58)
    assert low < 0.6 and high < 0.75  # the pooled IQM (0.9) is far outside
    # With the default method a task of one run leaves no interval at all (below).
    assert np.isnan(aggregate(lost, reps=200, seed=1)["iqm"][1:]).all()


@pytest.mark.parametrize(("tasks", "runs"), [(1, 2), (1, 3), (1, 4), (2, 2), (5, 1), (5, 2), (3, 3), (2, 3)])
def test_no_across_task_interval_where_none_covers_95_percent(tasks, runs):
    # bench/coverage.py: these layouts covered 0% (one run: zero width) to 92.9% on normal scores.
    scores = np.random.default_rng(tasks * 10 + runs).normal(0.6, 0.2, (runs, tasks))
    for name, (value, low, high) in aggregate(scores, reps=300).items():
        assert np.isfinite(value) and np.isnan(low) and np.isnan(high), name


@pytest.mark.parametrize(("tasks", "runs"), [(1, 5), (5, 3), (2, 4), (4, 3)])
def test_across_task_intervals_from_the_layouts_where_they_cover(tasks, runs):
    scores = np.random.default_rng(tasks * 10 + runs).normal(0.6, 0.2, (runs, tasks))
    for name, (value, low, high) in aggregate(scores, reps=300).items():
        assert low < value < high, name


def test_normalize_maps_references_to_zero_and_one_for_either_goal():
    s = np.array([[10.0, 0.3], [20.0, 0.1]])
    # task 0: maximise, random 10 -> 0, expert 20 -> 1; task 1: minimise error, 0.3 -> 0, 0.1 -> 1.
    out = normalize(s, np.array([10.0, 0.3]), np.array([20.0, 0.1]))
    assert out == pytest.approx(np.array([[0.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(ValueError):
        normalize(s, np.array([1.0, 1.0]), np.array([1.0, 2.0]))


def test_iqm_and_its_stratified_ci_agree_with_rliable(rliable):
    library, metrics = rliable
    reps = 5_000
    np.random.seed(0)  # rliable's resampling draws from numpy's global state
    point, cis = library.get_interval_estimates(
        {"x": SCORES}, lambda s: np.array([metrics.aggregate_iqm(s), metrics.aggregate_mean(s),
                                           metrics.aggregate_median(s),
                                           metrics.aggregate_optimality_gap(s)]),
        reps=reps)
    ours = aggregate(SCORES, reps=reps, seed=1, method="percentile")
    names = ["iqm", "mean", "median", "optimality_gap"]
    # Two independent Monte Carlo estimates of a 2.5% quantile from 5,000 resamples
    # differ by about 0.05 bootstrap SE (SE taken as the CI width / 3.92); allow 0.15 SE.
    for i, name in enumerate(names):
        value, low, high = ours[name]
        assert value == pytest.approx(point["x"][i], rel=1e-12)
        width = cis["x"][1, i] - cis["x"][0, i]
        tol = 0.15 * width / 3.92
        assert low == pytest.approx(cis["x"][0, i], abs=tol), name
        assert high == pytest.approx(cis["x"][1, i], abs=tol), name


def test_performance_profile_matches_rliable_and_hand_count(rliable):
    library, _ = rliable
    taus = np.linspace(0.0, 1.5, 7)
    profile, low, high = performance_profile(SCORES, taus, reps=2_000, seed=0)
    assert profile == pytest.approx([np.mean(SCORES > t) for t in taus])
    np.random.seed(0)
    ref, ref_ci = library.create_performance_profile({"x": SCORES}, taus, reps=2_000)
    assert profile == pytest.approx(ref["x"])
    assert np.all(low <= profile) and np.all(profile <= high)
    assert low == pytest.approx(ref_ci["x"][0], abs=0.02)
    assert high == pytest.approx(ref_ci["x"][1], abs=0.02)


def test_average_probability_of_improvement_matches_rliable(rliable):
    _, metrics = rliable
    other = SCORES + np.random.default_rng(4).normal(0.05, 0.2, size=SCORES.shape)
    value, low, high = average_probability_of_improvement(other, SCORES, reps=1_000, seed=0)
    assert value == pytest.approx(metrics.probability_of_improvement(other, SCORES))
    assert low < value < high
    same, _, _ = average_probability_of_improvement(SCORES, SCORES, reps=100)
    assert same == pytest.approx(0.5)


@pytest.mark.parametrize("tasks", [1, 3, 6])
def test_count_based_aggregates_equal_those_of_the_explicit_resamples(tasks):
    import sys

    module = sys.modules["benchlab.stats.aggregate"]
    scores = SCORES[:, :tasks].copy()
    scores[7:, 0] = np.nan  # the first task has 7 runs only
    other = 1.3 - 2.0 * scores  # a second config, same layout, values in the reverse order
    resampler = module._Resampler([scores, other])
    slots = resampler.draw(50, np.random.default_rng(3))  # (runs, 50, tasks)
    got = resampler.reduce(slots)  # (2, 50, 4)
    for table, mine in ((scores, got[0]), (other, got[1])):
        # Rebuild every resample as an array and compute the aggregates the plain way.
        flat = np.append(table.ravel(), np.nan)
        explicit = np.moveaxis(flat[slots], 1, 0)  # (50, runs, tasks), NaN where padded
        assert not np.isnan(explicit[:, :7, 0]).any() and np.isnan(explicit[:, 7:, 0]).all()
        assert mine[:, 0] == pytest.approx(iqm(explicit))
        assert mine[:, 1] == pytest.approx(median_of_means(explicit))
        assert mine[:, 2] == pytest.approx(mean_of_means(explicit))
        assert mine[:, 3] == pytest.approx(optimality_gap(explicit))


def test_aggregating_configs_together_gives_each_what_it_gets_alone():
    from benchlab.stats.aggregate import aggregate_many

    tables = [SCORES, SCORES[::-1] * 1.5, SCORES + 0.2]
    together = aggregate_many(tables, reps=3_000, seed=5)
    alone = [aggregate(t, reps=3_000, seed=5) for t in tables]
    for mine, its in zip(together, alone, strict=True):
        for name in mine:  # the same resamples; sums may round differently in the last bit
            assert mine[name] == pytest.approx(its[name], rel=1e-12, abs=1e-12)
    with pytest.raises(ValueError, match="same shape and NaN padding"):
        aggregate_many([SCORES, SCORES[:5]], reps=10)


def test_the_expanded_interval_is_wider_than_the_percentile_one_by_the_small_n_factor():
    from benchlab.stats.aggregate import expanded_confidence

    # 5 runs on each of 4 tasks: sqrt(5/4) * t_{0.975, 16} = 2.3719 -> two-sided 98.23%.
    expected = 1 - 2 * sps.norm.sf(np.sqrt(5 / 4) * sps.t.ppf(0.975, 16))
    assert expanded_confidence(np.full(4, 5), 0.95) == pytest.approx(expected, rel=1e-12)
    plain = aggregate(SCORES[:5], reps=4_000, seed=2, method="percentile")["mean"]
    wide = aggregate(SCORES[:5], reps=4_000, seed=2)["mean"]
    assert wide[1] < plain[1] and wide[2] > plain[2]


def test_aggregate_names_excluded_failed_seeds_with_the_worst_case_figure_beside_it():
    import pandas as pd

    from benchlab.stats.accounting import analyze_seeds

    rows = []
    for s in range(4):
        rows += [("easy", "base", s, 0.60 + 0.01 * s), ("easy", "cand", s, [0.88, 0.9, 0.92, 0.9][s]),
                 ("hard", "base", s, 0.60 + 0.01 * s),
                 ("hard", "cand", s, 0.27 if s == 0 else float("nan"))]
    df = pd.DataFrame(rows, columns=["task", "config", "seed", "value"])
    result = analyze_seeds(df, baseline="base", reps=500, ranges={"value": (0.0, 1.0)})
    cand = next(a for a in result.aggregate if a.config == "cand")
    base = next(a for a in result.aggregate if a.config == "base")
    assert cand.failed_excluded == 3 and base.failed_excluded is None
    # Worst = the range's low end, 0: hard task mean (0.27 + 0 + 0 + 0) / 4; easy mean 0.9.
    assert cand.failed_as_worst is not None
    assert cand.failed_as_worst["mean"] == pytest.approx((0.9 + 0.0675) / 2)
    easy, hard = [0.88, 0.9, 0.92, 0.9], [0.27, 0.0, 0.0, 0.0]
    assert cand.failed_as_worst["iqm"] == pytest.approx(sps.trim_mean(easy + hard, 0.25))
    assert cand.mean.value == pytest.approx((0.9 + 0.27) / 2)
    assert any("cand: 3 failed seed(s) excluded" in w and "--failed-as worst" in w
               for w in result.warnings)
    out = json.loads(result.to_json())["aggregate"]
    assert out[1]["failed_seeds_excluded"] == 3
    assert out[1]["mean_failed_as_worst"] == pytest.approx((0.9 + 0.0675) / 2)


def test_performance_profile_counts_ties_and_padding_as_comparing_each_run_with_each_tau():
    # Taus equal to some scores (a tie is not above), a task padded with NaN, taus in any order.
    scores = np.array([[0.2, 0.5], [0.4, 0.5], [0.4, np.nan], [0.9, np.nan]])
    taus = np.array([0.0, 0.2, 0.4, 0.5, 0.9, 1.0])
    # Task 0: above 0.0 all 4; 0.2 three; 0.4 one; 0.5 one; 0.9 none. Task 1 (2 runs): 2, 2, 2, 0, 0.
    by_hand = [(4 / 4 + 2 / 2) / 2, (3 / 4 + 2 / 2) / 2, (1 / 4 + 2 / 2) / 2, (1 / 4 + 0) / 2, 0.0, 0.0]
    profile, low, high = performance_profile(scores, taus, reps=500, seed=1)
    assert profile.tolist() == by_hand
    shuffled = np.array([3, 0, 5, 1, 4, 2])
    again, low2, high2 = performance_profile(scores, taus[shuffled], reps=500, seed=1)
    assert again.tolist() == [by_hand[i] for i in shuffled]
    assert low2.tolist() == low[shuffled].tolist() and high2.tolist() == high[shuffled].tolist()
