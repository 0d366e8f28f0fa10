"""The typed result of :func:`benchlab.stats.analyze`: rows, methods, and its JSON.

:class:`Analysis` holds one :class:`SummaryRow` per (task, config, metric), one
:class:`ComparisonRow` per candidate vs baseline, one :class:`AggregateRow` per config
(across tasks), the warnings, the :class:`Methods` used and the :class:`Normalization`
of the aggregate. Undefined numbers are ``None``.

:meth:`Analysis.to_json` is the JSON that ``benchlab analyze --json`` prints; its layout
(key names and order) is a contract documented in ``docs/statistics.md`` and pinned by
``tests/stats/test_analysis_json.py``. Fields the seed accounting adds
(:func:`benchlab.stats.accounting.analyze_seeds`) appear in it only when it ran.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlab.json_types import JsonObject
from benchlab.stats.aggregate import AGGREGATES
from benchlab.stats.compare import deciding_test

if TYPE_CHECKING:
    from benchlab.stats.describe import Description


@dataclass(frozen=True)
class RowSeeds:
    """What became of the planned seeds of a summary row (seed accounting)."""

    planned: int
    completed: int
    failed_seeds: tuple[Any, ...] = ()
    missing_seeds: tuple[Any, ...] = ()
    #: How ``ci_low``/``ci_high`` were computed; None when there is no interval.
    ci_method: str | None = None
    #: False where no seed of the row was planned or counted (``planned`` is then ``n``); not in the JSON.
    counted: bool = True


@dataclass(frozen=True)
class StderrInterval:
    """A one-seed result's interval from the evaluation's own standard error: ``value ± z·se``
    (:func:`benchlab.stats.describe.normal_interval`), cut at the metric's range; ``label`` names
    where the standard error came from (``"s.e."``, ``"lm-eval standard error"``)."""

    se: float
    low: float
    high: float
    label: str


@dataclass(frozen=True)
class SummaryRow:
    """The description and rank of one (task, config, metric); see ``docs/statistics.md``.

    Every table of a config's numbers (the report's, the dashboard's, ``benchlab analyze``'s)
    renders these rows through the columns declared once in :mod:`benchlab.report.columns`.
    """

    task: str
    config: str
    metric: str
    n: int
    mean: float | None = None
    std: float | None = None
    sem: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    boot_ci_low: float | None = None
    boot_ci_high: float | None = None
    high_variance: bool | None = None
    rank: int | None = None
    #: Set by the seed accounting; None when the table was analysed as it is.
    seeds: RowSeeds | None = None
    #: The rank by mean alone (1: the best mean; equal means share it); not in the JSON.
    mean_rank: int | None = None
    #: Interquartile range of the values, q₀.₇₅ − q₀.₂₅ (linear interpolation, as
    #: ``numpy.percentile``'s default); None without a value; not in the JSON.
    iqr: float | None = None
    #: A one-seed result's interval from its evaluation's standard error
    #: (:func:`benchlab.stats.results_analysis.analyze_results`); not in the JSON.
    stderr: StderrInterval | None = None

    @classmethod
    def of(cls, task: str, config: str, metric: str, values: np.ndarray, d: Description) -> SummaryRow:
        """The row of one sample: ``values`` (shape ``(n,)``, the runs' final values) and their
        :func:`~benchlab.stats.describe.describe`. The mean is the correctly rounded one
        (``math.fsum``): a mean of 0.7375 prints as 0.738, as by hand, where a running float sum
        can land a unit below it. Every per-row statistic is computed here, once."""
        finite = values[np.isfinite(values)]
        mean = math.fsum(finite.tolist()) / finite.shape[0] if finite.shape[0] else None
        return cls(task=task, config=config, metric=metric, n=d.n, mean=_finite(mean),
                   std=_finite(d.std), sem=_finite(d.sem), median=_finite(d.median), min=_finite(d.min),
                   max=_finite(d.max), ci_low=_finite(d.ci_low), ci_high=_finite(d.ci_high),
                   boot_ci_low=_finite(d.boot_ci_low), boot_ci_high=_finite(d.boot_ci_high),
                   high_variance=d.high_variance,
                   iqr=float(np.subtract(*np.percentile(finite, [75, 25]))) if finite.shape[0] else None)

    @property
    def tied(self) -> bool:
        """Ranked first through a 95% CI overlapping the best one's, not by the best mean."""
        return self.rank == 1 and self.mean_rank != 1

    @property
    def ci_method(self) -> str | None:
        """How ``ci_low``/``ci_high`` were computed, when the seed accounting named it."""
        return self.seeds.ci_method if self.seeds is not None else None

    def to_json(self) -> JsonObject:
        """The row as a JSON object (flat; the accounting's fields last)."""
        out = {k: getattr(self, k) for k in _SUMMARY_KEYS}
        if self.seeds is not None:  # the seeds as JSON arrays (lists), as before the rows were frozen
            out.update({k: list(v) if isinstance(v, tuple) else v for k, v in _fields(self.seeds).items()
                        if k != "counted"})
        return out


@dataclass(frozen=True)
class ComparisonSeeds:
    """The seeds behind each side of a comparison (seed accounting)."""

    baseline_seeds: str | None  # completed/planned
    candidate_seeds: str | None
    #: What each side lost (failed or missing seeds), or None.
    caveat: str | None = None


@dataclass(frozen=True)
class ComparisonRow:
    """A candidate against the baseline on one (task, metric); ``diff = candidate - baseline``."""

    task: str
    metric: str
    baseline: str
    candidate: str
    paired: bool
    n: int
    mean_diff: float | None = None
    diff_ci_low: float | None = None
    diff_ci_high: float | None = None
    diff_boot_ci_low: float | None = None
    diff_boot_ci_high: float | None = None
    t_pvalue: float | None = None
    wilcoxon_pvalue: float | None = None
    welch_pvalue: float | None = None
    mannwhitney_pvalue: float | None = None
    cohens_d: float | None = None
    hedges_g: float | None = None
    prob_improvement: float | None = None
    p_holm: float | None = None
    #: The Holm family ``p_holm`` was adjusted in: ``metric <name>, m = <size>`` (every task and
    #: candidate of the metric against the baseline, as at the question level).
    holm_family: str | None = None
    #: True/False; None when there is no verdict (no p-value, or undefined interval).
    significant: bool | None = None
    #: The method that decided ``significant`` (:mod:`benchlab.stats.verdict`); None when withheld.
    decided_by: str | None = None
    seeds: ComparisonSeeds | None = None

    @property
    def caveat(self) -> str | None:
        """What either side lost (failed or missing seeds); None when nothing or unaccounted."""
        return self.seeds.caveat if self.seeds is not None else None

    @property
    def pvalue(self) -> float | None:
        """The unadjusted p-value shown beside the verdict: paired t, else Welch; the rank
        test of the same design where the t-test is undefined
        (:func:`benchlab.stats.compare.deciding_test`)."""
        return deciding_test(self.paired, self.t_pvalue, self.wilcoxon_pvalue, self.welch_pvalue,
                             self.mannwhitney_pvalue)[0]

    @property
    def test(self) -> str | None:
        """The name of the test behind :attr:`pvalue`."""
        return deciding_test(self.paired, self.t_pvalue, self.wilcoxon_pvalue, self.welch_pvalue,
                             self.mannwhitney_pvalue)[1]

    def to_json(self) -> JsonObject:
        """The row as a JSON object (flat; the accounting's fields last)."""
        out = {k: getattr(self, k) for k in _COMPARISON_KEYS}
        if self.seeds is not None:
            out.update(_fields(self.seeds))
        return out


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its confidence interval; any may be None."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class AggregateRow:
    """One config across tasks: the aggregates of :data:`benchlab.stats.AGGREGATES`."""

    config: str
    iqm: Estimate = field(default_factory=Estimate)
    median: Estimate = field(default_factory=Estimate)
    mean: Estimate = field(default_factory=Estimate)
    optimality_gap: Estimate = field(default_factory=Estimate)
    #: Seeds of this config that failed and were left out of the aggregate
    #: (``--failed-as exclude``); None when nothing failed or the accounting did not run.
    failed_excluded: int | None = None
    #: Each aggregate's value with those seeds scored as the worst value (``--failed-as
    #: worst``), shown beside the value they were excluded from.
    failed_as_worst: dict[str, float | None] | None = None

    def estimate(self, name: str) -> Estimate:
        """The aggregate called ``name`` (one of :data:`benchlab.stats.AGGREGATES`)."""
        if name not in AGGREGATES:
            raise KeyError(f"no aggregate {name!r}; aggregates are {', '.join(AGGREGATES)}")
        value: Estimate = getattr(self, name)
        return value

    def to_json(self) -> JsonObject:
        """``{"config", "iqm", "iqm_ci_low", "iqm_ci_high", "median", ...}``."""
        out: dict[str, Any] = {"config": self.config}
        for name in AGGREGATES:
            e = self.estimate(name)
            out[name], out[f"{name}_ci_low"], out[f"{name}_ci_high"] = e.value, e.ci_low, e.ci_high
        if self.failed_excluded is not None:
            out["failed_seeds_excluded"] = self.failed_excluded
            for name in AGGREGATES:
                out[f"{name}_failed_as_worst"] = (self.failed_as_worst or {}).get(name)
        return out


@dataclass(frozen=True)
class TaskNormalization:
    """How one task's scores were put on a common scale: ``(x - low) / (high - low)``."""

    source: str  # "reference", "observed" or "none"
    low: float
    high: float


@dataclass(frozen=True)
class Normalization:
    """The scale the aggregate across tasks is on."""

    method: str | None  # "none", "references", "observed" or "mixed"
    tasks: dict[str, TaskNormalization] = field(default_factory=dict)
    metric: str | None = None  # the metric aggregated

    def to_json(self) -> JsonObject:
        return {"method": self.method,
                "tasks": {t: _fields(n) for t, n in self.tasks.items()},
                "metric": self.metric}


@dataclass(frozen=True)
class Methods:
    """The method behind every number, named as the output shows it."""

    ci: str
    boot_ci: str
    diff_ci: str
    diff_boot_ci: str
    aggregate_ci: str
    wilcoxon: str
    mannwhitney: str
    summary: str
    align: str | None
    confidence: float
    alpha: float
    reps: int

    def to_json(self) -> JsonObject:
        return _fields(self)


@dataclass
class Analysis:
    """Every statistic of a long-format table (:func:`benchlab.stats.analyze`)."""

    summary: list[SummaryRow] = field(default_factory=list)
    comparisons: list[ComparisonRow] = field(default_factory=list)
    aggregate: list[AggregateRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: None when nothing was analysed (no completed run).
    methods: Methods | None = None
    normalization: Normalization | None = None
    #: Seed accounting (:func:`benchlab.stats.accounting.analyze_seeds`); None without it.
    failed_as: str | None = None
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    def summary_of(self, task: str, config: str, metric: str) -> SummaryRow | None:
        """The summary row of ``(task, config, metric)``, or None."""
        for row in self.summary:
            if (row.task, row.config, row.metric) == (task, config, metric):
                return row
        return None

    def to_dict(self) -> JsonObject:
        """The JSON object ``benchlab analyze --json`` prints, as Python values."""
        methods = self.methods.to_json() if self.methods is not None else {}
        if self.failed_as is not None:
            methods["failed_as"] = self.failed_as
        if self.ranges:
            methods["ranges"] = {m: list(r) for m, r in self.ranges.items()}
        return {
            "summary": [r.to_json() for r in self.summary],
            "comparisons": [r.to_json() for r in self.comparisons],
            "aggregate": [r.to_json() for r in self.aggregate],
            "warnings": list(self.warnings),
            "methods": methods,
            "normalization": self.normalization.to_json() if self.normalization else {},
        }

    def to_json(self) -> str:
        """The JSON text (2-space indent, no NaN) that ``benchlab analyze --json`` prints."""
        return json.dumps(self.to_dict(), indent=2, default=str, allow_nan=False)


def name_holm_families(rows: list[ComparisonRow]) -> None:
    """Set each row's ``holm_family`` (the list in place, each row replaced by its copy): one family
    per metric, of the comparisons with a p-value (those Holm's correction counts)."""
    for met in dict.fromkeys(r.metric for r in rows):
        m = sum(1 for r in rows if r.metric == met and r.pvalue is not None)
        for i, r in enumerate(rows):
            if r.metric == met:
                rows[i] = replace(r, holm_family=f"metric {met}, m = {m}")


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _fields(obj: Any) -> dict[str, Any]:
    # Shallow on purpose: asdict() would deep-copy and recurse into nested rows.
    return {k: getattr(obj, k) for k in obj.__dataclass_fields__}


#: Fields of a summary row kept out of ``analyze --json`` (its layout is a pinned contract).
_NOT_IN_JSON = ("seeds", "mean_rank", "stderr", "iqr")
_SUMMARY_KEYS = [k for k in SummaryRow.__dataclass_fields__ if k not in _NOT_IN_JSON]
_COMPARISON_KEYS = [k for k in ComparisonRow.__dataclass_fields__ if k != "seeds"]

__all__ = ["AggregateRow", "Analysis", "ComparisonRow", "ComparisonSeeds", "Estimate", "Methods",
           "Normalization", "RowSeeds", "StderrInterval", "SummaryRow", "TaskNormalization", "name_holm_families"]
