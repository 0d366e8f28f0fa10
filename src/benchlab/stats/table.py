"""The statistics of a whole long-format results table, as one JSON-ready dict.

:func:`analyze` is what ``benchlab analyze``, ``benchlab compare`` and the
report call: it validates the table, reduces learning curves to one number per
run, describes and ranks every (task, config, metric), compares every candidate
with the baseline (Holm-corrected across all comparisons), and aggregates the
primary metric across tasks. Undefined numbers are ``None`` with a line in
``warnings``; nothing here prints or reads files.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchlab.errors import DataError
from benchlab.stats.aggregate import AGGREGATES, aggregate
from benchlab.stats.bootstrap import Method
from benchlab.stats.compare import compare, holm, is_significant
from benchlab.stats.curves import SUMMARIES, Summary, align, summarize
from benchlab.stats.describe import Goal, describe, rank
from benchlab.stats.scores import score_matrices

REQUIRED_COLUMNS = ("task", "config", "seed", "value")
OPTIONAL_COLUMNS = ("metric", "step", "benchmark")
DEFAULT_METRIC = "value"


def validate_table(df: pd.DataFrame, source: str = "table") -> pd.DataFrame:
    """Check a long-format table and return a normalised copy.

    Args:
        df: columns ``task, config, seed, value`` and optionally ``metric, step, benchmark``.
        source: names the table in error messages (usually its file name).

    Returns:
        A copy with ``metric`` (``"value"`` where absent) and ``step`` (NaN where
        absent) columns, ``value``/``step`` as floats, ``task``/``config``/``metric`` as str.

    Raises:
        DataError: a required column is missing, the table is empty, or ``value``
            or ``step`` holds something that is not a number (the first offending
            row and value are named).
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {', '.join(missing)}; a long-format table needs "
            f"{', '.join(REQUIRED_COLUMNS)} (optional: {', '.join(OPTIONAL_COLUMNS)}); "
            f"found {', '.join(map(str, df.columns)) or 'no columns'}"
        )
    if len(df) == 0:
        raise DataError(f"{source}: the table has no rows")
    out = df.copy()
    if "metric" not in out.columns:
        out["metric"] = DEFAULT_METRIC
    if "step" not in out.columns:
        out["step"] = np.nan
    for col in ("value", "step"):
        numeric = pd.to_numeric(out[col], errors="coerce")
        text = out[col].astype(str).str.strip().str.lower()
        bad = numeric.isna() & out[col].notna() & ~text.isin(["", "nan"])
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{source}: column {col!r} must hold numbers; row {row + 1} has "
                f"{out[col].iloc[row]!r}"
            )
        out[col] = numeric.astype(float)
    for col in ("task", "config", "seed", "metric"):
        if out[col].isna().any():
            row = int(np.flatnonzero(out[col].isna().to_numpy())[0])
            raise DataError(f"{source}: column {col!r} is empty in row {row + 1}")
    for col in ("task", "config", "metric"):
        out[col] = out[col].astype(str)
    # "3" and 3.0 name the same seed (CSV exports differ); keep ints as ints.
    seeds = pd.to_numeric(out["seed"], errors="coerce")
    if seeds.notna().all() and (seeds == seeds.round()).all():
        out["seed"] = seeds.astype(np.int64)
    else:
        out["seed"] = out["seed"].astype(str)
    return out


def reduce_runs(
    df: pd.DataFrame, summary: Summary = "final", k: int = 1, fraction: float = 0.25
) -> tuple[pd.DataFrame, list[str]]:
    """One value per run and metric: ``task, config, metric, seed, value``.

    A run's final scalar (a row with no step) is used as is for ``summary="final"``.
    Learning curves (rows with a step) of one (task, metric) are interpolated onto
    their common step grid (:func:`benchlab.stats.curves.align`) and summarised;
    for ``auc``, ``max`` and ``slope`` every run needs a curve. Duplicate scalars
    of one run are averaged, with a warning.

    Args:
        df: a table checked by :func:`validate_table`.
        summary, k, fraction: see :func:`benchlab.stats.curves.summarize`.

    Returns:
        ``(runs, warnings)``.
    """
    if summary not in SUMMARIES:
        raise DataError(f"--summary must be one of {', '.join(SUMMARIES)}; got {summary!r}")
    warnings: list[str] = []
    keys = ["task", "config", "metric", "seed"]
    scalars = df[df["step"].isna()]
    curves = df[df["step"].notna()]
    dup = scalars.duplicated(keys, keep=False)
    if dup.any():
        n_runs = scalars[dup].drop_duplicates(keys).shape[0]
        warnings.append(
            f"{n_runs} run(s) have several final values for one metric; they are averaged"
        )
    # A NaN value must reach describe() (which reports it), not vanish in a groupby mean.
    grouped = scalars.assign(has_nan=scalars["value"].isna()).groupby(keys, sort=False)
    scalar_runs = grouped.agg(value=("value", "mean"), has_nan=("has_nan", "any")).reset_index()
    scalar_runs.loc[scalar_runs["has_nan"], "value"] = np.nan
    scalar_runs = scalar_runs.drop(columns="has_nan")
    rows: list[dict[str, Any]] = []
    curve_keys: set[tuple[Any, ...]] = set()
    for (task, metric), group in curves.groupby(["task", "metric"], sort=False):
        runs = list(group.groupby(["config", "seed"], sort=False))
        grid, values = align([(g["step"].to_numpy(), g["value"].to_numpy()) for _, g in runs])
        if grid.shape[0] == 0:
            warnings.append(f"{task} {metric}: the learning curves share no step range; skipped")
            continue
        for ((config, seed), _), row in zip(runs, values, strict=True):
            value = summarize(grid, row, summary, k, fraction)
            if value is None:
                warnings.append(f"{task}/{config}/s{seed} {metric}: {summary} is undefined (null)")
            rows.append({"task": task, "config": config, "metric": metric, "seed": seed,
                         "value": np.nan if value is None else value})
            curve_keys.add((task, config, metric, seed))
    curve_runs = pd.DataFrame(rows, columns=keys + ["value"])
    if summary == "final":
        # The run's own final scalar wins over its curve.
        taken = set(map(tuple, scalar_runs[keys].itertuples(index=False, name=None)))
        curve_runs = curve_runs[[tuple(r) not in taken
                                 for r in curve_runs[keys].itertuples(index=False, name=None)]]
        out = pd.concat([scalar_runs, curve_runs], ignore_index=True)
    else:
        only_scalar = scalar_runs[[tuple(r) not in curve_keys
                                   for r in scalar_runs[keys].itertuples(index=False, name=None)]]
        if len(only_scalar):
            metrics = sorted(only_scalar["metric"].unique())
            warnings.append(
                f"--summary {summary} needs learning curves; {len(only_scalar)} run(s) of "
                f"{', '.join(metrics)} have only a final value and are left out"
            )
        out = curve_runs
    return out.reset_index(drop=True), warnings


def _seed(seed: int, *parts: object) -> np.random.SeedSequence:
    # A stable stream per group: results do not depend on which other groups exist.
    return np.random.SeedSequence([seed, zlib.crc32("\x1f".join(map(str, parts)).encode())])


def _goal_of(goal: Goal | Mapping[str, Goal], metric: str) -> Goal:
    g = goal.get(metric, "max") if isinstance(goal, Mapping) else goal
    if g not in ("max", "min"):
        raise DataError(f"goal of metric {metric!r} must be 'max' or 'min'; got {g!r}")
    return g


def _num(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def analyze(
    df: pd.DataFrame,
    baseline: str | None = None,
    candidates: Sequence[str] | None = None,
    metric: str | None = None,
    goal: Goal | Mapping[str, Goal] = "max",
    reps: int = 10_000,
    seed: int = 0,
    summary: Summary = "final",
    confidence: float = 0.95,
    alpha: float = 0.05,
    method: Method = "percentile",
    variance_threshold: float = 0.01,
    references: Mapping[str, tuple[float, float]] | None = None,
    source: str = "table",
) -> dict[str, list[Any]]:
    """Every statistic of a long-format table.

    Args:
        df: long-format table (see :func:`validate_table`).
        baseline: config the others are compared with; no comparisons when ``None``.
        candidates: configs compared with the baseline (default: all others).
        metric: analyse only this metric; by default every metric, and the first
            one in the table is the one aggregated across tasks.
        goal: ``"max"``/``"min"``, or one per metric name (default ``"max"``).
        reps: bootstrap resamples (describe, comparisons and aggregates).
        seed: seed of every random procedure.
        summary: how learning curves become one number per run.
        confidence: coverage of every interval; ``alpha``: significance level.
        method: one-sample bootstrap interval, ``"percentile"`` or ``"bca"``.
        variance_threshold: ``high_variance`` when ``std > threshold · |mean|``.
        references: ``{task: (low, high)}`` normalising scores for the aggregate;
            tasks without one use the observed worst and best values (with a warning).
        source: names the table in messages.

    Returns:
        ``{"summary": [...], "comparisons": [...], "aggregate": [...], "warnings": [...]}``
        (the object layout is in ``docs/statistics.md``).
    """
    table = validate_table(df, source)
    warnings: list[str] = []
    if metric is not None:
        available = list(dict.fromkeys(table["metric"]))
        if metric not in available:
            raise DataError(
                f"{source}: no metric {metric!r}; the table has {', '.join(available)}"
            )
        table = table[table["metric"] == metric]
    configs = list(dict.fromkeys(table["config"]))
    if baseline is not None and baseline not in configs:
        raise DataError(
            f"{source}: column 'config' has no baseline {baseline!r}; configs are "
            f"{', '.join(configs)}"
        )
    if candidates is not None:
        unknown = [c for c in candidates if c not in configs]
        if unknown:
            raise DataError(
                f"{source}: column 'config' has no {', '.join(map(repr, unknown))}; configs are "
                f"{', '.join(configs)}"
            )
    runs, notes = reduce_runs(table, summary)
    warnings += notes
    if runs.empty:
        raise DataError(f"{source}: no runs left to analyse with --summary {summary}")
    metrics = list(dict.fromkeys(runs["metric"]))

    summary_rows: list[dict[str, Any]] = []
    for (task, met), group in runs.groupby(["task", "metric"], sort=False):
        rows = []
        for config, g in group.groupby("config", sort=False):
            d = describe(
                g["value"].to_numpy(), confidence, reps, method, variance_threshold,
                _seed(seed, "describe", task, config, met), f"{task}/{config} {met}",
            )
            warnings += d.warnings
            rows.append({
                "task": task, "config": config, "metric": met, "n": d.n,
                "mean": _num(d.mean), "std": _num(d.std), "sem": _num(d.sem),
                "median": _num(d.median), "min": _num(d.min), "max": _num(d.max),
                "ci_low": _num(d.ci_low), "ci_high": _num(d.ci_high),
                "boot_ci_low": _num(d.boot_ci_low), "boot_ci_high": _num(d.boot_ci_high),
                "high_variance": d.high_variance,
            })
        ranks = rank([r["mean"] for r in rows], [r["ci_low"] for r in rows],
                     [r["ci_high"] for r in rows], _goal_of(goal, met))
        for r, rk in zip(rows, ranks, strict=True):
            r["rank"] = rk
        summary_rows += rows

    comparisons = _compare_all(runs, baseline, candidates, configs, goal, reps, seed,
                               confidence, method, alpha, warnings)
    primary = metric if metric is not None else (metrics[0] if metrics else None)
    if metric is None and len(metrics) > 1:
        warnings.append(f"several metrics; the aggregate across tasks is of {primary!r}")
    aggregates: list[dict[str, Any]] = []
    if primary is not None:
        aggregates = _aggregate(runs[runs["metric"] == primary], configs,
                                _goal_of(goal, primary), references, reps, seed,
                                confidence, warnings)
    return {"summary": summary_rows, "comparisons": comparisons, "aggregate": aggregates,
            "warnings": warnings}


def _compare_all(
    runs: pd.DataFrame,
    baseline: str | None,
    candidates: Sequence[str] | None,
    configs: list[str],
    goal: Goal | Mapping[str, Goal],
    reps: int,
    seed: int,
    confidence: float,
    method: Method,
    alpha: float,
    warnings: list[str],
) -> list[dict[str, Any]]:
    if baseline is None:
        return []
    chosen = [c for c in (candidates or configs) if c != baseline]
    out: list[dict[str, Any]] = []
    pvalues: list[float | None] = []
    # {(task, metric, config): {seed: value}}, built in one pass (pandas masks per pair are slow).
    values = runs["value"].to_numpy(dtype=float)
    seeds = runs["seed"].to_numpy()
    by_run = {key: dict(zip(seeds[idx].tolist(), values[idx].tolist(), strict=True))
              for key, idx in runs.groupby(["task", "metric", "config"], sort=False).indices.items()}
    for task, met in dict.fromkeys(zip(runs["task"], runs["metric"], strict=True)):
        base = by_run.get((task, met, baseline), {})
        if not base:
            warnings.append(f"{task} {met}: the baseline {baseline!r} has no runs; not compared")
            continue
        for cand in chosen:
            other = by_run.get((task, met, cand), {})
            if not other:
                continue
            label = f"{task} {met} {cand} vs {baseline}"
            common = [s for s in base if s in other]
            only_b = sorted(set(base) - set(other), key=str)
            only_c = sorted(set(other) - set(base), key=str)
            paired = len(common) >= 2
            if paired and (only_b or only_c):
                warnings.append(
                    f"{label}: paired on the {len(common)} shared seed(s); seed(s) "
                    f"{', '.join(map(str, only_b + only_c))} are missing on one side and left out"
                )
            elif not paired:
                warnings.append(f"{label}: fewer than 2 shared seeds; compared unpaired")
            b = np.array([base[s] for s in common] if paired else list(base.values()))
            c = np.array([other[s] for s in common] if paired else list(other.values()))
            cmp = compare(b, c, paired, _goal_of(goal, met), reps, confidence, method,
                          _seed(seed, "compare", task, met, baseline, cand), label)
            warnings += cmp.warnings
            pvalues.append(cmp.pvalue)
            out.append({
                "task": task, "metric": met, "baseline": baseline, "candidate": cand,
                "paired": cmp.paired, "n": cmp.n, "mean_diff": _num(cmp.mean_diff),
                "diff_ci_low": _num(cmp.diff_ci_low), "diff_ci_high": _num(cmp.diff_ci_high),
                "t_pvalue": _num(cmp.t_pvalue), "wilcoxon_pvalue": _num(cmp.wilcoxon_pvalue),
                "welch_pvalue": _num(cmp.welch_pvalue),
                "mannwhitney_pvalue": _num(cmp.mannwhitney_pvalue),
                "cohens_d": _num(cmp.cohens_d), "hedges_g": _num(cmp.hedges_g),
                "prob_improvement": _num(cmp.prob_improvement),
            })
    for row, p in zip(out, holm(pvalues), strict=True):
        row["p_holm"] = p
        row["significant"] = is_significant(p, row["diff_ci_low"], row["diff_ci_high"], alpha)
        if p is None:
            warnings.append(
                f"{row['task']} {row['metric']} {row['candidate']} vs {baseline}: no p-value; "
                "not counted in the Holm correction, significance is null"
            )
    return out


def _aggregate(
    runs: pd.DataFrame,
    configs: list[str],
    goal: Goal,
    references: Mapping[str, tuple[float, float]] | None,
    reps: int,
    seed: int,
    confidence: float,
    warnings: list[str],
) -> list[dict[str, Any]]:
    # NaN and infinite values were already reported per (task, config) by describe().
    matrices = score_matrices(runs, goal, references, configs)
    warnings += matrices.warnings
    out = []
    for config, normed in matrices.scores.items():
        result = aggregate(normed, reps, confidence, _seed(seed, "aggregate", config))
        row: dict[str, Any] = {"config": config}
        for name in AGGREGATES:
            value, lo, hi = result[name]
            row[name] = _num(value)
            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = _num(lo), _num(hi)
        out.append(row)
    return out


__all__ = ["DEFAULT_METRIC", "REQUIRED_COLUMNS", "analyze", "reduce_runs", "validate_table"]
