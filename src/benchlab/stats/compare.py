"""Candidate vs baseline on one (task, metric): tests, effect sizes, bootstrap CI, Holm.

Sign conventions: ``mean_diff``, its CI, Cohen's d and Hedges' g are
``candidate - baseline`` in the metric's own units, whatever the goal;
``prob_improvement`` is goal-aware (for ``goal="min"`` an improvement is a lower
value). p-values are two-sided.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtr, stdtrit

from benchlab.stats.bootstrap import (
    BOOTSTRAP_T_MIN_N,
    FEW_FOR_BOOTSTRAP_T,
    Method,
    SeedLike,
    bootstrap_mean_diff_ci,
)
from benchlab.stats.describe import UNBOUNDED_BOOTSTRAP_T, Goal
from benchlab.stats.ranktests import RankTest, rank_sum_test, signed_rank_test
from benchlab.stats.tolerance import is_negligible, scale


@dataclass(frozen=True)
class Comparison:
    """The comparison of a candidate's seeds with a baseline's on one (task, metric)."""

    paired: bool
    n: int
    n_baseline: int
    n_candidate: int
    mean_diff: float | None
    diff_ci_low: float | None
    diff_ci_high: float | None
    t_pvalue: float | None
    wilcoxon_pvalue: float | None
    welch_pvalue: float | None
    mannwhitney_pvalue: float | None
    cohens_d: float | None
    hedges_g: float | None
    prob_improvement: float | None
    warnings: list[str] = field(default_factory=list)
    diff_boot_ci_low: float | None = None
    diff_boot_ci_high: float | None = None
    #: The smallest p-value the deciding test can give at this n, set when that test is a
    #: rank test standing in for an undefined t-test (every difference the same): its p is
    #: then that floor, and a floor at or above alpha means too few seeds to decide.
    p_floor: float | None = None

    @property
    def diff_ci_method(self) -> str:
        """How ``diff_ci_low/high`` were computed: ``"student-t"`` (paired) or ``"welch-t"``."""
        return "student-t" if self.paired else "welch-t"

    @property
    def pvalue(self) -> float | None:
        """The p-value that Holm's correction and the verdict use (:func:`deciding_test`)."""
        return deciding_test(self.paired, self.t_pvalue, self.wilcoxon_pvalue, self.welch_pvalue,
                             self.mannwhitney_pvalue)[0]

    @property
    def test(self) -> str | None:
        """The name of the test whose p-value decides (:func:`deciding_test`)."""
        return deciding_test(self.paired, self.t_pvalue, self.wilcoxon_pvalue, self.welch_pvalue,
                             self.mannwhitney_pvalue)[1]


def shared_seeds(baseline_seeds: Sequence[object], candidate_seeds: Sequence[object]
                 ) -> tuple[bool, list[object]]:
    """Whether to compare paired by seed, and on which seeds (``(paired, shared)``).

    Paired only when the shared seeds are most (more than half) of each side's runs, and at
    least 2: pairing then removes the seed-to-seed variance at the cost of a few runs.
    Otherwise unpaired, on every run of both sides: pairing on the few shared seeds would
    throw away most of the data (baseline seeds 0–9 and candidate seeds 0, 1, 10–17 share 2
    of 10; paired on those 2 the comparison dropped 16 of 20 runs, p = 0.11, where Welch on all
    20 runs gives p = 1e-5).

    Args:
        baseline_seeds, candidate_seeds: the seeds each side has values for.

    Returns:
        ``(paired, shared)``: ``shared`` in the baseline's order.
    """
    other = set(candidate_seeds)
    shared = [s for s in baseline_seeds if s in other]
    k = len(shared)
    paired = k >= 2 and 2 * k > len(baseline_seeds) and 2 * k > len(candidate_seeds)
    return paired, shared


def deciding_test(paired: bool, t_pvalue: float | None, wilcoxon_pvalue: float | None,
                  welch_pvalue: float | None, mannwhitney_pvalue: float | None
                  ) -> tuple[float | None, str | None]:
    """``(p-value, test name)`` of the test that decides a comparison.

    The t-test (paired t, or Welch's unpaired) where it is defined. Where it is not because
    the spread it divides by is zero — every paired difference the same non-zero number, or
    both sides constant — the rank test of the same design still is, and decides: the
    Wilcoxon signed-rank test (8 of 8 seeds one way: p = 2/2⁸ = 0.0078, the sign test's p)
    or the Mann–Whitney U test. ``(None, None)`` when neither is defined.
    """
    if paired:
        if t_pvalue is not None:
            return t_pvalue, "paired t"
        return (wilcoxon_pvalue, "Wilcoxon signed-rank") if wilcoxon_pvalue is not None else (None, None)
    if welch_pvalue is not None:
        return welch_pvalue, "Welch t"
    return (mannwhitney_pvalue, "Mann-Whitney U") if mannwhitney_pvalue is not None else (None, None)


def paired_t_pvalue(diffs: np.ndarray, magnitude: float | None = None) -> float | None:
    """Two-sided p-value of the paired t-test on ``diffs`` (shape ``(n,)``).

    ``t = mean(d) / (sd(d)/√n)`` with ``sd`` of ddof = 1 and ``n-1`` degrees of freedom;
    ``None`` when ``n < 2`` or ``sd(d)`` is zero up to rounding
    (``<= RELATIVE_TOLERANCE · magnitude``, ``magnitude`` defaulting to ``max|d|``; pass
    the scale of the paired values): t would be 0/0 or float noise blown up.
    """
    d = np.asarray(diffs, dtype=float)
    n = d.shape[0]
    if n < 2:
        return None
    sd = float(d.std(ddof=1))
    if is_negligible(sd, d, np.array([magnitude or 0.0])):
        return None
    t = float(d.mean()) / (sd / np.sqrt(n))
    return float(2 * stdtr(n - 1, -abs(t)))  # two-sided Student t tail


def welch_pvalue(baseline: np.ndarray, candidate: np.ndarray) -> float | None:
    """Two-sided p-value of Welch's t-test (unequal variances, Welch–Satterthwaite df).

    Variances with ddof = 1. ``None`` when a group has fewer than 2 values or both
    standard deviations are zero up to rounding (relative to ``max|x|`` of both).
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    nb, nc = b.shape[0], c.shape[0]
    if nb < 2 or nc < 2:
        return None
    if is_negligible(max(float(b.std(ddof=1)), float(c.std(ddof=1))), b, c):
        return None
    vb, vc = float(b.var(ddof=1)) / nb, float(c.var(ddof=1)) / nc
    t = (float(c.mean()) - float(b.mean())) / np.sqrt(vb + vc)
    # A side with zero variance contributes nothing to the df (0/0 avoided).
    df = (vb + vc) ** 2 / sum(v**2 / (k - 1) for v, k in ((vb, nb), (vc, nc)) if v > 0)
    return float(2 * stdtr(df, -abs(t)))


def probability_of_improvement(
    baseline: np.ndarray, candidate: np.ndarray, goal: Goal = "max"
) -> float:
    """``P(candidate better than baseline) + ½ P(tie)`` over all ``n_c × n_b`` pairs of runs.

    This is the Mann–Whitney U statistic divided by ``n_c · n_b``; "better" is
    higher for ``goal="max"`` and lower for ``goal="min"``.
    """
    b = np.asarray(baseline, dtype=float)[None, :]
    c = np.asarray(candidate, dtype=float)[:, None]
    better = (c > b) if goal == "max" else (c < b)
    return float(np.mean(better) + 0.5 * np.mean(c == b))


def cohens_d(baseline: np.ndarray, candidate: np.ndarray, paired: bool) -> float | None:
    """Cohen's d of ``candidate - baseline`` (standard deviations with ddof = 1).

    Paired: ``mean(d) / sd(d)`` (d_z). Unpaired: ``(mean_c - mean_b) / s_pooled`` with
    ``s_pooled² = ((n_b-1)s_b² + (n_c-1)s_c²) / (n_b+n_c-2)``. ``None`` when a side has
    fewer than 2 values or the sd is zero up to rounding (relative to ``max|x|``).
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if paired:
        d = c - b
        if d.shape[0] < 2:
            return None
        sd = float(d.std(ddof=1))
        return None if is_negligible(sd, b, c) else float(d.mean()) / sd
    nb, nc = b.shape[0], c.shape[0]
    if nb < 2 or nc < 2:
        return None
    ssb = float(((b - b.mean()) ** 2).sum())
    ssc = float(((c - c.mean()) ** 2).sum())
    pooled = float(np.sqrt((ssb + ssc) / (nb + nc - 2)))
    return None if is_negligible(pooled, b, c) else (float(c.mean()) - float(b.mean())) / pooled


def hedges_g(d: float | None, df: int) -> float | None:
    """Hedges' g: ``d · (1 - 3 / (4·df - 1))``; df is ``n-1`` paired, ``n_b+n_c-2`` unpaired.

    ``None`` when ``d`` is undefined or ``df < 2`` (the correction is 0 or negative there).
    """
    if d is None or df < 2:
        return None
    return d * (1.0 - 3.0 / (4.0 * df - 1.0))


def diff_t_interval(
    baseline: np.ndarray, candidate: np.ndarray, paired: bool, confidence: float = 0.95
) -> tuple[float, float]:
    """t interval of ``mean(c) - mean(b)``, the interval the verdict uses.

    Paired: ``mean(d) ± t_{1-α/2, n-1} · s_d/√n``. Unpaired (Welch):
    ``c̄ - b̄ ± t_{1-α/2, ν} · √(s_b²/n_b + s_c²/n_c)`` with the Welch–Satterthwaite ν.
    Standard deviations with ddof = 1; each side needs ``n >= 2``. A spread of zero
    (up to rounding) gives the point interval.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    q = 0.5 + confidence / 2
    if paired:
        d = c - b
        n = d.shape[0]
        mean, sd = float(d.mean()), float(d.std(ddof=1))
        if is_negligible(sd, b, c):
            return mean, mean
        half = float(stdtrit(n - 1, q)) * sd / np.sqrt(n)
        return mean - half, mean + half
    nb, nc = b.shape[0], c.shape[0]
    diff = float(c.mean() - b.mean())
    if is_negligible(max(float(b.std(ddof=1)), float(c.std(ddof=1))), b, c):
        return diff, diff
    vb, vc = float(b.var(ddof=1)) / nb, float(c.var(ddof=1)) / nc
    df = (vb + vc) ** 2 / sum(v**2 / (k - 1) for v, k in ((vb, nb), (vc, nc)) if v > 0)
    half = float(stdtrit(df, q)) * np.sqrt(vb + vc)
    return diff - half, diff + half


def _rank_test_note(name: str, test: RankTest | None, where: str, note: list[str]) -> float | None:
    if test is None:
        return None
    if test.method == "normal" and test.tied_groups:
        note.append(
            f"{where}{name}: normal approximation (n={test.n} is above the exact limit) with a "
            f"tie correction for {test.tied_groups} group(s) of tied values"
        )
    return test.pvalue


def _finite_values(b: np.ndarray, c: np.ndarray, paired: bool, where: str,
                   note: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``b`` and ``c`` without NaN or infinite values (whole pairs when ``paired``), with a note."""
    if paired:
        if b.shape != c.shape:
            raise ValueError(f"paired samples need the same shape, got {b.shape} and {c.shape}")
        keep = np.isfinite(b) & np.isfinite(c)
        if not keep.all():
            note.append(f"{where}{int((~keep).sum())} pair(s) with a NaN or infinite value dropped")
            b, c = b[keep], c[keep]
    else:
        for name, arr in (("baseline", b), ("candidate", c)):
            if not np.isfinite(arr).all():
                bad = int((~np.isfinite(arr)).sum())
                note.append(f"{where}{bad} NaN or infinite {name} value(s) dropped")
        b, c = b[np.isfinite(b)], c[np.isfinite(c)]
    return b, c


def _paired_tests(d: np.ndarray, magnitude: float, where: str,
                  note: list[str]) -> tuple[float | None, float | None, float | None, bool]:
    """Paired t and Wilcoxon p-values of the differences ``d``, the smallest p the signed-rank test
    can give when every difference is the same non-zero number (else None), and whether every
    difference is zero up to rounding."""
    t_p = paired_t_pvalue(d, magnitude)
    wil_p = _rank_test_note("Wilcoxon", signed_rank_test(d, magnitude), where, note)
    p_floor: float | None = None
    identical = False
    nb = int(d.shape[0])
    if t_p is None:
        identical = is_negligible(float(np.max(np.abs(d))), np.array([magnitude]))
        if identical:
            note.append(f"{where}the same value on both sides for every seed (up to "
                        "rounding): no change; no test has anything to test")
        else:
            # Every difference the same non-zero number: t is 0/0, the signed-rank
            # test is not; its p is the smallest it can give at this n.
            p_floor = wil_p
            note.append(
                f"{where}all {nb} paired differences equal {float(d.mean()):g} (up to "
                "rounding): paired t, Cohen's d and Hedges' g are undefined (null); the "
                f"Wilcoxon signed-rank test decides (p = {wil_p:.4g}: {nb} of {nb} seeds "
                f"one way, the smallest p it can give with {nb} seeds)")
    return t_p, wil_p, p_floor, identical


def deciding_pvalue(baseline: np.ndarray, candidate: np.ndarray, paired: bool) -> tuple[float | None, str | None]:
    """``(p-value, test name)`` of the test that decides :func:`compare` of the same values (its
    :attr:`Comparison.pvalue` and :attr:`Comparison.test`, equal to them), computing that test
    alone: the t-test, and the rank test only where the t-test is undefined; no effect size, no
    interval. What a caller that needs only the verdict's p-value pays (the ranks' "tied": a
    config against the best of each task and metric).

    Args:
        baseline: shape ``(n_b,)``.
        candidate: shape ``(n_c,)``; index ``i`` of both is the same seed when ``paired``.
        paired: whether the arrays are aligned by seed.
    """
    note: list[str] = []
    b, c = _finite_values(np.asarray(baseline, dtype=float), np.asarray(candidate, dtype=float), paired, "", note)
    if min(b.shape[0], c.shape[0]) < 2:
        return None, None  # compare's every test is null there
    if paired:
        d = c - b
        magnitude = scale(b, c)
        t_p = paired_t_pvalue(d, magnitude)
        if t_p is not None:
            return t_p, "paired t"
        wil = signed_rank_test(d, magnitude)
        return (wil.pvalue, "Wilcoxon signed-rank") if wil is not None else (None, None)
    welch_p = welch_pvalue(b, c)
    if welch_p is not None:
        return welch_p, "Welch t"
    mw = rank_sum_test(b, c)
    return (mw.pvalue, "Mann-Whitney U") if mw is not None else (None, None)


def compare(
    baseline: np.ndarray,
    candidate: np.ndarray,
    paired: bool,
    goal: Goal = "max",
    reps: int = 10_000,
    confidence: float = 0.95,
    method: Method = "studentized",
    seed: SeedLike = 0,
    label: str = "",
) -> Comparison:
    """Compare a candidate's values with a baseline's.

    Args:
        baseline: shape ``(n_b,)``.
        candidate: shape ``(n_c,)``. When ``paired``, ``n_c == n_b`` and index ``i``
            of both arrays is the same seed; pairs with a NaN or infinity on either side
            are dropped.
        paired: whether the arrays are aligned by seed.
        goal: ``"max"`` or ``"min"``; only ``prob_improvement`` depends on it.
        reps, confidence, method, seed: the bootstrap CI of the mean difference
            (``diff_boot_ci_*``; ``reps=0`` skips it). ``diff_ci_*`` is the t interval
            (:func:`diff_t_interval`) at the same ``confidence``.
        label: names the comparison in warnings (task, metric and both configs).

    Returns:
        A :class:`Comparison`. The paired t and Wilcoxon p-values are ``None`` when
        unpaired; Welch and Mann–Whitney are computed on the two samples in both cases.
        Every test, effect size and interval is ``None`` when a side has fewer than 2
        values; the tests and effect sizes that divide by a spread are ``None`` when that
        spread is zero up to rounding (:mod:`benchlab.stats.tolerance`).
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    note: list[str] = []
    where = f"{label}: " if label else ""
    b, c = _finite_values(b, c, paired, where, note)
    nb, nc = int(b.shape[0]), int(c.shape[0])
    n = nb if paired else nb + nc
    if nb == 0 or nc == 0:
        note.append(f"{where}a side has no values; the comparison is null")
        return Comparison(paired, n, nb, nc, None, None, None, None, None, None, None, None, None,
                          None, note)
    mean_diff = float(c.mean() - b.mean())
    if nb < 2 or nc < 2:
        what = "n=1 pair" if paired else f"a side has n<2 (baseline {nb}, candidate {nc})"
        note.append(f"{where}{what}: tests, effect sizes and CI are null; no verdict")
        return Comparison(paired, n, nb, nc, mean_diff, None, None, None, None, None, None, None,
                          None, None, note)

    magnitude = scale(b, c)
    t_p = wil_p = p_floor = None
    identical = False
    if paired:
        t_p, wil_p, p_floor, identical = _paired_tests(c - b, magnitude, where, note)
    welch_p = welch_pvalue(b, c)
    mw = rank_sum_test(b, c)
    if mw is None:
        note.append(f"{where}every value is equal (up to rounding): Mann-Whitney U is null")
        identical = identical or not paired
    mw_p = _rank_test_note("Mann-Whitney U", mw, where, note)
    if welch_p is None and mw is not None:
        if not paired:
            p_floor = mw_p
        note.append(f"{where}both sides have zero variance (up to rounding): Welch t-test is null"
                    + ("" if paired else "; the Mann-Whitney U test decides"))
    d_eff = cohens_d(b, c, paired)
    if d_eff is None and not (paired and t_p is None):
        note.append(f"{where}zero standard deviation (up to rounding): Cohen's d, Hedges' g are "
                    "null")
    df = nb - 1 if paired else nb + nc - 2
    g = hedges_g(d_eff, df)
    if d_eff is not None and g is None:
        note.append(f"{where}{df} degree(s) of freedom: Hedges' g is null")
    ci: tuple[float | None, float | None]
    if identical:
        ci = (0.0, 0.0)
    elif p_floor is not None:
        # Every difference the same (or both sides constant): zero observed spread is not a 95%
        # interval of zero width around the shift, and no interval method covers there. The rank
        # test decides the verdict without one.
        ci = (None, None)
        note.append(f"{where}zero observed spread of the difference: no confidence interval (null); the "
                    "difference is the same on every seed, which is not certainty that the next seed agrees")
    else:
        ci = diff_t_interval(b, c, paired, confidence)
    boot: tuple[float | None, float | None] = (None, None)
    if reps > 0 and p_floor is None:
        if method == "studentized" and min(nb, nc) < BOOTSTRAP_T_MIN_N:
            note.append(f"{where}{min(nb, nc)} values {'a pair' if paired else 'on a side'}: "
                        f"{FEW_FOR_BOOTSTRAP_T}")
        else:
            boot = bootstrap_mean_diff_ci(b, c, paired, reps, confidence, method, seed)
            if not all(x is not None and np.isfinite(x) for x in boot):
                boot = (None, None)
                note.append(f"{where}{UNBOUNDED_BOOTSTRAP_T}")
    return Comparison(
        paired, n, nb, nc, mean_diff, ci[0], ci[1], t_p, wil_p, welch_p, mw_p, d_eff, g,
        probability_of_improvement(b, c, goal), note, boot[0], boot[1], p_floor,
    )


#: Up to this many seeds a side, a comparison is checked for a seed that stands out (a collapse):
#: there the t-test's false-positive rate on collapsing or skewed seeds was measured above alpha
#: (docs/statistics.md, bench/coverage.py).
FEW_SEEDS = 10
#: The share of normal-data comparisons the outlier check may flag, all its samples together.
SHAPE_ALPHA = 0.08


def grubbs_critical(n: int, alpha: float) -> float:
    """The two-sided Grubbs critical value: normal samples of ``n`` have
    ``G = max|x_i − x̄| / s`` (ddof 1) above it with probability at most ``alpha``.

    ``G_crit = (n − 1)/√n · √(t² / (n − 2 + t²))`` with ``t`` the upper ``alpha / 2n`` quantile of
    Student's t with ``n − 2`` degrees of freedom (Grubbs 1950; the Bonferroni bound over the n
    candidates for the outlier, exact to the third decimal at these n). ``n >= 3``.
    """
    t = float(stdtrit(n - 2, 1.0 - alpha / (2 * n)))
    return (n - 1) / np.sqrt(n) * np.sqrt(t * t / (n - 2 + t * t))


@functools.lru_cache(maxsize=64)
def gap_critical(n: int, alpha: float) -> float:
    """The ``1 − alpha`` quantile of the widest gap between sorted values over their range, for
    ``n`` normal values: the statistic does not depend on the mean or the sd, so the quantile is
    one number per ``n``, taken from 400,000 seeded draws (Monte Carlo error under 2% of alpha at
    alpha = 0.01)."""
    rng = np.random.default_rng([20261128, n])
    x = np.sort(rng.standard_normal((400_000, n)), axis=1)
    ratio = np.max(np.diff(x, axis=1), axis=1) / (x[:, -1] - x[:, 0])
    return float(np.quantile(ratio, 1.0 - alpha))


def shape_warning(baseline: np.ndarray, candidate: np.ndarray, paired: bool,
                  t_pvalue: float | None, rank_pvalue: float | None, alpha: float) -> str | None:
    """Why a verdict on few seeds may not hold its alpha, or None.

    With 10 seeds or fewer a side (and 3 at least), each sample — the paired differences and each
    side's values when ``paired``, each side's values otherwise — is checked for a seed that
    stands out from the others: Grubbs' ``G = max|x_i − x̄| / s`` above its critical value at
    ``SHAPE_ALPHA / samples`` (so normal data are flagged in at most 8% of comparisons, whatever
    the effect: G does not depend on location or scale). ``t_pvalue``, ``rank_pvalue`` and
    ``alpha`` are not used: a t-test and a rank test that disagree at alpha on normal data with
    an effect did so in 15% of comparisons at 5 seeds, a warning users learn to ignore.
    ``baseline``/``candidate``: shape ``(n_b,)``, ``(n_c,)`` (aligned when ``paired``).
    """
    del t_pvalue, rank_pvalue, alpha
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if max(b.shape[0], c.shape[0]) > FEW_SEEDS:
        return None
    samples = [("the baseline's values", b), ("the candidate's values", c)]
    if paired:
        samples.insert(0, ("the paired differences", c - b))
    notes = []
    for what, x in samples:
        x = x[np.isfinite(x)]
        n = x.shape[0]
        # Values equal up to rounding (a constant shift read from CSV) have no shape to judge.
        if n < 3 or is_negligible(float(np.ptp(x)), x, b, c):
            continue
        # Two statistics on each sample (one at 3 values, where the gap ratio is a function of G):
        # by the union bound all of them together flag normal data in at most SHAPE_ALPHA.
        checks = len(samples) * (1 if n == 3 else 2)
        g = float(np.max(np.abs(x - x.mean())) / x.std(ddof=1))
        crit = grubbs_critical(n, SHAPE_ALPHA / checks)
        if g > crit:
            notes.append(f"{what} hold a seed that stands out (Grubbs' G = {g:.3g} above {crit:.3g}, which "
                         f"normal data exceed in under {100 * SHAPE_ALPHA / checks:.2g}% of samples of "
                         f"{n}: a collapsed seed?)")
            break
        if n == 3:
            continue
        xs = np.sort(x)
        q = float(np.max(np.diff(xs)) / np.ptp(xs))
        q_crit = gap_critical(n, SHAPE_ALPHA / checks)
        if q > q_crit:
            notes.append(f"{what} fall in two groups (the widest gap is {100 * q:.0f}% of their range, "
                         f"above the {100 * q_crit:.0f}% that normal data exceed in {100 * SHAPE_ALPHA / checks:.2g}% "
                         f"of samples of {n}: some seeds collapsed?)")
            break
    if not notes:
        return None
    return (f"the verdict rests on {max(b.shape[0], c.shape[0])} seeds, and " + "; ".join(notes)
            + ": the t-test's alpha was measured on normal data, and with a candidate whose seeds "
            "collapse or are skewed against a stable baseline, at 3–10 seeds, its false-positive rate "
            "was above alpha (docs/statistics.md); more seeds, or the metric's range, would settle it")


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values.

    With the ``m`` defined p-values sorted ascending, ``p̃_(i) = max_{j<=i} min(1, (m-j+1)·p_(j))``.
    ``None`` entries stay ``None`` and do not count in ``m``.
    """
    idx = [i for i, p in enumerate(pvalues) if p is not None and np.isfinite(p)]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    p = np.array([pvalues[i] for i in idx], dtype=float)
    order = np.argsort(p, kind="stable")
    m = p.shape[0]
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    for rank_pos, k in enumerate(order):
        out[idx[k]] = float(adjusted[rank_pos])
    return out


def is_significant(
    p_adjusted: float | None, ci_low: float | None, ci_high: float | None, alpha: float = 0.05,
    p_floor: float | None = None,
) -> bool | None:
    """The verdict: adjusted p < alpha and the CI of the difference excludes 0.

    ``False`` (no change) when both sides are the same: no p-value and the point interval
    ``[0, 0]``. A constant shift (``p_floor`` given, no interval: zero observed spread) is
    decided by its rank test's adjusted p alone. ``None`` (no verdict) when the adjusted p-value
    or the interval is otherwise undefined, or when ``p_floor`` (:attr:`Comparison.p_floor`, the smallest p-value the
    deciding test can give at this n) is not below alpha: too few seeds for any test.
    """
    if p_floor is not None and p_floor >= alpha:
        return None
    if p_adjusted is None:
        return False if (ci_low == 0.0 and ci_high == 0.0) else None
    if ci_low is None or ci_high is None:
        # A constant shift has no interval (zero observed spread); its rank test decides alone.
        return bool(p_adjusted < alpha) if p_floor is not None else None
    return bool(p_adjusted < alpha and (ci_low > 0 or ci_high < 0))


__all__ = [
    "FEW_SEEDS",
    "SHAPE_ALPHA",
    "Comparison",
    "cohens_d",
    "compare",
    "deciding_test",
    "shared_seeds",
    "diff_t_interval",
    "gap_critical",
    "grubbs_critical",
    "shape_warning",
    "hedges_g",
    "holm",
    "is_significant",
    "paired_t_pvalue",
    "probability_of_improvement",
    "welch_pvalue",
]
