"""The IQM across tasks has one definition whatever the balance of seeds: every task weighs the
same and the share of the weight cut from each end is the full table's (``⌊N/4⌋/N``, rliable's
on a full table), so scoring a failed seed as the worst value never raises it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchlab.stats.aggregate import iqm


def _quartile_mean_by_hand(table: np.ndarray) -> float:
    """The mean of the task-weighted distribution between the quantiles f and 1 - f, f the
    share scipy's trim_mean(0.25) cuts from the full table: each task's runs share mass 1/T."""
    runs, tasks = table.shape
    f = ((runs * tasks) // 4) / (runs * tasks)
    values, masses = [], []
    for t in range(tasks):
        col = table[:, t][~np.isnan(table[:, t])]
        values += list(col)
        masses += [1 / tasks / col.size] * col.size
    order = np.argsort(values, kind="stable")
    v, m = np.array(values)[order], np.array(masses)[order]
    end = np.cumsum(m)
    kept = np.clip(end, f, 1 - f) - np.clip(end - m, f, 1 - f)
    return float(np.sum(kept * v) / (1 - 2 * f))


def test_failed_seed_scored_as_worst_never_raises_the_iqm():
    # The case that rose before: 2 tasks x 3 seeds, one seed of task 0 failed.
    x = np.array([[0.15418603, 0.33147148], [0.29620643, 0.78244116], [0.4117884, 0.75782292]])
    excluded = x.copy()
    excluded[2, 0] = np.nan
    worst = x.copy()
    worst[2, 0] = 0.0
    assert float(iqm(worst)) <= float(iqm(excluded))
    assert float(iqm(worst)) == pytest.approx(stats.trim_mean(worst.ravel(), 0.25))  # rliable's, full table
    # Before, the table with the seed excluded cut a quarter of its weight (3 of 12), the full
    # one 1 of 6: the worst-filled IQM came out above the excluded one (0.38492 > 0.38490).
    assert stats.trim_mean(worst.ravel(), 0.25) > 0.38490
    rng = np.random.default_rng(0)
    for _ in range(3000):
        runs, tasks = rng.integers(2, 8), rng.integers(2, 5)
        x = rng.random((runs, tasks))
        lost = rng.integers(1, runs)
        excluded, worst = x.copy(), x.copy()
        excluded[runs - lost:, 0] = np.nan
        worst[runs - lost:, 0] = 0.0
        assert float(iqm(worst)) <= float(iqm(excluded)) + 1e-12


@pytest.mark.parametrize("shape", [(3, 2), (5, 3), (6, 2), (4, 3), (7, 5)])
def test_the_iqm_is_the_task_weighted_mean_between_the_quartiles_balanced_or_not(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape)
    assert float(iqm(x)) == pytest.approx(_quartile_mean_by_hand(x))
    x[-1, 0] = np.nan  # one seed lost: the same definition
    assert float(iqm(x)) == pytest.approx(_quartile_mean_by_hand(x))


@pytest.mark.parametrize("shape", [(4, 3), (5, 3), (3, 2), (10, 1)])
def test_a_full_table_gives_scipys_trimmed_mean_as_rliable(shape):
    x = np.random.default_rng(1).normal(size=shape)
    assert float(iqm(x)) == pytest.approx(stats.trim_mean(x.ravel(), 0.25))
