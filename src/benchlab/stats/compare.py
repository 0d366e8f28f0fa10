"""Candidate vs baseline on one (task, metric): tests, effect sizes, bootstrap CI, Holm.

Sign conventions: ``mean_diff``, its CI, Cohen's d and Hedges' g are
``candidate - baseline`` in the metric's own units, whatever the goal;
``prob_improvement`` is goal-aware (for ``goal="min"`` an improvement is a lower
value). p-values are two-sided.
"""

from __future__ import annotations

import warnings as _warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtr

from benchlab.stats.bootstrap import Method, SeedLike, bootstrap_mean_diff_ci
from benchlab.stats.describe import Goal


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

    @property
    def pvalue(self) -> float | None:
        """The p-value that Holm's correction and the verdict use: paired t, else Welch."""
        return self.t_pvalue if self.paired else self.welch_pvalue


def paired_t_pvalue(diffs: np.ndarray) -> float | None:
    """Two-sided p-value of the paired t-test on ``diffs`` (shape ``(n,)``).

    ``t = mean(d) / (sd(d)/√n)`` with ``n-1`` degrees of freedom; ``None`` when
    ``n < 2`` or ``sd(d) = 0`` (t is 0/0 or infinite).
    """
    d = np.asarray(diffs, dtype=float)
    n = d.shape[0]
    if n < 2:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return None
    t = float(d.mean()) / (sd / np.sqrt(n))
    return float(2 * stdtr(n - 1, -abs(t)))  # two-sided Student t tail


def welch_pvalue(baseline: np.ndarray, candidate: np.ndarray) -> float | None:
    """Two-sided p-value of Welch's t-test (unequal variances, Welch–Satterthwaite df).

    ``None`` when a group has fewer than 2 values or both variances are 0.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    nb, nc = b.shape[0], c.shape[0]
    if nb < 2 or nc < 2:
        return None
    vb, vc = float(b.var(ddof=1)) / nb, float(c.var(ddof=1)) / nc
    if vb + vc == 0.0:
        return None
    t = (float(c.mean()) - float(b.mean())) / np.sqrt(vb + vc)
    df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
    return float(2 * stdtr(df, -abs(t)))


def _scipy_pvalue(func, *args, note: list[str], what: str, **kwargs) -> float | None:  # type: ignore[no-untyped-def]
    # scipy warns (small samples, ties) rather than failing; its warnings become ours.
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        try:
            p = float(func(*args, **kwargs).pvalue)
        except ValueError as exc:
            note.append(f"{what}: {exc}")
            return None
    for w in caught:
        note.append(f"{what}: {w.message}")
    return p if np.isfinite(p) else None


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
    """Cohen's d of ``candidate - baseline``.

    Paired: ``mean(d) / sd(d)`` (d_z). Unpaired: ``(mean_c - mean_b) / s_pooled`` with
    ``s_pooled² = ((n_b-1)s_b² + (n_c-1)s_c²) / (n_b+n_c-2)``. ``None`` when the sd is 0
    or undefined.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    if paired:
        d = c - b
        if d.shape[0] < 2:
            return None
        sd = float(d.std(ddof=1))
        return float(d.mean()) / sd if sd > 0 else None
    nb, nc = b.shape[0], c.shape[0]
    if nb + nc < 3 or nb < 1 or nc < 1:
        return None
    ssb = float(((b - b.mean()) ** 2).sum())
    ssc = float(((c - c.mean()) ** 2).sum())
    pooled = np.sqrt((ssb + ssc) / (nb + nc - 2))
    return (float(c.mean()) - float(b.mean())) / pooled if pooled > 0 else None


def hedges_g(d: float | None, df: int) -> float | None:
    """Hedges' g: ``d · (1 - 3 / (4·df - 1))``; df is ``n-1`` paired, ``n_b+n_c-2`` unpaired.

    ``None`` when ``d`` is undefined or ``df < 2`` (the correction is 0 or negative there).
    """
    if d is None or df < 2:
        return None
    return d * (1.0 - 3.0 / (4.0 * df - 1.0))


def compare(
    baseline: np.ndarray,
    candidate: np.ndarray,
    paired: bool,
    goal: Goal = "max",
    reps: int = 10_000,
    confidence: float = 0.95,
    method: Method = "percentile",
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
        reps, confidence, method, seed: the bootstrap CI of the mean difference.
        label: names the comparison in warnings.

    Returns:
        A :class:`Comparison`. The paired t and Wilcoxon p-values are ``None`` when
        unpaired; Welch and Mann–Whitney are computed on the two samples in both cases.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    note: list[str] = []
    where = f"{label}: " if label else ""
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
    nb, nc = int(b.shape[0]), int(c.shape[0])
    n = nb if paired else nb + nc
    if nb == 0 or nc == 0:
        note.append(f"{where}a side has no values; the comparison is null")
        return Comparison(paired, n, nb, nc, None, None, None, None, None, None, None, None, None,
                          None, note)

    # Imported here, not with the module: scipy.stats takes most of a second to import, and
    # processes that only draw a report's figures need nothing of it.
    from scipy import stats as sps

    mean_diff = float(c.mean() - b.mean())
    t_p = wil_p = None
    if paired:
        d = c - b
        t_p = paired_t_pvalue(d)
        if nb < 2:
            note.append(f"{where}n=1 pair: paired tests, effect sizes and CI are null")
        elif np.all(d == d[0]):
            note.append(
                f"{where}all paired differences equal {d[0]:g}: paired t, Wilcoxon and Cohen's d "
                "are undefined (null)"
            )
        else:
            wil_p = _scipy_pvalue(sps.wilcoxon, d, note=note, what=f"{where}Wilcoxon")
    welch_p = welch_pvalue(b, c)
    if welch_p is None and (nb < 2 or nc < 2):
        note.append(f"{where}a side has n<2: Welch t-test is null")
    elif welch_p is None:
        note.append(f"{where}both sides have zero variance: Welch t-test is null")
    mw_p = None
    if np.all(np.concatenate([b, c]) == b[0]):
        note.append(f"{where}every value is equal: Mann-Whitney U is null")
    else:
        mw_p = _scipy_pvalue(sps.mannwhitneyu, c, b, alternative="two-sided", note=note,
                             what=f"{where}Mann-Whitney U")
    d_eff = cohens_d(b, c, paired)
    df = nb - 1 if paired else nb + nc - 2
    if d_eff is None and not (paired and nb >= 2 and np.all(c - b == (c - b)[0])):
        note.append(f"{where}zero or undefined standard deviation: Cohen's d, Hedges' g are null")
    g = hedges_g(d_eff, df)
    if d_eff is not None and g is None:
        note.append(f"{where}{df} degree(s) of freedom: Hedges' g is null")
    ci: tuple[float | None, float | None] = (None, None)
    if nb >= 2 and nc >= 2:
        ci = bootstrap_mean_diff_ci(b, c, paired, reps, confidence, method, seed)
    elif not (paired and nb < 2):
        note.append(f"{where}a side has n<2: bootstrap CI of the difference is null")
    return Comparison(
        paired, n, nb, nc, mean_diff, ci[0], ci[1], t_p, wil_p, welch_p, mw_p, d_eff, g,
        probability_of_improvement(b, c, goal), note,
    )


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
    p_adjusted: float | None, ci_low: float | None, ci_high: float | None, alpha: float = 0.05
) -> bool | None:
    """The verdict: adjusted p < alpha and the CI of the difference excludes 0.

    ``None`` when the adjusted p-value or the interval is undefined.
    """
    if p_adjusted is None or ci_low is None or ci_high is None:
        return None
    return bool(p_adjusted < alpha and (ci_low > 0 or ci_high < 0))


__all__ = [
    "Comparison",
    "cohens_d",
    "compare",
    "hedges_g",
    "holm",
    "is_significant",
    "paired_t_pvalue",
    "probability_of_improvement",
    "welch_pvalue",
]
