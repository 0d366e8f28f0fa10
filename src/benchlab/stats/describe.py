"""Per-(task, config) description of a sample of seeds, and ranking of configs.

Undefined values are ``None`` and come with a warning in ``Description.warnings``;
nothing here raises on n=1 or zero variance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.special import stdtrit

from benchlab.stats.bootstrap import Method, SeedLike, bootstrap_ci

Goal = Literal["max", "min"]


@dataclass(frozen=True)
class Description:
    """What one sample of seeds says about one (task, config, metric)."""

    n: int
    mean: float | None
    std: float | None
    sem: float | None
    median: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    boot_ci_low: float | None
    boot_ci_high: float | None
    high_variance: bool | None
    warnings: list[str] = field(default_factory=list)


def t_interval(x: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean: ``mean ± t_{1-α/2, n-1} · s/√n``.

    Args:
        x: shape ``(n,)``, ``n >= 2``.

    Returns:
        ``(low, high)``; both equal the mean when ``s = 0``.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    mean = float(x.mean())
    sem = float(x.std(ddof=1)) / np.sqrt(n)
    half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * sem  # Student t quantile
    return mean - half, mean + half


def is_high_variance(std: float, mean: float, threshold: float = 0.01) -> bool:
    """``std > threshold · |mean|`` (a non-zero std around a zero mean is high variance)."""
    return bool(std > threshold * abs(mean))


def describe(
    x: np.ndarray,
    confidence: float = 0.95,
    reps: int = 10_000,
    method: Method = "percentile",
    variance_threshold: float = 0.01,
    seed: SeedLike = 0,
    label: str = "",
) -> Description:
    """Describe one sample: n, mean, std (ddof=1), sem, median, min, max, t and bootstrap CIs.

    Args:
        x: shape ``(n,)``. NaN and infinite values are dropped with a warning.
        confidence: coverage of both intervals.
        reps: bootstrap resamples.
        method: bootstrap interval, ``"percentile"`` or ``"bca"``.
        variance_threshold: flag ``std > variance_threshold · |mean|``.
        seed: seed of the bootstrap.
        label: names the sample in warnings, e.g. ``"digits/mlp accuracy"``.
    """
    x = np.asarray(x, dtype=float)
    warnings: list[str] = []
    where = f"{label}: " if label else ""
    bad = ~np.isfinite(x)
    if bad.any():
        warnings.append(f"{where}{int(bad.sum())} NaN or infinite value(s) dropped")
        x = x[~bad]
    n = int(x.shape[0])
    if n == 0:
        warnings.append(f"{where}no values; every statistic is null")
        return Description(0, None, None, None, None, None, None, None, None, None, None, None,
                           warnings)
    mean = float(x.mean())
    median, lo, hi = float(np.median(x)), float(x.min()), float(x.max())
    if n == 1:
        warnings.append(f"{where}n=1: std, sem, confidence intervals and variance flag are null")
        return Description(1, mean, None, None, median, lo, hi, None, None, None, None, None,
                           warnings)
    std = float(x.std(ddof=1))
    sem = std / np.sqrt(n)
    if std == 0.0:
        warnings.append(f"{where}all {n} values are equal: zero variance, point intervals")
        return Description(n, mean, 0.0, 0.0, median, lo, hi, mean, mean, mean, mean, False,
                           warnings)
    ci_low, ci_high = t_interval(x, confidence)
    b_low, b_high = bootstrap_ci(x, np.mean, reps, confidence, method, seed)
    return Description(
        n, mean, std, sem, median, lo, hi, ci_low, ci_high, b_low, b_high,
        is_high_variance(std, mean, variance_threshold), warnings,
    )


def rank(
    means: Sequence[float | None],
    ci_low: Sequence[float | None],
    ci_high: Sequence[float | None],
    goal: Goal = "max",
) -> list[int | None]:
    """Rank configs by mean, best first, with ties to the best where CIs overlap.

    Args:
        means, ci_low, ci_high: one entry per config (``None`` where undefined).
        goal: ``"max"`` (higher is better) or ``"min"``.

    Returns:
        One rank per config: ``1`` for the best config and for every config whose
        interval overlaps the best one's; otherwise its 1-based position in the
        order of means. ``None`` where the mean is undefined. A config without an
        interval (n=1) is never counted as tied.
    """
    if goal not in ("max", "min"):
        raise ValueError(f"goal must be 'max' or 'min', got {goal!r}")
    defined = [i for i, m in enumerate(means) if m is not None and np.isfinite(m)]
    sign = -1.0 if goal == "max" else 1.0
    order = sorted(defined, key=lambda i: sign * float(means[i]))  # type: ignore[arg-type]
    ranks: list[int | None] = [None] * len(means)
    if not order:
        return ranks
    best = order[0]
    b_lo, b_hi = ci_low[best], ci_high[best]
    for position, i in enumerate(order, start=1):
        lo, hi = ci_low[i], ci_high[i]
        overlaps = (
            None not in (b_lo, b_hi, lo, hi)
            and float(lo) <= float(b_hi)  # type: ignore[arg-type]
            and float(b_lo) <= float(hi)  # type: ignore[arg-type]
        )
        ranks[i] = 1 if (i == best or overlaps) else position
    return ranks


__all__ = ["Description", "Goal", "describe", "is_high_variance", "rank", "t_interval"]
