"""Group-sequential boundaries and decisions: checked against scipy and by seeded simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchlab.stats.sequential import (
    DEGENERATE,
    EQUIVALENT,
    NEGATIVE,
    OPEN,
    POSITIVE,
    boundaries,
    decide_look,
    look_sizes,
    run_design,
    spent,
)


def _never_crossed(bounds: np.ndarray, fractions: np.ndarray) -> float:
    """P(|Z_k| < c_k at every look) for the canonical joint normal, by scipy's multivariate normal CDF."""
    t = np.asarray(fractions)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    return float(stats.multivariate_normal(np.zeros(t.size), cov).cdf(bounds, lower_limit=-bounds))


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_boundaries_spend_alpha_look_by_look_as_scipy_integrates_it(spending: str) -> None:
    fractions = np.array([0.25, 0.5, 0.75, 1.0])
    bounds = boundaries(fractions, 0.05, spending)
    for k in range(1, fractions.size + 1):
        crossed_by_k = 1.0 - _never_crossed(bounds[:k], fractions[:k])
        assert crossed_by_k == pytest.approx(spent(fractions[:k], 0.05, spending)[-1], abs=2e-4)
    assert 1.0 - _never_crossed(bounds, fractions) == pytest.approx(0.05, abs=2e-4)


def test_first_obrien_fleming_boundary_is_the_fixed_critical_value_over_root_t() -> None:
    # α(t) = 2 − 2Φ(z/√t) spent at the first look alone: c_1 = z_{0.975} / √t_1 exactly.
    bounds = boundaries([0.2, 0.6, 1.0], 0.05)
    assert bounds[0] == pytest.approx(stats.norm.ppf(0.975) / np.sqrt(0.2), rel=1e-9)
    assert bounds[0] > bounds[1] > bounds[2] > stats.norm.ppf(0.975)


def test_pocock_boundaries_are_nearly_flat_and_above_the_fixed_value() -> None:
    bounds = boundaries([0.5, 1.0], 0.05, "pocock")
    assert bounds[0] == pytest.approx(stats.norm.isf(0.05 * np.log1p((np.e - 1) * 0.5) / 2), rel=1e-9)
    assert abs(bounds[1] - bounds[0]) < 0.1 and bounds.min() > 2.1


def test_look_sizes_end_at_the_cap_with_a_partial_last_batch() -> None:
    assert look_sizes(5, 5, 20) == [5, 10, 15, 20]
    assert look_sizes(5, 4, 15) == [5, 9, 13, 15]
    assert look_sizes(5, 3, 5) == [5]
    with pytest.raises(ValueError):
        look_sizes(5, 1, 4)


def test_bad_fractions_are_refused() -> None:
    for bad in ([0.5, 0.5], [0.0, 1.0], [0.5, 1.2], []):
        with pytest.raises(ValueError):
            boundaries(bad)


def test_repeated_interval_is_the_t_interval_at_the_boundarys_nominal_level() -> None:
    diffs = np.array([0.3, 0.5, 0.1, 0.4, 0.6])
    bound = 2.5
    look = decide_look(diffs[None, :], bound)
    q = stats.t.ppf(stats.norm.cdf(bound), df=4)
    se = np.std(diffs, ddof=1) / np.sqrt(5)
    assert look.low[0] == pytest.approx(diffs.mean() - q * se, rel=1e-12)
    assert look.high[0] == pytest.approx(diffs.mean() + q * se, rel=1e-12)
    assert look.decision[0] == POSITIVE  # the lower end is above 0
    assert decide_look(-diffs[None, :], bound).decision[0] == NEGATIVE


def test_equivalence_needs_the_whole_interval_inside_the_margin() -> None:
    diffs = np.array([[0.01, -0.02, 0.0, 0.015, -0.01, 0.005]])
    half = decide_look(diffs, 2.0).high[0] - diffs.mean()
    assert decide_look(diffs, 2.0).decision[0] == OPEN  # no margin: no equivalence
    assert decide_look(diffs, 2.0, margin=abs(diffs.mean()) + half * 1.01).decision[0] == EQUIVALENT
    assert decide_look(diffs, 2.0, margin=abs(diffs.mean()) + half * 0.99).decision[0] == OPEN


def test_a_constant_offset_lost_in_rounding_gives_no_verdict() -> None:
    base = np.array([0.7, 0.9, 0.3, 0.15, 0.45, 0.62])
    diffs = (base + 0.1) - base  # sd about 1e-17, not 0
    assert np.std(diffs, ddof=1) > 0
    look = decide_look(diffs[None, :], 3.0, magnitude=np.array([1.02]))
    assert look.decision[0] == DEGENERATE and np.isnan(look.low[0])


def test_fewer_than_two_pairs_stay_open_and_failed_seeds_drop_out() -> None:
    look = decide_look(np.array([[5.0, np.nan, np.nan], [1.0, 1.2, np.nan]]), 2.0)
    assert look.decision[0] == OPEN and look.n.tolist() == [1, 2]
    assert np.isnan(look.low[0]) and np.isfinite(look.low[1])


@pytest.mark.parametrize("spending", ["obrien-fleming", "pocock"])
def test_false_positive_rate_stays_at_alpha_while_naive_retesting_inflates_it(spending: str) -> None:
    rng = np.random.default_rng(20260414)
    trials, alpha = 6000, 0.05
    sizes = look_sizes(5, 5, 20)
    bounds = boundaries(np.array(sizes) / 20, alpha, spending)
    diffs = rng.normal(0.0, 1.0, size=(trials, 20))
    decision, _ = run_design(diffs, sizes, bounds)
    rate = np.isin(decision, (POSITIVE, NEGATIVE)).mean()
    mc_error = np.sqrt(alpha * (1 - alpha) / trials)
    assert abs(rate - alpha) < 3 * mc_error, rate
    # The naive procedure on the same data: a plain t-test at α after every batch.
    naive = np.zeros(trials, dtype=bool)
    for n in sizes:
        naive |= stats.ttest_1samp(diffs[:, :n], 0.0, axis=1).pvalue < alpha
    assert naive.mean() > alpha + 6 * mc_error


def test_a_real_effect_is_decided_with_fewer_seeds_than_the_fixed_design_of_the_same_power() -> None:
    rng = np.random.default_rng(7)
    trials, alpha, effect = 6000, 0.05, 1.0
    sizes = look_sizes(5, 5, 20)
    bounds = boundaries(np.array(sizes) / 20, alpha)
    decision, used = run_design(rng.normal(effect, 1.0, size=(trials, 20)), sizes, bounds)
    power = (decision == POSITIVE).mean()
    assert (decision == NEGATIVE).mean() < 0.001
    # The fixed design: the smallest n whose two-sided paired t-test reaches that power (noncentral t).
    def fixed_power(n: int) -> float:
        crit = stats.t.ppf(1 - alpha / 2, n - 1)
        return float(stats.nct.sf(crit, n - 1, effect * np.sqrt(n)) + stats.nct.cdf(-crit, n - 1, effect * np.sqrt(n)))
    fixed_n = next(n for n in range(2, 200) if fixed_power(n) >= power)
    assert used.mean() < 0.85 * fixed_n, (used.mean(), fixed_n, power)


def test_the_boundaries_printed_in_the_statistics_doc_are_the_computed_ones() -> None:
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "statistics.md").read_text()
    section = doc.split("## Seeds until decided", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"they are ([\d., ]+) \(O'Brien–Fleming\) and\s+([\d., ]+) \(Pocock\)", section)
    assert found, "the doc no longer states the boundaries"
    for text, spending in zip(found.groups(), ("obrien-fleming", "pocock"), strict=True):
        shown = [float(x) for x in text.replace(",", " ").split()]
        assert shown == pytest.approx(boundaries(np.array([5, 10, 15, 20]) / 20, 0.05, spending), abs=6e-4)
