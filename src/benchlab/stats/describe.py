"""Per-(task, config) description of a sample of seeds, and ranking of configs.

Undefined values are ``None`` and come with a warning in ``Description.warnings``;
nothing here raises on n=1 or zero variance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
from scipy.special import ndtri, stdtrit

from benchlab.names.benchmark_info import goal_of
from benchlab.stats.bootstrap import (
    BOOTSTRAP_T_MIN_N,
    FEW_FOR_BOOTSTRAP_T,
    STUDENTIZED_MIN_N,
    Method,
    SeedLike,
    bootstrap_ci,
)
from benchlab.stats.tolerance import RELATIVE_TOLERANCE, is_negligible

if TYPE_CHECKING:
    import pandas as pd

Goal = Literal["max", "min"]

#: Why a bootstrap-t interval is null: tied or integer values, so that some resamples
#: repeat one value, have no spread, and make the studentized statistic infinite.
UNBOUNDED_BOOTSTRAP_T = ("bootstrap-t interval undefined (null): too many resamples of these "
                         "tied values have no spread, which makes the studentized statistic "
                         "infinite; the t interval stands")


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
        x: shape ``(n,)``, ``n >= 2``, or ``(..., n)`` for a batch of samples.

    Returns:
        ``(low, high)``: floats for one sample, arrays of shape ``x.shape[:-1]`` for a
        batch; both equal the mean when ``s = 0``. ``s`` has ddof = 1.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    mean = x.mean(axis=-1)
    sem = x.std(axis=-1, ddof=1) / np.sqrt(n)
    half = stdtrit(n - 1, 0.5 + confidence / 2) * sem  # Student t quantile
    if x.ndim == 1:
        return float(mean - half), float(mean + half)
    return mean - half, mean + half


def normal_interval(value: float, se: float, confidence: float = 0.95) -> tuple[float, float]:
    """Normal interval of a value reported with its own standard error: ``value ± z_{1-α/2} · se``.

    For a one-seed result whose evaluation gave a standard error (lm-evaluation-harness's
    ``*_stderr``); ``z`` is the exact normal quantile (1.959964 for 95%). A bounded metric's
    interval is then cut at its range (:func:`benchlab.stats.accounting.bound_interval`).
    """
    half = float(ndtri(0.5 + confidence / 2)) * se
    return float(value - half), float(value + half)


def median_member(values: Sequence[float], goal: Goal = "max") -> int | None:
    """The index of the sample's median member: the seed whose run stands for the sample.

    Args:
        values: shape ``(n,)``, one value per member (seed); NaN and infinite ones are skipped.
        goal: ``"max"`` or ``"min"``; of an even count, the worse of the two middle members
            for the goal is taken (never the flattering one).

    Returns:
        An index into ``values`` (equal values keep their order there, so the choice is
        deterministic); None when no value is finite.
    """
    if goal not in ("max", "min"):
        raise ValueError(f"goal must be 'max' or 'min', got {goal!r}")
    x = np.asarray(values, dtype=float)
    finite = np.flatnonzero(np.isfinite(x))
    if finite.size == 0:
        return None
    # Worst first: ascending for max, descending for min; stable, so equal values keep their order.
    order = finite[np.argsort(x[finite] if goal == "max" else -x[finite], kind="stable")]
    return int(order[(finite.size - 1) // 2])


def is_high_variance(std: float, mean: float, threshold: float = 0.01) -> bool:
    """``std > threshold · |mean|`` (a non-zero std around a zero mean is high variance)."""
    return bool(std > threshold * abs(mean))


def describe(
    x: np.ndarray,
    confidence: float = 0.95,
    reps: int = 10_000,
    method: Method = "studentized",
    variance_threshold: float = 0.01,
    seed: SeedLike = 0,
    label: str = "",
) -> Description:
    """Describe one sample: n, mean, std (ddof=1), sem, median, min, max, t and bootstrap CIs.

    Args:
        x: shape ``(n,)``. NaN and infinite values are dropped with a warning.
        confidence: coverage of both intervals.
        reps: bootstrap resamples; 0 leaves the bootstrap interval null (for callers that
            compute it for many samples at once, as :func:`benchlab.stats.analyze` does).
        method: bootstrap interval: ``"studentized"`` (bootstrap-t; null below
            ``n = 8``, :data:`~benchlab.stats.bootstrap.BOOTSTRAP_T_MIN_N`, with a warning),
            ``"percentile"`` or ``"bca"``.
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
    if is_negligible(std, x):
        # Equal up to rounding (e.g. 0.1 + 0.2 vs 0.3 read from CSV): zero observed spread.
        # That is not certainty (the next seed may differ), and no interval of zero width
        # covers 95%: the spread is stated as zero and the intervals are null.
        warnings.append(f"{where}all {n} values are equal (up to rounding): zero observed "
                        "spread, which is not certainty; no confidence interval (null)")
        return Description(n, mean, 0.0, 0.0, median, lo, hi, None, None, None, None, False,
                           warnings)
    ci_low, ci_high = t_interval(x, confidence)
    b_low = b_high = None
    if method == "studentized" and n < STUDENTIZED_MIN_N:
        warnings.append(f"{where}n={n}: too few values for the bootstrap-t interval (null; the "
                        "t interval stands)")
    elif method == "studentized" and n < BOOTSTRAP_T_MIN_N:
        if reps > 0:  # a caller batching the intervals (reps = 0) names all such samples in one warning
            warnings.append(f"{where}n={n}: {FEW_FOR_BOOTSTRAP_T}")
    elif reps > 0:
        b_low, b_high = bootstrap_ci(x, np.mean, reps, confidence, method, seed)
        if not (np.isfinite(b_low) and np.isfinite(b_high)):
            b_low = b_high = None
            warnings.append(f"{where}{UNBOUNDED_BOOTSTRAP_T}")
    return Description(
        n, mean, std, sem, median, lo, hi, ci_low, ci_high, b_low, b_high,
        is_high_variance(std, mean, variance_threshold), warnings,
    )


def rank(
    means: Sequence[float | None],
    ci_low: Sequence[float | None],
    ci_high: Sequence[float | None],
    goal: Goal = "max",
    separated: Sequence[bool] | None = None,
) -> list[int | None]:
    """Rank configs by mean, best first, with ties to the best where CIs overlap.

    Args:
        means, ci_low, ci_high: one entry per config (``None`` where undefined).
        goal: ``"max"`` (higher is better) or ``"min"``.

    Returns:
        One rank per config: ``1`` for the best config and for every config whose
        interval overlaps the best one's; otherwise one more than the number of
        configs with a strictly better mean (the ``min`` method: configs whose means
        are equal, up to rounding, share a rank whatever the input order). ``None``
        where the mean is undefined. A config without an interval (n=1) is never
        counted as tied through its interval. ``separated[i]`` True: the comparison of config
        ``i`` with the best one (paired by seed where they share seeds) is significant, so it is
        not tied whatever its interval (paired seeds can separate configs whose own intervals
        overlap: a paired p of 9e-7 beside "tied" contradicted itself).
    """
    if goal not in ("max", "min"):
        raise ValueError(f"goal must be 'max' or 'min', got {goal!r}")
    defined = [i for i, m in enumerate(means) if m is not None and np.isfinite(m)]
    sign = -1.0 if goal == "max" else 1.0
    order = sorted(defined, key=lambda i: sign * float(means[i]))  # type: ignore[arg-type]
    ranks: list[int | None] = [None] * len(means)
    if not order:
        return ranks
    values = np.array([sign * float(means[i]) for i in order])  # type: ignore[arg-type]
    tol = RELATIVE_TOLERANCE * float(np.max(np.abs(values)))
    # 1 + how many means are better by more than rounding: equal means share a rank.
    positions = 1 + np.searchsorted(values, values - tol, side="left")
    best = order[0]
    b_lo, b_hi = ci_low[best], ci_high[best]
    for position, i in zip(positions.tolist(), order, strict=True):
        lo, hi = ci_low[i], ci_high[i]
        overlaps = (
            None not in (b_lo, b_hi, lo, hi)
            and float(lo) <= float(b_hi)  # type: ignore[arg-type]
            and float(b_lo) <= float(hi)  # type: ignore[arg-type]
        )
        apart = separated is not None and bool(separated[i])
        ranks[i] = 1 if (i == best or (overlaps and not apart)) else int(position)
    return ranks


def separated_from_best(configs: Sequence[str], means: Sequence[float | None],
                        values: Mapping[str, Mapping[object, float]], goal: Goal = "max",
                        alpha: float = 0.05, bounds: tuple[float, float] | None = None,
                        normal: bool = False) -> list[bool]:
    """For each config, whether its comparison with the best-mean config is significant at ``alpha``
    by the rule of the default verdict (:mod:`benchlab.stats.verdict`): the deciding test of
    :func:`benchlab.stats.compare.compare` (paired by seed where most seeds are shared, else Welch),
    confirmed by the betting test valid in the metric's range ``bounds``, or standing alone where
    ``normal`` (the metric declares ``assume: normal``), or the exact rank test where the t-test is
    undefined. Without any of these no verdict is given, so nothing separates a config from the
    best. What :func:`rank` needs so that "tied" never contradicts the verdicts.
    ``values``: ``{config: {seed: value}}``."""
    from benchlab.stats.compare import deciding_pvalue, shared_seeds
    from benchlab.stats.verdict import RANK_TESTS

    defined = [i for i, m in enumerate(means) if m is not None and np.isfinite(m)]
    out = [False] * len(configs)
    if not defined:
        return out
    best = (max if goal == "max" else min)(defined, key=lambda i: float(means[i]))  # type: ignore[arg-type]
    base = values.get(configs[best], {})
    for i, config in enumerate(configs):
        other = values.get(config, {})
        if i == best or not base or not other:
            continue
        paired, common = shared_seeds(list(base), list(other))
        b = np.array([base[s] for s in common] if paired else list(base.values()), dtype=float)
        c = np.array([other[s] for s in common] if paired else list(other.values()), dtype=float)
        # Only the deciding test's p: compare()'s effect sizes and intervals are not read here.
        pvalue, test = deciding_pvalue(b, c, paired)
        out[i] = pvalue is not None and pvalue < alpha
        if not out[i] or normal or test in RANK_TESTS:
            continue  # an exact rank test decides where the t-test is undefined (verdict.py)
        if bounds is None:
            out[i] = False
        else:
            # Imported here: scipy.stats comes with it, which a plain describe never needs.
            from benchlab.stats.sequential import betting_pvalue
            from benchlab.stats.verdict import range_test_diffs

            d = range_test_diffs(b, c, paired)
            out[i] = bool(d.shape[0]) and betting_pvalue(d, float(bounds[1] - bounds[0])) < alpha
    return out


def describe_groups(
    table: pd.DataFrame, goal: Goal | Mapping[str, Goal] = "max", confidence: float = 0.95,
    ranges: Mapping[str, tuple[float, float]] | None = None, assume_normal: Sequence[str] = (),
) -> pd.DataFrame:
    """:func:`describe` (no bootstrap) of every (task, config, metric) of a long table's final
    values, and :func:`rank` of the configs of each (task, metric): what a report's tables show.

    Args:
        table: columns ``task, config, metric, value``, one row per run and metric.
        goal: ``"max"``/``"min"``, or one per metric (``"max"`` for a metric not named).

    Returns:
        One row per group with a finite value, in the order the groups first appear:
        ``task, config, metric, n, mean`` (correctly rounded), ``std, min, max, ci_low,
        ci_high`` (:func:`describe`'s; NaN where
        undefined), ``rank`` (:func:`rank`: CIs overlapping the best one's share rank 1),
        ``mean_rank`` (the rank by mean alone; 1 is the best mean) and ``tied`` (rank 1
        through an overlapping CI, not by the best mean).
    """
    import pandas as pd

    values = table["value"].to_numpy(dtype=float)
    rows: list[dict[str, object]] = []
    for (task, config, metric), idx in table.groupby(["task", "config", "metric"], sort=False).indices.items():
        x = values[idx]
        d = describe(x, confidence, reps=0)
        if d.n:
            # The printed mean is the correctly rounded one (from math.fsum): a mean of 0.7375
            # prints as 0.738, as by hand, where a running float sum can land a unit below it
            # and print as 0.737. describe's own mean (and the analysis JSON) keep numpy's.
            x = x[np.isfinite(x)]
            mean = math.fsum(x.tolist()) / x.shape[0]
            rows.append({"task": task, "config": config, "metric": metric, "n": d.n, "mean": mean,
                         "std": d.std, "min": d.min, "max": d.max, "ci_low": d.ci_low,
                         "ci_high": d.ci_high})
    out = pd.DataFrame(rows, columns=["task", "config", "metric", "n", "mean", "std", "min", "max",
                                      "ci_low", "ci_high"])
    by_ci: list[int | None] = [None] * len(rows)
    by_mean: list[int | None] = [None] * len(rows)
    groups: dict[tuple[object, object], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["task"], r["metric"]), []).append(i)
    seeded = "seed" in table.columns
    for (task, metric), idx in groups.items():
        g = goal_of(goal, str(metric))
        means = [rows[i]["mean"] for i in idx]
        separated = None
        if seeded:
            sub = table[(table["task"] == task) & (table["metric"] == metric)]
            by_config = {str(c): dict(zip(grp["seed"].tolist(), grp["value"].tolist(), strict=True))
                         for c, grp in sub.groupby("config", sort=False)}
            from benchlab.stats.verdict import assumes_normal, range_of

            separated = separated_from_best([str(rows[i]["config"]) for i in idx], means,  # type: ignore[arg-type]
                                            by_config, g, bounds=range_of(ranges or {}, str(task), str(metric)),
                                            normal=assumes_normal(assume_normal, str(task), str(metric)))
        ranked = rank(means, [rows[i]["ci_low"] for i in idx],  # type: ignore[arg-type,misc]
                      [rows[i]["ci_high"] for i in idx], g, separated)  # type: ignore[arg-type,misc]
        alone = rank(means, [None] * len(idx), [None] * len(idx), g)  # type: ignore[arg-type]
        for i, a, b in zip(idx, ranked, alone, strict=True):
            by_ci[i], by_mean[i] = a, b
    for column in ("mean", "std", "min", "max", "ci_low", "ci_high"):
        out[column] = out[column].astype(float)
    out["n"] = out["n"].astype(int)
    out["rank"] = pd.array(by_ci, dtype="Int64")
    out["mean_rank"] = pd.array(by_mean, dtype="Int64")
    out["tied"] = (out["rank"] == 1) & (out["mean_rank"] != 1)
    return out


__all__ = ["Description", "Goal", "describe", "describe_groups", "is_high_variance", "median_member",
           "normal_interval", "rank", "separated_from_best", "t_interval"]
