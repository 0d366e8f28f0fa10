"""The statistics of a whole long-format results table, as one typed :class:`Analysis`.

:func:`analyze` is what ``benchlab analyze``, ``benchlab compare`` and the
report call: it validates the table, reduces learning curves to one number per
run, describes and ranks every (task, config, metric), compares every candidate
with the baseline (Holm-corrected across the comparisons of each metric), and aggregates the
primary metric across tasks. Undefined numbers are ``None`` with a line in
``warnings``; nothing here prints or reads files. The result's types and its JSON
are in :mod:`benchlab.stats.analysis`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from benchlab.errors import BadArgument, DataError
from benchlab.names.benchmark_info import goal_of
from benchlab.names.choices import AlignChoice
from benchlab.names.long_format import OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from benchlab.stats.aggregate import AGGREGATES, aggregate_many, interval_shortfall
from benchlab.stats.analysis import (
    AggregateRow,
    Analysis,
    ComparisonRow,
    Estimate,
    Methods,
    Normalization,
    SummaryRow,
    TaskNormalization,
    name_holm_families,
)
from benchlab.stats.bootstrap import (
    BOOTSTRAP_T_MIN_N,
    METHODS,
    STUDENTIZED_MIN_N,
    Method,
    few_for_bootstrap_t,
    studentized_mean_ci,
)
from benchlab.stats.compare import Comparison, compare, holm, is_significant, shape_warning, shared_seeds
from benchlab.stats.curves import SUMMARIES, Summary, summarize
from benchlab.stats.curves import align as align_curves
from benchlab.stats.describe import UNBOUNDED_BOOTSTRAP_T, Goal, describe, rank, separated_from_best
from benchlab.stats.ranktests import MANNWHITNEY_EXACT_MAX, WILCOXON_EXACT_MAX
from benchlab.stats.runvalues import RunValues
from benchlab.stats.scores import NORMALIZATIONS, Normalize, score_matrices
from benchlab.stats.verdict import EVERY_METRIC, assumes_normal, decide, range_of

if TYPE_CHECKING:
    # Imported where a function needs it: a table of final values is analysed without pandas.
    import pandas as pd

DEFAULT_METRIC = "value"

#: The across-task intervals, as ``methods.aggregate_ci`` names them.
AGGREGATE_CI = ("stratified bootstrap, expanded percentile; median: task means shrunk toward "
                "their median by the share of their spread that noise explains (James–Stein) "
                "before resampling")
AGGREGATE_CI_ONE_TASK = ("one task: mean, median and optimality gap: bootstrap-t (studentized) from "
                         f"{BOOTSTRAP_T_MIN_N} runs, Student t below; IQM (4 runs or more): bootstrap-t "
                         "studentized by the Tukey–McLaughlin standard error from 8 runs, Yuen's t interval below; "
                         "otherwise stratified bootstrap, expanded percentile")


def validate_table(df: pd.DataFrame, source: str = "table") -> pd.DataFrame:
    """Check a long-format table and return a normalised copy.

    Args:
        df: columns ``task, config, seed, value`` and optionally ``metric, step, benchmark``.
        source: names the table in error messages (usually its file name).

    Returns:
        A copy with ``metric`` (``"value"`` where absent) and ``step`` (NaN where
        absent) columns, ``value``/``step`` as floats, ``task``/``config``/``metric`` as str.

    Raises:
        DataError: a required column is missing, the table is empty, ``value`` or
            ``step`` holds something that is not a number, or ``seed`` something that
            is not an integer (the first offending row and value are named).
    """
    import pandas as pd

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
        # Only a cell that did not parse is read as text (an empty one or "nan" holds no value):
        # a column of numbers, the usual one, is never turned into 20,000 strings.
        bad = (numeric.isna() & out[col].notna()).to_numpy(dtype=bool, copy=True)
        if bad.any():
            text = out[col][bad].astype(str).str.strip().str.lower()
            bad[bad] = ~text.isin(["", "nan"]).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
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
    # "3" and 3.0 name the same seed (CSV exports differ); 1.5 or "best" is no seed at all,
    # and taking it as a label would silently pair runs that were never paired.
    seeds = pd.to_numeric(out["seed"], errors="coerce")
    bad = ~(np.isfinite(seeds.to_numpy(dtype=float)) & (seeds == seeds.round()).to_numpy())
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        shown = out["seed"].iloc[row]
        shown = shown.item() if isinstance(shown, np.generic) else shown
        raise DataError(f"{source}: column 'seed' must hold integers; row {row + 1} has {shown!r}")
    out["seed"] = seeds.astype(np.int64)
    return out


Align = Literal["common", "own"]
ALIGNS: tuple[str, ...] = tuple(m.value for m in AlignChoice)


def default_align(summary: str) -> Align:
    """``own`` for the summaries of a run's end (``final``, ``max``); ``common`` for those
    of a whole range (``auc``, ``slope``), which differ in meaning over different ranges."""
    return "own" if summary in ("final", "max") else "common"


def reduce_runs(
    df: pd.DataFrame,
    summary: Summary = "final",
    k: int = 1,
    fraction: float = 0.25,
    align: Align | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """One value per run and metric: ``task, config, metric, seed, value``.

    A run's final scalar (a row with no step) is used as is for ``summary="final"``.
    Learning curves (rows with a step) are summarised (:func:`benchlab.stats.curves.summarize`)

    - on each run's own curve (``align="own"``, the default for ``final`` and ``max``):
      a run that stopped early keeps its own last value;
    - or on the step range every curve of the (task, metric) covers (``align="common"``,
      the default for ``auc`` and ``slope``), after linear interpolation onto the union
      of their steps in that range (:func:`benchlab.stats.curves.align`); every run that
      is cut is named in a warning with the steps it lost.

    NaN points of a curve are dropped and counted in a warning. With ``align="own"`` a run
    whose curve stops before the last step other runs of its (task, metric) reach is named
    in a warning (it is taken as if complete). A point logged twice for one run and step (a
    resumed run) is the mean of its copies, with a warning, so that no summary depends on
    the order of the rows. For ``auc``, ``max`` and ``slope`` every run needs a curve.
    Duplicate scalars of one run are averaged, with a warning.

    Args:
        df: a table checked by :func:`validate_table`.
        summary, k, fraction: see :func:`benchlab.stats.curves.summarize`.
        align: ``"own"`` or ``"common"``; ``None`` picks :func:`default_align`.

    Returns:
        ``(runs, warnings)``.
    """
    import pandas as pd

    if summary not in SUMMARIES:
        raise BadArgument("summary", summary, SUMMARIES)
    align = default_align(summary) if align is None else align
    if align not in ALIGNS:
        raise BadArgument("align", align, ALIGNS)
    warnings: list[str] = []
    keys = ["task", "config", "metric", "seed"]
    scalars = df[df["step"].isna()]
    curves = df[df["step"].notna()]
    scalar_runs = _scalar_runs(scalars, keys, warnings)
    curves = _drop_repeated_points(curves, keys, warnings)
    # Only curves are checked against the runs' scalars: a table of final values builds no set.
    scalar_keys = set(_rows(scalar_runs, keys)) if len(curves) else set()
    rows: list[dict[str, Any]] = []
    curve_keys: set[tuple[Any, ...]] = set()
    for (task, metric), group in curves.groupby(["task", "metric"], sort=False):
        runs = list(group.groupby(["config", "seed"], sort=False))
        raw = [(g["step"].to_numpy(dtype=float), g["value"].to_numpy(dtype=float)) for _, g in runs]
        dropped = [int(np.isnan(v).sum()) for _, v in raw]
        if sum(dropped):
            warnings.append(
                f"{task} {metric}: {sum(dropped)} NaN curve point(s) dropped from "
                f"{sum(1 for x in dropped if x)} run(s)"
            )
        cleaned = [(st[~np.isnan(v)], v[~np.isnan(v)]) for st, v in raw]
        if align == "common":
            aligned = _on_common_range(task, metric, runs, cleaned, summary, warnings)
            if aligned is None:
                continue
            per_run = aligned
        else:
            per_run = cleaned
            _warn_short_runs(task, metric, runs, cleaned, summary, scalar_keys, warnings)
        for ((config, seed), _), (st, v) in zip(runs, per_run, strict=True):
            value = summarize(st, v, summary, k, fraction)
            if value is None:
                warnings.append(f"{task}/{config}/s{seed} {metric}: {summary} is undefined (null)")
            rows.append({"task": task, "config": config, "metric": metric, "seed": seed,
                         "value": np.nan if value is None else value})
            curve_keys.add((task, config, metric, seed))
    curve_runs = pd.DataFrame(rows, columns=keys + ["value"])
    if summary == "final":
        # The run's own final scalar wins over its curve.
        taken = set(_rows(scalar_runs, keys)) if len(curve_runs) else set()
        curve_runs = curve_runs[[r not in taken for r in _rows(curve_runs, keys)]]
        out = pd.concat([scalar_runs, curve_runs], ignore_index=True)
    else:
        only_scalar = scalar_runs[[r not in curve_keys for r in _rows(scalar_runs, keys)]]
        if len(only_scalar):
            metrics = sorted(only_scalar["metric"].unique())
            warnings.append(
                f"--summary {summary} needs learning curves; {len(only_scalar)} run(s) of "
                f"{', '.join(metrics)} have only a final value and are left out"
            )
        out = curve_runs
    return out.reset_index(drop=True), warnings


def _rows(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows of ``frame``'s ``columns`` as tuples of Python values (``itertuples``' values)."""
    # Column by column: iterating a pandas 3 string column value by value (itertuples, a zip over
    # the Series) costs ~2 µs a value, its tolist() a twentieth of that.
    return list(zip(*(frame[c].tolist() for c in columns), strict=True))


def _scalar_runs(scalars: pd.DataFrame, keys: list[str], warnings: list[str]) -> pd.DataFrame:
    """One final value per run and metric: duplicates averaged (with a warning), NaN kept."""
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
    return scalar_runs.drop(columns="has_nan")


def _drop_repeated_points(curves: pd.DataFrame, keys: list[str], warnings: list[str]) -> pd.DataFrame:
    """The curves with one point per (run, step): the mean of a step's points when it was logged
    more than once (with a warning naming the runs)."""
    # A resumed run logs some steps twice. Keeping both made final and auc depend on the order
    # of the rows (0.667 or 1.0), and so did keeping "the last written" one: which row is last
    # is the order the files were read in. The mean of the copies is the same in any order.
    import pandas as pd

    point = keys + ["step"]
    copies = curves.duplicated(point, keep=False)
    if copies.any():
        repeated = int(curves.duplicated(point, keep="first").sum())
        hit = curves[copies].drop_duplicates(keys)
        named = [f"{t}/{c}/s{sd} {m}" for t, c, m, sd in hit[keys].itertuples(index=False, name=None)]
        warnings.append(
            f"{repeated} duplicate curve point(s) (the same run and step logged again, "
            f"as a resumed run does) in {len(named)} run(s): {', '.join(named[:8])}"
            f"{' and more' if len(named) > 8 else ''}; each step's points are averaged (the same "
            "whatever the order of the rows)")
        curves = curves.copy()
        # Sorted before the mean, so that even its last bit does not depend on the row order.
        ordered = curves[copies].sort_values("value", kind="stable")
        means = ordered.groupby(point, sort=False, dropna=False)["value"].mean()
        first = ~curves.duplicated(point, keep="first")
        curves = curves[first]
        idx = pd.MultiIndex.from_frame(curves[point])
        found = idx.isin(means.index)
        curves.loc[found, "value"] = means.reindex(idx[found]).to_numpy()
    return curves


def _on_common_range(task: Any, metric: Any, runs: list[Any], cleaned: list[tuple[np.ndarray, np.ndarray]],
                     summary: Summary, warnings: list[str]) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The curves interpolated onto the step range all of them cover (each cut run named in a
    warning); None when they share no range."""
    grid, values = align_curves(cleaned)
    if grid.shape[0] == 0:
        warnings.append(f"{task} {metric}: the learning curves share no step range; skipped")
        return None
    lo, hi = float(grid[0]), float(grid[-1])
    cut = []
    for ((config, seed), _), (st, _) in zip(runs, cleaned, strict=True):
        if st.shape[0] and (st.min() < lo or st.max() > hi):
            cut.append(f"{config}/s{seed} (steps {st.min():g}–{st.max():g})")
    if cut:
        warnings.append(
            f"{task} {metric}: --summary {summary} on the common step range "
            f"[{lo:g}, {hi:g}], the steps every run of the task reached (one range per task, the "
            f"same whichever configs are compared); cut to it: {', '.join(cut)}"
        )
    return [(grid, row) for row in values]


def _warn_short_runs(task: Any, metric: Any, runs: list[Any], cleaned: list[tuple[np.ndarray, np.ndarray]],
                     summary: Summary, scalar_keys: set[tuple[Any, ...]], warnings: list[str]) -> None:
    """Under ``align="own"``: name the runs whose curve stops before the last step others reach."""
    ends = [float(st.max()) for st, _ in cleaned if st.shape[0]]
    top = max(ends, default=float("nan"))
    # Under final, a run's own final scalar stands for it, whatever its curve.
    short = [f"{config}/s{seed} (last step {st.max():g})"
             for ((config, seed), _), (st, _) in zip(runs, cleaned, strict=True)
             if st.shape[0] and st.max() < top
             and not (summary == "final" and (task, config, metric, seed) in scalar_keys)]
    if short and summary in ("final", "max"):
        warnings.append(
            f"{task} {metric}: {len(short)} run(s) stopped before step {top:g}, which "
            f"other runs reach: {', '.join(short[:8])}{' and more' if len(short) > 8 else ''}"
            f"; --summary {summary} takes each at its own last step (--align own) as if it "
            f"were complete; --align common compares every run at the last step all reach "
            f"({min(ends):g})")


def _seed(seed: int, *parts: object) -> np.random.SeedSequence:
    # A stable stream per group: results do not depend on which other groups exist.
    return np.random.SeedSequence([seed, zlib.crc32("\x1f".join(map(str, parts)).encode())])


def _num(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _fill_studentized(
    rows: list[Any],  # SummaryRow or ComparisonRow
    cells: list[tuple[int, np.ndarray]],
    low_key: str,
    high_key: str,
    reps: int,
    confidence: float,
    seed: int,
    what: str,
    warnings: list[str],
) -> None:
    """Bootstrap-t intervals of the mean for many samples at once, written into their rows:
    ``cells`` are ``(index in rows, sample)``, and each such row is replaced by its copy with the
    interval (the rows are frozen).

    An interval with an infinite bound (tied values: resamples without spread) is null on
    both sides, with a warning naming the row.

    Samples of the same size share one set of resample draws (seeded by the size alone,
    so a sample's interval does not depend on which other samples exist): one matrix
    product per size instead of one bootstrap per (task, config).
    """
    if reps == 0:  # no resamples asked for: the intervals stay null, nothing to warn of
        return
    by_size: dict[int, list[tuple[int, np.ndarray]]] = {}
    for i, x in cells:
        by_size.setdefault(int(x.shape[0]), []).append((i, x))
    for n, group in by_size.items():
        batch = np.stack([x for _, x in group])
        low, high = studentized_mean_ci(batch, reps, confidence, _seed(seed, what, n))
        for (i, _), lo, hi in zip(group, low.tolist(), high.tolist(), strict=True):
            row = rows[i]
            if not (np.isfinite(lo) and np.isfinite(hi)):
                name = (f"{row.task}/{row.config} {row.metric}" if isinstance(row, SummaryRow)
                        else f"{row.task} {row.metric} {row.candidate} vs {row.baseline}")
                warnings.append(f"{name}: {UNBOUNDED_BOOTSTRAP_T}")
                lo = hi = float("nan")
            rows[i] = replace(row, **{low_key: _num(lo), high_key: _num(hi)})


@dataclass(frozen=True)
class AnalysisOptions:
    """What :func:`analyze` compares and how.

    Fields:
    baseline: config the others are compared with; no comparisons when ``None``.
    candidates: configs compared with the baseline (default: all others).
    metric: analyse only this metric; by default every metric, and the first
        one in the table is the one aggregated across tasks.
    goal: ``"max"``/``"min"``, or one per metric name (default ``"max"``).
    reps: bootstrap resamples (describe, comparisons and aggregates); 0 for none: every
        bootstrap interval is then null, the t intervals and tests stand.
    seed: seed of every random procedure.
    summary: how learning curves become one number per run.
    confidence: coverage of every interval; ``alpha``: significance level.
    method: bootstrap interval of the mean (``boot_ci_*``, ``diff_boot_ci_*``):
        ``"studentized"`` (bootstrap-t, default), ``"percentile"`` or ``"bca"``.
    variance_threshold: ``high_variance`` when ``std > threshold · |mean|``.
    references: ``{task: (low, high)}`` normalising scores for the aggregate.
    source: names the table in messages.
    normalize: tasks without a reference: ``"none"`` (raw scores, default) or
        ``"observed"`` (min–max over the configs compared); see
        :func:`benchlab.stats.score_matrices`.
    align: learning curves summarised on each run's ``"own"`` curve or on the
        ``"common"`` step range; ``None`` picks :func:`default_align` of ``summary``.
    ranges: ``{metric: (low, high)}`` (or ``{"TASK/METRIC": ...}``), the values a metric can take: a
        significant t verdict stands only where a test valid for any distribution in that range
        confirms it (:mod:`benchlab.stats.verdict`). On raw scores
        (no references, ``normalize="none"``) the optimality gap is computed only for
        a metric declared to lie in ``[0, 1]``; otherwise it is null, with a warning.
    assume_normal: metrics (names, ``TASK/METRIC`` or ``"*"``; one name alone, or ``True`` for
        every metric) whose t verdict is accepted
        without a range, on the assumption that their values are close to normal; a
        significant t verdict of any other metric without a range is withheld.
    """

    baseline: str | None = None
    candidates: Sequence[str] | None = None
    metric: str | None = None
    goal: Goal | Mapping[str, Goal] = "max"
    reps: int = 10_000
    seed: int = 0
    summary: Summary = "final"
    confidence: float = 0.95
    alpha: float = 0.05
    method: Method = "studentized"
    variance_threshold: float = 0.01
    references: Mapping[str, tuple[float, float]] | None = None
    source: str = "table"
    normalize: Normalize = "none"
    align: Align | None = None
    ranges: Mapping[str, tuple[float, float]] | None = None
    assume_normal: Sequence[str] | bool = ()

    def normal_assumed(self) -> tuple[str, ...]:
        """``assume_normal`` as names: one name is that metric (not its letters), ``True``
        every metric, ``False`` none."""
        flag = self.assume_normal
        if isinstance(flag, bool):
            return (EVERY_METRIC,) if flag else ()
        return (flag,) if isinstance(flag, str) else tuple(flag)


def analyze(df: pd.DataFrame | RunValues, options: AnalysisOptions | None = None, **changes: Any) -> Analysis:
    """Every statistic of a long-format table.

    Args:
        df: long-format table (see :func:`validate_table`), or final values already one per
            run (:class:`~benchlab.stats.runvalues.RunValues`, read without pandas).
        options: what to compare and how (:class:`AnalysisOptions`; its defaults when None).
        **changes: fields of :class:`AnalysisOptions` to change, e.g. ``baseline="a", reps=500``.

    Returns:
        An :class:`~benchlab.stats.analysis.Analysis`; its ``to_json()`` layout is in
        ``docs/statistics.md``.

    Raises:
        BadArgument: ``method``, ``normalize``, ``summary``, ``align`` or a ``goal`` is not
            one of its choices.
        DataError: the table is unusable, names no such ``metric``, ``baseline`` or
            candidate, or ``reps`` is negative.
        TypeError: a change names no field of :class:`AnalysisOptions`.
    """
    o = replace(options or AnalysisOptions(), **changes)
    if o.method not in METHODS:
        raise BadArgument("method", o.method, METHODS)
    if o.normalize not in NORMALIZATIONS:
        raise BadArgument("normalize", o.normalize, NORMALIZATIONS)
    if not isinstance(o.reps, int) or o.reps < 0:
        raise DataError(f"reps must be a whole number of resamples, 0 (no bootstrap intervals) or more; got {o.reps!r}")
    if isinstance(df, RunValues) and o.summary != "final":
        df = df.to_frame()  # the summaries of curves go through reduce_runs' checks and warnings
    align = default_align(o.summary) if o.align is None else o.align
    warnings: list[str] = []
    runs, configs, has_curves = _runs_of(df, o, align, warnings)
    metrics = list(dict.fromkeys(runs.metric))
    summary_rows = _summarize(runs, o, warnings)
    comparisons = _compare_all(runs, configs, o, warnings)
    name_holm_families(comparisons)
    primary = o.metric if o.metric is not None else (metrics[0] if metrics else None)
    if o.metric is None and len(metrics) > 1:
        warnings.append(f"several metrics; the aggregate across tasks is of {primary!r}")
    aggregates: list[AggregateRow] = []
    normalization = Normalization(method=None, metric=primary)
    if primary is not None:
        aggregates, normalization = _aggregate(
            runs.where(m == primary for m in runs.metric), configs, goal_of(o.goal, primary),
            o.references, o.normalize, o.reps, o.seed, o.confidence, warnings, (o.ranges or {}).get(primary))
        normalization = replace(normalization, metric=primary)
    boot = o.method if o.method != "studentized" else "bootstrap-t (studentized)"
    methods = Methods(
        ci="student-t",
        boot_ci=boot,
        diff_ci="student-t on paired differences; welch-t unpaired",
        diff_boot_ci=boot,
        aggregate_ci=AGGREGATE_CI_ONE_TASK if len(normalization.tasks) == 1 else AGGREGATE_CI,
        wilcoxon="signed rank, zero differences dropped (wilcox), exact up to "
                 f"{WILCOXON_EXACT_MAX} pairs, else normal approximation with tie correction",
        mannwhitney="rank sum, exact up to "
                    f"{MANNWHITNEY_EXACT_MAX} runs, else normal approximation with tie correction",
        summary=o.summary,
        align=align if has_curves else None,
        confidence=o.confidence,
        alpha=o.alpha,
        reps=o.reps,
    )
    return Analysis(summary=summary_rows, comparisons=comparisons, aggregate=aggregates,
                    warnings=warnings, methods=methods, normalization=normalization)


def _runs_of(df: pd.DataFrame | RunValues, o: AnalysisOptions, align: Align,
             warnings: list[str]) -> tuple[RunValues, list[str], bool]:
    """The final value of each run of the metrics analysed, the configs compared, and whether
    the table held learning curves."""
    if isinstance(df, RunValues):
        # Final values, one per run: the table is its own reduction.
        runs = _pick_metric(df, o.metric, o.source, list(dict.fromkeys(df.metric)))
        configs = _check_configs(list(dict.fromkeys(runs.config)), o.baseline, o.candidates, o.source)
        has_curves = False
    else:
        table = validate_table(df, o.source)
        if o.metric is not None:
            _pick_metric(None, o.metric, o.source, list(dict.fromkeys(table["metric"].tolist())))
            table = table[table["metric"] == o.metric]
        configs = _check_configs(list(dict.fromkeys(table["config"].tolist())), o.baseline, o.candidates, o.source)
        reduced, notes = reduce_runs(table, o.summary, align=align)
        warnings += notes
        runs = RunValues.from_frame(reduced)
        has_curves = bool(table["step"].notna().any())
    if runs.empty:
        raise DataError(f"{o.source}: no runs left to analyse with summary {o.summary!r}")
    return runs, configs, has_curves


def describe_runs(table: pd.DataFrame, options: AnalysisOptions | None = None) -> list[SummaryRow]:
    """The summary rows :func:`analyze` gives a table of final values (one per run and metric),
    without bootstrap intervals, comparisons or aggregates: what a table of every metric shows
    beside the one analysed in full. Its warnings are dropped (the full analysis gives its own)."""
    o = replace(options or AnalysisOptions(), reps=0, method="percentile")
    reduced, _ = reduce_runs(validate_table(table, o.source), "final", align="own")
    runs = RunValues.from_frame(reduced)
    return [] if runs.empty else _summarize(runs, o, [])


def _summarize(runs: RunValues, o: AnalysisOptions, warnings: list[str]) -> list[SummaryRow]:
    """One described and ranked row per (task, config, metric)."""
    batched = o.method == "studentized"
    summary_rows: list[SummaryRow] = []
    boot_cells: list[tuple[int, np.ndarray]] = []  # (index in summary_rows, sample)
    too_few: list[str] = []
    for (task, met), idx in runs.groups("task", "metric").items():
        rows = []
        by_config: dict[str, list[int]] = {}
        for i in idx:
            by_config.setdefault(runs.config[i], []).append(i)
        for config, rows_of in by_config.items():
            values = runs.value[rows_of]
            d = describe(
                values, o.confidence, 0 if batched else o.reps, o.method,
                o.variance_threshold, _seed(o.seed, "describe", task, config, met),
                f"{task}/{config} {met}",
            )
            warnings += d.warnings
            rows.append(SummaryRow.of(str(task), str(config), str(met), values, d))
            if batched and d.n >= BOOTSTRAP_T_MIN_N:
                x = values[np.isfinite(values)]
                if d.std != 0.0:  # zero observed spread: no interval (describe says why)
                    boot_cells.append((len(summary_rows) + len(rows) - 1, x))
            elif batched and d.n >= STUDENTIZED_MIN_N and d.std != 0.0:
                too_few.append(f"{task}/{config} {met} (n={d.n})")
        by_seed = {config: _finite_by_seed(runs, rows_of) for config, rows_of in by_config.items()}
        separated = separated_from_best([r.config for r in rows], [r.mean for r in rows], by_seed,
                                        goal_of(o.goal, met), o.alpha,
                                        bounds=range_of(o.ranges or {}, str(task), str(met)),
                                        normal=assumes_normal(o.normal_assumed(), str(task), str(met)))
        ranks = rank([r.mean for r in rows], [r.ci_low for r in rows],
                     [r.ci_high for r in rows], goal_of(o.goal, met), separated)
        by_mean = rank([r.mean for r in rows], [None] * len(rows), [None] * len(rows), goal_of(o.goal, met))
        summary_rows += [replace(r, rank=rk, mean_rank=mk) for r, rk, mk in zip(rows, ranks, by_mean, strict=True)]
    if too_few:
        warnings.append(few_for_bootstrap_t(too_few))
    if batched:
        _fill_studentized(summary_rows, boot_cells, "boot_ci_low", "boot_ci_high", o.reps, o.confidence, o.seed,
                          "describe", warnings)
    return summary_rows


def _finite_by_seed(runs: RunValues, rows: list[int]) -> dict[object, float]:
    """``{seed: value}`` of the runs ``rows`` whose value is finite (one array pass, not a
    scalar test per run)."""
    values = runs.value[rows]
    keep = np.isfinite(values)
    return dict(zip([runs.seed[i] for i, k in zip(rows, keep.tolist(), strict=True) if k],
                    values[keep].tolist(), strict=True))


def _pick_metric(runs: RunValues | None, metric: str | None, source: str,
                 available: list[str]) -> RunValues:
    """``runs`` of ``metric`` only (all of them when it is None); a DataError naming the metrics
    there are when the table has no such metric."""
    if metric is not None and metric not in available:
        raise DataError(f"{source}: no metric {metric!r}; the table has {', '.join(available)}")
    if runs is None:
        return RunValues([], [], [], [], np.empty(0))
    return runs if metric is None else runs.where(m == metric for m in runs.metric)


def _check_configs(configs: list[str], baseline: str | None, candidates: Sequence[str] | None,
                   source: str) -> list[str]:
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
    return configs


def _compare_all(runs: RunValues, configs: list[str], o: AnalysisOptions,
                 warnings: list[str]) -> list[ComparisonRow]:
    """Each candidate against the baseline, per (task, metric), with Holm-corrected verdicts."""
    baseline = o.baseline
    if baseline is None:
        return []
    chosen = [c for c in (o.candidates or configs) if c != baseline]
    pairs: list[Pair] = []
    # {(task, metric, config): {seed: value}}, built in one pass (masks per pair are slow).
    values = runs.value.tolist()
    by_run = {key: {runs.seed[i]: values[i] for i in idx}
              for key, idx in runs.groups("task", "metric", "config").items()}
    for task, met in dict.fromkeys(zip(runs.task, runs.metric, strict=True)):
        base = by_run.get((task, met, baseline), {})
        if not base:
            warnings.append(f"{task} {met}: the baseline {baseline!r} has no runs; not compared")
            continue
        for cand in chosen:
            other = by_run.get((task, met, cand), {})
            if other:
                pairs.append(Pair(str(task), str(met), baseline, cand, base, other))
    return [p.row for p in compare_pairs(pairs, o, warnings)]


@dataclass(frozen=True)
class Pair:
    """One comparison to make: ``candidate``'s runs against ``baseline``'s on one (task, metric),
    each side's value per seed. ``label`` names it in warnings (default
    ``"<task> <metric> <candidate> vs <baseline>"``)."""

    task: str
    metric: str
    baseline: str
    candidate: str
    baseline_runs: Mapping[Any, float]
    candidate_runs: Mapping[Any, float]
    label: str | None = None

    @property
    def named(self) -> str:
        return self.label or f"{self.task} {self.metric} {self.candidate} vs {self.baseline}"


@dataclass(frozen=True)
class ComparedPair:
    """A :class:`Pair` compared: its row (Holm-adjusted p-value and verdict filled in), the values
    each side was compared on (the shared seeds' when paired, in seed order then; every run
    otherwise), shape ``(n,)`` each, and the warnings that name it (also in the list
    :func:`compare_pairs` was given)."""

    row: ComparisonRow
    baseline_values: np.ndarray
    candidate_values: np.ndarray
    warnings: tuple[str, ...]


def compare_pairs(pairs: Sequence[Pair], o: AnalysisOptions, warnings: list[str]) -> list[ComparedPair]:
    """Compare every pair the one way ``analyze``, the report and ``diff`` do: paired by seed where
    the shared seeds are most of each side's runs (:func:`~benchlab.stats.compare.shared_seeds`),
    else unpaired on every run; :func:`~benchlab.stats.compare.compare` (its bootstrap seeded per
    pair, so that a pair's numbers do not depend on which others exist); one Holm family per metric
    over all the pairs; and the default verdict (:func:`~benchlab.stats.verdict.decide`).

    Uses ``o``'s ``goal``, ``reps``, ``confidence``, ``method``, ``seed``, ``alpha``, ``ranges`` and
    ``assume_normal``. Warnings are appended to ``warnings`` in the order ``analyze`` gives them.
    """
    reps, seed, confidence, method, alpha = o.reps, o.seed, o.confidence, o.method, o.alpha
    said: list[list[str]] = [[] for _ in pairs]

    def say(i: int, text: str) -> None:
        warnings.append(text)
        said[i].append(text)

    out: list[ComparisonRow] = []
    pvalues: list[float | None] = []
    floors: list[float | None] = []
    sides: list[tuple[np.ndarray, np.ndarray]] = []
    boot_cells: list[tuple[int, np.ndarray]] = []  # (index in out, paired differences)
    too_few: list[str] = []
    for i, pair in enumerate(pairs):
        base, other, label = pair.baseline_runs, pair.candidate_runs, pair.named
        paired, common = shared_seeds(list(base), list(other))
        pairing = _pairing_note(base, other, paired, common)
        if pairing is not None:
            say(i, f"{label}: {pairing}")
        b = np.array([base[s] for s in common] if paired else list(base.values()))
        c = np.array([other[s] for s in common] if paired else list(other.values()))
        # Paired bootstrap-t intervals are filled in below, all sizes at once (none with reps=0).
        batch = paired and method == "studentized" and reps > 0
        cmp = compare(b, c, paired, goal_of(o.goal, pair.metric), 0 if batch else reps, confidence,
                      method, _seed(seed, "compare", pair.task, pair.metric, pair.baseline, pair.candidate), label)
        for w in cmp.warnings:
            say(i, w)
        shape = shape_caveat(b, c, cmp.paired, cmp.t_pvalue if cmp.paired else cmp.welch_pvalue,
                             cmp.wilcoxon_pvalue if cmp.paired else cmp.mannwhitney_pvalue, alpha)
        if shape is not None:
            say(i, f"{label}: {shape}")
        pvalues.append(cmp.pvalue)
        floors.append(cmp.p_floor)
        row = _comparison_row(pair, cmp)
        out.append(row)
        sides.append((b, c))
        if batch and cmp.diff_ci_low is not None:
            keep = np.isfinite(b) & np.isfinite(c)
            d = (c - b)[keep]
            if d.shape[0] < BOOTSTRAP_T_MIN_N:
                too_few.append(f"{label} ({d.shape[0]} pairs)")
            elif cmp.diff_ci_low == cmp.diff_ci_high:
                out[-1] = replace(row, diff_boot_ci_low=cmp.diff_ci_low, diff_boot_ci_high=cmp.diff_ci_low)
            else:
                boot_cells.append((len(out) - 1, d))
    if too_few:
        warnings.append(few_for_bootstrap_t(too_few))
    _fill_studentized(out, boot_cells, "diff_boot_ci_low", "diff_boot_ci_high", reps, confidence, seed,
                      "compare", warnings)
    _holm_verdicts(out, pvalues, floors, [p.named for p in pairs], alpha, say)
    # The t verdict stands only where a range test confirms it or normality is assumed (stats/verdict.py).
    withheld: list[str] = []
    decided = decide(out, sides, [r.significant for r in out], o.ranges or {}, o.normal_assumed(), alpha, withheld)
    for i, (row, verdict) in enumerate(zip(out, decided, strict=True)):
        out[i] = replace(row, significant=verdict.significant, decided_by=verdict.decided_by)
        # decide() names a row by its task, metric, candidate and baseline, in the rows' order.
        where = f"{row.task} {row.metric} {row.candidate} vs {row.baseline}: "
        for w in [w for w in withheld if w.startswith(where)]:
            say(i, w)
            withheld.remove(w)
    warnings += withheld
    return [ComparedPair(row, b, c, tuple(notes))
            for row, (b, c), notes in zip(out, sides, said, strict=True)]


def _comparison_row(pair: Pair, cmp: Comparison) -> ComparisonRow:
    """The row of a compared pair, every undefined or non-finite number None."""
    return ComparisonRow(
        task=pair.task, metric=pair.metric, baseline=pair.baseline, candidate=pair.candidate,
        paired=cmp.paired, n=cmp.n, mean_diff=_num(cmp.mean_diff),
        diff_ci_low=_num(cmp.diff_ci_low), diff_ci_high=_num(cmp.diff_ci_high),
        diff_boot_ci_low=_num(cmp.diff_boot_ci_low),
        diff_boot_ci_high=_num(cmp.diff_boot_ci_high),
        t_pvalue=_num(cmp.t_pvalue), wilcoxon_pvalue=_num(cmp.wilcoxon_pvalue),
        welch_pvalue=_num(cmp.welch_pvalue),
        mannwhitney_pvalue=_num(cmp.mannwhitney_pvalue),
        cohens_d=_num(cmp.cohens_d), hedges_g=_num(cmp.hedges_g),
        prob_improvement=_num(cmp.prob_improvement),
    )


def _pairing_note(base: Mapping[Any, float], other: Mapping[Any, float], paired: bool,
                  common: list[object]) -> str | None:
    """What the pairing left out, or why there is none; None when every seed is on both sides."""
    only_b = sorted(set(base) - set(other), key=str)
    only_c = sorted(set(other) - set(base), key=str)
    if paired and (only_b or only_c):
        return (f"paired on the {len(common)} shared seed(s); seed(s) "
                f"{', '.join(map(str, only_b + only_c))} are missing on one side and left out")
    if not paired and len(common) >= 2:
        return (f"only {len(common)} of the baseline's {len(base)} and the candidate's {len(other)} seeds are "
                f"shared, not most of each side's runs; compared unpaired on all {len(base) + len(other)} runs")
    if not paired:
        return "fewer than 2 shared seeds; compared unpaired"
    return None


def _holm_verdicts(out: list[ComparisonRow], pvalues: list[float | None], floors: list[float | None],
                   labels: list[str], alpha: float, say: Callable[[int, str], None]) -> None:
    """Fill in each row's Holm-adjusted p-value and verdict, warning where no verdict is possible."""
    # One Holm family per metric: the comparisons of one metric across tasks and candidates.
    # Secondary metrics (fps, memory) must not weaken the primary metric's verdicts, and the
    # report, which analyses the primary metric alone, gives the same p-values.
    adjusted: list[float | None] = [None] * len(out)
    for met in dict.fromkeys(r.metric for r in out):
        idx = [i for i, r in enumerate(out) if r.metric == met]
        for i, p in zip(idx, holm([pvalues[i] for i in idx]), strict=True):
            adjusted[i] = p
    for i, (row, p, floor) in enumerate(zip(out, adjusted, floors, strict=True)):
        row = out[i] = replace(row, p_holm=p,
                               significant=is_significant(p, row.diff_ci_low, row.diff_ci_high, alpha, floor))
        if floor is not None and floor >= alpha:
            say(i, f"{labels[i]}: with {row.n} seeds the {row.test} test cannot give a "
                   f"p-value below {alpha:g} (its smallest is {floor:.4g}); too few seeds "
                   "to decide, no verdict (significance is null)")
        elif p is None and row.significant is None:
            say(i, f"{labels[i]}: no p-value; not counted in the Holm correction, no "
                   "verdict (significance is null)")


def shape_caveat(baseline: np.ndarray, candidate: np.ndarray, paired: bool,
                 t_pvalue: float | None, rank_pvalue: float | None, alpha: float) -> str | None:
    """:func:`benchlab.stats.compare.shape_warning` (kept under its former name)."""
    return shape_warning(baseline, candidate, paired, t_pvalue, rank_pvalue, alpha)


def _aggregate(
    runs: RunValues,
    configs: list[str],
    goal: Goal,
    references: Mapping[str, tuple[float, float]] | None,
    normalize: Normalize,
    reps: int,
    seed: int,
    confidence: float,
    warnings: list[str],
    score_range: tuple[float, float] | None = None,
) -> tuple[list[AggregateRow], Normalization]:
    # NaN and infinite values were already reported per (task, config) by describe().
    matrices = score_matrices(runs, goal, references, configs, normalize)
    warnings += matrices.warnings
    raw_min = matrices.method == "none" and goal == "min"
    if raw_min and matrices.scores:
        warnings.append("aggregate: raw scores of a metric to minimise: iqm, median and mean are "
                        "in the metric's units (lower is better); optimality_gap needs "
                        "normalised scores and is null")
    # The gap is the mean shortfall below a score of 1: on raw scores that means something
    # only when 1 is the best score the metric can take, as for an accuracy in [0, 1].
    unit_range = score_range is not None and tuple(map(float, score_range)) == (0.0, 1.0)
    raw_max = matrices.method == "none" and goal == "max" and not unit_range
    if raw_max and matrices.scores:
        metric = runs.metric[0] if len(runs) else "the metric"
        warnings.append(f"aggregate: optimality_gap is null: it is the shortfall below a score of "
                        f"1, and {metric} has raw scores (no reference scores) without a declared "
                        "range [0, 1]; give the tasks reference scores, or the metric's range if "
                        "it is [0, 1]")
    normalization = Normalization(
        method=matrices.method,
        tasks={t: TaskNormalization(matrices.sources[t], float(lo), float(hi))
               for t, lo, hi in zip(matrices.tasks, matrices.low, matrices.high, strict=True)},
    )
    # Configs with the same runs per task share one set of resamples (drawn once, seeded by
    # that layout alone, so a config's interval does not depend on which others exist).
    layouts: dict[bytes, list[str]] = {}
    for config, normed in matrices.scores.items():
        key = np.asarray(normed.shape).tobytes() + np.isnan(normed).tobytes()
        layouts.setdefault(key, []).append(config)
    results: dict[str, dict[str, tuple[float, float, float]]] = {}
    for key, group in layouts.items():
        short = interval_shortfall(np.sum(~np.isnan(matrices.scores[group[0]]), axis=0))
        if short is not None:
            warnings.append(f"aggregate ({', '.join(group)}): {short}")
        many = aggregate_many([matrices.scores[c] for c in group], reps, confidence,
                              _seed(seed, "aggregate", zlib.crc32(key)))
        results.update(zip(group, many, strict=True))
        if short is None and reps > 0:  # reps=0 asks for no intervals: a null is not news
            for config, result in zip(group, many, strict=True):
                flat = [name for name, (value, lo, _) in result.items()
                        if np.isfinite(value) and np.isnan(lo)
                        and not (name == "optimality_gap" and (raw_min or raw_max))]
                if flat:
                    warnings.append(
                        f"aggregate ({config}): {', '.join(flat)}: every resample gives the "
                        "same value (the runs of each task are equal up to rounding): zero "
                        "observed spread, which is not certainty; no interval (null)")
    out = []
    for config in matrices.scores:
        result = results[config]
        estimates = {}
        for name in AGGREGATES:
            value, lo, hi = result[name]
            gap_undefined = (raw_min or raw_max) and name == "optimality_gap"
            estimates[name] = (Estimate() if gap_undefined
                               else Estimate(_num(value), _num(lo), _num(hi)))
        out.append(AggregateRow(config=str(config), iqm=estimates["iqm"],
                                median=estimates["median"], mean=estimates["mean"],
                                optimality_gap=estimates["optimality_gap"]))
    return out, normalization


def aggregate_points(
    runs: RunValues,
    configs: list[str],
    goal: Goal,
    references: Mapping[str, tuple[float, float]] | None = None,
    normalize: Normalize = "none",
) -> dict[str, dict[str, float | None]]:
    """The across-task aggregates of one metric's runs, without intervals:
    ``{config: {name: value}}`` for the names of :data:`~benchlab.stats.AGGREGATES`."""
    from benchlab.stats.aggregate import _FUNCS

    matrices = score_matrices(runs, goal, references, configs, normalize)
    return {config: {name: _num(float(_FUNCS[name](normed))) for name in AGGREGATES}
            for config, normed in matrices.scores.items()}


__all__ = ["ALIGNS", "DEFAULT_METRIC", "REQUIRED_COLUMNS", "AnalysisOptions", "ComparedPair", "Pair",
           "aggregate_points", "analyze", "compare_pairs", "default_align", "describe_runs", "reduce_runs",
           "validate_table"]
