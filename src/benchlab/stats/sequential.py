"""Group-sequential comparisons: adding seeds only while a comparison is still open.

Looking at a paired comparison after every batch of seeds and stopping at the first
``p < α`` inflates the false-positive rate far above α (five looks at α = 0.05 give
about 14%). A group-sequential design spends α over the planned looks instead:

- The looks are at ``n_1 < n_2 < … < n_K`` paired seeds (the spec's seeds, then one
  batch at a time up to ``--max-seeds``); the information fraction of look ``k`` is
  ``t_k = n_k / n_K``.
- A spending function ``α(t)`` says how much of α may be used up by fraction ``t``:
  O'Brien–Fleming-type ``α(t) = 2 − 2Φ(z_{1−α/2} / √t)`` (Lan & DeMets 1983; spends
  almost nothing early, so the last look is close to the fixed design) or Pocock-type
  ``α(t) = α · ln(1 + (e − 1) t)``.
- :func:`boundaries` turns the spending into two-sided critical values ``c_k`` on the
  z scale, solving ``P(|Z_1| < c_1, …, |Z_{k−1}| < c_{k−1}, |Z_k| ≥ c_k) = α(t_k) − α(t_{k−1})``
  for the canonical joint distribution of the ``Z_k`` (``corr(Z_i, Z_j) = √(t_i / t_j)``)
  by numerical integration on a grid (Armitage, McPherson & Rowe 1969).
- At look ``k`` the *repeated confidence interval* (Jennison & Turnbull 1989) of the
  mean paired difference is ``mean ± q_k · sd / √n``; ``q_k`` is the Student-t quantile
  (``n − 1`` degrees of freedom) at the nominal level ``Φ(c_k)`` of the boundary, because
  seeds are few and the variance is estimated.

The repeated intervals hold the true difference at every look at once with probability
``1 − α``, whatever rule decides when to stop. So every decision taken from them is
wrong with probability at most α: *positive* (the interval is above 0), *negative*
(below 0), or *equivalent* (inside ``(−margin, margin)``). A comparison that reaches its
last look without one of those stays *open* (undecided at the seed cap).

Every function is pure (arrays in, arrays out). Shapes are stated as ``comparisons × seeds``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from benchlab.stats.tolerance import negligible_mask

SPENDINGS = ("obrien-fleming", "pocock")

# Decision codes of :func:`decide_look` (ints so that thousands of simulated trials stay one array).
OPEN, POSITIVE, NEGATIVE, EQUIVALENT, DEGENERATE = 0, 1, 2, 3, 4
DECISIONS = {OPEN: "open", POSITIVE: "positive", NEGATIVE: "negative", EQUIVALENT: "equivalent",
             DEGENERATE: "degenerate"}

_GRID_POINTS = 801


def look_sizes(first: int, batch: int, most: int) -> list[int]:
    """The planned numbers of paired seeds at each look: ``first``, then ``batch`` more at a time,
    the last look at ``most`` (a partial batch where ``most − first`` is not a multiple)."""
    if first < 1 or batch < 1 or most < first:
        raise ValueError(f"expected 1 <= first <= most and batch >= 1, got first={first}, batch={batch}, "
                         f"most={most}")
    sizes = list(range(first, most, batch))
    return [*sizes, most] if not sizes or sizes[-1] != most else sizes


def spent(fractions: np.ndarray, alpha: float, spending: str = "obrien-fleming") -> np.ndarray:
    """Cumulative α spent by each information fraction (two-sided), ``α(1) = α``."""
    t = np.asarray(fractions, dtype=float)
    if spending == "obrien-fleming":
        with np.errstate(divide="ignore"):
            out = 2.0 - 2.0 * stats.norm.cdf(stats.norm.ppf(1.0 - alpha / 2.0) / np.sqrt(t))
    elif spending == "pocock":
        out = alpha * np.log1p((np.e - 1.0) * t)
    else:
        raise ValueError(f"unknown spending {spending!r}; expected one of {', '.join(SPENDINGS)}")
    return np.where(t >= 1.0, alpha, out)


def boundaries(fractions: np.ndarray | list[float], alpha: float = 0.05,
               spending: str = "obrien-fleming") -> np.ndarray:
    """Two-sided critical values ``c_k`` (z scale) at increasing information ``fractions`` in (0, 1].

    The probability that ``|Z_k| ≥ c_k`` at some look is ``α(t_K)`` under the null, and the
    part of it first reached at look ``k`` is ``α(t_k) − α(t_{k−1})``. Works on the Brownian
    scale ``W(t) = Z √t``: the sub-density of ``W`` over the paths still inside the boundary
    is carried from look to look on a grid and convolved with the normal increment.
    """
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(t <= 0) or np.any(t > 1) or np.any(np.diff(t) <= 0):
        raise ValueError(f"expected increasing information fractions in (0, 1], got {t.tolist()}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"expected 0 < alpha < 1, got {alpha}")
    increments = np.diff(spent(t, alpha, spending), prepend=0.0)
    bounds = np.empty(t.size)
    bounds[0] = stats.norm.isf(increments[0] / 2.0) if increments[0] > 0 else np.inf
    # The grid spans the continuation region (−c√t, c√t) of the previous look.
    edge = min(bounds[0], 12.0) * np.sqrt(t[0])
    w = np.linspace(-edge, edge, _GRID_POINTS)
    density = stats.norm.pdf(w, scale=np.sqrt(t[0]))
    for k in range(1, t.size):
        step = np.sqrt(t[k] - t[k - 1])
        weights = _trapezoid_weights(w) * density

        top_scale, target = np.sqrt(t[k]), increments[k]
        if target <= 0 or _exit_probability(40.0, top_scale, w, weights, step) >= target:
            bounds[k] = np.inf if target <= 0 else 40.0
        else:
            bounds[k] = optimize.brentq(
                lambda c, s=top_scale, x=w, wt=weights, h=step, a=target: _exit_probability(c, s, x, wt, h) - a,
                0.0, 40.0, xtol=1e-10)
        edge = min(bounds[k], 12.0) * np.sqrt(t[k])
        new_w = np.linspace(-edge, edge, _GRID_POINTS)
        density = stats.norm.pdf((new_w[:, None] - w[None, :]) / step) / step @ weights
        w = new_w
    return bounds


def _exit_probability(c: float, scale: float, w: np.ndarray, weights: np.ndarray, step: float) -> float:
    """Probability of first crossing ``±c`` (z scale, ``±c·scale`` on the W scale) at the next look,
    from the sub-density ``weights`` on grid ``w`` and a normal increment of sd ``step``."""
    top = c * scale
    return float(weights @ (stats.norm.cdf((-top - w) / step) + stats.norm.sf((top - w) / step)))


def _trapezoid_weights(x: np.ndarray) -> np.ndarray:
    """Weights of the trapezoid rule on the evenly spaced grid ``x``."""
    h = x[1] - x[0] if x.size > 1 else 0.0
    weights = np.full(x.size, h)
    weights[[0, -1]] = h / 2.0
    return weights


@dataclass(frozen=True)
class LookResult:
    """What one look says about each comparison (arrays of length ``comparisons``)."""

    decision: np.ndarray  # int codes: OPEN, POSITIVE, NEGATIVE, EQUIVALENT, DEGENERATE
    n: np.ndarray  # paired seeds used (failed seeds, NaN, left out)
    mean: np.ndarray  # mean paired difference (NaN where n = 0)
    low: np.ndarray  # repeated confidence interval (NaN where it does not exist)
    high: np.ndarray


def decide_look(diffs: np.ndarray, bound: float, margin: float | None = None,
                magnitude: np.ndarray | None = None) -> LookResult:
    """Decisions at one look from paired differences ``diffs`` (``comparisons × seeds``, NaN for a
    seed missing on either side) and the look's z-scale critical value ``bound``.

    ``margin`` (same units as the metric) allows *equivalent*; ``magnitude`` (per comparison,
    the largest |value| of the two sides) lets a spread lost in rounding count as zero: such a
    comparison is DEGENERATE (no interval, no verdict), like ``n < 2`` gives OPEN.
    """
    d = np.atleast_2d(np.asarray(diffs, dtype=float))
    n = np.sum(np.isfinite(d), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(d, axis=1) / n
        var = np.nansum((d - mean[:, None]) ** 2, axis=1) / (n - 1)
    sd = np.sqrt(var)
    mag = np.nanmax(np.abs(d), axis=1, initial=0.0) if magnitude is None else np.asarray(magnitude, dtype=float)
    enough = n >= 2
    flat = enough & negligible_mask(np.where(enough, sd, 0.0), mag)
    usable = enough & ~flat
    df = np.where(usable, n - 1, 1)
    q = stats.t.ppf(stats.norm.cdf(bound), df) if np.isfinite(bound) else np.full(n.shape, np.inf)
    half = np.where(usable, q * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    low, high = mean - half, mean + half
    decision = np.full(n.shape, OPEN)
    decision[flat] = DEGENERATE
    decision[usable & (low > 0)] = POSITIVE
    decision[usable & (high < 0)] = NEGATIVE
    if margin is not None:
        decision[usable & (low > -margin) & (high < margin)] = EQUIVALENT
    return LookResult(decision, n, np.where(n > 0, mean, np.nan), np.where(usable, low, np.nan),
                      np.where(usable, high, np.nan))


def run_design(diffs: np.ndarray, sizes: list[int], bounds: np.ndarray,
               margin: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every comparison taken through the looks until it is decided (``comparisons × sizes[-1]``
    differences, all there, as a simulation has them): returns (decision, seeds used) per row.
    Rows still open at the last look end OPEN with ``sizes[-1]`` seeds."""
    d = np.atleast_2d(np.asarray(diffs, dtype=float))
    decision = np.full(d.shape[0], OPEN)
    used = np.full(d.shape[0], sizes[-1])
    for size, bound in zip(sizes, bounds, strict=True):
        live = decision == OPEN
        if not live.any():
            break
        look = decide_look(d[live, :size], float(bound), margin)
        idx = np.flatnonzero(live)
        decision[idx] = look.decision
        used[idx[look.decision != OPEN]] = size
    return decision, used


__all__ = ["DECISIONS", "DEGENERATE", "EQUIVALENT", "NEGATIVE", "OPEN", "POSITIVE", "SPENDINGS", "LookResult",
           "boundaries", "decide_look", "look_sizes", "run_design", "spent"]
