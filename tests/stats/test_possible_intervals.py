"""No interval is impossible, half-empty or a disguised range: tied values, declared ranges,
zero spread, and too few runs per task for an across-task interval."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from benchlab.stats import analyze
from benchlab.stats.accounting import analyze_seeds


def _table(groups: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([(t, c, s, v) for (t, c), vs in groups.items() for s, v in enumerate(vs)],
                        columns=["task", "config", "seed", "value"])


@pytest.mark.parametrize("values", [[0.99, 1, 1, 0.98, 1], [10, 10, 9, 10, 10, 10],
                                    [0, 0, 0, 1, 0, 0, 0, 2, 0, 0]])
def test_tied_values_never_give_a_half_null_bootstrap_interval(values):
    out = analyze(_table({("t", "a"): values}), reps=2_000)
    (row,) = out.summary
    # Both bounds or neither, and a warning naming why; the t interval stands (scipy's).
    assert (row.boot_ci_low is None) == (row.boot_ci_high is None)
    if row.boot_ci_low is None:
        assert any("t/a value: bootstrap-t interval undefined" in w
                   or w.startswith("t/a value (n=") and "null below 8" in w for w in out.warnings)
    lo, hi = sps.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=sps.sem(values))
    assert (row.ci_low, row.ci_high) == (pytest.approx(lo), pytest.approx(hi))


def test_a_declared_range_bounds_the_mean_the_difference_and_the_aggregate():
    # Acrobot-like returns in [-500, 0], bimodal, 5 seeds: some seeds never learn.
    a = [-483.0, -480.0, -475.0, -103.0, -110.0]
    b = [-105.0, -104.0, -480.0, -103.0, -101.0]
    out = analyze_seeds(_table({("acrobot", "a"): a, ("acrobot", "b"): b}), baseline="a",
                        reps=2_000, ranges={"value": (-500.0, 0.0)})
    for row in out.summary:
        for x in (row.ci_low, row.ci_high, row.boot_ci_low, row.boot_ci_high):
            assert x is None or -500.0 <= x <= 0.0
    (cmp,) = out.comparisons
    for x in (cmp.diff_ci_low, cmp.diff_ci_high, cmp.diff_boot_ci_low, cmp.diff_boot_ci_high):
        assert x is None or -500.0 <= x <= 500.0  # a difference of two means in [-500, 0]
    for agg in out.aggregate:
        for name in ("iqm", "median", "mean"):
            e = agg.estimate(name)
            assert e.ci_low is None or -500.0 <= e.ci_low <= e.ci_high <= 0.0, (agg.config, name)


def test_one_run_per_task_gives_no_aggregate_interval_rather_than_a_zero_width_one():
    out = analyze(_table({(f"t{i}", "a"): [v] for i, v in enumerate([0.5, 0.641, 0.7, 0.9])}),
                  reps=500)
    (agg,) = out.aggregate
    assert agg.iqm.value == pytest.approx(sps.trim_mean([0.5, 0.641, 0.7, 0.9], 0.25))
    assert agg.iqm.ci_low is None and agg.iqm.ci_high is None
    assert any("4 tasks of 1 runs" in w and "no interval" in w for w in out.warnings)


def test_the_same_value_on_every_seed_is_zero_spread_not_a_point_interval():
    out = analyze(_table({("t", "a"): [0.9] * 5, ("t", "b"): [0.8, 0.81, 0.82, 0.83, 0.84]}),
                  reps=500)
    row = out.summary_of("t", "a", "value")
    assert row is not None and row.std == 0.0
    assert (row.ci_low, row.ci_high, row.boot_ci_low, row.boot_ci_high) == (None,) * 4
    assert any("t/a value: all 5 values are equal" in w and "not certainty" in w
               for w in out.warnings)


def test_an_aggregate_of_tasks_whose_runs_never_vary_is_zero_spread_not_a_point_interval():
    # Every task's 5 runs equal: each resample gives the same IQM, mean and median. That is
    # zero observed spread, as for one task's mean above, not a 95% interval [0.85, 0.85].
    same = {("t1", "a"): [0.9] * 5, ("t2", "a"): [0.8] * 5,
            ("t1", "b"): [0.80, 0.81, 0.82, 0.83, 0.84], ("t2", "b"): [0.70, 0.71, 0.72, 0.73, 0.74]}
    out = analyze(_table(same), reps=1_000, ranges={"value": (0.0, 1.0)})
    agg = {row.config: row for row in out.aggregate}
    for name in ("iqm", "median", "mean", "optimality_gap"):
        e = agg["a"].estimate(name)
        assert (e.ci_low, e.ci_high) == (None, None), name
        assert agg["b"].estimate(name).ci_low is not None, name
    assert agg["a"].mean.value == pytest.approx((0.9 + 0.8) / 2)
    assert agg["a"].optimality_gap.value == pytest.approx(1 - (0.9 + 0.8) / 2)
    assert any(w.startswith("aggregate (a): iqm, median, mean, optimality_gap: every resample")
               and "not certainty" in w for w in out.warnings)
    assert not any(w.startswith("aggregate (b)") for w in out.warnings)
    # Raw scores above 1 with no declared range: the gap is null for its own stated reason,
    # and is not also reported as flat.
    raw = analyze(_table({("t", "a"): [10.0, 11, 12, 13, 14]}), reps=500)
    assert raw.aggregate[0].optimality_gap.value is None
    assert not any(w.startswith("aggregate (a)") for w in raw.warnings)


def test_a_verdict_on_few_collapsing_seeds_carries_a_warning_and_one_on_normal_seeds_does_not():
    # Two of five candidate seeds collapsed: the paired differences fall in two groups.
    base = [-110.0, -104.0, -108.0, -103.0, -106.0]
    cand = [-101.0, -480.0, -99.0, -476.0, -100.0]
    out = analyze(_table({("acrobot", "a"): base, ("acrobot", "b"): cand}), baseline="a", reps=200)
    assert any("acrobot value b vs a: the verdict rests on 5 seeds" in w and "fall in two groups" in w
               for w in out.warnings)
    d = np.sort(np.array(cand) - np.array(base))
    assert np.diff(d).max() / np.ptp(d) > 0.95  # by hand: 368 of a range of 386
    steady = analyze(_table({("t", "a"): [0.50, 0.52, 0.51, 0.53, 0.49, 0.515],
                             ("t", "b"): [0.53, 0.545, 0.54, 0.56, 0.52, 0.55]}),
                     baseline="a", reps=200)
    assert not any("the verdict rests on" in w for w in steady.warnings)


def test_the_outlier_rule_is_grubbs_critical_value_from_scipys_t_quantile():
    from benchlab.stats.compare import grubbs_critical
    from benchlab.stats.table import shape_caveat

    # Grubbs' two-sided table at alpha 0.05: 1.715 for n = 5, 2.290 for n = 10 (Grubbs 1969).
    assert grubbs_critical(5, 0.05) == pytest.approx(1.715, abs=1e-3)
    assert grubbs_critical(10, 0.05) == pytest.approx(2.290, abs=1e-3)
    t = sps.t.isf(0.01 / 16, 6)
    assert grubbs_critical(8, 0.01) == pytest.approx(7 / np.sqrt(8) * np.sqrt(t * t / (6 + t * t)))
    # One candidate seed of eight collapsed against a stable baseline: flagged, G named.
    cand = np.array([0.80, 0.82, 0.79, 0.81, 0.80, 0.10, 0.83, 0.78])
    note = shape_caveat(np.full(8, 0.71) + np.linspace(0, 0.01, 8), cand, True, None, None, 0.05)
    d = cand - (np.full(8, 0.71) + np.linspace(0, 0.01, 8))
    g = np.max(np.abs(d - d.mean())) / d.std(ddof=1)
    assert note is not None and f"Grubbs' G = {g:.3g}" in note


def test_a_per_task_range_bounds_every_interval_of_that_task_and_the_aggregate():
    # Returns of task "acrobot" lie in [-500, 0]; task "cartpole" has no declared range.
    a = [-483.0, -480.0, -103.0, -475.0, -110.0]
    b = [-105.0, -104.0, -480.0, -103.0, -101.0]
    df = _table({("acrobot", "a"): a, ("acrobot", "b"): b,
                 ("cartpole", "a"): [10.0, 12.0, 11.0, 40.0, 9.0],
                 ("cartpole", "b"): [30.0, 31.0, 29.0, 5.0, 33.0]})
    out = analyze_seeds(df[df["task"] == "acrobot"], baseline="a", reps=2_000,
                        ranges={"acrobot/value": (-500.0, 0.0)})
    for row in out.summary:
        for x in (row.ci_low, row.ci_high, row.boot_ci_low, row.boot_ci_high):
            assert x is None or -500.0 <= x <= 0.0
        assert row.ci_method is not None and "cut at the range [-500, 0]" in row.ci_method
    (cmp,) = out.comparisons
    for x in (cmp.diff_ci_low, cmp.diff_ci_high, cmp.diff_boot_ci_low, cmp.diff_boot_ci_high):
        assert x is None or -500.0 <= x <= 500.0
    for agg in out.aggregate:
        e = agg.mean
        assert e.ci_low is None or -500.0 <= e.ci_low <= e.ci_high <= 0.0
    both = analyze_seeds(df, baseline="a", reps=500, ranges={"acrobot/value": (-500.0, 0.0)})
    cart = both.summary_of("cartpole", "a", "value")
    assert cart is not None and cart.ci_method is not None and "cut" not in cart.ci_method


def test_a_bootstrap_t_interval_reaching_past_the_range_is_null_not_the_whole_range():
    # Acrobot returns in [-500, 0], one of five candidate seeds collapsed: the bootstrap-t's
    # resamples explode and, cut at the range, the interval was [-500, ...], the range's end.
    rows = {("acrobot", "a"): [-98.0, -99.0, -97.0, -101.0, -96.0],
            ("acrobot", "b"): [-100.0, -95.0, -480.0, -90.0, -105.0]}
    out = analyze_seeds(_table(rows), baseline="a", reps=2_000, ranges={"value": (-500.0, 0.0)})
    b = next(r for r in out.summary if r.config == "b")
    assert (b.boot_ci_low, b.boot_ci_high) == (None, None)
    # Null below 8 seeds (the reason given), as it was null past the range.
    assert any("acrobot/b value (n=5): the bootstrap-t interval is null below 8" in w for w in out.warnings)
    cmp = out.comparisons[0]
    assert cmp.diff_boot_ci_low is None and cmp.diff_boot_ci_high is None
    # The one-task aggregate (the t interval at 5 runs) never the range's end unmarked.
    agg = next(r for r in out.aggregate if r.config == "b")
    assert agg.mean.ci_low is None or -500.0 < agg.mean.ci_low <= agg.mean.ci_high <= 0.0
    # The t interval of b, by scipy, reaches above 0: shown cut there, and the warning marks that end.
    x = np.array(rows[("acrobot", "b")])
    low, high = sps.t.interval(0.95, 4, loc=x.mean(), scale=sps.sem(x))
    assert high > 0 and (b.ci_low, b.ci_high) == (pytest.approx(low), 0.0)
    assert any("acrobot/b value: the t interval" in w and "upper end 0 is the range's" in w for w in out.warnings)


def test_an_interval_inside_the_range_is_left_alone_without_a_warning():
    rows = {("t", "a"): [0.50, 0.52, 0.51, 0.53, 0.49, 0.515], ("t", "b"): [0.53, 0.545, 0.54, 0.56, 0.52, 0.55]}
    out = analyze_seeds(_table(rows), baseline="a", reps=500, ranges={"value": (0.0, 1.0)})
    assert not any("reaches past the range" in w for w in out.warnings)
    assert all(r.ci_low is not None for r in out.summary)


def test_a_significant_t_verdict_on_few_seeds_is_withheld_unless_a_range_test_confirms_it():
    rows = {("t", "a"): [0.50, 0.52, 0.51, 0.53, 0.49], ("t", "b"): [0.60, 0.63, 0.60, 0.64, 0.58]}
    out = analyze(_table(rows), baseline="a", reps=200)
    assert out.comparisons[0].significant is None
    assert any("t value b vs a: no verdict (significance is null): the paired t test gives p =" in w
               and "without a range" in w for w in out.warnings)
    # With the range [0, 1] no valid test can confirm a gain of 0.1 on 5 seeds (it needs 32).
    ranged = analyze(_table(rows), baseline="a", reps=200, ranges={"value": (0.0, 1.0)})
    assert ranged.comparisons[0].significant is None
    assert any("does not confirm it" in w and "at least 32 seeds" in w for w in ranged.warnings)


def test_a_verdict_the_range_based_test_confirms_stands_without_a_warning():
    # Ten seeds of an accuracy up from 0.05 to 0.95: the range-based test confirms the t-test
    # (each seed multiplies its capital by about 1 + 1.5 x 0.45; 1.675^10 = 174, p = 2/174).
    rng = np.random.default_rng(4)
    base = rng.normal(0.05, 0.005, 10)
    few = {("t", "a"): base.tolist(), ("t", "b"): (base + 0.9 + rng.normal(0, 0.005, 10)).tolist()}
    out = analyze(_table(few), baseline="a", reps=200, ranges={"value": (0.0, 1.0)})
    assert out.comparisons[0].significant is True
    assert out.comparisons[0].decided_by == "paired t, confirmed by a betting test valid in the range [0, 1]"
    assert not any("no verdict" in w for w in out.warnings)
