"""The IQM across tasks has one definition whatever the balance of seeds: every task weighs the
same and a quarter of the weight is cut from each end, so scoring a failed seed as the worst
value never raises it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchlab.stats.aggregate import iqm


def _quartile_mean_by_hand(table: np.ndarray) -> float:
    """Twice the integral of the task-weighted quantile function from 1/4 to 3/4: each task's
    runs share mass 1/T equally; the mass between the quartiles is averaged."""
    tasks = table.shape[1]
    values, masses = [], []
    for t in range(tasks):
        col = table[:, t][~np.isnan(table[:, t])]
        values += list(col)
        masses += [1 / tasks / col.size] * col.size
    order = np.argsort(values, kind="stable")
    v, m = np.array(values)[order], np.array(masses)[order]
    end = np.cumsum(m)
    kept = np.clip(end, 0.25, 0.75) - np.clip(end - m, 0.25, 0.75)
    return float(np.sum(kept * v) / 0.5)


def test_failed_seed_scored_as_worst_never_raises_the_iqm():
    # The case that rose before: 2 tasks x 3 seeds, one seed of task 0 failed.
    x = np.array([[0.15418603, 0.33147148], [0.29620643, 0.78244116], [0.4117884, 0.75782292]])
    excluded = x.copy()
    excluded[2, 0] = np.nan
    worst = x.copy()
    worst[2, 0] = 0.0
    assert float(iqm(worst)) <= float(iqm(excluded))
    # Before, the full table took trim_mean's floor(6/4) = 1 of 6 values off each end.
    assert stats.trim_mean(worst.ravel(), 0.25) > float(iqm(excluded))
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


def test_with_a_multiple_of_four_runs_it_is_scipys_trimmed_mean():
    x = np.random.default_rng(1).normal(size=(4, 3))
    assert float(iqm(x)) == pytest.approx(stats.trim_mean(x.ravel(), 0.25))
