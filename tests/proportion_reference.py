"""Newcombe's paired-difference interval written out from the paper, for the tests: the Wilson
limits from statsmodels, the square-and-add with the corrected phi coefficient (Newcombe 1998,
Statistics in Medicine 17:2635, method 10), on a 2x2 table of (baseline, candidate) outcomes."""

from __future__ import annotations

import math

from statsmodels.stats.proportion import proportion_confint


def newcombe_by_hand(table: list[list[int]], alpha: float = 0.05) -> tuple[float, float]:
    """``table[i][j]``: questions with baseline outcome ``1 - i`` and candidate outcome ``1 - j``
    (row 0: baseline right). Returns the interval of p(candidate) - p(baseline)."""
    (e, f), (g, h) = table  # e both right, f baseline only, g candidate only, h neither
    n = e + f + g + h
    p_cand, p_base = (e + g) / n, (e + f) / n
    l_cand, u_cand = proportion_confint(e + g, n, alpha, method="wilson")
    l_base, u_base = proportion_confint(e + f, n, alpha, method="wilson")
    denom = (e + f) * (g + h) * (e + g) * (f + h)
    cross = e * h - f * g
    if denom == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    elif cross > n / 2:
        phi = (cross - n / 2) / math.sqrt(denom)
    else:
        phi = cross / math.sqrt(denom)
    d = p_cand - p_base
    dl = math.sqrt((p_cand - l_cand) ** 2 - 2 * phi * (p_cand - l_cand) * (u_base - p_base) + (u_base - p_base) ** 2)
    du = math.sqrt((u_cand - p_cand) ** 2 - 2 * phi * (u_cand - p_cand) * (p_base - l_base) + (p_base - l_base) ** 2)
    return max(-1.0, d - dl), min(1.0, d + du)
