"""Which test decides a fixed-seed verdict, and when no verdict may be given.

The t-test's ``significant`` rests on the means of a few seeds being close to normal. On the
field's data they are not, and the false-positive rate shows it: against a stable baseline of
the same mean, a candidate whose seeds collapse one time in five was called significant in
45% of null comparisons at 3 seeds and 6.4% at 30, a lognormal one in 9–12% at 3–30 seeds
(``bench/coverage.py --only field``, docs/statistics.md). No sample size cures this for every
distribution: without a bound on the values, no test of a mean difference holds its level for
every distribution at any fixed n (Bahadur & Savage 1956), since a mass too small to be seen
in n seeds can move the mean anywhere. So the default verdict is:

- **metric with a known range** ``[a, b]`` (declared per metric or task, or known, such as an
  accuracy; :mod:`benchlab.stats.ranges`): significant only when the t-test (Holm) says so *and*
  a test valid for any distribution of paired differences in ``[a − b, b − a]`` confirms it at
  its Holm level: the betting p-value of :func:`benchlab.stats.sequential.betting_pvalue`.
  Where it does not confirm, the verdict is withheld (``significant`` null) with a warning
  that gives both p-values and the seeds any such test needs (:func:`min_seeds`);
- **no range, and normality assumed** (``assume: normal`` on the metric, ``--assume-normal``):
  the t-test's verdict, named as resting on that assumption;
- **a constant shift** (every paired difference the same, so the t-test is undefined): the exact
  Wilcoxon signed-rank (or Mann–Whitney) test's verdict, valid for any distribution, about the
  median difference: no spread is there for a skewed tail to hide in the sample;
- **no range, nothing assumed**: a significant t-test is withheld (null) with a warning saying
  why and what to declare. A non-significant one stays ``False`` ("no difference found"),
  which claims no error rate.

Unpaired comparisons are confirmed on differences of runs taken in the table's order (the
``i``-th of one side with the ``i``-th of the other, up to the shorter side): independent runs
in an order that does not depend on their values give independent differences whose mean is
the difference of means, so the betting test stays valid.

:func:`min_seeds` is the reason small-n verdicts on bounded metrics need a minimum n: when all
``n`` paired differences equal ``d > 0`` and the difference lies in ``[−w, w]``, the null
distribution with mass ``w/(w + d)`` at ``d`` and the rest at ``−w`` has mean 0 and gives that
very sample with probability ``(w/(w + d))ⁿ``; a test that rejects it has level at least that,
so a valid test needs ``n ≥ ln(1/α) / ln(1 + d/w)``: 5 seeds at least even for ``d = w`` at
α = 0.05, and 32 for a gain of a tenth of the range.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from benchlab.stats.analysis import ComparisonRow
from benchlab.stats.compare import holm

#: The assumption a metric may declare (spec ``assume: normal``, ``--assume-normal``).
NORMAL = "normal"
#: ``assume_normal`` entry meaning every metric.
EVERY_METRIC = "*"
#: What the default verdict was measured to do without a range (bench/coverage.py --only field,
#: 2,000 trials a cell; docs/statistics.md): why a t verdict alone is withheld.
T_FALSE_POSITIVES = ("against a stable baseline of the same mean, the t verdict was significant in 45% of null "
                     "comparisons at 3 seeds and 6.4% at 30 with a candidate whose seeds collapse one time in "
                     "five, and in 9-12% at 3-30 seeds with a lognormal one")


#: The tests that decide where the t-test is undefined (:func:`benchlab.stats.compare.deciding_test`), and
#: what their verdict is about.
RANK_TESTS = {"Wilcoxon signed-rank": "about the median paired difference",
              "Mann-Whitney U": "about P(a candidate run beats a baseline run)"}


@dataclass(frozen=True)
class Decided:
    """One comparison's verdict: ``significant`` (None: withheld), the method that decided it,
    and the range test's Holm p-value (None where no range applied)."""

    significant: bool | None
    decided_by: str | None
    range_p_holm: float | None = None


def min_seeds(diff: float, width: float, alpha: float) -> int | None:
    """The fewest seeds at which any test valid for every distribution of paired differences in
    ``[−width, width]`` can reject "mean 0" at level ``alpha`` even if every seed showed the
    difference ``diff``: ``⌈ln(1/α) / ln(1 + |diff|/width)⌉`` (module docstring). None for a zero
    difference (never)."""
    d = min(abs(diff), width)
    if not d > 0 or not 0 < alpha < 1:
        return None
    return math.ceil(math.log(1.0 / alpha) / math.log1p(d / width) - 1e-12)


def assumes_normal(assume_normal: Collection[str], task: str, metric: str) -> bool:
    """Whether normality is assumed for this (task, metric): its name, ``TASK/METRIC`` or ``*``."""
    return bool({EVERY_METRIC, metric, f"{task}/{metric}"} & set(assume_normal))


def range_of(ranges: Mapping[str, tuple[float, float]], task: str, metric: str) -> tuple[float, float] | None:
    return ranges.get(f"{task}/{metric}", ranges.get(metric))


def range_test_diffs(baseline: np.ndarray, candidate: np.ndarray, paired: bool) -> np.ndarray:
    """The differences the range test bets on (module docstring: unpaired runs in table order)."""
    if paired:
        keep = np.isfinite(baseline) & np.isfinite(candidate)
        return (candidate - baseline)[keep]
    b, c = baseline[np.isfinite(baseline)], candidate[np.isfinite(candidate)]
    k = min(b.shape[0], c.shape[0])
    return c[:k] - b[:k]


def decide(rows: list[ComparisonRow], sides: list[tuple[np.ndarray, np.ndarray]],
           t_significant: list[bool | None], ranges: Mapping[str, tuple[float, float]],
           assume_normal: Collection[str], alpha: float, warnings: list[str]) -> list[Decided]:
    """The default verdict of each row (module docstring) from its t verdict (``is_significant`` on
    the Holm-adjusted p of :attr:`ComparisonRow.test`) and the runs on each side.

    The range test's p-values are Holm-adjusted per metric, over the rows that have a range,
    as the t-test's are; a warning names each withheld verdict, its p-values and the reason.
    """
    range_p: list[float | None] = [None] * len(rows)
    for i, (row, (b, c)) in enumerate(zip(rows, sides, strict=True)):
        bounds = range_of(ranges, row.task, row.metric)
        if bounds is None:
            continue
        d = range_test_diffs(b, c, row.paired)
        if d.shape[0]:
            # Imported here: it brings scipy.stats, which a plain analyze of a CSV never loads.
            from benchlab.stats.sequential import betting_pvalue

            range_p[i] = betting_pvalue(d, float(bounds[1] - bounds[0]))
    adjusted: list[float | None] = [None] * len(rows)
    for met in dict.fromkeys(r.metric for r in rows):
        idx = [i for i, r in enumerate(rows) if r.metric == met and range_of(ranges, r.task, r.metric)]
        for i, p in zip(idx, holm([range_p[i] for i in idx]), strict=True):
            adjusted[i] = p
    return [_one(row, t_sig, p, sides[i], ranges, assume_normal, alpha, warnings)
            for i, (row, t_sig, p) in enumerate(zip(rows, t_significant, adjusted, strict=True))]


def _one(row: ComparisonRow, t_sig: bool | None, range_p: float | None, side: tuple[np.ndarray, np.ndarray],
         ranges: Mapping[str, tuple[float, float]], assume_normal: Collection[str], alpha: float,
         warnings: list[str]) -> Decided:
    test = row.test or ("paired t" if row.paired else "Welch t")
    if t_sig is None:
        return Decided(None, None)
    if test in RANK_TESTS:
        # The t-test is undefined here (every seed moved by the same amount, as a deterministic
        # evaluation does), and the exact rank test decides: its level holds for any distribution,
        # about the median difference (paired) or P(candidate beats baseline) (unpaired), which
        # is what a difference without any spread can say.
        return Decided(t_sig, f"{test} (exact), valid for any distribution: {RANK_TESTS[test]}")
    bounds = range_of(ranges, row.task, row.metric)
    where = f"{row.task} {row.metric} {row.candidate} vs {row.baseline}"
    t_p = f"{row.p_holm:.3g}" if row.p_holm is not None else "none"
    if bounds is not None:
        label = f"{test}, confirmed by a betting test valid in the range [{bounds[0]:g}, {bounds[1]:g}]"
        if t_sig is False:
            return Decided(False, test, range_p)
        if range_p is not None and range_p < alpha:
            return Decided(True, label, range_p)
        width = float(bounds[1] - bounds[0])
        need = min_seeds(row.mean_diff or 0.0, width, alpha)
        seeds = (f"even if every seed showed the observed difference of {row.mean_diff:.4g}, a test valid for "
                 f"every distribution in the range needs at least {need} seeds at alpha {alpha:g}"
                 if need is not None and row.mean_diff is not None else "")
        found = "no runs to test" if range_p is None else f"p = {range_p:.3g} (Holm)"
        warnings.append(
            f"{where}: no verdict (significance is null): the {test} test gives p = {t_p} (Holm) on {row.n} "
            f"seeds, but it rests on normal-looking values, and the test valid for any distribution in the "
            f"metric's range [{bounds[0]:g}, {bounds[1]:g}] does not confirm it ({found}); "
            + (f"{seeds} (docs/statistics.md)" if seeds else "see docs/statistics.md"))
        return Decided(None, None, range_p)
    if assumes_normal(assume_normal, row.task, row.metric):
        return Decided(t_sig, f"{test}, normal distribution assumed")
    if t_sig is False:
        return Decided(False, test)
    warnings.append(
        f"{where}: no verdict (significance is null): the {test} test gives p = {t_p} (Holm) on {row.n} seeds, "
        f"but without a range no test of a mean difference holds its level for every distribution; "
        f"{T_FALSE_POSITIVES} (docs/statistics.md). Declare the metric's range (range: [low, high], "
        "--range) to have it decided by a test valid in the range, or assume: normal (--assume-normal) "
        "to accept the t-test's verdict")
    return Decided(None, None)


__all__ = ["EVERY_METRIC", "NORMAL", "Decided", "assumes_normal", "decide", "min_seeds", "range_of", "range_test_diffs"]
