"""One analysis of a results folder, computed once: what every output of benchlab renders.

:func:`analyze_results` takes the results table (:class:`benchlab.results.Results`: the final
values, the benchmark record, the seeds planned and failed) and returns one frozen
:class:`ResultsAnalysis`:

- the seed accounting, done once for every metric (:func:`benchlab.stats.accounting.account`):
  what became of each planned seed, and the table the statistics see (failed seeds left out or
  scored as the worst value);
- a :class:`~benchlab.stats.analysis.SummaryRow` per (task, config, metric), for every metric:
  n, mean, std, sem, median, min, max, the Student-t 95% CI (cut at the metric's range, its
  method named), ranks, the high-variance flag, the seeds planned, completed, failed and
  missing, and for a one-seed result the interval of the evaluation's own standard error;
- of the primary metric, the full analysis (:func:`benchlab.stats.accounting.analyze_accounted`):
  bootstrap intervals, every candidate against the baseline (one Holm family), the aggregates
  across tasks and the warnings.

``BENCHMARK_REPORT.md``, ``BENCHMARKS.md``, the figures, the dashboard's tables and
``benchlab compare`` render this object and compute no statistic of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from benchlab.errors import DataError
from benchlab.names.benchmark_info import goal_of
from benchlab.names.choices import DEFAULT_REPS as _DEFAULT_REPS
from benchlab.stats.accounting import (
    Accounting,
    SeedCount,
    account,
    account_table,
    analyze_accounted,
    annotate_summary,
)
from benchlab.stats.analysis import (
    AggregateRow,
    Analysis,
    ComparisonRow,
    Methods,
    Normalization,
    StderrInterval,
    SummaryRow,
)
from benchlab.stats.curves import CurveSet, GroupedCurves, curve_sets
from benchlab.stats.figures import PrimaryFigures
from benchlab.stats.runvalues import RunValues

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.results import Results
    from benchlab.stats.table import AnalysisOptions

#: Bootstrap resamples of a report's statistics (``benchlab report --reps``), spelt in names.choices.
DEFAULT_REPS = _DEFAULT_REPS


@dataclass(frozen=True)
class ResultsAnalysis:
    """Every statistic of a results table, immutable (:func:`analyze_results`).

    ``summary`` holds a row per (task, config, metric) of every metric; ``comparisons``,
    ``aggregate``, ``normalization`` and ``methods`` are the primary metric's. Undefined numbers
    are None.
    """

    primary: str
    #: The primary metric's goal, ``"max"`` or ``"min"`` (``BenchmarkInfo.primary_goal``).
    goal: str
    failed_as: str = "exclude"
    #: The metrics with a value, in the order they first appear in the table.
    metrics: tuple[str, ...] = ()
    summary: tuple[SummaryRow, ...] = ()
    #: What became of each planned seed, per (task, config, metric), counted once.
    seeds: tuple[SeedCount, ...] = ()
    comparisons: tuple[ComparisonRow, ...] = ()
    aggregate: tuple[AggregateRow, ...] = ()
    warnings: tuple[str, ...] = ()
    methods: Methods | None = None
    normalization: Normalization | None = None
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    #: Whether the primary metric was analysed in full (its rows carry intervals): False when no
    #: run of it completed or failed, or its table could not be analysed (the warnings say why).
    primary_analysed: bool = False
    #: The metrics analysed in full (bootstrap intervals, comparisons): the primary one for a
    #: results folder's report; those a caller asked for (every metric by default) for
    #: ``benchlab analyze`` and ``compare`` (:func:`analyze_table`'s ``options``).
    analysed: tuple[str, ...] = ()
    #: Every logged curve, by (metric, task): the runs' curves aligned on one grid, and each
    #: config's mean curve with its Student-t 95% band (:func:`benchlab.stats.curves.curve_sets`).
    curves: tuple[CurveSet, ...] = ()
    #: The final values as the statistics saw them (failed seeds excluded or scored worst): the
    #: seeds the figures draw and a pre-registered plan is judged on.
    used: pd.DataFrame | None = None
    #: The numbers of the figures of the primary metric's seeds (CV of the mean vs N, performance
    #: profiles, radar), computed on first use (:mod:`benchlab.stats.figures`); None for an analysis
    #: as a caller asked (``analyze``, ``compare``), which draws none.
    figures: PrimaryFigures | None = None

    @cached_property
    def _rows(self) -> dict[tuple[str, str, str], SummaryRow]:
        return {(r.task, r.config, r.metric): r for r in self.summary}

    def row(self, task: str, config: str, metric: str | None = None) -> SummaryRow | None:
        """The summary row of ``(task, config, metric)`` (default: the primary metric), or None."""
        return self._rows.get((task, config, metric or self.primary))

    def rows_of(self, metric: str | None = None) -> list[SummaryRow]:
        """The summary rows of ``metric`` (default: the primary one), in the table's order."""
        want = metric or self.primary
        return [r for r in self.summary if r.metric == want]

    def primary_counts(self) -> dict[tuple[str, str], SeedCount]:
        """The seed counts of the primary metric, by (task, config)."""
        return {(c.task, c.config): c for c in self.seeds if c.metric == self.primary}

    def median_seed(self, task: str, config: str, among: Sequence[int]) -> int | None:
        """Of the seeds ``among``, the one whose primary value is the sample's median member
        (:func:`benchlab.stats.describe.median_member`: of an even count the worse middle one):
        the run that stands for the score. None when none of them has a value."""
        from benchlab.stats.describe import median_member

        values = self._primary_values.get((task, config), {})
        pick = median_member([values.get(s, float("nan")) for s in among], "min" if self.goal == "min" else "max")
        return None if pick is None else among[pick]

    @cached_property
    def _primary_values(self) -> dict[tuple[str, str], dict[int, float]]:
        out: dict[tuple[str, str], dict[int, float]] = {}
        if self.used is None:
            return out
        prim = self.used[(self.used["metric"] == self.primary).to_numpy()]
        for t, c, s, v in zip(prim["task"].tolist(), prim["config"].tolist(), prim["seed"].tolist(),
                              prim["value"].tolist(), strict=True):
            out.setdefault((t, c), {})[int(s)] = float(v)
        return out

    def analysis(self) -> Analysis:
        """The metrics analysed in full (:attr:`analysed`) as an :class:`~benchlab.stats.analysis.Analysis`:
        what ``benchlab analyze`` and ``compare`` print (its ``to_json()`` is ``--json``'s text)."""
        want = set(self.analysed)
        return Analysis(summary=[r for r in self.summary if r.metric in want], comparisons=list(self.comparisons),
                        aggregate=list(self.aggregate), warnings=list(self.warnings), methods=self.methods,
                        normalization=self.normalization, failed_as=self.failed_as if want else None,
                        ranges=dict(self.ranges))

    def to_json(self) -> str:
        """The JSON ``benchlab analyze --json`` and ``compare --json`` print (:meth:`analysis`)."""
        return self.analysis().to_json()

    def of_pair(self, baseline: str, candidate: str) -> ResultsAnalysis:
        """This analysis narrowed to ``baseline`` and ``candidate``: their summary and aggregate rows,
        the candidate's comparisons, and the warnings not about another config. The p-values stay
        those of the whole family they were adjusted in (``holm_family``): ``compare``'s verdict is
        the one ``analyze`` and the report give."""
        pair = {baseline, candidate}
        others = {r.config for r in self.summary} | {r.candidate for r in self.comparisons}
        others |= {r.config for r in self.aggregate}
        others -= pair
        return replace(self, summary=tuple(r for r in self.summary if r.config in pair),
                       comparisons=tuple(r for r in self.comparisons if r.candidate == candidate),
                       aggregate=tuple(r for r in self.aggregate if r.config in pair),
                       warnings=tuple(_warnings_about(self.warnings, pair, others)))

    def primary_analysis(self) -> Analysis:
        """The primary metric's part as an :class:`~benchlab.stats.analysis.Analysis` (the JSON
        ``benchlab analyze --json`` prints, and what ``compare`` and an export take)."""
        return Analysis(summary=self.rows_of(), comparisons=list(self.comparisons), aggregate=list(self.aggregate),
                        warnings=list(self.warnings), methods=self.methods, normalization=self.normalization,
                        failed_as=self.failed_as if self.primary_analysed else None, ranges=dict(self.ranges))


def analyze_results(results: Results, *, failed_as: str = "exclude", reps: int = DEFAULT_REPS,
                    seed: int = 0, options: AnalysisOptions | None = None) -> ResultsAnalysis:
    """Every statistic of a results table, computed once (module docstring).

    Args:
        results: the results table (:func:`benchlab.results.read`).
        failed_as: ``"exclude"`` (failed seeds left out, and every claim they touch says so) or
            ``"worst"`` (scored as the worst value; :mod:`benchlab.stats.accounting`).
        reps: bootstrap resamples of the primary metric's intervals.
        seed: seed of every random procedure, so the same table gives the same analysis.
        options: analyse as a caller asks instead (:func:`analyze_table`).
    """
    return analyze_table(results.finals, results.info, planned=results.planned, failed_runs=results.failed_runs,
                         failed_as=failed_as, reps=reps, seed=seed, curves=results.curves, options=options)


@dataclass(frozen=True)
class CurveSummaries:
    """The first part of a results folder's analysis, by itself (:func:`summarise_curves`): its
    logged curves aligned and banded (:attr:`ResultsAnalysis.curves`) and the metrics' declared
    ranges (:attr:`ResultsAnalysis.ranges`). What the report's curve figures draw, ready before the
    rest is computed; :func:`analyze_table` takes it back as its ``curves`` and computes neither
    again."""

    curves: tuple[CurveSet, ...]
    ranges: dict[str, tuple[float, float]]


def summarise_curves(curves: GroupedCurves | None, info: BenchmarkInfo) -> CurveSummaries:
    """The curves and ranges part of :func:`analyze_table` for ``info``'s benchmark (module
    docstring), computed ahead of the rest."""
    from benchlab.stats.ranges import metric_ranges

    return CurveSummaries(tuple(curve_sets(curves)) if curves is not None else (), metric_ranges(info.spec))


def analyze_table(
    finals: pd.DataFrame | RunValues,
    info: BenchmarkInfo | None,
    *,
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Sequence[tuple[str, str, Any]] = (),
    failed_as: str = "exclude",
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    curves: GroupedCurves | CurveSummaries | None = None,
    options: AnalysisOptions | None = None,
) -> ResultsAnalysis:
    """:func:`analyze_results` of a long table of final values (``task, config, seed, metric,
    value``) and the benchmark record it was made under; ``curves`` the logged curves
    (:class:`benchlab.results.Curves`), summarised when given, or their summaries computed ahead
    (:func:`summarise_curves`, of the same ``info``).

    With ``options`` (:class:`~benchlab.stats.table.AnalysisOptions`), the table is analysed as a
    caller asks, the way ``benchlab analyze`` and ``compare`` (and :func:`benchlab.compare`) do:
    every metric of it (or ``options.metric``) in full with those settings (its baseline, goals,
    curve summary, ranges, ...; the caller fills them from ``info`` where it has one), the first
    one aggregated across tasks and taken as primary; ``reps`` and ``seed`` are then the
    options'. ``finals`` may then be a long table with curves, or final values read without pandas
    (:class:`~benchlab.stats.runvalues.RunValues`). Without them, the benchmark record decides:
    its primary metric in full, every other one described (the report's analysis).
    """
    from benchlab.stats.ranges import metric_ranges, normal_metrics
    from benchlab.stats.table import AnalysisOptions, describe_runs, validate_table

    ahead = curves if isinstance(curves, CurveSummaries) else None
    if isinstance(curves, CurveSummaries):
        curve_summaries = curves.curves
    else:
        curve_summaries = tuple(curve_sets(curves)) if curves is not None else ()
    if options is not None:
        return _analyze_as_asked(finals, options, planned=planned, failed_runs=list(failed_runs),
                                 failed_as=failed_as, curves=curve_summaries)
    if info is None:
        raise TypeError("analyze_table: give the benchmark record (info) or the analysis' options")
    assert not isinstance(finals, RunValues), "a results table is a DataFrame"
    primary, goal = info.primary, info.primary_goal
    ranges = dict(ahead.ranges) if ahead is not None else metric_ranges(info.spec)
    failed_runs = list(failed_runs)
    head = ResultsAnalysis(primary, goal, failed_as, ranges=ranges, curves=curve_summaries)
    if not len(finals) and not failed_runs:
        return replace(head, warnings=(f"no completed run has a value of {primary!r} yet",), used=finals)
    problem = None
    try:
        table = validate_table(finals, "results") if len(finals) else _empty_table()
    except DataError as exc:  # the primary's analysis says why; the table is still described
        table, problem = finals, str(exc)
    used, acc = account(table, failed_as, info.goal or "max", planned, failed_runs, ranges, [primary])
    is_primary = (table["metric"] == primary).to_numpy()
    analysis = _analyze_primary(used, acc, table[is_primary], info, problem, planned=planned, failed_runs=failed_runs,
                                ranges=ranges, reps=reps, seed=seed)
    options = AnalysisOptions(goal=info.goal or "max", ranges=ranges,  # type: ignore[arg-type]
                              assume_normal=normal_metrics(info.spec))
    analysed = any(r.metric == primary for r in analysis.summary)
    others = used if not analysed else used[(used["metric"] != primary).to_numpy()]
    described = Analysis(summary=describe_runs(others, options) if len(others) else [])
    rest = Accounting(acc.failed_as, {k: c for k, c in acc.counts.items() if not analysed or k[2] != primary},
                      acc.worst)
    annotate_summary(described, rest, ranges)  # seeds and intervals cut at the range; warnings not shown
    stderr = _stderr_intervals(finals, primary, ranges.get(primary))
    summary = [replace(r, stderr=stderr.get((r.task, r.config))) if r.metric == primary and r.n == 1 else r
               for r in [*analysis.summary, *described.summary]]
    return replace(
        head, metrics=tuple(dict.fromkeys(used["metric"].tolist())), summary=tuple(summary),
        seeds=tuple(acc.counts.values()), comparisons=tuple(analysis.comparisons),
        aggregate=tuple(analysis.aggregate), warnings=tuple(analysis.warnings), methods=analysis.methods,
        normalization=analysis.normalization, primary_analysed=analysed, analysed=(primary,) if analysed else (),
        used=used, figures=PrimaryFigures(primary, goal, used, tuple(info.tasks), tuple(info.configs),
                                          dict(info.references), seed))


def _analyze_as_asked(finals: pd.DataFrame | RunValues, options: AnalysisOptions, *,
                      planned: Mapping[tuple[str, str], Sequence[Any]] | None,
                      failed_runs: list[tuple[str, str, Any]], failed_as: str,
                      curves: tuple[CurveSet, ...]) -> ResultsAnalysis:
    """:func:`analyze_table` with ``options``: the seeds counted once
    (:func:`~benchlab.stats.accounting.account_table`), every metric asked for analysed in full."""
    from dataclasses import fields

    ranges = dict(options.ranges or {})
    settings = {f.name: getattr(options, f.name) for f in fields(options) if f.name != "ranges"}
    used, acc, table = account_table(finals, failed_as=failed_as, planned=planned, failed_runs=failed_runs,
                                     ranges=ranges, metric=options.metric, goal=options.goal,
                                     summary=options.summary, source=options.source)
    analysis = analyze_accounted(used, acc, table, planned=planned, failed_runs=failed_runs, ranges=ranges,
                                 **settings)
    metrics = tuple(dict.fromkeys(r.metric for r in analysis.summary))
    norm = analysis.normalization
    primary = options.metric or (norm.metric if norm is not None and norm.metric else None) or (
        metrics[0] if metrics else "value")
    stderr = _stderr_intervals(used if table is None else table, primary, ranges.get(primary))
    summary = [replace(r, stderr=stderr.get((r.task, r.config))) if r.metric == primary and r.n == 1 else r
               for r in analysis.summary]
    if isinstance(used, RunValues):
        used = None  # final values read without pandas stay so: no figure draws them
    return ResultsAnalysis(
        primary, goal_of(options.goal, primary), failed_as, metrics=metrics, summary=tuple(summary),
        seeds=tuple(acc.counts.values()), comparisons=tuple(analysis.comparisons),
        aggregate=tuple(analysis.aggregate), warnings=tuple(analysis.warnings), methods=analysis.methods,
        normalization=analysis.normalization, ranges=dict(analysis.ranges), primary_analysed=bool(metrics),
        analysed=metrics, curves=curves, used=used)


def _warnings_about(warnings: Sequence[str], pair: set[str], others: set[str]) -> list[str]:
    """Of ``warnings``, those not about one of ``others`` alone (:meth:`ResultsAnalysis.of_pair`)."""
    import re

    if not others:
        return list(warnings)
    names = "|".join(re.escape(o) for o in sorted(others, key=len, reverse=True))
    # Warnings open with what they are about: "task/config metric: ", "task/config/s3 metric: ",
    # "task metric config vs baseline: ", "config: ", "aggregate: config: " or "aggregate (configs): ".
    about_other = re.compile(rf"(\S*/(?:{names})(?:/s\S+)? |\S+ \S+ (?:{names}) vs |(?:aggregate: )?(?:{names}): )")
    group = re.compile(r"aggregate \(([^)]*)\)")
    kept = []
    for w in warnings:
        if about_other.match(w):
            continue
        m = group.match(w)
        if m and not pair & {c.strip() for c in m.group(1).split(",")}:
            continue
        kept.append(w)
    return kept


def _analyze_primary(used: pd.DataFrame, acc: Accounting, table: pd.DataFrame, info: BenchmarkInfo,
                     problem: str | None, *, planned: Mapping[tuple[str, str], Sequence[Any]] | None,
                     failed_runs: list[tuple[str, str, Any]], ranges: Mapping[str, tuple[float, float]],
                     reps: int, seed: int) -> Analysis:
    """The full analysis of the primary metric on the seeds as accounted: an empty one with a
    warning when no run of it completed or failed, or its table cannot be analysed."""
    from benchlab.stats.ranges import normal_metrics

    primary = info.primary
    if problem is not None:
        return Analysis(warnings=[problem])
    if table.empty and not failed_runs:
        return Analysis(warnings=[f"no completed run has a value of {primary!r} yet"])
    configs = set(table["config"].tolist())
    try:
        return analyze_accounted(
            used[(used["metric"] == primary).to_numpy()], acc.of_metric(primary), table, planned=planned,
            failed_runs=failed_runs, ranges=ranges, assume_normal=normal_metrics(info.spec),
            baseline=info.baseline if info.baseline in configs else None, metric=primary,
            goal=info.goal or "max", reps=reps, seed=seed, references=info.references or None, source="results")
    except DataError as exc:
        return Analysis(warnings=[str(exc)])


def _empty_table() -> pd.DataFrame:
    """A long table with no row (every run failed): nothing to validate, all to count."""
    import numpy as np
    import pandas as pd

    return pd.DataFrame({"task": pd.Series(dtype=object), "config": pd.Series(dtype=object),
                         "seed": pd.Series(dtype=np.int64), "metric": pd.Series(dtype=object),
                         "step": pd.Series(dtype=float), "value": pd.Series(dtype=float)})


def stderr_names(metric: str, task: str) -> list[tuple[str, str]]:
    """The metric names an evaluation's standard error of ``metric`` may have, with the
    label the report gives each: ``(name, label)``, most specific first.

    lm-evaluation-harness writes ``exact_match_stderr,strict-match`` next to
    ``exact_match,strict-match``; its every-metric extractor names them
    ``task/exact_match_stderr,strict-match`` (``collect/lm_eval.py``), and a bare
    ``metric,filter`` primary is taken from the run's own task. Any other tool's
    ``<metric>_stderr`` counts too.
    """
    names: list[tuple[str, str]] = []
    if "," in metric:
        head, filt = metric.split(",", 1)
        own = f"{head}_stderr,{filt}"
        names.append((own, "lm-eval standard error"))
        if "/" not in metric:
            names.append((f"{task}/{own}", "lm-eval standard error"))
    names.append((f"{metric}_stderr", "s.e."))
    return names


def _stderr_intervals(finals: pd.DataFrame | RunValues, metric: str, bounds: tuple[float, float] | None
                      ) -> dict[tuple[str, str], StderrInterval]:
    """Per (task, config) with one value of ``metric``: the normal interval of the evaluation's
    own standard error, found by name (:func:`stderr_names`), so an lm-eval run read with
    ``from: {lm_eval: .}`` needs no declaration; ``value ± 1.96·se``
    (:func:`benchlab.stats.describe.normal_interval`), cut at the metric's range."""
    from benchlab.stats.accounting import bound_interval
    from benchlab.stats.describe import normal_interval

    if not len(finals):
        return {}
    values: dict[tuple[str, str, str], list[float]] = {}
    columns = ((finals.task, finals.config, finals.metric, finals.value.tolist()) if isinstance(finals, RunValues)
               else (finals["task"].tolist(), finals["config"].tolist(), finals["metric"].tolist(),
                     finals["value"].tolist()))
    for task, config, name, value in zip(*columns, strict=True):
        if value == value:  # NaN: no value
            values.setdefault((str(task), str(config), str(name)), []).append(float(value))
    out: dict[tuple[str, str], StderrInterval] = {}
    for (task, config, name), found in values.items():
        if name != metric or len(found) != 1:
            continue
        for se_name, label in stderr_names(metric, task):
            se = values.get((task, config, se_name), [])
            if len(se) == 1 and se[0] > 0:
                low, high = bound_interval(*normal_interval(found[0], se[0]), bounds)
                out[(task, config)] = StderrInterval(se[0], float(low), float(high), label)  # type: ignore[arg-type]
                break
    return out


__all__ = ["DEFAULT_REPS", "CurveSet", "CurveSummaries", "PrimaryFigures", "ResultsAnalysis", "SeedCount",
           "analyze_results", "analyze_table", "stderr_names", "summarise_curves"]
