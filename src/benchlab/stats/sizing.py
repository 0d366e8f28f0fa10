"""How many seeds a table calls for: CV of the mean vs N, and paired power, per task.

The DataFrame-level side of :mod:`benchlab.stats.seeds`, as typed records whose
``to_json()`` is what ``benchlab variance`` and ``benchlab power`` print.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlab.errors import DataError
from benchlab.json_types import JsonObject
from benchlab.stats.seeds import (
    cv_of_mean,
    effect_from_pilot,
    effect_interval,
    seeds_for_cv,
    seeds_for_power,
    smallest_n,
)
from benchlab.stats.table import reduce_runs, validate_table

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PowerRow:
    """Paired seeds for one task (``task`` None for a given effect): the effect ``d_z``, its 95%
    interval and pilot pairs (None for a given effect or a smallest effect of interest), the
    seeds for the effect (None when it is 0 or undefined) and at the interval's end nearest 0."""

    task: Any
    effect: float | None
    effect_ci_low: float | None
    effect_ci_high: float | None
    pilot_pairs: int | None
    seeds: int | None
    seeds_conservative: int | None
    #: With a smallest effect of interest (``--min-effect``): the sd of the paired differences
    #: the effect was divided by, the pilot's own sd, and why the two differ.
    sd_used: float | None = None
    sd_observed: float | None = None
    sd_basis: str | None = None


@dataclass(frozen=True)
class PowerAnalysis:
    """:func:`power_analysis`'s answer; ``to_json()`` is what ``benchlab power --json`` prints."""

    alpha: float
    power: float
    metric: str | None
    rows: tuple[PowerRow, ...]
    warnings: tuple[str, ...]

    def to_json(self) -> JsonObject:
        """``{"alpha", "power", "metric", "rows": [{"task", "effect", ...}], "warnings"}``."""
        return {"alpha": self.alpha, "power": self.power, "metric": self.metric,
                "rows": [_row_json(r) for r in self.rows], "warnings": list(self.warnings)}


def _row_json(row: PowerRow) -> JsonObject:
    """A row as JSON; ``sd_used``, ``sd_observed`` and ``sd_basis`` only where a smallest effect
    of interest was divided by an sd (the layout of the other rows is unchanged)."""
    out = asdict(row)
    if row.sd_used is None:
        for key in ("sd_used", "sd_observed", "sd_basis"):
            out.pop(key)
    return out


@dataclass(frozen=True)
class CvCurve:
    """CV of the mean at each number of seeds ``n`` (None where the mean is 0), the smallest N
    under the threshold (None if none), and then the seeds the pilot's spread calls for."""

    n: tuple[int, ...]
    cv: tuple[float | None, ...]
    smallest_n: int | None
    seeds_to_reach: int | None = None

    def to_json(self) -> JsonObject:
        """``{"n", "cv", "smallest_n"}``, with ``seeds_to_reach`` when ``smallest_n`` is None."""
        out: dict[str, Any] = {"n": list(self.n), "cv": list(self.cv), "smallest_n": self.smallest_n}
        if self.smallest_n is None:
            out["seeds_to_reach"] = self.seeds_to_reach
        return out


@dataclass(frozen=True)
class TaskVariance:
    """One task's seeds and CV curves of the ``final``, ``auc`` and ``slope`` summaries (None
    without one; ``slope`` is the derivative summary: the least-squares slope over the last
    quarter of the steps)."""

    task: Any
    n_seeds: int
    final: CvCurve | None
    auc: CvCurve | None
    slope: CvCurve | None = None


@dataclass(frozen=True)
class VarianceAnalysis:
    """:func:`variance_analysis`'s answer; ``to_json()`` is what ``benchlab variance --json`` prints."""

    config: str
    metric: str
    threshold: float
    tasks: tuple[TaskVariance, ...]
    warnings: tuple[str, ...]

    def to_json(self) -> JsonObject:
        """``{"config", "metric", "threshold", "tasks": [{"task", "n_seeds", "final", "auc", "slope"}],
        "warnings"}``."""
        return {"config": self.config, "metric": self.metric, "threshold": self.threshold,
                "tasks": [{"task": t.task, "n_seeds": t.n_seeds,
                           "final": t.final.to_json() if t.final else None,
                           "auc": t.auc.to_json() if t.auc else None,
                           "slope": t.slope.to_json() if t.slope else None} for t in self.tasks],
                "warnings": list(self.warnings)}


#: The summaries ``benchlab variance`` sizes: the final value, the area under the curve and the
#: derivative summary (the slope), as the pilot-variance step of a training benchmark does.
SUMMARIES_OF_VARIANCE = ("final", "auc", "slope")


def _pick_metric(table: pd.DataFrame, metric: str | None, source: str) -> str:
    available = list(dict.fromkeys(table["metric"]))
    if metric is None:
        return available[0]
    if metric not in available:
        raise DataError(f"{source}: no metric {metric!r}; the table has {', '.join(available)}")
    return metric


def _check_config(table: pd.DataFrame, config: str, source: str) -> None:
    configs = list(dict.fromkeys(table["config"]))
    if config not in configs:
        raise DataError(
            f"{source}: column 'config' has no {config!r}; configs are {', '.join(configs)}"
        )


def variance_analysis(
    df: pd.DataFrame,
    config: str,
    metric: str | None = None,
    threshold: float = 0.05,
    reps: int = 2_000,
    seed: int = 0,
    source: str = "table",
) -> VarianceAnalysis:
    """CV of the mean vs number of seeds for one config, per task, of ``final``, ``auc`` and
    ``slope`` (the derivative summary).

    Returns:
        A :class:`VarianceAnalysis`: per task, a :class:`CvCurve` of each summary (None for
        ``auc`` without learning curves, or with fewer than 2 seeds); ``smallest_n`` is None
        when no N up to the number of pilot seeds reaches the threshold.
    """
    table = validate_table(df, source)
    _check_config(table, config, source)
    met = _pick_metric(table, metric, source)
    table = table[(table["config"] == config) & (table["metric"] == met)]
    warnings: list[str] = []
    out_tasks: list[TaskVariance] = []
    per_summary: dict[str, pd.DataFrame] = {}
    for summary in SUMMARIES_OF_VARIANCE:
        if summary != "final" and (table["step"].isna().all()):
            if summary == "auc":
                warnings.append(f"{met}: no learning curves, so no AUC and no slope")
            continue
        runs, notes = reduce_runs(table, summary)  # type: ignore[arg-type]
        warnings += notes
        per_summary[summary] = runs
    for task in dict.fromkeys(table["task"]):
        curves: dict[str, CvCurve | None] = dict.fromkeys(SUMMARIES_OF_VARIANCE)
        n_seeds = 0
        for summary in SUMMARIES_OF_VARIANCE:
            runs = per_summary.get(summary)
            if runs is None:
                continue
            values = runs.loc[runs["task"] == task, "value"].to_numpy(dtype=float)
            values = values[~np.isnan(values)]
            n_seeds = int(values.shape[0])
            if values.shape[0] < 2:
                warnings.append(f"{task}/{config} {met} {summary}: fewer than 2 seeds; no CV curve")
                continue
            ns, cv = cv_of_mean(values, reps=reps, seed=seed)
            if np.isnan(cv).any():
                warnings.append(f"{task}/{config} {met} {summary}: the mean is 0; CV is null")
            smallest = smallest_n(ns, cv, threshold)
            needed = None
            if smallest is None:
                # The CV of the mean falls as 1/√N: how many seeds the pilot's spread calls for.
                mean = float(values.mean())
                cv_one = float(values.std(ddof=1)) / abs(mean) if mean != 0 else float("nan")
                needed = seeds_for_cv(cv_one, threshold)
                warnings.append(
                    f"{task}/{config} {met} {summary}: CV stays above {threshold:g} up to "
                    f"{values.shape[0]} seeds; run more seeds"
                    + (f": about {needed} would reach it (the pilot's CV of one seed, "
                       f"{cv_one:.3g}, over √N)" if needed is not None else "")
                )
            curves[summary] = CvCurve(tuple(int(n) for n in ns.tolist()),
                                      tuple(None if np.isnan(c) else float(c) for c in cv), smallest, needed)
        out_tasks.append(TaskVariance(task, n_seeds, curves["final"], curves["auc"], curves["slope"]))
    return VarianceAnalysis(config, met, threshold, tuple(out_tasks), tuple(warnings))


def _sized_row(task: Any, label: str, bv: np.ndarray, cv: np.ndarray, min_effect: float | None,
               alpha: float, power: float, warnings: list[str]) -> PowerRow:
    """One task's row of :func:`power_analysis` from its pilot pairs ``bv``, ``cv`` (no NaN)."""
    pairs = int(bv.shape[0])
    d = effect_from_pilot(bv, cv)
    if min_effect is not None and d is not None:
        diffs = cv - bv
        from scipy import stats as sps

        # The sd at the upper end of its 95% interval: a pilot's sd is itself uncertain.
        sd = float(diffs.std(ddof=1))
        sd_high = sd * float(np.sqrt((pairs - 1) / sps.chi2.ppf(0.025, pairs - 1)))
        d_min = abs(float(min_effect)) / sd_high
        n_min = seeds_for_power(d_min, alpha, power)
        basis = (f"the upper end of the 95% interval of the pilot's sd of the paired differences, "
                 f"{sd:.4g} from {pairs} pairs, times sqrt((n-1)/chi2_0.025,n-1) = {sd_high / sd:.3g}: a pilot's "
                 "sd is itself uncertain, and sizing on its point value under-powers the experiment whenever "
                 "the pilot's sd came out low")
        warnings.append(f"{label}: --min-effect {float(min_effect):g} divided by sd {sd_high:.4g}, {basis}")
        return PowerRow(task, d_min, None, None, pairs, n_min, n_min, sd_high, sd, basis)
    n = None if d is None else seeds_for_power(d, alpha, power)
    ci: tuple[float | None, float | None] = (None, None)
    conservative = None
    if d is not None:
        lo, hi = effect_interval(d, pairs)
        ci = (lo, hi)
        if lo > 0 or hi < 0:
            conservative = seeds_for_power(min(abs(lo), abs(hi)), alpha, power)
        if pairs < 10:
            warnings.append(
                f"{label}: d_z = {d:.3g} from only {pairs} pilot "
                f"pairs; its 95% interval is [{lo:.3g}, {hi:.3g}], so the {n} seed(s) for the "
                "point estimate may give far less power: "
                + (f"{conservative} seeds at the interval's end nearest 0"
                   if conservative is not None else
                   "the interval holds 0, so the pilot cannot size the experiment")
                + "; give the smallest effect of interest (--min-effect, in the metric's "
                "units) to size it on what matters")
    if d is None:
        warnings.append(
            f"{label}: the effect is undefined from {pairs} "
            "pilot pair(s) "
            "(fewer than 2, or all differences equal up to rounding)"
        )
    elif n is None:
        warnings.append(f"{label}: the pilot effect is 0; no "
                        "number of seeds detects it")
    return PowerRow(task, d, ci[0], ci[1], pairs, n, conservative)


def power_analysis(
    effect: float | None = None,
    df: pd.DataFrame | None = None,
    baseline: str | None = None,
    candidate: str | None = None,
    metric: str | None = None,
    summary: str = "final",
    alpha: float = 0.05,
    power: float = 0.8,
    source: str = "table",
    min_effect: float | None = None,
) -> PowerAnalysis:
    """Paired seeds needed to detect an effect, given (``effect`` = d_z) or estimated per task
    from pilot runs of ``baseline`` and ``candidate`` in ``df`` (paired by seed).

    A pilot's ``d_z`` is an estimate: each row carries its 95% interval (:func:`effect_interval`)
    and ``seeds_conservative``, the seeds for the interval's end nearest 0 (``None`` when the
    interval holds 0: the pilot cannot size the experiment), beside ``seeds`` for the point
    estimate; below 10 pilot pairs a warning says how little the point estimate is worth.
    ``min_effect``, the smallest difference of interest in the metric's units, sizes the
    experiment instead of the pilot's effect: ``d_z = min_effect / sd`` of the paired
    differences, the sd taken at the upper end of its 95% interval.

    Returns:
        A :class:`PowerAnalysis`, one :class:`PowerRow` per task (one row with ``task`` None
        for a given effect); ``seeds`` is ``None`` when the effect is 0 or undefined.
    """
    warnings: list[str] = []
    rows: list[PowerRow] = []
    if effect is not None:
        n = seeds_for_power(effect, alpha, power)
        if n is None:
            warnings.append(f"effect {effect:g} cannot be detected with any number of seeds")
        rows.append(PowerRow(None, float(effect), None, None, None, n, n))
        return PowerAnalysis(alpha, power, None, tuple(rows), tuple(warnings))
    if df is None or baseline is None or candidate is None:
        raise DataError("power: give --effect, or pilot results with --baseline and --candidate")
    table = validate_table(df, source)
    for config in (baseline, candidate):
        _check_config(table, config, source)
    met = _pick_metric(table, metric, source)
    runs, notes = reduce_runs(table[table["metric"] == met], summary)  # type: ignore[arg-type]
    warnings += notes
    for task, group in runs.groupby("task", sort=False):
        b = group[group["config"] == baseline].set_index("seed")["value"]
        c = group[group["config"] == candidate].set_index("seed")["value"]
        common = [s for s in b.index if s in set(c.index)]
        bv, cv = b.loc[common].to_numpy(dtype=float), c.loc[common].to_numpy(dtype=float)
        bad = np.isnan(bv) | np.isnan(cv)
        if bad.any():
            lost = [str(s) for s, x in zip(common, bad, strict=True) if x]
            warnings.append(
                f"{task} {met} {candidate} vs {baseline}: {int(bad.sum())} pilot pair(s) with a NaN "
                f"dropped (seed(s) "
                f"{', '.join(lost)}); the effect is estimated from {int((~bad).sum())} pair(s)"
            )
        rows.append(_sized_row(task, f"{task} {met} {candidate} vs {baseline}", bv[~bad], cv[~bad],
                               min_effect, alpha, power, warnings))
    return PowerAnalysis(alpha, power, met, tuple(rows), tuple(warnings))


__all__ = ["CvCurve", "PowerAnalysis", "PowerRow", "TaskVariance", "VarianceAnalysis", "power_analysis",
           "variance_analysis"]
