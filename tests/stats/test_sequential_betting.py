"""Betting confidence sequences for a bounded metric's paired differences (``run --until-decided``).

Checked against a direct, loop-by-loop computation of Waudby-Smith & Ramdas's hedged capital
process with predictable plug-in bets, and by seeded simulation on the nulls where the
group-sequential t design decides falsely: a candidate whose seeds sometimes collapse, or are
skewed, against a stable baseline of the same mean.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchlab.stats.sequential import (
    DEGENERATE,
    EQUIVALENT,
    NEGATIVE,
    OPEN,
    POSITIVE,
    boundaries,
    decide_betting,
    rescale,
    run_betting_design,
    run_design,
)

ALPHA = 0.05
SIZES = [5, 10, 15, 20]


def _capital_by_hand(d: list[float], width: float, m: float, alpha: float) -> tuple[float, float]:
    """max over t of K⁺_t and K⁻_t at the mean difference ``m``, one seed at a time (the paper's
    formulas: μ̂, σ̂² with their priors ½ and ¼, λ_i from seeds before i, bets at most 3/2)."""
    y = [(x + width) / (2 * width) for x in d]
    mp = (m + width) / (2 * width)
    up = down = best_up = best_down = 1.0
    total, squares, var_before = 0.0, 0.0, 0.25
    for i, yi in enumerate(y, start=1):
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (var_before * i * math.log(1 + i))), 1.5)
        up *= 1 + lam * (yi - mp)
        down *= 1 - lam * (yi - mp)
        best_up, best_down = max(best_up, up), max(best_down, down)
        total += yi
        mu = (0.5 + total) / (i + 1)
        squares += (yi - mu) ** 2
        var_before = (0.25 + squares) / (i + 1)
    return best_up, best_down


def test_decisions_follow_the_hand_computed_capital_at_zero() -> None:
    rng = np.random.default_rng(5)
    for _ in range(40):
        n = int(rng.integers(3, 30))
        d = np.clip(rng.normal(rng.uniform(-0.4, 0.4), 0.1, n), -1, 1)
        up, down = _capital_by_hand(d.tolist(), 1.0, 0.0, ALPHA)
        look = decide_betting(d[None, :], 1.0, ALPHA)
        expected = POSITIVE if up >= 2 / ALPHA else NEGATIVE if down >= 2 / ALPHA else OPEN
        assert look.decision[0] == expected, (up, down)


def test_interval_ends_are_where_the_hand_computed_capital_crosses_two_over_alpha() -> None:
    d = [0.32, 0.41, 0.25, 0.38, 0.30, 0.36, 0.29, 0.35, 0.40, 0.33, 0.31, 0.37] * 2
    look = decide_betting(np.array([d]), 1.0, ALPHA)
    low, high = float(look.low[0]), float(look.high[0])
    assert low < np.mean(d) < high
    # Just inside the interval neither bettor has reached 2/α; just outside one has.
    assert max(_capital_by_hand(d, 1.0, low + 1e-6, ALPHA)) < 2 / ALPHA
    assert _capital_by_hand(d, 1.0, low - 1e-6, ALPHA)[0] >= 2 / ALPHA
    assert max(_capital_by_hand(d, 1.0, high - 1e-6, ALPHA)) < 2 / ALPHA
    assert _capital_by_hand(d, 1.0, high + 1e-6, ALPHA)[1] >= 2 / ALPHA
    assert look.decision[0] == POSITIVE and low > 0


def test_an_interval_in_another_range_is_the_same_after_rescaling() -> None:
    # Acrobot-like returns in [-500, 0]: differences in [-500, 500].
    d = np.array([[60.0, 75.0, 58.0, 81.0, 66.0, 70.0, 72.0, 64.0, 69.0, 77.0, 63.0, 74.0, 71.0, 68.0]])
    a, b = decide_betting(d, 500.0, ALPHA), decide_betting(d / 500.0, 1.0, ALPHA)
    assert a.low[0] == pytest.approx(500 * b.low[0]) and a.high[0] == pytest.approx(500 * b.high[0])
    assert a.decision[0] == b.decision[0]


def test_equivalence_needs_both_margin_ends_rejected() -> None:
    rng = np.random.default_rng(2)
    d = rng.normal(0.0, 0.01, (1, 60))
    look = decide_betting(d, 1.0, ALPHA, margin=0.2)
    assert look.decision[0] == EQUIVALENT and -0.2 < look.low[0] and look.high[0] < 0.2
    assert decide_betting(d, 1.0, ALPHA, margin=0.01).decision[0] == OPEN


def test_identical_runs_are_degenerate_and_a_constant_shift_is_not() -> None:
    assert decide_betting(np.zeros((1, 8)), 1.0, ALPHA).decision[0] == DEGENERATE
    assert decide_betting(np.full((1, 40), 0.3), 1.0, ALPHA).decision[0] == POSITIVE


def test_a_difference_outside_the_range_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        rescale(np.array([0.5, 1.5]), 1.0)


def _collapsing_null(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Paired differences: a candidate whose seeds collapse with probability 0.2 minus a stable
    baseline with the same mean (0.2·0.1 + 0.8·0.8 = 0.66), every value in [0, 1]."""
    collapsed = rng.random(shape) < 0.2
    cand = np.clip(np.where(collapsed, rng.normal(0.1, 0.03, shape), rng.normal(0.8, 0.03, shape)), 0, 1)
    return cand - np.clip(rng.normal(0.66, 0.02, shape), 0, 1)


@pytest.mark.parametrize("pairs", [1, 5])
def test_familywise_error_on_collapsing_seeds_holds_alpha_where_the_t_design_does_not(pairs: int) -> None:
    trials = 3000
    rng = np.random.default_rng([20261128, pairs])
    bounds = boundaries(np.array(SIZES) / SIZES[-1], ALPHA / pairs)
    betting = np.zeros(trials, bool)
    t_design = np.zeros(trials, bool)
    for _ in range(pairs):
        d = _collapsing_null(rng, (trials, SIZES[-1]))
        betting |= np.isin(run_betting_design(d, SIZES, 1.0, ALPHA / pairs)[0], (POSITIVE, NEGATIVE))
        t_design |= np.isin(run_design(d, SIZES, bounds)[0], (POSITIVE, NEGATIVE))
    se = math.sqrt(ALPHA * (1 - ALPHA) / trials)
    assert betting.mean() <= ALPHA + 2 * se, betting.mean()
    assert t_design.mean() > ALPHA + 10 * se, t_design.mean()  # what the old method did


def test_skewed_null_of_the_same_mean_holds_alpha() -> None:
    trials = 3000
    rng = np.random.default_rng(77)
    # 0.2·exp(N(0, 0.75)), cut at 1: the exact mean E[Y; Y<1] + P(Y ≥ 1).
    from scipy import stats

    c = math.log(5.0)
    mean = 0.2 * math.exp(0.75**2 / 2) * stats.norm.cdf((c - 0.75**2) / 0.75) + stats.norm.sf(c / 0.75)
    cand = np.minimum(0.2 * np.exp(rng.normal(0, 0.75, (trials, 20))), 1.0)
    d = cand - np.clip(rng.normal(mean, 0.02, (trials, 20)), 0, 1)
    wrong = np.isin(run_betting_design(d, SIZES, 1.0, ALPHA)[0], (POSITIVE, NEGATIVE))
    assert wrong.mean() <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / trials)


def test_a_clear_improvement_is_decided_better_within_the_looks() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(0.5, 0.05, (500, 20))
    d = base + 0.3 + rng.normal(0, 0.05, (500, 20)) - base
    decided, used = run_betting_design(d, SIZES, 1.0, ALPHA)
    assert np.mean(decided == POSITIVE) > 0.95 and used.mean() <= 20
