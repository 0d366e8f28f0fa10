"""Rank tests with their exact null distributions computed here, not by scipy.

scipy's Wilcoxon and Mann–Whitney choose between an exact, a permutation and a
normal-approximation p-value by n, ties and version (scipy 1.11.4 gives
p = 0.094 where 1.17 gives 0.125 on the same six tied pairs). benchlab fixes
the method instead, so a p-value does not depend on the installed scipy:

- **exact** whenever the sample is small enough to enumerate
  (:data:`WILCOXON_EXACT_MAX` non-zero pairs, :data:`MANNWHITNEY_EXACT_MAX` runs
  in all), ties or not: the permutation distribution of the statistic given the
  observed (mid)ranks, counted by dynamic programming over the doubled ranks,
  which are integers even with ties;
- otherwise the **normal approximation** with the tie-corrected variance and no
  continuity correction (a warning says so when there are ties).

Both are two-sided: ``p = min(1, 2 · min(P(T ≤ t), P(T ≥ t)))`` under the null
distribution, the convention of scipy's exact and permutation methods. Values
that differ by less than :data:`benchlab.stats.tolerance.RELATIVE_TOLERANCE`
times the data's magnitude count as tied, and paired differences that small
count as zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import ndtr

from benchlab.stats.tolerance import RELATIVE_TOLERANCE, scale

WILCOXON_EXACT_MAX = 50
MANNWHITNEY_EXACT_MAX = 60


@dataclass(frozen=True)
class RankTest:
    """A two-sided rank test's result.

    ``statistic`` is W+ (sum of the ranks of positive differences) for the
    signed-rank test and U of the candidate for Mann–Whitney; ``method`` is
    ``"exact"`` or ``"normal"``; ``tied_groups`` counts groups of tied values
    (0 without ties); ``zeros`` counts the zero differences dropped (signed rank).
    """

    pvalue: float
    statistic: float
    method: Literal["exact", "normal"]
    n: int
    tied_groups: int
    zeros: int = 0


def _midranks(values: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Ranks 1..n with ties (values within ``tol`` of their sorted neighbour) averaged.

    Returns ``(ranks, tie_sizes)``: ranks in the input order, and the size of each
    group of 2 or more tied values.
    """
    order = np.argsort(values, kind="stable")
    sorted_v = values[order]
    # A new group starts where the gap to the previous sorted value exceeds tol.
    starts = np.concatenate([[True], np.diff(sorted_v) > tol])
    group = np.cumsum(starts) - 1
    sizes = np.bincount(group)
    first = np.flatnonzero(starts)  # 0-based position of each group's first value
    mid = first + (sizes + 1) / 2.0  # average of 1-based positions first+1 .. first+size
    ranks = np.empty(values.shape[0])
    ranks[order] = mid[group]
    return ranks, sizes[sizes > 1]


def _two_sided(dist: np.ndarray, observed: int) -> float:
    """``min(1, 2 min(P(T <= t), P(T >= t)))`` for a distribution over 0..len-1."""
    below = float(dist[: observed + 1].sum())
    above = float(dist[observed:].sum())
    return min(1.0, 2.0 * min(below, above))


def _signed_rank_null(doubled: np.ndarray) -> np.ndarray:
    """P(Σ of a random half of the integer scores = s), each score in or out with prob. ½."""
    dist = np.zeros(int(doubled.sum()) + 1)
    dist[0] = 1.0
    top = 0
    for r in doubled.astype(int):
        shifted = np.zeros_like(dist)
        shifted[r : top + r + 1] = dist[: top + 1]
        dist = 0.5 * (dist + shifted)
        top += r
    return dist


def signed_rank_test(diffs: np.ndarray, magnitude: float | None = None) -> RankTest | None:
    """Wilcoxon signed-rank test of paired differences, two-sided.

    Zero differences are dropped before ranking (``zero_method="wilcox"``, as in R's
    ``wilcox.test`` and scipy's default); a difference counts as zero when
    ``|d| <= RELATIVE_TOLERANCE · magnitude`` (``magnitude`` defaults to ``max|d|``;
    pass the scale of the paired values themselves). Tied ``|d|`` get midranks.

    Args:
        diffs: shape ``(n,)``, finite.

    Returns:
        A :class:`RankTest`, or ``None`` when no non-zero difference is left.
    """
    d = np.asarray(diffs, dtype=float)
    tol = RELATIVE_TOLERANCE * (scale(d) if magnitude is None else max(magnitude, scale(d)))
    nonzero = np.abs(d) > tol
    zeros = int((~nonzero).sum())
    d = d[nonzero]
    n = int(d.shape[0])
    if n == 0:
        return None
    ranks, ties = _midranks(np.abs(d), tol)
    w_plus = float(ranks[d > 0].sum())
    if n <= WILCOXON_EXACT_MAX:
        dist = _signed_rank_null(np.rint(2 * ranks))
        p = _two_sided(dist, int(round(2 * w_plus)))
        return RankTest(p, w_plus, "exact", n, int(ties.shape[0]), zeros)
    mean = float(ranks.sum()) / 2
    sd = float(np.sqrt(np.sum(ranks**2) / 4))  # the tie-corrected variance, directly
    z = (w_plus - mean) / sd
    return RankTest(float(min(1.0, 2 * ndtr(-abs(z)))), w_plus, "normal", n,
                    int(ties.shape[0]), zeros)


def _rank_sum_null(doubled: np.ndarray, m: int) -> np.ndarray:
    """P(Σ of the scores of a random m-subset = s) for integer scores ``doubled``."""
    total = int(np.sort(doubled)[-m:].sum()) if m else 0
    # ways[j, s]: number of j-subsets of the scores seen so far summing to s, kept as a
    # probability-like float (divided by C(N, m) at the end) to stay finite at N = 60.
    ways = np.zeros((m + 1, total + 1))
    ways[0, 0] = 1.0
    for r in doubled.astype(int):
        if r <= total:
            ways[1:, r:] += ways[:-1, : total + 1 - r].copy()
    dist = ways[m]
    return dist / dist.sum()


def rank_sum_test(baseline: np.ndarray, candidate: np.ndarray) -> RankTest | None:
    """Mann–Whitney U test (Wilcoxon rank-sum) of two independent samples, two-sided.

    Ties (values within ``RELATIVE_TOLERANCE · max|x|``) get midranks; the exact null
    is the distribution of the candidate's rank sum over all ways of choosing which
    ``n_c`` of the ``N`` ranks are the candidate's.

    Args:
        baseline: shape ``(n_b,)``; candidate: shape ``(n_c,)``; finite values.

    Returns:
        A :class:`RankTest` with ``statistic`` the candidate's U, or ``None`` when a side
        is empty or every value is tied.
    """
    b = np.asarray(baseline, dtype=float)
    c = np.asarray(candidate, dtype=float)
    nb, nc = int(b.shape[0]), int(c.shape[0])
    if nb == 0 or nc == 0:
        return None
    both = np.concatenate([c, b])
    tol = RELATIVE_TOLERANCE * scale(both)
    ranks, ties = _midranks(both, tol)
    n = nb + nc
    if ties.shape[0] == 1 and ties[0] == n:
        return None
    rank_sum = float(ranks[:nc].sum())
    u = rank_sum - nc * (nc + 1) / 2
    if n <= MANNWHITNEY_EXACT_MAX:
        dist = _rank_sum_null(np.rint(2 * ranks), nc)
        p = _two_sided(dist, int(round(2 * rank_sum)))
        return RankTest(p, u, "exact", n, int(ties.shape[0]))
    mean = nb * nc / 2
    tie_term = float(np.sum(ties**3 - ties)) / (n * (n - 1))
    sd = float(np.sqrt(nb * nc / 12 * ((n + 1) - tie_term)))
    z = (u - mean) / sd
    return RankTest(float(min(1.0, 2 * ndtr(-abs(z)))), u, "normal", n, int(ties.shape[0]))


__all__ = ["MANNWHITNEY_EXACT_MAX", "WILCOXON_EXACT_MAX", "RankTest", "rank_sum_test",
           "signed_rank_test"]
