"""The analysis of two versions of a benchmark: which scores moved from the earlier to the later.

:func:`analyze_versions` takes each version's long-format table (and, where both kept them, their
per-question records) and returns one frozen :class:`VersionAnalysis`; ``benchlab diff`` renders it
and reads nothing else of the statistics. Every (task, config, metric) both versions have is one
:class:`~benchlab.stats.table.Pair` (the later version's runs against the earlier one's), compared by
:func:`~benchlab.stats.table.compare_pairs`, the function ``analyze``, ``compare`` and the report
compare with: paired by seed where the shared seeds are most of each side's runs (unpaired on every
run otherwise), one Holm family per metric, and the default verdict of
:mod:`benchlab.stats.verdict`. The change's verdict is then

- ``regression``: significant, and the change is on the bad side of the metric's goal;
- ``improvement``: significant, on the good side;
- ``no detectable change``: a change the statistics could judge and did not find significant
  (identical scores on both sides included);
- ``undetermined``: a change they cannot judge (fewer than two seeds on a side, NaN, too few seeds
  for the only valid test to reach alpha, or a t verdict withheld for want of a range or of
  ``assume: normal``); its warnings say why.

The question level (evaluations whose runs kept per-question records) compares each config of the
later version with the same config of the earlier one over the questions both asked
(:func:`~benchlab.stats.question_table.analyze_questions`), with one Holm family per metric across
the section (:func:`~benchlab.stats.question_table.judge`).

A metric's goal and range are the later version's where both versions declare one; ``assume:
normal`` holds where either version declares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from benchlab.errors import DataError
from benchlab.json_types import JsonObject
from benchlab.names.benchmark_info import Goal, goal_of
from benchlab.stats.curves import Summary
from benchlab.stats.ranges import metric_ranges, normal_metrics
from benchlab.stats.runvalues import RunValues
from benchlab.stats.table import AnalysisOptions, ComparedPair, Pair, compare_pairs, reduce_runs, validate_table

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.stats.question_table import QuestionAnalysis

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no detectable change"
UNDETERMINED = "undetermined"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, UNDETERMINED)

#: The suffixes that tell a config's two versions apart at the question level.
BEFORE, AFTER = "@before", "@after"


@dataclass(frozen=True)
class VersionRuns:
    """One version as its analysis needs it.

    Fields:
    label: names the version in the output (``v1``, ``results@3f2a``).
    table: its long-format table (``task, config, seed, metric, step, value``), completed runs only.
    goals: ``{metric: "max" | "min"}``; a metric it does not name is ``max``.
    spec: the spec as the ledger keeps it: the metrics' ranges and ``assume: normal`` come from it.
    not_completed: ``{status: runs}`` of the runs left out for not having completed.
    """

    label: str
    table: pd.DataFrame
    goals: Mapping[str, str] = field(default_factory=dict)
    spec: JsonObject = field(default_factory=dict)
    not_completed: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class VersionQuestions:
    """Both versions' per-question records (samples tables, :mod:`benchlab.names.long_format`) of the configs
    both have, only the questions both asked alike, and what reading them said (questions left out,
    records skipped)."""

    before: pd.DataFrame
    after: pd.DataFrame
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class VersionChange:
    """The change of one (task, config, metric) from the earlier version to the later:
    ``diff = after − before`` with its 95% CI, the deciding test's p-value and its Holm-adjusted
    value, and the verdict (one of :data:`VERDICTS`). Means and standard deviations are of each
    side's runs; the test is on the runs it paired (or on every run, unpaired)."""

    task: str
    config: str
    metric: str
    goal: str
    paired: bool
    n_before: int
    n_after: int
    mean_before: float
    mean_after: float
    std_before: float | None
    std_after: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    verdict: str
    ratio: float | None
    warnings: tuple[str, ...] = ()
    #: The method behind the verdict (:mod:`benchlab.stats.verdict`); None when undetermined.
    decided_by: str | None = None

    @property
    def key(self) -> str:
        return f"{self.task}/{self.config}/{self.metric}"

    @property
    def direction(self) -> str:
        """``worse`` or ``better`` by the metric's goal, as the means moved (``unchanged`` for equal
        means): what ``ratio`` (after / before) hides for a negative score, −406 → −484 being 1.19."""
        moved = self.mean_after - self.mean_before
        if moved == 0 or moved != moved:
            return "unchanged"
        return "better" if (moved > 0) == (self.goal == "max") else "worse"

    @property
    def relative(self) -> float | None:
        """(after − before) / |before|: the change as a fraction of the earlier score's size, its
        sign the change's (None where the earlier mean is 0)."""
        return (self.mean_after - self.mean_before) / abs(self.mean_before) if self.mean_before else None


@dataclass(frozen=True)
class VersionAnalysis:
    """Every statistic of two versions (:func:`analyze_versions`).

    ``changes`` in (task, config, metric) order; ``only_before``/``only_after`` the
    ``task/config/metric`` keys one version lacks; ``notes`` what concerns no single change (runs
    left out, curve summaries, intervals of several changes); ``questions`` the question level, or
    None where either version kept no per-question record.
    """

    before: str
    after: str
    changes: tuple[VersionChange, ...]
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]
    alpha: float
    summary: str
    notes: tuple[str, ...] = ()
    questions: QuestionAnalysis | None = None

    @property
    def regressions(self) -> list[VersionChange]:
        return [c for c in self.changes if c.verdict == REGRESSION]

    @property
    def improvements(self) -> list[VersionChange]:
        return [c for c in self.changes if c.verdict == IMPROVEMENT]

    @property
    def undetermined(self) -> list[VersionChange]:
        return [c for c in self.changes if c.verdict == UNDETERMINED]

    @property
    def counts(self) -> dict[str, int]:
        """The number of changes per verdict, every verdict named."""
        return {v: sum(1 for c in self.changes if c.verdict == v) for v in VERDICTS}

    @property
    def question_regressions(self) -> list[str]:
        """``task/config/metric`` of each question-level change for the worse."""
        if self.questions is None:
            return []
        return [f"{c.task}/{c.candidate}/{c.metric}" for c in self.questions.comparisons if c.verdict == "worse"]


def analyze_versions(before: VersionRuns, after: VersionRuns, *, questions: VersionQuestions | None = None,
                     metric: str | None = None, summary: Summary = "final", alpha: float = 0.05,
                     reps: int = 2000, seed: int = 0) -> VersionAnalysis:
    """Compare two versions (module docstring).

    Args:
        before, after: the two versions, earlier first.
        questions: their per-question records, where both kept some (else no question level).
        metric: compare only this metric (every metric when None).
        summary: how a learning curve becomes one value per run (:data:`~benchlab.stats.SUMMARIES`).
        alpha: the significance level, after Holm's correction.
        reps, seed: the bootstrap of each comparison, as ``analyze`` runs it (``reps=0``: none). A
            change's interval is the t interval: of the bootstrap only its notes reach the result.

    Raises:
        DataError: a version has no completed run (of ``metric``, when given).
        BadArgument: ``summary`` is not one of its choices.
    """
    notes: list[str] = []
    runs: list[dict[tuple[str, str, str], dict[int, float]]] = []
    for side in (before, after):
        table = side.table if metric is None else side.table[side.table["metric"] == metric]
        if table.empty:
            raise DataError(f"{side.label}: no completed run" + (f" with metric {metric!r}" if metric else ""))
        reduced, warnings = reduce_runs(validate_table(table, side.label), summary)
        notes += [f"{side.label}: {w}" for w in warnings]
        values = RunValues.from_frame(reduced)
        as_floats = values.value.tolist()
        # Each side's runs in seed order, whatever the table's: the unpaired range test pairs runs
        # by position, and the result must not depend on the order the files were read in.
        runs.append({key: {values.seed[i]: as_floats[i] for i in sorted(idx, key=lambda i: values.seed[i])}
                     for key, idx in sorted(values.groups("task", "config", "metric").items())})
        for status, n in side.not_completed.items():
            notes.append(f"{side.label}: {n} run(s) {status}, not in the comparison")
    goals = {**before.goals, **after.goals}
    options = AnalysisOptions(
        goal={m: goal_of(goals, m) for m in goals}, reps=reps, seed=seed, summary=summary, alpha=alpha,
        ranges={**metric_ranges(before.spec), **metric_ranges(after.spec)},
        assume_normal=tuple(dict.fromkeys([*normal_metrics(before.spec), *normal_metrics(after.spec)])))
    shared = sorted(runs[0].keys() & runs[1].keys())
    pairs = [Pair(task, metric_, before.label, f"{config} {after.label}", runs[0][(task, config, metric_)],
                  runs[1][(task, config, metric_)], label=f"{task}/{config}/{metric_}")
             for task, config, metric_ in shared]
    said: list[str] = []
    compared = compare_pairs(pairs, options, said)
    # A change's own warnings go with it; what names no single change (an interval's note over
    # several) stays with the analysis.
    own = {w for p in compared for w in p.warnings}
    notes += [w for w in said if w not in own]
    changes = tuple(_change(key, goal_of(goals, key[2]), runs[0][key], runs[1][key], p)
                    for key, p in zip(shared, compared, strict=True))
    return VersionAnalysis(
        before=before.label, after=after.label, changes=changes,
        only_before=tuple("/".join(k) for k in sorted(runs[0].keys() - runs[1].keys())),
        only_after=tuple("/".join(k) for k in sorted(runs[1].keys() - runs[0].keys())),
        alpha=alpha, summary=summary, notes=tuple(notes),
        questions=None if questions is None else _question_changes(questions, metric, alpha, goals))


def _change(key: tuple[str, str, str], goal: Goal, before: dict[int, float], after: dict[int, float],
            compared: ComparedPair) -> VersionChange:
    """One change from its compared pair (its row's verdict read by the metric's goal)."""
    row = compared.row
    verdict = UNDETERMINED if row.significant is None else NO_CHANGE
    if row.significant and row.mean_diff is not None:
        verdict = IMPROVEMENT if (row.mean_diff > 0) == (goal == "max") else REGRESSION
    vb, va = np.array(list(before.values()), dtype=float), np.array(list(after.values()), dtype=float)
    mb, ma = float(np.nanmean(vb)), float(np.nanmean(va))
    return VersionChange(
        key[0], key[1], key[2], goal, row.paired, len(before), len(after), mb, ma,
        float(np.nanstd(vb, ddof=1)) if len(vb) > 1 else None,
        float(np.nanstd(va, ddof=1)) if len(va) > 1 else None,
        row.mean_diff, row.diff_ci_low, row.diff_ci_high, row.pvalue, row.p_holm, verdict,
        ma / mb if mb != 0 else None, compared.warnings, row.decided_by)


def _question_changes(records: VersionQuestions, metric: str | None, alpha: float,
                      goals: Mapping[str, str]) -> QuestionAnalysis:
    """Each config of the later version against the same config of the earlier one, paired over
    the questions both asked; one Holm family per metric across every (task, config)."""
    import pandas as pd

    from benchlab.stats.question_table import QuestionAnalysis, QuestionComparisonRow, analyze_questions, judge

    goal: str | dict[str, str] = dict(goals) or "max"
    before, after = records.before, records.after
    # The configs both versions kept records of: a config all of whose questions were left out on
    # one side (asked differently) is named below rather than passed over.
    shared = sorted(set(before["config"].astype(str)) | set(after["config"].astype(str)))
    out = QuestionAnalysis(baseline=None, warnings=list(records.warnings))
    if not shared:
        out.warnings.append("no config has per-question records in both versions")
        return out
    a = before[before["config"].astype(str).isin(shared)].assign(config=lambda t: t["config"].astype(str) + BEFORE)
    b = after[after["config"].astype(str).isin(shared)].assign(config=lambda t: t["config"].astype(str) + AFTER)
    both = pd.concat([a, b], ignore_index=True)
    rows: list[QuestionComparisonRow] = []
    for config in shared:
        part = both[both["config"].isin([config + BEFORE, config + AFTER])]
        if part["config"].nunique() < 2:
            out.warnings.append(f"{config}: no question left that both versions asked")
            continue
        found = analyze_questions(part, baseline=config + BEFORE, candidates=[config + AFTER], metric=metric,
                                  goal=goal, alpha=alpha)
        for row in found.comparisons:
            row.baseline, row.candidate = config, config
        rows += found.comparisons
        out.warnings += found.warnings
    judge(rows, alpha=alpha, goal=goal)
    out.comparisons = rows
    return out


__all__ = ["AFTER", "BEFORE", "IMPROVEMENT", "NO_CHANGE", "REGRESSION", "UNDETERMINED", "VERDICTS",
           "VersionAnalysis", "VersionChange", "VersionQuestions", "VersionRuns", "analyze_versions"]
