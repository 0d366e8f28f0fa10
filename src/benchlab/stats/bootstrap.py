"""Vectorised bootstrap: resample indices drawn once, statistics taken along an axis.

Every function draws its resamples from ``np.random.default_rng(seed)`` as one
index array of shape ``(reps, n)`` (chunked so no intermediate exceeds a few
tens of megabytes), so there is no Python loop over resamples and the same
seed always gives the same interval.

A *statistic* here is a function ``f(x, axis=-1)`` that reduces the last axis
(``np.mean``, ``np.median``, ...). Stratified statistics reduce the last two
axes ``(..., runs, tasks)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from scipy.special import ndtr, ndtri

from benchlab.names.choices import MethodChoice
from benchlab.stats.threads import one_blas_thread

Statistic = Callable[..., np.ndarray]
Method = Literal["studentized", "percentile", "bca"]
METHODS: tuple[str, ...] = tuple(m.value for m in MethodChoice)
SeedLike = int | np.random.SeedSequence | None

# Below 4 values too many resamples repeat one value (a third of them at n = 3), their
# standard error is 0 and the studentized interval is undefined.
STUDENTIZED_MIN_N = 4
# Below 8 values the bootstrap-t is computable but not shown by default: a resample of few
# values often has a tiny spread, its t* explodes, and the interval runs far past the data. Of
# 2,000 samples of 5 normal values, 16% of the intervals reached more than one sample range
# beyond the data (63% at 4, 2.3% at 6, 0% at 8), 31% of lognormal ones and 71% where one seed
# in five collapses; at 8 it was at most 2.1% except where seeds collapse (bench/coverage.py
# --only small-n; docs/statistics.md, "Intervals at small n").
BOOTSTRAP_T_MIN_N = 8
#: Why the bootstrap-t interval is null below :data:`BOOTSTRAP_T_MIN_N` values.
FEW_FOR_BOOTSTRAP_T = (f"the bootstrap-t interval is null below {BOOTSTRAP_T_MIN_N} values: its "
                       "studentized resamples explode at few values (at 5 normal values 16% of its "
                       "intervals reach more than one sample range beyond the data; docs/statistics.md); "
                       "the t interval stands")


def few_for_bootstrap_t(labels: list[str], most: int = 8) -> str:
    """One warning naming every sample whose bootstrap-t interval is null for having fewer than
    :data:`BOOTSTRAP_T_MIN_N` values: ``"t/a value (n=5), t/b value (n=5): the bootstrap-t …"``."""
    shown = ", ".join(labels[:most]) + (f" and {len(labels) - most} more" if len(labels) > most else "")
    return f"{shown}: {FEW_FOR_BOOTSTRAP_T}"

# Largest number of resampled values held in memory at once (float64: 128 MiB).
_CHUNK_ELEMENTS = 1 << 24
# Values per chunk of the studentized bootstrap's work arrays: small enough to stay in cache.
_CACHE_ELEMENTS = 1 << 17


def _rng(seed: SeedLike) -> np.random.Generator:
    return np.random.default_rng(seed)


def _chunks(reps: int, per_rep: int, limit: int = _CHUNK_ELEMENTS) -> list[int]:
    size = max(1, limit // max(per_rep, 1))
    return [min(size, reps - start) for start in range(0, reps, size)]


def bootstrap_distribution(
    x: np.ndarray, statistic: Statistic = np.mean, reps: int = 10_000, seed: SeedLike = 0
) -> np.ndarray:
    """Bootstrap distribution of ``statistic`` over one sample, or a batch of samples.

    Args:
        x: shape ``(n,)``, or ``(..., n)`` for a batch of samples of equal size
            (each resampled with the same index draws), finite values.
        statistic: ``f(samples, axis=-1)`` reducing the last axis.
        reps: number of resamples.
        seed: seed of the numpy Generator.

    Returns:
        shape ``(reps,)``, or ``(..., reps)`` for a batch: the statistic of each
        resample (drawn with replacement, size ``n``).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    rng = _rng(seed)
    parts = [
        statistic(x[..., rng.integers(0, n, size=(m, n))], axis=-1)
        for m in _chunks(reps, x.size)
    ]
    return np.concatenate(parts, axis=-1)


def _percentile_bounds(
    dist: np.ndarray, confidence: float, axis: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """Both ends of the central ``confidence`` interval of ``dist`` along ``axis`` (the resamples)."""
    alpha = 1.0 - confidence
    low, high = np.percentile(dist, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=axis)
    return low, high


def percentile_interval(
    dist: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Percentile interval of a bootstrap distribution.

    ``dist``: shape ``(reps,)`` (returns two floats) or ``(..., reps)`` (returns two
    arrays of shape ``(...)``).
    """
    low, high = _percentile_bounds(dist, confidence)
    if np.ndim(low) == 0:
        return float(low), float(high)
    return low, high


def _jackknife(x: np.ndarray, statistic: Statistic) -> np.ndarray:
    """Leave-one-out values of ``statistic``: shape ``(n,)``."""
    n = x.shape[0]
    keep = ~np.eye(n, dtype=bool)
    return np.asarray(statistic(np.broadcast_to(x, (n, n))[keep].reshape(n, n - 1), axis=-1))


def _bca_interval(
    theta_hat: float, dist: np.ndarray, jackknives: list[np.ndarray], confidence: float
) -> tuple[float, float]:
    """BCa interval of ``dist`` (shape ``(reps,)``): its percentiles at the levels adjusted for
    bias and acceleration (Efron & Tibshirani, eq. 14.10, 15.36)."""
    proportion = (np.count_nonzero(dist < theta_hat) + np.count_nonzero(dist <= theta_hat)) / (
        2 * dist.shape[0]
    )
    z0 = float(ndtri(proportion))
    num = 0.0
    den = 0.0
    for jack in jackknives:
        n = jack.shape[0]
        u = (n - 1) * (jack.mean() - jack)
        num += float(np.sum(u**3)) / n**3
        den += float(np.sum(u**2)) / n**2
    a = num / (6 * den**1.5) if den > 0 else 0.0
    z = float(ndtri((1 - confidence) / 2))
    levels = [100 * float(ndtr(z0 + (z0 + zq) / (1 - a * (z0 + zq)))) for zq in (z, -z)]
    low, high = np.percentile(dist, levels)
    return float(low), float(high)


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}")


def resample_counts(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
    """How often each of ``n`` values is drawn in each of ``reps`` resamples: ``(reps, n)``.

    A resample's mean and sum of squares are then matrix products, so any number of
    samples of the same size share one set of draws.
    """
    idx = rng.integers(0, n, size=(reps, n))
    flat = (np.arange(reps)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=reps * n).reshape(reps, n).astype(float)


def _order_statistics(t: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``α/2`` and ``1-α/2`` quantiles of ``t`` along its last axis, as order statistics.

    The ``q``-quantile of ``B`` resampled values is the ``⌈qB⌉``-th smallest (the inverse
    of their empirical distribution function; Efron & Tibshirani 1993, §12.5); two
    selections, no sort. ``t`` is reordered in place. NaN (0/0) must be replaced first.
    """
    reps = t.shape[-1]
    alpha = 1.0 - confidence
    k_low = min(max(int(np.ceil(reps * alpha / 2)) - 1, 0), reps - 1)
    k_high = min(max(int(np.ceil(reps * (1 - alpha / 2))) - 1, 0), reps - 1)
    # Two single selections: numpy's partition with several kth is several times slower
    # than one (measured, numpy 2.4); after the first, the upper order statistic is among
    # the values right of k_low.
    t.partition(k_low, axis=-1)
    low = t[..., k_low].copy()
    right = t[..., k_low + 1 :]
    if k_high <= k_low or right.shape[-1] == 0:
        return low, t[..., k_high]
    right.partition(k_high - k_low - 1, axis=-1)
    return low, right[..., k_high - k_low - 1]


def _studentized_t(centred: np.ndarray, counts: np.ndarray, out: np.ndarray) -> None:
    """``t* / √(n-1)`` of each resample, written into ``out``: ``(samples, reps)``.

    ``centred``: samples minus their means, ``(samples, n)``; ``counts``: ``(reps, n)``.
    With ``S1 = Σ wᵢ cᵢ`` and ``S2 = Σ wᵢ cᵢ²`` over a resample's draw counts ``w``,
    ``t* = (x̄* - x̄) / (s*/√n) = √(n-1) · S1 / √(n·S2 - S1²)``; the constant √(n-1) is
    applied to the two quantiles only. A resample of one repeated value has
    ``n·S2 = S1²``: t* is ±inf, or 0/0 (set to 0) when that value is the mean.
    """
    n = centred.shape[-1]
    s1 = centred @ counts.T
    s2 = (centred * centred) @ counts.T
    s2 *= n
    s2 -= s1 * s1
    np.maximum(s2, 0.0, out=s2)
    np.sqrt(s2, out=s2)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(s1, s2, out=out)
    out[np.isnan(out)] = 0.0


def _t_star(centred: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Resampled mean shift and its squared standard error: ``(samples, reps)`` each.

    ``centred``: samples minus their means, ``(samples, n)``; ``counts``: ``(reps, n)``.
    """
    n = centred.shape[-1]
    shift = centred @ counts.T / n
    second = (centred**2) @ counts.T / n
    var = np.maximum(second - shift**2, 0.0) * (n / (n - 1))
    return shift, var / n


def _studentized_bounds(shift: np.ndarray, se2: np.ndarray, confidence: float
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles ``(q_low, q_high)`` of ``t* = shift / se*`` along the last axis."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = shift / np.sqrt(se2)
    # A resample of one repeated value has se* = 0: t* is ±inf (or 0/0 when it equals the mean).
    t[np.isnan(t)] = 0.0
    return _order_statistics(t, confidence)


@one_blas_thread
def studentized_mean_ci(
    x: np.ndarray, reps: int = 10_000, confidence: float = 0.95, seed: SeedLike = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap-t (studentized) CI of the mean, for one sample or a batch of samples.

    ``t* = (x̄* - x̄) / (s*/√n)`` over resamples, and the interval is
    ``[x̄ - q_{1-α/2}(t*) · s/√n, x̄ - q_{α/2}(t*) · s/√n]`` (Efron & Tibshirani 1993,
    §12.5), standard deviations with ddof = 1 and the quantiles the ``⌈qB⌉``-th smallest
    of the ``B`` values. Every sample of the batch is resampled with the same draws, so
    a batch costs two matrix products per chunk of resamples.

    Args:
        x: shape ``(n,)`` or ``(..., n)``, finite, ``n >= STUDENTIZED_MIN_N``.
        reps, confidence, seed: resamples, coverage, seed of the numpy Generator.

    Returns:
        ``(low, high)``, arrays of shape ``x.shape[:-1]`` (0-d for one sample); ±inf where
        too many resamples repeat one value (never at ``n >= 4`` in practice).
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    if n < STUDENTIZED_MIN_N:
        raise ValueError(f"the studentized interval needs n >= {STUDENTIZED_MIN_N}, got {n}")
    flat = x.reshape(-1, n)
    mean = flat.mean(axis=1)
    centred = flat - mean[:, None]
    se = np.sqrt(np.sum(centred**2, axis=1) / (n - 1) / n)
    rng = _rng(seed)
    t = np.empty((flat.shape[0], reps))
    start = 0
    # Small chunks keep each step's arrays in cache (measured: about 2x faster than
    # chunks of tens of megabytes); the per-chunk Python overhead stays small.
    for m in _chunks(reps, flat.shape[0] * 3 + n, _CACHE_ELEMENTS):
        _studentized_t(centred, resample_counts(rng, m, n), t[:, start : start + m])
        start += m
    q_low, q_high = _order_statistics(t, confidence)
    scale = np.sqrt(n - 1) * se
    with np.errstate(invalid="ignore"):
        low, high = mean - q_high * scale, mean - q_low * scale
    return low.reshape(x.shape[:-1]), high.reshape(x.shape[:-1])


@one_blas_thread
def _studentized_diff_ci(
    b: np.ndarray, c: np.ndarray, reps: int, confidence: float, seed: SeedLike
) -> tuple[float, float]:
    """Two-sample bootstrap-t CI of ``mean(c) - mean(b)`` with the Welch standard error."""
    nb, nc = b.shape[0], c.shape[0]
    rng = _rng(seed)
    cb, cc = (b - b.mean())[None, :], (c - c.mean())[None, :]
    shifts, se2s = [], []
    for m in _chunks(reps, nb + nc):
        sb, vb = _t_star(cb, resample_counts(rng, m, nb))
        sc, vc = _t_star(cc, resample_counts(rng, m, nc))
        shifts.append(sc - sb)
        se2s.append(vb + vc)
    q_low, q_high = _studentized_bounds(np.concatenate(shifts, axis=1),
                                        np.concatenate(se2s, axis=1), confidence)
    diff = float(c.mean() - b.mean())
    se = float(np.sqrt(b.var(ddof=1) / nb + c.var(ddof=1) / nc))
    return diff - float(q_high[0]) * se, diff - float(q_low[0]) * se


def bootstrap_ci(
    x: np.ndarray,
    statistic: Statistic = np.mean,
    reps: int = 10_000,
    confidence: float = 0.95,
    method: Method = "studentized",
    seed: SeedLike = 0,
) -> tuple[float, float]:
    """Bootstrap confidence interval of ``statistic`` over one sample.

    Args:
        x: shape ``(n,)``, finite values, ``n >= 2`` (``n >= 4`` for ``"studentized"``).
        statistic: ``f(samples, axis=-1)``; ``"studentized"`` is of the mean only.
        reps: number of resamples.
        confidence: coverage, e.g. 0.95.
        method: ``"studentized"`` (bootstrap-t, :func:`studentized_mean_ci`; the one whose
            coverage holds at small n), ``"percentile"`` or ``"bca"`` (bias-corrected and
            accelerated, acceleration from the jackknife).
        seed: seed of the numpy Generator.

    Returns:
        ``(low, high)``. When every value of ``x`` is equal the interval is that value twice.
    """
    _check_method(method)
    x = np.asarray(x, dtype=float)
    if method == "studentized":
        if statistic is not np.mean:
            raise ValueError("the studentized interval is of the mean; use percentile or bca")
        if np.all(x == x[0]):
            return float(x[0]), float(x[0])
        t_low, t_high = studentized_mean_ci(x, reps, confidence, seed)
        return float(t_low), float(t_high)
    dist = bootstrap_distribution(x, statistic, reps, seed)
    if method == "percentile":
        low, high = percentile_interval(dist, confidence)
        return float(low), float(high)
    if np.all(dist == dist[0]):
        return float(dist[0]), float(dist[0])
    theta_hat = float(statistic(x, axis=-1))
    return _bca_interval(theta_hat, dist, [_jackknife(x, statistic)], confidence)


def bootstrap_mean_diff_ci(
    baseline: np.ndarray,
    candidate: np.ndarray,
    paired: bool,
    reps: int = 10_000,
    confidence: float = 0.95,
    method: Method = "studentized",
    seed: SeedLike = 0,
) -> tuple[float, float]:
    """Bootstrap CI of ``mean(candidate) - mean(baseline)``.

    Args:
        baseline: shape ``(n_b,)``.
        candidate: shape ``(n_c,)``; when ``paired``, ``n_c == n_b`` and row ``i`` of
            both is the same seed, and the differences are resampled as pairs.
        paired: resample pairs (one index array) or each sample on its own.
        reps, confidence, method, seed: as in :func:`bootstrap_ci`; unpaired
            ``"studentized"`` studentizes with the Welch standard error
            ``√(s_b²/n_b + s_c²/n_c)`` and needs ``n >= 4`` on each side.

    Returns:
        ``(low, high)``.
    """
    _check_method(method)
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if paired:
        return bootstrap_ci(c - b, np.mean, reps, confidence, method, seed)
    if method == "studentized":
        if min(b.shape[0], c.shape[0]) < STUDENTIZED_MIN_N:
            raise ValueError(f"the studentized interval needs n >= {STUDENTIZED_MIN_N} a side")
        if np.all(b == b[0]) and np.all(c == c[0]):
            diff = float(c[0] - b[0])
            return diff, diff
        return _studentized_diff_ci(b, c, reps, confidence, seed)
    rng = _rng(seed)
    parts = []
    for m in _chunks(reps, b.shape[0] + c.shape[0]):
        ib = rng.integers(0, b.shape[0], size=(m, b.shape[0]))
        ic = rng.integers(0, c.shape[0], size=(m, c.shape[0]))
        parts.append(c[ic].mean(axis=-1) - b[ib].mean(axis=-1))
    dist = np.concatenate(parts)
    if method == "percentile" or np.all(dist == dist[0]):
        low, high = percentile_interval(dist, confidence)
        return float(low), float(high)
    theta_hat = float(c.mean() - b.mean())
    # Jackknife of a difference of means: leaving out one value of a sample moves
    # only that sample's mean, so each sample contributes its own jackknife values.
    jb = c.mean() - _jackknife(b, np.mean)
    jc = _jackknife(c, np.mean) - b.mean()
    return _bca_interval(theta_hat, dist, [jb, jc], confidence)


def stratified_bootstrap(
    scores: np.ndarray,
    statistic: Statistic,
    reps: int = 10_000,
    seed: SeedLike = 0,
) -> np.ndarray:
    """Bootstrap distribution of an across-task statistic, resampling runs within each task.

    Args:
        scores: shape ``(runs, tasks)``. Tasks with fewer runs are padded with NaN at
            the end of their column; a task's resamples draw only from its own runs
            and keep its NaN padding, so statistics must ignore NaN (see
            :mod:`benchlab.stats.aggregate`).
        statistic: ``f(scores)`` mapping shape ``(k, runs, tasks)`` to ``(k,)`` or
            ``(k, m)``.
        reps: number of resamples.
        seed: seed of the numpy Generator.

    Returns:
        shape ``(reps,)`` or ``(reps, m)``: the statistic of each stratified resample.
    """
    scores = np.asarray(scores, dtype=float)
    runs, tasks = scores.shape
    counts = np.sum(~np.isnan(scores), axis=0)  # (tasks,)
    flat = scores.ravel()
    cols = np.arange(tasks)
    rng = _rng(seed)
    parts = []
    if np.all(counts == runs):
        # Every task has all its runs: draw row indices directly, gather by flat index.
        for m in _chunks(reps, runs * tasks):
            rows = rng.integers(0, runs, size=(m, runs, tasks))
            parts.append(statistic(flat[rows * tasks + cols]))
        return np.concatenate(parts)
    # A valid row index for every slot; padding slots keep pointing at padding.
    pad = np.arange(runs)[:, None] >= counts[None, :]  # (runs, tasks)
    for m in _chunks(reps, runs * tasks):
        u = rng.random(size=(m, runs, tasks))
        rows = np.floor(u * np.maximum(counts, 1)).astype(np.intp)
        rows = np.where(pad, np.arange(runs)[:, None], rows)
        parts.append(statistic(flat[rows * tasks + cols]))
    return np.concatenate(parts)


__all__ = [
    "BOOTSTRAP_T_MIN_N",
    "FEW_FOR_BOOTSTRAP_T",
    "METHODS",
    "STUDENTIZED_MIN_N",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_mean_diff_ci",
    "few_for_bootstrap_t",
    "percentile_interval",
    "resample_counts",
    "stratified_bootstrap",
    "studentized_mean_ci",
]
