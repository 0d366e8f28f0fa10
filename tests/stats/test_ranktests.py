"""The rank tests' exact null distributions, computed here, against scipy's exact and
permutation p-values; the method no longer depends on n, ties or scipy's version."""

import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import compare, rank_sum_test, signed_rank_test

RNG = np.random.default_rng(21)


def _signed_rank_stat(d, axis=-1):
    ranks = sps.rankdata(np.abs(d), axis=axis)
    return np.sum(ranks * (d > 0), axis=axis)


@pytest.mark.parametrize("n", [3, 6, 12, 25, 50])
def test_signed_rank_without_ties_equals_scipys_exact_p(n):
    d = RNG.normal(0.3, 1.0, size=n)
    ours = signed_rank_test(d)
    assert ours.method == "exact"
    assert ours.pvalue == pytest.approx(sps.wilcoxon(d, method="exact").pvalue, rel=1e-12)


@pytest.mark.parametrize("d", [
    [1.0, 1.0, 2.0, 2.0, -1.0, 3.0],              # ties among |d|
    [0.5, -0.5, 0.5, 1.5, 1.5, 2.0, -2.0, 2.5],   # ties across signs
])
def test_signed_rank_with_ties_equals_the_full_permutation_test(d):
    d = np.array(d)
    ours = signed_rank_test(d)
    ref = sps.permutation_test((d,), _signed_rank_stat, permutation_type="samples",
                               n_resamples=np.inf, alternative="two-sided", vectorized=True)
    assert ours.method == "exact" and ours.tied_groups > 0
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_zero_differences_are_dropped_before_ranking():
    d = np.array([0.0, 1.0, 2.0, 3.0, -0.5, 0.0, 4.0])
    ours = signed_rank_test(d)
    assert ours.zeros == 2 and ours.n == 5
    assert ours.pvalue == pytest.approx(signed_rank_test(d[d != 0]).pvalue)
    assert signed_rank_test(np.zeros(4)) is None


@pytest.mark.parametrize(("nb", "nc"), [(3, 4), (5, 5), (10, 10), (12, 17), (30, 30)])
def test_rank_sum_without_ties_equals_scipys_exact_p(nb, nc):
    b = RNG.normal(0.0, 1.0, size=nb)
    c = RNG.normal(0.6, 1.0, size=nc)
    ours = rank_sum_test(b, c)
    assert ours.method == "exact"
    assert ours.statistic == pytest.approx(sps.mannwhitneyu(c, b).statistic)
    assert ours.pvalue == pytest.approx(sps.mannwhitneyu(c, b, method="exact").pvalue, rel=1e-10)


def test_rank_sum_with_ties_equals_the_full_permutation_test():
    b = np.array([1.0, 2.0, 2.0, 3.0, 4.0])
    c = np.array([2.0, 3.0, 3.0, 5.0, 6.0, 6.0])

    def u(x, y, axis=-1):
        return sps.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic

    ref = sps.permutation_test((c, b), u, n_resamples=np.inf, alternative="two-sided",
                               vectorized=True)
    ours = rank_sum_test(b, c)
    assert ours.method == "exact" and ours.tied_groups == 3
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_large_tied_samples_use_the_tie_corrected_normal_approximation_without_continuity():
    b = np.round(RNG.normal(0.0, 1.0, size=40), 1)
    c = np.round(RNG.normal(0.5, 1.0, size=41), 1)
    ours = rank_sum_test(b, c)
    assert ours.method == "normal" and ours.tied_groups > 0
    assert ours.pvalue == pytest.approx(
        sps.mannwhitneyu(c, b, method="asymptotic", use_continuity=False).pvalue, rel=1e-10)
    d = np.round(RNG.normal(0.2, 1.0, size=80), 1)
    w = signed_rank_test(d)
    assert w.method == "normal"
    assert w.pvalue == pytest.approx(
        sps.wilcoxon(d, method="asymptotic", correction=False, zero_method="wilcox").pvalue,
        rel=1e-10)


def test_a_warning_says_when_ties_forced_the_normal_approximation():
    b = np.round(RNG.normal(0.0, 1.0, size=60), 1)
    c = b + np.round(RNG.normal(0.1, 0.5, size=60), 1)
    r = compare(b, c, paired=True, reps=0, label="t m c vs b")
    assert any(w.startswith("t m c vs b: Wilcoxon: normal approximation (n=") and "tie" in w
               for w in r.warnings)
    assert any("Mann-Whitney U: normal approximation" in w for w in r.warnings)


def test_the_mann_whitney_p_of_ten_runs_a_side_is_exact_not_scipys_default_approximation():
    b = RNG.normal(0.0, 1.0, size=10)
    c = RNG.normal(0.8, 1.0, size=10)
    got = compare(b, c, paired=False, reps=0).mannwhitney_pvalue
    assert got == pytest.approx(sps.mannwhitneyu(c, b, method="exact").pvalue, rel=1e-10)
    assert got != pytest.approx(sps.mannwhitneyu(c, b, method="asymptotic").pvalue, rel=1e-6)
