"""Every planned seed accounted for: completed, failed or missing, and how failed ones count.

A claim about a config is only as good as the seeds behind it. A config that
crashed or returned NaN on half its seeds and is judged on the other half looks
better than it is, and one that failed on every seed must not vanish from a
table. :func:`analyze_seeds` wraps :func:`benchlab.stats.analyze`:

- it counts, per (task, config, metric), the seeds that were **planned**, the
  ones that **completed** with a finite value, the ones that **failed** (the run
  failed, or its value is NaN or infinite) and the ones that are **missing** (no
  run result at all: not run yet, or absent from a CSV);
- with ``failed_as="exclude"`` (the default) failed seeds are left out, and every
  row and comparison they touch says so; with ``failed_as="worst"`` each failed
  seed is scored as the worst value: the metric's bound where its range is known
  (0 for an accuracy in [0, 1]), otherwise the worst value observed on that task
  and metric over all configs. Missing seeds are never scored: a sweep still
  running has not failed;
- a config with no completed seed keeps its summary row (``n = 0``) and its
  comparison row (no verdict);
- every interval of a metric with a known range is cut at that range
  (``ci_method`` names it), since the mean of values inside ``[low, high]`` lies
  inside it too; cutting the interval there never removes the true mean, so its
  coverage is unchanged.

Pure functions over DataFrames (or, for a table of final values,
:class:`~benchlab.stats.runvalues.RunValues`, without pandas): no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from benchlab.errors import BadArgument
from benchlab.names.benchmark_info import goal_of
from benchlab.names.choices import FailedAsChoice
from benchlab.stats.analysis import (
    Analysis,
    ComparisonRow,
    ComparisonSeeds,
    Estimate,
    RowSeeds,
    SummaryRow,
    name_holm_families,
)
from benchlab.stats.runvalues import RunValues

if TYPE_CHECKING:
    import pandas as pd

FailedAs = Literal["exclude", "worst"]
FAILED_AS: tuple[str, ...] = tuple(m.value for m in FailedAsChoice)

#: The interval the summary rows carry (``ci_low``, ``ci_high``), as :func:`analyze` computes it.
T_METHOD = "Student-t"


@dataclass(frozen=True)
class SeedCount:
    """What became of the planned seeds of one (task, config, metric)."""

    task: str
    config: str
    metric: str
    planned: int
    completed: int
    failed: tuple[Any, ...] = ()
    missing: tuple[Any, ...] = ()

    @property
    def lost(self) -> int:
        """Planned seeds without a completed value (failed or missing)."""
        return len(self.failed) + len(self.missing)

    @property
    def label(self) -> str:
        """``completed/planned``, as every table shows it."""
        return f"{self.completed}/{self.planned}"

    def describe_loss(self, failed_as: str, worst: float | None = None) -> str | None:
        """``"flaky: 4 of 8 seeds failed (1, 3, 5, 7), excluded"``; None when nothing was lost."""
        if not self.lost:
            return None
        parts = []
        if self.failed:
            how = "excluded" if failed_as == "exclude" or worst is None else (
                f"scored as the worst value {worst:.4g}")
            parts.append(f"{len(self.failed)} of {self.planned} seeds failed "
                         f"({_seeds(self.failed)}), {how}")
        if self.missing:
            parts.append(f"{len(self.missing)} of {self.planned} seeds missing "
                         f"({_seeds(self.missing)})")
        return f"{self.config}: " + "; ".join(parts)


@dataclass
class Accounting:
    """The seed counts of a table and the values that replace failed seeds (``worst`` mode)."""

    failed_as: str
    counts: dict[tuple[str, str, str], SeedCount] = field(default_factory=dict)
    worst: dict[tuple[str, str], float] = field(default_factory=dict)  # (task, metric) -> value
    warnings: list[str] = field(default_factory=list)

    def of_metric(self, metric: str) -> Accounting:
        """The accounting of one metric's seeds, with the warnings an accounting of that metric
        alone gives: an analysis of the metric reads it as if only that metric were counted."""
        counts = {k: c for k, c in self.counts.items() if k[2] == metric}
        worst = {k: v for k, v in self.worst.items() if k[1] == metric}
        out = Accounting(self.failed_as, counts, worst)
        if self.failed_as == "worst":
            out.warnings = _unfilled_warnings(counts, worst)
        out.warnings += _loss_warnings(out)
        return out

    def loss(self, task: str, config: str, metric: str) -> str | None:
        count = self.counts.get((task, config, metric))
        if count is None:
            return None
        worst = self.worst.get((task, metric)) if self.failed_as == "worst" else None
        return count.describe_loss(self.failed_as, worst)


def _seeds(seeds: Sequence[Any], most: int = 8) -> str:
    shown = ", ".join(map(str, list(seeds)[:most]))
    return shown + (f" and {len(seeds) - most} more" if len(seeds) > most else "")


def count_seeds(
    table: pd.DataFrame | RunValues,
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Iterable[tuple[str, str, Any]] = (),
    metrics: Sequence[str] = (),
) -> dict[tuple[str, str, str], SeedCount]:
    """Count the seeds of every (task, config, metric).

    Args:
        table: a long-format table checked by :func:`benchlab.stats.validate_table`, or
            final values one per run.
        planned: ``{(task, config): seeds}`` that were meant to run (a spec's runs). Without
            it, every config seen on a task is taken to plan every seed seen on that task.
        failed_runs: ``(task, config, seed)`` of runs that failed (the ledger's failures);
            they have no value in the table.
        metrics: metrics counted on a task where no run has a value (every run failed).

    Returns:
        ``{(task, config, metric): SeedCount}``. A run is failed when it is in
        ``failed_runs``, when its final value (a row without step) is NaN or infinite, or
        when none of its values is finite.
    """
    failed_set = {(str(t), str(c), s) for t, c, s in failed_runs}
    done: dict[tuple[str, str, str], dict[Any, bool]] = {}
    if isinstance(table, RunValues):  # final values, one per run: a run is ok when it is finite
        columns = (table.task, table.config, table.metric, table.seed)
        for task, config, metric, seed, good in zip(*columns, np.isfinite(table.value).tolist(),
                                                    strict=True):
            done.setdefault((task, config, metric), {})[seed] = good
    else:
        columns = (table["task"].tolist(), table["config"].tolist(), table["metric"].tolist(),
                   table["seed"].tolist())
        ok = _runs_ok(table)
        # The index's levels as lists: iterating a MultiIndex builds a tuple object per run.
        levels = [ok.index.get_level_values(i).tolist() for i in range(4)]
        for task, config, metric, seed, good in zip(*levels, ok.to_numpy().tolist(), strict=True):
            done.setdefault((task, config, metric), {})[seed] = bool(good)
    tasks, configs_seen, metrics_seen, seeds_seen = columns
    metrics_of_task: dict[str, list[str]] = {}
    for task, metric in dict.fromkeys(zip(tasks, metrics_seen, strict=True)):
        metrics_of_task.setdefault(task, []).append(metric)
    if planned is None:
        seeds_of_task: dict[str, list[Any]] = {}
        for task, seed in dict.fromkeys(zip(tasks, seeds_seen, strict=True)):
            seeds_of_task.setdefault(task, []).append(seed)
        for t, _, s in failed_set:
            if s not in seeds_of_task.setdefault(t, []):
                seeds_of_task[t].append(s)
        configs = list(dict.fromkeys([*configs_seen, *(c for _, c, _ in failed_set)]))
        planned = {(t, c): seeds for t, seeds in seeds_of_task.items() for c in configs}
    out: dict[tuple[str, str, str], SeedCount] = {}
    for (task, config), seeds in planned.items():
        for metric in metrics_of_task.get(task) or metrics:
            have = done.get((task, config, metric), {})
            completed, failed, missing = 0, [], []
            for seed in seeds:
                if (task, config, seed) in failed_set or have.get(seed) is False:
                    failed.append(seed)
                elif seed in have:
                    completed += 1
                else:
                    missing.append(seed)
            # Seeds that ran although not planned (a CSV, an older spec) still count.
            meant = set(seeds)
            extra = [s for s in have if s not in meant]
            completed += sum(have[s] for s in extra)
            failed += [s for s in extra if not have[s]]
            out[(task, config, metric)] = SeedCount(
                task, config, metric, len(seeds) + len(extra), completed, tuple(failed),
                tuple(missing))
    return out


def _runs_ok(table: pd.DataFrame) -> pd.Series:
    """Per (task, config, metric, seed), in order of appearance: whether the run completed (a
    finite value, and no NaN final value)."""
    import pandas as pd

    finite = np.isfinite(table["value"].to_numpy(dtype=float))
    scalar = table["step"].isna().to_numpy()
    frame = pd.DataFrame({
        "task": table["task"].to_numpy(), "config": table["config"].to_numpy(),
        "metric": table["metric"].to_numpy(), "seed": table["seed"].to_numpy(),
        "finite": finite, "bad_final": scalar & ~finite,
    })
    runs = frame.groupby(["task", "config", "metric", "seed"], sort=False).agg(
        any_finite=("finite", "any"), bad_final=("bad_final", "any"))
    ok: pd.Series = runs["any_finite"] & ~runs["bad_final"]
    return ok


def range_of(ranges: Mapping[str, tuple[float, float]], task: str, metric: str
             ) -> tuple[float, float] | None:
    """The values ``metric`` can take on ``task``: a per-task range (key ``"TASK/METRIC"``)
    wins over the metric's (key ``"METRIC"``); None when neither is declared."""
    return ranges.get(f"{task}/{metric}", ranges.get(metric))


def _worst_values(
    table: pd.DataFrame,
    goal: str | Mapping[str, str],
    ranges: Mapping[str, tuple[float, float]],
) -> dict[tuple[str, str], float]:
    out = {}
    good = table[np.isfinite(table["value"].to_numpy(dtype=float))]
    for (task, metric), g in good.groupby(["task", "metric"], sort=False):
        up = goal_of(goal, metric) == "max"
        bounds = range_of(ranges, task, metric)
        if bounds is not None:
            out[(task, metric)] = float(bounds[0] if up else bounds[1])
        else:
            out[(task, metric)] = float(g["value"].min() if up else g["value"].max())
    for task, metric in dict.fromkeys(zip(table["task"].tolist(), table["metric"].tolist(), strict=True)):
        bounds = range_of(ranges, task, metric)
        if (task, metric) not in out and bounds is not None:
            up = goal_of(goal, metric) == "max"
            out[(task, metric)] = float(bounds[0] if up else bounds[1])
    return out


def account(
    table: pd.DataFrame,
    failed_as: str = "exclude",
    goal: str | Mapping[str, str] = "max",
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Iterable[tuple[str, str, Any]] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
    metrics: Sequence[str] = (),
) -> tuple[pd.DataFrame, Accounting]:
    """The table the statistics should see under ``failed_as``, and the seed accounting.

    ``exclude`` drops the rows of failed runs; ``worst`` gives each failed seed one
    final value, the worst (module docstring). See :func:`count_seeds` for the arguments.
    """
    if failed_as not in FAILED_AS:
        raise BadArgument("failed_as", failed_as, FAILED_AS)
    failed_runs = list(failed_runs)
    counts = count_seeds(table, planned, failed_runs, metrics)
    acc = Accounting(failed_as, counts)
    failed_keys = {(c.task, c.config, c.metric, s) for c in counts.values() for s in c.failed}
    keys = list(zip(table["task"].tolist(), table["config"].tolist(), table["metric"].tolist(),
                    table["seed"].tolist(), strict=True))
    is_failed = np.fromiter((k in failed_keys for k in keys), dtype=bool, count=len(keys))
    out = table[~is_failed]
    if failed_as == "worst":
        acc.worst = _worst_values(table, goal, ranges or {})
        rows = []
        for (task, metric), value in acc.worst.items():
            for c in counts.values():
                if c.task == task and c.metric == metric:
                    rows += [{"task": task, "config": c.config, "metric": metric, "seed": s,
                              "step": np.nan, "value": value} for s in c.failed]
        acc.warnings += _unfilled_warnings(counts, acc.worst)
        if rows:
            import pandas as pd

            filler = pd.DataFrame(rows)
            for col in out.columns:
                if col not in filler.columns:
                    filler[col] = out[col].iloc[0] if len(out) else None
            out = pd.concat([out, filler[out.columns]], ignore_index=True)
            if out["seed"].map(type).nunique() > 1:
                out["seed"] = out["seed"].astype(str)
    acc.warnings += _loss_warnings(acc)
    return out.reset_index(drop=True), acc


def _unfilled_warnings(counts: Mapping[tuple[str, str, str], SeedCount],
                       worst: Mapping[tuple[str, str], float]) -> list[str]:
    """One line per (task, metric) whose failed seeds have no worst value to be scored as."""
    unfilled = sorted({(c.task, c.metric) for c in counts.values() if c.failed} - set(worst))
    return [f"{task} {metric}: no finite value and no declared range, so there is no worst value to "
            "give the failed seeds; excluded" for task, metric in unfilled]


def _loss_warnings(acc: Accounting) -> list[str]:
    """One line per (task, config, metric) that lost seeds: which, and how they count."""
    out = []
    for c in acc.counts.values():
        if not c.lost:
            continue
        parts = []
        if c.failed:
            if acc.failed_as == "exclude" or (c.task, c.metric) not in acc.worst:
                how = (f"excluded (--failed-as {acc.failed_as}): the statistics cover only the "
                       f"{c.completed} that completed")
            else:
                how = (f"scored as the worst value {acc.worst[(c.task, c.metric)]:.4g} "
                       "(--failed-as worst)")
            parts.append(f"{len(c.failed)} of {c.planned} seeds failed ({_seeds(c.failed)}); {how}")
        if c.missing:
            parts.append(f"{len(c.missing)} of {c.planned} seeds missing ({_seeds(c.missing)}), "
                         "not counted")
        out.append(f"{c.task}/{c.config} {c.metric}: " + "; ".join(parts))
    return out


def bound_interval(
    low: float | None, high: float | None, bounds: tuple[float, float] | None
) -> tuple[float | None, float | None]:
    """``[low, high]`` cut at ``bounds``; unchanged when either is undefined."""
    if bounds is None:
        return low, high
    lo, hi = bounds
    return (None if low is None else min(max(low, lo), hi),
            None if high is None else max(min(high, hi), lo))


def _bound_or_drop(low: float | None, high: float | None, bounds: tuple[float, float], bootstrap: bool,
                   name: str, warnings: list[str]) -> tuple[float | None, float | None]:
    """An interval kept inside ``bounds``, with a warning whenever that changed it.

    A bootstrap-t interval reaching past the range is null: at a few seeds its studentized
    resamples explode (a resample repeating one value has no spread), and cut at the range it
    became the whole range, an "interval" that says nothing. A t interval reaching past it is cut
    there, and the warning names the end that is the range's, not the interval's.
    """
    if low is None or high is None:
        return low, high
    lo, hi = bounds
    if low >= lo and high <= hi:
        return low, high
    if bootstrap:
        warnings.append(f"{name}: the bootstrap-t interval [{low:.4g}, {high:.4g}] reaches past the range "
                        f"[{lo:g}, {hi:g}] (its resamples exploded at these few seeds): null, not cut at the "
                        "range; the t interval stands")
        return None, None
    ends = [e for e, past in ((f"lower end {lo:g}", low < lo), (f"upper end {hi:g}", high > hi)) if past]
    warnings.append(f"{name}: the t interval [{low:.4g}, {high:.4g}] reaches past the range [{lo:g}, {hi:g}]; "
                    f"shown cut there: its {' and '.join(ends)} is the range's, not the interval's")
    return bound_interval(low, high, bounds)


def analyze_seeds(
    df: pd.DataFrame | RunValues,
    *,
    failed_as: str = "exclude",
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Iterable[tuple[str, str, Any]] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
    **kwargs: Any,
) -> Analysis:
    """:func:`benchlab.stats.analyze` with every planned seed accounted for (module docstring).

    Takes :func:`~benchlab.stats.analyze`'s keyword arguments, plus:

    Args:
        failed_as: ``"exclude"`` (default) or ``"worst"``.
        planned: ``{(task, config): seeds}`` meant to run; default: every seed seen on a task.
        failed_runs: ``(task, config, seed)`` of failed runs (not in ``df``).
        ranges: ``{metric: (low, high)}`` of bounded metrics; a key ``"TASK/METRIC"`` gives one
            task its own range (:func:`range_of`), which bounds every interval of that task,
            and the across-task intervals through it.

    Returns:
        ``analyze``'s :class:`~benchlab.stats.analysis.Analysis` with ``failed_as`` and
        ``ranges`` set; each summary row gains ``seeds`` (planned, completed, failed and
        missing seeds, and ``ci_method``), each comparison ``seeds`` (``completed/planned``
        of each side and a ``caveat`` naming what each side lost). Configs without a
        completed seed keep a summary row and a comparison row.
    """
    ranges = dict(ranges or {})
    used, acc, table = account_table(df, failed_as=failed_as, planned=planned, failed_runs=failed_runs,
                                     ranges=ranges, metric=kwargs.get("metric"), goal=kwargs.get("goal", "max"),
                                     summary=kwargs.get("summary", "final"), source=kwargs.get("source", "table"))
    return analyze_accounted(used, acc, table, planned=planned, failed_runs=list(failed_runs), ranges=ranges,
                             **kwargs)


def account_table(
    df: pd.DataFrame | RunValues,
    *,
    failed_as: str = "exclude",
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Iterable[tuple[str, str, Any]] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
    metric: str | None = None,
    goal: str | Mapping[str, str] = "max",
    summary: str = "final",
    source: str = "table",
) -> tuple[pd.DataFrame | RunValues, Accounting, pd.DataFrame | None]:
    """The seed accounting of :func:`analyze_seeds`, before its analysis: the table the statistics
    see (``used``), the :class:`Accounting`, and the validated table before failed seeds were
    dropped or filled (None for final values read without pandas and nothing failed, which keep
    their fast path). ``metric`` narrows the table to one metric first."""
    from benchlab.stats.table import validate_table

    failed_runs = list(failed_runs)
    ranges = dict(ranges or {})
    used: pd.DataFrame | RunValues
    if failed_as not in FAILED_AS:
        raise BadArgument("failed_as", failed_as, FAILED_AS)
    if isinstance(df, RunValues) and (failed_runs or summary != "final"):
        df = df.to_frame()
    if isinstance(df, RunValues):
        # Final values, one per run, read without pandas: nothing to validate, reduce or fill in.
        used = df if metric is None or metric not in set(df.metric) else df.where(
            m == metric for m in df.metric)
        acc = Accounting(failed_as, count_seeds(used, planned, (), [metric] if metric else ()))
        if not any(c.failed for c in acc.counts.values()):
            acc.warnings = _loss_warnings(acc)
            return used, acc, None
        df = df.to_frame()  # NaN values: the full accounting below
    if len(df) == 0 and failed_runs:  # every run failed: nothing to validate, all to count
        import pandas as pd

        table = pd.DataFrame({"task": pd.Series(dtype=object), "config": pd.Series(dtype=object),
                              "seed": pd.Series(dtype=np.int64), "metric": pd.Series(dtype=object),
                              "step": pd.Series(dtype=float), "value": pd.Series(dtype=float)})
    else:
        table = validate_table(df, source)
    if metric is not None and metric in set(table["metric"]):
        table = table[table["metric"] == metric]
    used, acc = account(table, failed_as, goal, planned, failed_runs, ranges, [metric] if metric else ())
    return used, acc, table


def analyze_accounted(
    used: pd.DataFrame | RunValues,
    acc: Accounting,
    table: pd.DataFrame | None,
    *,
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Sequence[tuple[str, str, Any]] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
    **kwargs: Any,
) -> Analysis:
    """:func:`analyze_seeds` of a table already accounted for: ``used`` and ``acc`` as
    :func:`account` returned them (``acc`` of the metrics ``used`` holds, e.g.
    :meth:`Accounting.of_metric`), ``table`` the validated table before it (None: no failed-as-worst
    aggregate beside the excluded one). For a caller that counts the seeds once for several
    analyses (:func:`benchlab.stats.results_analysis.analyze_results`)."""
    ranges = dict(ranges or {})
    failed_as = acc.failed_as
    result = Analysis() if used.empty else _analyze(used, ranges=ranges, **kwargs)
    result.warnings = acc.warnings + result.warnings
    result.failed_as = failed_as
    result.ranges = {m: (lo, hi) for m, (lo, hi) in ranges.items()}
    annotate_summary(result, acc, ranges)
    _annotate_comparisons(result, acc, kwargs.get("baseline"), kwargs.get("candidates"), ranges)
    name_holm_families(result.comparisons)  # the rows of configs without a completed seed too
    _bound_aggregates(result, ranges)
    if failed_as == "exclude" and table is not None and not used.empty:
        _aggregate_failed_as_worst(result, table, acc, kwargs.get("goal", "max"), planned, list(failed_runs),
                                   ranges, kwargs)
    return result


def _analyze(used: pd.DataFrame | RunValues, **kwargs: Any) -> Analysis:
    from benchlab.stats.table import analyze

    return analyze(used, **kwargs)


def _bound_aggregates(result: Analysis, ranges: Mapping[str, tuple[float, float]]) -> None:
    """Cut the across-task intervals at what the aggregated metric's range allows: every
    aggregate is a (weighted) mean or median of scores, so it lies between the lowest and the
    highest score any task can reach once normalised; the optimality gap, 1 - mean(min(s, 1)),
    between 1 - min(top, 1) and 1 - min(bottom, 1)."""
    norm = result.normalization
    if norm is None or norm.metric is None or not norm.tasks:
        return
    ends = []
    for task, t in norm.tasks.items():
        bounds = range_of(ranges, task, norm.metric)
        if bounds is None:  # a task without a declared range bounds nothing
            return
        low, high = bounds
        span = t.high - t.low
        a, b = (low - t.low) / span, (high - t.low) / span
        ends.append((min(a, b), max(a, b)))
    bottom, top = min(e[0] for e in ends), max(e[1] for e in ends)
    gap = (1 - min(top, 1.0), 1 - min(bottom, 1.0))
    for i, row in enumerate(result.aggregate):
        cut: dict[str, Estimate] = {}
        for name in ("iqm", "median", "mean", "optimality_gap"):
            e = row.estimate(name)
            bounds = gap if name == "optimality_gap" else (bottom, top)
            if e.ci_low is not None and e.ci_high is not None and (e.ci_low < bounds[0] or e.ci_high > bounds[1]):
                # Resampled values stay inside the range, so only an exploded studentized interval
                # leaves it: cut at the range it would be the range's ends, which says nothing.
                result.warnings.append(
                    f"aggregate ({row.config}): {name}: the interval [{e.ci_low:.4g}, {e.ci_high:.4g}] reaches past "
                    f"what the range allows [{bounds[0]:.4g}, {bounds[1]:.4g}] (a bootstrap-t whose resamples "
                    "exploded at these few runs): null, not cut at the range")
                cut[name] = Estimate(e.value, None, None)
                continue
            lo, hi = bound_interval(e.ci_low, e.ci_high, bounds)
            cut[name] = Estimate(e.value, lo, hi)
        result.aggregate[i] = replace(row, **cut)  # type: ignore[arg-type]


def _aggregate_failed_as_worst(result: Analysis, table: pd.DataFrame, acc: Accounting,
                               goal: Any, planned: Mapping[tuple[str, str], Sequence[Any]] | None,
                               failed_runs: list[tuple[str, str, Any]],
                               ranges: Mapping[str, tuple[float, float]],
                               kwargs: Mapping[str, Any]) -> None:
    """Beside each aggregate from which failed seeds were excluded, its value with them
    scored as the worst value: excluding them flatters the config that lost them."""
    from benchlab.stats.scores import score_matrices
    from benchlab.stats.table import aggregate_points, reduce_runs

    norm = result.normalization
    if norm is None or norm.metric is None or not result.aggregate:
        return
    metric = norm.metric
    tasks = set(norm.tasks)
    lost = {row.config: sum(len(c.failed) for c in acc.counts.values()
                            if c.metric == metric and c.config == row.config and c.task in tasks)
            for row in result.aggregate}
    if not any(lost.values()):
        return
    worst_table, _ = account(table[table["metric"] == metric], "worst", goal, planned,
                                     failed_runs, ranges, [metric])
    reduced, _ = reduce_runs(worst_table, kwargs.get("summary", "final"), align=kwargs.get("align"))
    runs = RunValues.from_frame(reduced)
    configs = [row.config for row in result.aggregate]
    metric_goal = goal_of(goal, metric)
    matrices = score_matrices(runs, metric_goal, kwargs.get("references"), configs,
                              kwargs.get("normalize", "none"))
    if set(matrices.tasks) != tasks:
        return  # a different task set would not be the same aggregate
    points = aggregate_points(runs, configs, metric_goal, kwargs.get("references"),  # type: ignore[arg-type]
                              kwargs.get("normalize", "none"))
    for i, row in enumerate(result.aggregate):
        if not lost[row.config] or row.config not in points:
            continue
        worst = dict(points[row.config])
        if row.optimality_gap.value is None:
            worst["optimality_gap"] = None  # null for the same reason as the shown one
        result.aggregate[i] = replace(row, failed_excluded=lost[row.config], failed_as_worst=worst)
        shown = ", ".join(f"{name} {row.estimate(name).value:.4g} ({worst[name]:.4g})"
                          for name in ("iqm", "mean")
                          if row.estimate(name).value is not None and worst[name] is not None)
        result.warnings.append(
            f"aggregate: {row.config}: {lost[row.config]} failed seed(s) excluded; with them "
            f"scored as the worst value (--failed-as worst) in brackets: {shown}")


def annotate_summary(result: Analysis, acc: Accounting,
                     ranges: Mapping[str, tuple[float, float]]) -> None:
    """Give each summary row of ``result`` (in place) its seeds, and its intervals cut at the
    metric's range with the method named; a row for each counted (task, config, metric) without
    a completed seed (``n = 0``); the rows in the accounting's order."""
    rows = result.summary
    seen = {(r.task, r.config, r.metric) for r in rows}
    for key, count in acc.counts.items():
        if key not in seen:  # no completed seed: the row stays, with nothing to show
            rows.append(SummaryRow(task=count.task, config=count.config, metric=count.metric, n=0))
    order = {k: i for i, k in enumerate(acc.counts)}
    rows.sort(key=lambda r: (order.get((r.task, r.config, r.metric), len(order)),))
    named = result.methods.ci if result.methods is not None else ""
    for i, r in enumerate(rows):
        own = acc.counts.get((r.task, r.config, r.metric))
        bounds = range_of(ranges, r.task, r.metric)
        method = T_METHOD if named in ("", "student-t") else named
        ci, boot = (r.ci_low, r.ci_high), (r.boot_ci_low, r.boot_ci_high)
        if bounds is not None:
            name = f"{r.task}/{r.config} {r.metric}"
            ci = _bound_or_drop(*ci, bounds, False, name, result.warnings)
            boot = _bound_or_drop(*boot, bounds, True, name, result.warnings)
            method += f", cut at the range [{bounds[0]:g}, {bounds[1]:g}]"
        rows[i] = replace(r, ci_low=ci[0], ci_high=ci[1], boot_ci_low=boot[0], boot_ci_high=boot[1], seeds=RowSeeds(
            planned=own.planned if own else r.n,
            completed=own.completed if own else r.n,
            failed_seeds=tuple(own.failed) if own else (),
            missing_seeds=tuple(own.missing) if own else (),
            ci_method=method if ci[0] is not None else None,
            counted=own is not None,
        ))


def _annotate_comparisons(result: Analysis, acc: Accounting, baseline: str | None,
                          candidates: Sequence[str] | None,
                          ranges: Mapping[str, tuple[float, float]]) -> None:
    if baseline is None:
        return
    rows = result.comparisons
    seen = {(r.task, r.metric, r.candidate) for r in rows}
    for (task, config, metric), count in acc.counts.items():
        if config == baseline or (candidates is not None and config not in candidates):
            continue
        base = acc.counts.get((task, baseline, metric))
        if (task, metric, config) in seen or base is None:
            continue
        if count.completed == 0 or base.completed == 0:
            rows.append(ComparisonRow(task=task, metric=metric, baseline=baseline,
                                      candidate=config, paired=False, n=0))
    for i, r in enumerate(rows):
        bounds = range_of(ranges, r.task, r.metric)
        diff, boot = (r.diff_ci_low, r.diff_ci_high), (r.diff_boot_ci_low, r.diff_boot_ci_high)
        if bounds is not None:
            # c̄ - b̄ of values in [low, high] lies in [low - high, high - low].
            span = (bounds[0] - bounds[1], bounds[1] - bounds[0])
            name = f"{r.task} {r.metric} {r.candidate} vs {r.baseline}"
            diff = _bound_or_drop(*diff, span, False, name, result.warnings)
            boot = _bound_or_drop(*boot, span, True, name, result.warnings)
        base = acc.counts.get((r.task, r.baseline, r.metric))
        cand = acc.counts.get((r.task, r.candidate, r.metric))
        losses = [x for x in (acc.loss(r.task, r.baseline, r.metric),
                              acc.loss(r.task, r.candidate, r.metric)) if x]
        rows[i] = replace(r, diff_ci_low=diff[0], diff_ci_high=diff[1], diff_boot_ci_low=boot[0],
                          diff_boot_ci_high=boot[1], seeds=ComparisonSeeds(
                              baseline_seeds=base.label if base else None,
                              candidate_seeds=cand.label if cand else None,
                              caveat="; ".join(losses) or None))


__all__ = ["FAILED_AS", "Accounting", "FailedAs", "SeedCount", "account", "account_table", "analyze_accounted",
           "analyze_seeds",
           "bound_interval", "count_seeds", "range_of"]
