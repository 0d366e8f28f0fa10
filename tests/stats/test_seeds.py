import numpy as np
import pytest
from scipy import stats as sps

from benchlab.stats import (
    cv_of_mean,
    effect_from_pilot,
    paired_power,
    seeds_for_power,
    smallest_n,
)

PILOT = np.array([10.2, 9.1, 11.4, 10.8, 9.7, 10.1, 12.0, 9.4, 10.6, 10.9, 9.9, 10.3])


def test_cv_of_mean_is_the_sample_sd_with_ddof_1_over_root_n_and_the_mean():
    ns, cv = cv_of_mean(PILOT)
    assert ns.tolist() == list(range(1, 13))
    expected = sps.tstd(PILOT) / np.sqrt(ns) / PILOT.mean()  # tstd: ddof = 1
    assert cv == pytest.approx(expected, rel=1e-12)


def test_smallest_n_under_the_threshold():
    ns = np.array([1, 2, 3, 4])
    assert smallest_n(ns, np.array([0.2, 0.08, 0.04, 0.03]), 0.05) == 3
    assert smallest_n(ns, np.array([0.2, 0.1, 0.09, 0.08]), 0.05) is None


def test_cv_is_nan_when_the_mean_is_zero():
    ns, cv = cv_of_mean(np.zeros(3), reps=10)
    assert ns.tolist() == [1, 2, 3]
    assert np.isnan(cv).all()


def test_paired_power_matches_the_noncentral_t_by_hand():
    # n = 10 pairs, d_z = 1: nc = sqrt(10), df = 9, two-sided alpha 0.05.
    crit = sps.t.ppf(0.975, 9)
    expected = 1 - sps.nct.cdf(crit, 9, np.sqrt(10)) + sps.nct.cdf(-crit, 9, np.sqrt(10))
    assert paired_power(10, 1.0) == pytest.approx(expected)
    assert 0.78 < expected < 0.81  # the textbook figure: ~0.80 for d=1, n=10


def test_paired_power_agrees_with_statsmodels():
    power = pytest.importorskip("statsmodels.stats.power")
    for n, d in [(5, 1.5), (20, 0.5), (50, 0.3)]:
        assert paired_power(n, d) == pytest.approx(
            power.TTestPower().power(effect_size=d, nobs=n, alpha=0.05), rel=1e-6)


@pytest.mark.parametrize("effect", [0.2, 0.5, 0.8, 1.2, 3.0])
def test_seeds_for_power_is_the_smallest_n_reaching_the_target(effect):
    n = seeds_for_power(effect, alpha=0.05, power=0.8)
    assert paired_power(n, effect) >= 0.8
    if n > 2:
        assert paired_power(n - 1, effect) < 0.8
    # The normal approximation ((z_a + z_b) / d)^2 + z_a^2 / 2 is within 2 seeds.
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    approx = (z / effect) ** 2 + sps.norm.ppf(0.975) ** 2 / 2
    assert abs(n - approx) <= 2


def test_no_effect_needs_no_finite_number_of_seeds():
    assert seeds_for_power(0.0) is None


def test_effect_from_pilot_is_mean_over_sd_of_differences():
    b = np.array([1.0, 2.0, 3.0])
    c = np.array([2.0, 4.0, 6.0])  # diffs 1, 2, 3: mean 2, sd 1
    assert effect_from_pilot(b, c) == pytest.approx(2.0)
    assert effect_from_pilot(b, b + 1) is None
