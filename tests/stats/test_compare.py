import math

import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import (
    cohens_d,
    compare,
    describe,
    hedges_g,
    holm,
    is_significant,
    paired_t_pvalue,
    probability_of_improvement,
    welch_pvalue,
)
from benchlab.stats.compare import shared_seeds

RNG = np.random.default_rng(12)
BASE = RNG.normal(0.70, 0.05, size=10)
CAND = BASE + RNG.normal(0.03, 0.02, size=10)


def test_paired_tests_match_scipy():
    c = compare(BASE, CAND, paired=True, reps=2_000)
    assert c.paired and c.n == 10
    assert c.t_pvalue == pytest.approx(sps.ttest_rel(CAND, BASE).pvalue, rel=1e-10)
    assert c.wilcoxon_pvalue == pytest.approx(sps.wilcoxon(CAND - BASE).pvalue, rel=1e-10)
    assert c.welch_pvalue == pytest.approx(
        sps.ttest_ind(CAND, BASE, equal_var=False).pvalue, rel=1e-10)
    # Exact at n = 10 + 10 (scipy's default would switch to its normal approximation here).
    assert c.mannwhitney_pvalue == pytest.approx(
        sps.mannwhitneyu(CAND, BASE, alternative="two-sided", method="exact").pvalue, rel=1e-10)
    assert c.mean_diff == pytest.approx(np.mean(CAND - BASE))
    assert c.diff_ci_low < c.mean_diff < c.diff_ci_high


def test_unpaired_skips_paired_tests_and_matches_welch_and_mann_whitney():
    b = np.array([1.0, 2.0, 3.0, 4.0])
    c = np.array([2.5, 3.5, 4.5, 6.0, 7.0])
    r = compare(b, c, paired=False, reps=2_000)
    assert r.t_pvalue is None and r.wilcoxon_pvalue is None
    assert r.n == 9 and (r.n_baseline, r.n_candidate) == (4, 5)
    assert r.welch_pvalue == pytest.approx(sps.ttest_ind(c, b, equal_var=False).pvalue)
    assert r.mannwhitney_pvalue == pytest.approx(
        sps.mannwhitneyu(c, b, alternative="two-sided").pvalue)
    assert r.pvalue == r.welch_pvalue


def test_welch_and_paired_t_closed_forms():
    # d = [1, 2, 3]: mean 2, sd 1, t = 2 / (1/sqrt 3) = 3.4641, df 2.
    assert paired_t_pvalue(np.array([1.0, 2.0, 3.0])) == pytest.approx(
        2 * sps.t.sf(2 * np.sqrt(3), 2))
    # b=[0,2] (mean 1, var 2), c=[3,5,7] (mean 5, var 4): se² = 1 + 4/3, t = 4/se,
    # df = (7/3)² / (1 + (4/3)²/2)
    se2 = 1 + 4 / 3
    df = se2**2 / (1 + (4 / 3) ** 2 / 2)
    assert welch_pvalue(np.array([0.0, 2.0]), np.array([3.0, 5.0, 7.0])) == pytest.approx(
        2 * sps.t.sf(4 / np.sqrt(se2), df))


def test_cohens_d_and_hedges_g_by_hand():
    # Paired: diffs [1, 2, 3] -> d = 2 / 1 = 2; g = 2 * (1 - 3/(4*2 - 1)) = 2 * 4/7.
    b = np.array([0.0, 0.0, 0.0])
    c = np.array([1.0, 2.0, 3.0])
    assert cohens_d(b, c, paired=True) == pytest.approx(2.0)
    assert hedges_g(2.0, 2) == pytest.approx(8 / 7)
    # Unpaired: b=[0,2] var 2, c=[3,5,7] var 4; pooled = sqrt((2 + 8)/3); d = (5 - 1) / pooled.
    d = cohens_d(np.array([0.0, 2.0]), np.array([3.0, 5.0, 7.0]), paired=False)
    assert d == pytest.approx(4 / np.sqrt(10 / 3))
    r = compare(np.array([0.0, 2.0]), np.array([3.0, 5.0, 7.0]), paired=False, reps=500)
    assert r.hedges_g == pytest.approx(d * (1 - 3 / (4 * 3 - 1)))


def test_probability_of_improvement_counts_ties_half_and_honours_goal():
    b = np.array([1.0, 2.0])
    c = np.array([2.0, 3.0])
    # Pairs (c, b): (2,1) win, (2,2) tie, (3,1) win, (3,2) win -> (3 + 0.5) / 4.
    assert probability_of_improvement(b, c, "max") == pytest.approx(0.875)
    assert probability_of_improvement(b, c, "min") == pytest.approx(0.125)
    u = sps.mannwhitneyu(c, b).statistic
    assert probability_of_improvement(b, c) == pytest.approx(u / 4)


def test_goal_min_keeps_raw_difference_but_flips_improvement():
    b = np.array([0.30, 0.32, 0.31, 0.29])
    c = b - 0.05
    r = compare(b, c, paired=True, goal="min", reps=500)
    assert r.mean_diff == pytest.approx(-0.05)
    assert r.prob_improvement == pytest.approx(
        np.mean(c[:, None] < b[None, :]) + 0.5 * np.mean(c[:, None] == b[None, :]))


def test_all_equal_paired_differences_leave_the_rank_test_which_cannot_decide_on_three_seeds():
    b = np.array([1.0, 2.0, 3.0])
    r = compare(b, b + 0.5, paired=True, reps=500, label="t m")
    assert r.t_pvalue is None
    assert r.cohens_d is None and r.hedges_g is None
    # 3 of 3 seeds one way: the signed-rank (and sign) test's smallest p, 2/2³.
    assert r.wilcoxon_pvalue == pytest.approx(sps.binomtest(3, 3).pvalue) == 0.25
    assert r.pvalue == r.wilcoxon_pvalue and r.test == "Wilcoxon signed-rank" and r.p_floor == 0.25
    assert r.mean_diff == pytest.approx(0.5)
    assert (r.diff_ci_low, r.diff_ci_high) == (None, None)  # zero observed spread: no interval
    assert any("all 3 paired differences equal 0.5" in w for w in r.warnings)
    assert is_significant(r.pvalue, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor) is None


def test_a_constant_shift_on_eight_seeds_is_decided_by_the_signed_rank_test():
    # An integer metric that loses exactly 3 on every seed (a deterministic evaluation).
    b = np.array([10.0, 11, 12, 13, 14, 15, 16, 17])
    r = compare(b, b - 3, paired=True, reps=500)
    assert r.t_pvalue is None and r.cohens_d is None
    assert r.pvalue == pytest.approx(sps.binomtest(8, 8).pvalue)  # 2/2⁸ = 0.0078
    assert r.pvalue == pytest.approx(sps.wilcoxon(b - 3 - b).pvalue)
    assert is_significant(r.pvalue, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor) is True


def test_two_constant_sides_are_decided_by_mann_whitney_when_unpaired():
    r = compare(np.full(8, 10.0), np.full(8, 7.0), paired=False, reps=0)
    assert r.welch_pvalue is None
    # Complete separation of 8 and 8 values: 2 / C(16, 8).
    assert r.pvalue == pytest.approx(2 / math.comb(16, 8))
    assert r.test == "Mann-Whitney U"
    assert is_significant(r.pvalue, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor) is True


def test_identical_values_on_both_sides_are_no_change_not_undetermined():
    b = np.array([0.5, 0.7, 0.6, 0.9])
    r = compare(b, b.copy(), paired=True, reps=200)
    assert r.pvalue is None and (r.diff_ci_low, r.diff_ci_high) == (0.0, 0.0)
    assert is_significant(r.pvalue, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor) is False


def test_large_values_with_a_real_spread_are_not_all_equal():
    # 1e12 + N(0, 0.68): a spread of 0.68 is thousands of units in the last place of 1e12.
    rng = np.random.default_rng(1)
    b = 1e12 + rng.normal(0, 0.68, 8)
    c = 1e12 + 1 + rng.normal(0, 0.68, 8)
    r = compare(b, c, paired=True, reps=0)
    assert r.t_pvalue == pytest.approx(sps.ttest_rel(c, b).pvalue, rel=1e-6)
    assert r.welch_pvalue == pytest.approx(sps.ttest_ind(c, b, equal_var=False).pvalue, rel=1e-6)
    assert describe(b, reps=0).std == pytest.approx(np.std(b, ddof=1))


def test_identical_constant_samples_give_null_tests():
    r = compare(np.full(3, 1.0), np.full(3, 1.0), paired=True, reps=200)
    assert r.welch_pvalue is None and r.mannwhitney_pvalue is None and r.t_pvalue is None
    assert r.prob_improvement == 0.5
    assert len(r.warnings) >= 3


def test_single_pair_gives_null_tests_and_interval():
    r = compare(np.array([1.0]), np.array([2.0]), paired=True)
    assert r.n == 1 and r.mean_diff == 1.0
    assert r.t_pvalue is None and r.diff_ci_low is None and r.cohens_d is None
    assert any("n=1" in w for w in r.warnings)


def test_nan_pairs_are_dropped():
    b = np.array([1.0, 2.0, np.nan, 4.0])
    c = np.array([1.5, 2.7, 3.0, 4.4])
    r = compare(b, c, paired=True, reps=200)
    assert r.n == 3
    assert r.t_pvalue == pytest.approx(sps.ttest_rel(c[[0, 1, 3]], b[[0, 1, 3]]).pvalue)
    assert any("NaN" in w for w in r.warnings)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01=0.03, 2*0.03=0.06, max(0.06, 1*0.04)=0.06
    assert holm([0.04, 0.01, None, 0.03]) == [
        pytest.approx(0.06), pytest.approx(0.03), None, pytest.approx(0.06)]
    assert holm([0.5, 0.9]) == [pytest.approx(1.0), pytest.approx(1.0)]


def test_significant_needs_adjusted_p_and_an_interval_excluding_zero():
    assert is_significant(0.01, 0.1, 0.3) is True
    assert is_significant(0.01, -0.1, 0.3) is False
    assert is_significant(0.2, 0.1, 0.3) is False
    assert is_significant(0.01, -0.3, -0.1) is True
    assert is_significant(None, 0.1, 0.3) is None


def test_pairs_only_when_the_shared_seeds_are_most_of_each_sides_runs():
    assert shared_seeds(range(10), [0, 1, *range(10, 18)]) == (False, [0, 1])
    assert shared_seeds(range(5), [0, 1, 2, 3]) == (True, [0, 1, 2, 3])
    assert shared_seeds(range(4), [0, 1, 7, 8]) == (False, [0, 1])  # half is not most
    assert shared_seeds([0, 1], [0, 1]) == (True, [0, 1])
    assert shared_seeds([0], [0]) == (False, [0])


def test_a_few_shared_seeds_do_not_throw_away_most_runs():
    # Baseline seeds 0-9, candidate seeds 0, 1 and 10-17: two shared seeds of ten a side.
    import pandas as pd

    from benchlab.stats import analyze

    rng = np.random.default_rng(3)
    base = rng.normal(0.5, 0.05, 10)
    cand = rng.normal(0.6, 0.05, 10)
    cand_seeds = [0, 1, *range(10, 18)]
    df = pd.DataFrame([("t", "base", s, v) for s, v in enumerate(base)]
                      + [("t", "cand", s, v) for s, v in zip(cand_seeds, cand, strict=True)],
                      columns=["task", "config", "seed", "value"])
    out = analyze(df, baseline="base", reps=500)
    (row,) = out.comparisons
    assert row.paired is False and row.n == 20
    assert row.pvalue == pytest.approx(sps.ttest_ind(cand, base, equal_var=False).pvalue)
    # Significant by Welch's t, but without a range that verdict is withheld unless normality is assumed.
    assert row.pvalue < 0.05 and row.significant is None
    assumed = analyze(df, baseline="base", reps=500, assume_normal=["value"]).comparisons[0]
    assert assumed.significant is True and assumed.decided_by == "Welch t, normal distribution assumed"
    assert any("only 2 of the baseline's 10 and the candidate's 10 seeds are shared" in w
               for w in out.warnings)


def test_a_constant_shift_has_no_interval_and_is_decided_by_its_rank_test():
    from benchlab.stats.compare import is_significant
    from benchlab.stats.table import shape_caveat

    base = np.array([10.0, 11.0, 9.5, 12.0, 10.25, 8.0, 11.5, 9.0])
    cand = base - 3.0  # a deterministic regression of 3 on every seed
    cmp = compare(base, cand, paired=True, reps=200, method="percentile")
    # Zero observed spread: no interval of zero width around the shift, bootstrap's included.
    assert (cmp.diff_ci_low, cmp.diff_ci_high) == (None, None)
    assert (cmp.diff_boot_ci_low, cmp.diff_boot_ci_high) == (None, None)
    assert any("zero observed spread of the difference" in w for w in cmp.warnings)
    # The signed-rank test still decides: 8 of 8 seeds one way, p = 2 / 2^8 by hand.
    assert cmp.wilcoxon_pvalue == pytest.approx(2 / 2**8)
    assert is_significant(cmp.wilcoxon_pvalue, None, None, 0.05, cmp.p_floor) is True
    # At 5 seeds the smallest p is 2 / 2^5 = 0.0625: no verdict.
    short = compare(base[:5], cand[:5], paired=True, reps=0)
    assert is_significant(short.wilcoxon_pvalue, None, None, 0.05, short.p_floor) is None
    # Equal differences up to rounding are no shape to flag as bimodal.
    noisy = cand + np.array([0, 1e-15, -1e-15, 0, 2e-15, 0, -2e-15, 1e-15])
    assert shape_caveat(base, noisy, True, None, cmp.wilcoxon_pvalue, 0.05) is None


def _shape_rate(draw, paired: bool, trials: int, seed: int) -> float:
    from benchlab.stats.compare import shape_warning

    rng = np.random.default_rng(seed)
    return float(np.mean([shape_warning(*draw(rng), paired, None, None, 0.05) is not None for _ in range(trials)]))


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("effect", [0.0, 1.0])
def test_the_shape_warning_flags_at_most_a_tenth_of_normal_comparisons_at_five_seeds(paired, effect):
    trials = 1500
    rate = _shape_rate(lambda rng: (rng.normal(0, 1, 5), rng.normal(effect, 1, 5)), paired, trials, 41)
    # The old rule (a gap wider than half the range) flagged 45-50% of these.
    assert rate <= 0.10 + 2 * np.sqrt(0.1 * 0.9 / trials), rate


def test_the_shape_warning_flags_most_comparisons_where_one_seed_of_five_collapsed():
    trials = 1000

    def collapsed(rng):
        cand = rng.normal(0.8, 0.05, 5)
        cand[rng.integers(5)] = rng.normal(0.1, 0.05)
        return rng.normal(0.66, 0.2, 5), cand  # even against a noisy baseline

    rate = _shape_rate(collapsed, True, trials, 42)
    assert rate >= 0.80, rate


def test_the_shape_warning_exists_at_three_seeds():
    from benchlab.stats.compare import shape_warning

    note = shape_warning(np.array([0.70, 0.71, 0.69]), np.array([0.80, 0.81, 0.10]), True, None, None, 0.05)
    assert note is not None and "3 seeds" in note
    assert shape_warning(np.array([0.70, 0.71, 0.69]), np.array([0.80, 0.83, 0.77]), True, None, None, 0.05) is None
