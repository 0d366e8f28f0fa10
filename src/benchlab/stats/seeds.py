"""How many seeds: the coefficient of variation of the mean vs N, and power analysis.

CV of the mean at N seeds is ``CV(N) = s / (√N · |x̄|)``, with ``s`` the pilot's
sample standard deviation (ddof = 1: the pilot is a sample, and ddof = 0 would
understate the spread, by 9% at 6 pilot seeds) and ``x̄`` its mean. This is the
value that subsampling N runs with replacement estimates, up to ddof and Monte
Carlo error, computed exactly.

Power is that of the paired design: a two-sided one-sample t-test on the
per-seed differences, whose statistic follows a noncentral t with ``n-1``
degrees of freedom and noncentrality ``d_z · √n`` (``d_z`` = mean difference /
sd of differences).
"""

from __future__ import annotations

import numpy as np

from benchlab.stats.bootstrap import SeedLike
from benchlab.stats.tolerance import is_negligible


def cv_of_mean(
    values: np.ndarray,
    ns: np.ndarray | None = None,
    reps: int = 2_000,
    seed: SeedLike = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficient of variation of the mean of N runs, for each N: ``s / (√N · |x̄|)``.

    Args:
        values: one number per pilot run, shape ``(n,)``; NaN are dropped.
        ns: the sample sizes, shape ``(k,)``; default ``1..n``.
        reps, seed: accepted for compatibility; the closed form needs no resampling.

    Returns:
        ``(ns, cv)``, both shape ``(k,)``; ``cv`` is NaN where the mean is 0 or, with a
        single pilot value, where no standard deviation exists.
    """
    del reps, seed
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.shape[0] == 0:
        raise ValueError("cv_of_mean needs at least one value")
    ns = np.arange(1, x.shape[0] + 1) if ns is None else np.asarray(ns, dtype=int)
    centre = abs(float(x.mean()))
    if x.shape[0] < 2 or centre == 0.0:
        return ns, np.full(ns.shape, np.nan)
    spread = float(x.std(ddof=1))
    return ns, spread / (np.sqrt(ns) * centre)


def smallest_n(ns: np.ndarray, cv: np.ndarray, threshold: float = 0.05) -> int | None:
    """The smallest N whose CV is below ``threshold`` (``None`` if none is)."""
    below = np.flatnonzero(np.asarray(cv) < threshold)
    return int(np.asarray(ns)[below[0]]) if below.size else None


def paired_power(n: np.ndarray | int, effect: float, alpha: float = 0.05) -> np.ndarray:
    """Power of the two-sided paired t-test with ``n`` pairs for the standardised effect ``d_z``.

    ``power = P(T > t_{1-α/2}) + P(T < -t_{1-α/2})`` with ``T ~ nct(n-1, d_z·√n)``.
    ``n``: int or array of shape ``(k,)`` (each ``>= 2``); returns the same shape.
    """
    from scipy import stats as sps

    n = np.asarray(n, dtype=float)
    df = n - 1
    crit = sps.t.ppf(1 - alpha / 2, df)
    nc = effect * np.sqrt(n)
    # The lower tail as the upper tail of -T: scipy's nct.cdf far in the tail opposite a large
    # noncentrality returns NaN (n = 3, d_z = 5.57), which dropped that n from the search.
    upper = sps.nct.sf(crit, df, nc)
    lower = sps.nct.sf(crit, df, -nc)
    return np.nan_to_num(upper, nan=0.0) + np.nan_to_num(lower, nan=0.0)


def seeds_for_power(
    effect: float, alpha: float = 0.05, power: float = 0.8, max_n: int = 100_000
) -> int | None:
    """Smallest number of paired seeds ``n >= 2`` with :func:`paired_power` ``>= power``.

    Args:
        effect: ``d_z``, the mean paired difference over the sd of the differences
            (its sign does not matter).
        alpha: two-sided significance level.
        power: wanted probability of detecting the effect.
        max_n: give up above this (returns ``None``).
    """
    from scipy import stats as sps

    d = abs(float(effect))
    if d == 0.0 or not np.isfinite(d):
        return None
    # The normal approximation is a lower bound; search upward from just below it.
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    start = max(2, int((z / d) ** 2) - 2)
    if paired_power(start, d, alpha) >= power:  # the approximation overshot
        start = 2
    lo = start
    while lo <= max_n:
        ns = np.arange(lo, min(lo + 256, max_n + 1))
        ok = np.flatnonzero(paired_power(ns, d, alpha) >= power)
        if ok.size:
            return int(ns[ok[0]])
        lo += 256
    return None


def effect_from_pilot(baseline: np.ndarray, candidate: np.ndarray) -> float | None:
    """``d_z`` estimated from paired pilot runs: mean(c - b) / sd(c - b) (ddof = 1).

    ``baseline``, ``candidate``: shape ``(n,)``, aligned by seed; pairs with a NaN on
    either side are dropped (:func:`benchlab.stats.power_analysis` says how many).
    ``None`` with fewer than 2 pairs or when sd(c - b) is zero up to rounding
    (:mod:`benchlab.stats.tolerance`): a constant offset has no finite d_z.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    keep = ~(np.isnan(b) | np.isnan(c))
    b, c = b[keep], c[keep]
    d = c - b
    if d.shape[0] < 2:
        return None
    sd = float(d.std(ddof=1))
    return None if is_negligible(sd, b, c) else float(d.mean()) / sd


def effect_interval(effect: float, pairs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Confidence interval of ``d_z`` estimated from ``pairs`` pilot pairs.

    ``t = d_z·√n`` follows a noncentral t with ``n - 1`` degrees of freedom and noncentrality
    ``δ = d_z·√n``; the interval inverts it (the ``δ`` at which the observed ``t`` is the
    ``1 - α/2`` and the ``α/2`` quantile), divided by ``√n``. From few pairs it is wide: a
    pilot ``d_z`` of 1.41 from 4 pairs is compatible with effects near 0.
    """
    from scipy import optimize
    from scipy import stats as sps

    n = int(pairs)
    t = float(effect) * np.sqrt(n)
    df = n - 1
    alpha = 1 - confidence

    def at(q: float) -> float:
        # sf(t; δ) increases with δ: find the δ where it equals q.
        lo, hi = t - 50 - 10 * abs(t), t + 50 + 10 * abs(t)
        return float(optimize.brentq(lambda nc: sps.nct.sf(t, df, nc) - q, lo, hi))

    return at(alpha / 2) / np.sqrt(n), at(1 - alpha / 2) / np.sqrt(n)


def seeds_for_cv(cv_one: float, threshold: float) -> int | None:
    """Seeds for the CV of the mean, ``cv_one/√N``, to reach ``threshold``: ``⌈(cv_one/threshold)²⌉``.

    ``cv_one``: the pilot's std / |mean| (the CV of one seed). ``None`` when it is undefined.
    """
    if not np.isfinite(cv_one) or threshold <= 0:
        return None
    return max(2, int(np.ceil((cv_one / threshold) ** 2 - 1e-9)))


__all__ = ["cv_of_mean", "effect_from_pilot", "effect_interval", "paired_power", "seeds_for_cv",
           "seeds_for_power", "smallest_n"]
