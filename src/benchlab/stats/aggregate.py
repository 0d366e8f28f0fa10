"""Across-task aggregates after Agarwal et al. (2021), "Deep RL at the edge of the statistical precipice".

Scores are arrays of shape ``(runs, tasks)``, normalised so that 0 is a task's
``low`` reference and 1 its ``high`` reference (higher is better after
normalisation, whatever the metric's goal). A task with fewer runs than the
others is padded with NaN at the end of its column; every aggregate here
ignores the padding. Confidence intervals come from the stratified bootstrap
(runs resampled within each task) of :func:`benchlab.stats.bootstrap.stratified_bootstrap`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from benchlab.stats.bootstrap import SeedLike, stratified_bootstrap

AGGREGATES = ("iqm", "median", "mean", "optimality_gap")


def normalize(scores: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``(score - low) / (high - low)`` per task.

    Args:
        scores: shape ``(runs, tasks)``.
        low, high: shape ``(tasks,)``; the scores normalised to 0 and 1. For a metric
            to minimise give ``low`` the worse (larger) reference, so that a higher
            normalised score is better; ``high == low`` is an error.
    """
    low = np.asarray(low, dtype=float)
    high = np.asarray(high, dtype=float)
    if np.any(high == low):
        raise ValueError("a task's high and low references are equal; cannot normalise")
    return (np.asarray(scores, dtype=float) - low) / (high - low)


def _flat(scores: np.ndarray) -> np.ndarray:
    return scores.reshape(*scores.shape[:-2], -1)


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean over all runs of all tasks: the mean of the middle 50%.

    Like ``scipy.stats.trim_mean(x, 0.25)``: of the ``N`` values, ``⌊N/4⌋`` are cut
    from each end. ``scores``: shape ``(..., runs, tasks)``; returns shape ``(...)``.
    """
    flat = np.sort(_flat(np.asarray(scores, dtype=float)), axis=-1)  # NaN sort last
    count = np.sum(~np.isnan(flat), axis=-1, keepdims=True)
    cut = count // 4
    pos = np.arange(flat.shape[-1])
    keep = (pos >= cut) & (pos < count - cut)
    return np.sum(np.where(keep, flat, 0.0), axis=-1) / np.sum(keep, axis=-1)


def _task_means(scores: np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    valid = ~np.isnan(s)
    return np.sum(np.where(valid, s, 0.0), axis=-2) / np.sum(valid, axis=-2)


def mean_of_means(scores: np.ndarray) -> np.ndarray:
    """Mean over tasks of each task's mean score. ``(..., runs, tasks) -> (...)``."""
    return np.mean(_task_means(scores), axis=-1)


def median_of_means(scores: np.ndarray) -> np.ndarray:
    """Median over tasks of each task's mean score. ``(..., runs, tasks) -> (...)``."""
    return np.median(_task_means(scores), axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``gamma - mean(min(score, gamma))`` over all runs of all tasks (lower is better).

    ``scores``: shape ``(..., runs, tasks)``; returns shape ``(...)``.
    """
    flat = _flat(np.asarray(scores, dtype=float))
    valid = ~np.isnan(flat)
    clipped = np.where(valid, np.minimum(flat, gamma), 0.0)
    return gamma - np.sum(clipped, axis=-1) / np.sum(valid, axis=-1)


_FUNCS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "iqm": iqm,
    "median": median_of_means,
    "mean": mean_of_means,
    "optimality_gap": optimality_gap,
}


def _interval(dist: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    alpha = 1.0 - confidence
    low, high = np.percentile(dist, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return low, high


def aggregate(
    scores: np.ndarray,
    reps: int = 10_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
) -> dict[str, tuple[float, float, float]]:
    """IQM, median, mean and optimality gap with stratified-bootstrap percentile CIs.

    Args:
        scores: normalised scores, shape ``(runs, tasks)`` (NaN padding allowed).
        reps: bootstrap resamples, shared by the four aggregates.
        confidence: coverage of the intervals.
        seed: seed of the numpy Generator.

    Returns:
        ``{name: (value, ci_low, ci_high)}`` for the names in :data:`AGGREGATES`.
    """
    scores = np.asarray(scores, dtype=float)

    def all_four(s: np.ndarray) -> np.ndarray:
        # One sort serves the IQM; the rest are sums: all four share the resamples.
        return np.stack([_FUNCS[name](s) for name in AGGREGATES], axis=-1)

    point = all_four(scores[None])[0]
    dist = stratified_bootstrap(scores, all_four, reps, seed)  # (reps, 4)
    low, high = _interval(dist, confidence)
    return {
        name: (float(point[i]), float(low[i]), float(high[i])) for i, name in enumerate(AGGREGATES)
    }


def performance_profile(
    scores: np.ndarray,
    taus: np.ndarray,
    reps: int = 2_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score distribution: the fraction of runs with a score above each threshold ``tau``.

    The fraction is taken per task and averaged over tasks (with equal runs per
    task, the fraction of all runs).

    Args:
        scores: shape ``(runs, tasks)``.
        taus: shape ``(T,)``.
        reps, confidence, seed: the stratified bootstrap bands.

    Returns:
        ``(profile, low, high)``, each of shape ``(T,)``.
    """
    taus = np.asarray(taus, dtype=float)

    def profile(s: np.ndarray) -> np.ndarray:
        valid = ~np.isnan(s)
        above = (s[..., None] > taus) & valid[..., None]  # (..., runs, tasks, T)
        per_task = above.sum(axis=-3) / valid.sum(axis=-2)[..., None]
        return per_task.mean(axis=-2)

    point = profile(np.asarray(scores, dtype=float)[None])[0]
    dist = stratified_bootstrap(scores, profile, reps, seed)
    low, high = _interval(dist, confidence)
    return point, low, high


def _poi_per_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``P(X > Y) + ½P(X = Y)`` per task: ``(..., nx, tasks), (..., ny, tasks) -> (..., tasks)``."""
    xv, yv = x[..., :, None, :], y[..., None, :, :]
    valid = ~(np.isnan(xv) | np.isnan(yv))
    wins = ((xv > yv) + 0.5 * (xv == yv)) * valid
    return wins.sum(axis=(-3, -2)) / valid.sum(axis=(-3, -2))


def average_probability_of_improvement(
    x: np.ndarray,
    y: np.ndarray,
    reps: int = 2_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
) -> tuple[float, float, float]:
    """Average over tasks of ``P(X > Y) + ½P(X = Y)`` (X's runs vs Y's runs of a task).

    Args:
        x: scores of config X, shape ``(runs_x, tasks)``.
        y: scores of config Y, shape ``(runs_y, tasks)``, same tasks in the same order.
        reps, confidence, seed: the CI, resampling the runs of X and of Y
            independently within each task.

    Returns:
        ``(value, ci_low, ci_high)``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    point = float(_poi_per_task(x, y).mean())
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63 - 1, size=2)
    # Same count of resamples for both, independent streams: a joint resample of (X, Y).
    bx = _stratified_samples(x, reps, int(seeds[0]))
    by = _stratified_samples(y, reps, int(seeds[1]))
    dist = _poi_per_task(bx, by).mean(axis=-1)
    low, high = _interval(dist, confidence)
    return point, float(low), float(high)


def _stratified_samples(scores: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """Stratified resamples themselves: shape ``(reps, runs, tasks)``."""
    return stratified_bootstrap(scores, lambda s: s, reps, seed)


__all__ = [
    "AGGREGATES",
    "aggregate",
    "average_probability_of_improvement",
    "iqm",
    "mean_of_means",
    "median_of_means",
    "normalize",
    "optimality_gap",
    "performance_profile",
]
