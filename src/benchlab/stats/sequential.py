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

That guarantee rests on the paired differences being close to normal. On the field's data
they are not: a candidate whose seeds sometimes collapse (a fifth of RL seeds never learn)
against a stable baseline of the same mean shows, at the first looks, mostly seeds without a
collapse, and the t-based intervals decided falsely in 14–66% of sweeps of 1–20 pairs. No
method can hold α for every distribution of an unbounded metric from a few seeds; for a
metric with a known range it can, by betting (Waudby-Smith & Ramdas 2024, "Estimating means
of bounded random variables by betting", JRSS-B):

- the paired difference of a metric in ``[a, b]`` lies in ``[a − b, b − a]``; rescaled,
  ``y = (d + w) / 2w ∈ [0, 1]`` with ``w = b − a``, and a mean difference ``m`` is
  ``m' = (m + w) / 2w``;
- a gambler who bets ``λ_i`` on ``y_i > m'`` has capital ``K⁺_t(m') = ∏_{i≤t} (1 + λ_i (y_i − m'))``,
  and one who bets against it ``K⁻_t(m') = ∏ (1 − λ_i (y_i − m'))``. With ``λ_i`` chosen from
  seeds ``1..i−1`` only (predictable) and ``0 ≤ λ_i ≤ 1``, each is a non-negative
  supermartingale when the true mean is on the bettor's losing side, so by Ville's
  inequality ``P(sup_t K⁺_t(m') ≥ 2/α) ≤ α/2`` when the mean is ``≤ m``, *whatever the
  distribution in the range*;
- the bets are the paper's predictable plug-in ``λ_i = √(2 log(2/α) / (σ̂²_{i−1} · i · log(1 + i)))``
  with ``σ̂²_i = (1/4 + Σ_{j≤i} (y_j − μ̂_j)²) / (i + 1)``, ``μ̂_i = (1/2 + Σ_{j≤i} y_j) / (i + 1)``,
  truncated at 3/2 (the paper's ``c = 3/4`` at ``m' = ½``, where a difference of 0 sits).
  They do not depend on ``m'``, so ``K⁺`` falls and ``K⁻`` rises with ``m'``; every factor
  stays non-negative where each is used, ``K⁺`` on ``m' ≤ 2/3`` and ``K⁻`` on ``m' ≥ 1/3``
  (the interval's ends are taken there; a lower end above ``2/3`` is shown as ``2/3``, which
  only widens it). The set of means not rejected, ``{m : sup K⁺(m) < 2/α and sup K⁻(m) < 2/α}``,
  is then an interval (the *confidence sequence*), and a pair is *positive* when
  ``sup K⁺(0) ≥ 2/α``, *negative* when ``sup K⁻(0) ≥ 2/α``, *equivalent* when ``sup K⁺(−margin)``
  and ``sup K⁻(margin)`` both are.

Each wrong decision needs a capital process that is a supermartingale under the truth to
reach ``2/α``, so a pair's chance of any wrong decision is at most α, at any stopping rule.

Every function is pure (arrays in, arrays out). Shapes are stated as ``comparisons × seeds``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from benchlab.stats.tolerance import negligible_mask

SPENDINGS = ("obrien-fleming", "pocock")

#: The two methods: betting confidence sequences for a bounded metric, valid for any
#: distribution in its range; the group-sequential t design for an unbounded one.
BETTING, NORMAL_THEORY = "betting", "normal-theory"
#: What each method's error guarantee rests on, in words (printed by ``run --until-decided``).
GUARANTEES = {
    BETTING: "betting confidence sequences on the paired differences, bounded by the metric's range: "
             "the error rate holds for any distribution in that range (no normality assumed)",
    NORMAL_THEORY: "group-sequential t intervals: the error rate holds only if the paired differences are "
                   "close to normal; with seeds that collapse or skewed values it was measured far above "
                   "alpha (docs/statistics.md); declare the metric's range to get a guarantee that does "
                   "not rest on normality",
}

# Decision codes of :func:`decide_look` (ints so that thousands of simulated trials stay one array).
OPEN, POSITIVE, NEGATIVE, EQUIVALENT, DEGENERATE = 0, 1, 2, 3, 4
DECISIONS = {OPEN: "open", POSITIVE: "positive", NEGATIVE: "negative", EQUIVALENT: "equivalent",
             DEGENERATE: "degenerate"}

_GRID_POINTS = 801
#: The largest bet: 3/2 keeps 1 + λ(y − m') ≥ 0 for y in [0, 1] while m' ≤ 2/3 (and 1 − λ(y − m')
#: while m' ≥ 1/3), the parts of the scale where K⁺ and K⁻ are used.
_MOST_BET = 1.5


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


def _bets(y: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets ``λ_i`` (module docstring) for ``y`` in [0, 1] (``rows × seeds``,
    NaN for a missing seed, which gets no bet and does not move the estimates)."""
    seen = np.isfinite(y)
    yy = np.where(seen, y, 0.0)
    count = np.cumsum(seen, axis=1)  # values up to and including i
    mu = (0.5 + np.cumsum(yy, axis=1)) / (count + 1.0)
    sq = np.where(seen, (yy - mu) ** 2, 0.0)
    var = (0.25 + np.cumsum(sq, axis=1)) / (count + 1.0)
    before = np.concatenate([np.full((y.shape[0], 1), 0.25), var[:, :-1]], axis=1)  # σ̂²_{i−1}
    i = np.concatenate([np.zeros((y.shape[0], 1)), count[:, :-1]], axis=1) + 1.0  # index of this value
    lam = np.sqrt(2.0 * np.log(2.0 / alpha) / (before * i * np.log1p(i)))
    return np.where(seen, np.minimum(lam, _MOST_BET), 0.0)


def _log_capital(y: np.ndarray, lam: np.ndarray, m: np.ndarray | float, side: int) -> np.ndarray:
    """Running maximum over seeds of ``log K⁺(m)`` (side +1) or ``log K⁻(m)`` (side −1):
    ``rows × seeds``; ``m`` per row (shape ``(rows,)``) or one number."""
    m = np.asarray(m, dtype=float)
    m = m[:, None] if m.ndim == 1 else m
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.log1p(side * lam * (np.where(np.isfinite(y), y, m) - m))
    return np.maximum.accumulate(np.cumsum(step, axis=1), axis=1)


def rescale(diffs: np.ndarray, width: float) -> np.ndarray:
    """Paired differences of a metric whose range has width ``width`` (``b − a``), mapped from
    ``[−width, width]`` to [0, 1]; values outside the range are refused (ValueError)."""
    d = np.asarray(diffs, dtype=float)
    if not width > 0:
        raise ValueError(f"the range's width must be positive, got {width}")
    bad = np.isfinite(d) & (np.abs(d) > width * (1 + 1e-12))
    if bad.any():
        raise ValueError(f"a paired difference {float(d[bad][0]):g} is outside [-{width:g}, {width:g}]: "
                         "a value lies outside the metric's declared range")
    return np.clip((d + width) / (2.0 * width), 0.0, 1.0)


def decide_betting(diffs: np.ndarray, width: float, alpha: float, margin: float | None = None,
                   magnitude: np.ndarray | None = None) -> LookResult:
    """Decisions from every seed so far of each comparison, by betting (module docstring).

    ``diffs``: ``comparisons × seeds`` paired differences, in seed order (NaN: no value on a
    side); ``width``: the metric's range ``b − a``; ``alpha``: this comparison's error rate.
    ``low``/``high`` is the confidence sequence's interval, running-intersected over the seeds
    (so it never widens); it is NaN before any seed has a value. Paired differences all zero up
    to rounding are DEGENERATE (identical runs: nothing to bet on), as in :func:`decide_look`.
    """
    d = np.atleast_2d(np.asarray(diffs, dtype=float))
    y = rescale(d, width)
    lam = _bets(y, alpha)
    threshold = np.log(2.0 / alpha)
    n = np.sum(np.isfinite(d), axis=1)
    with np.errstate(invalid="ignore"):
        mean = np.where(n > 0, np.nansum(d, axis=1) / np.maximum(n, 1), np.nan)
    mag = np.nanmax(np.abs(d), axis=1, initial=0.0) if magnitude is None else np.asarray(magnitude, dtype=float)
    largest = np.nanmax(np.abs(np.where(np.isfinite(d), d, 0.0)), axis=1, initial=0.0)
    flat = (n >= 2) & negligible_mask(largest, np.maximum(mag, largest))

    def up(m: np.ndarray | float) -> np.ndarray:  # evidence that the mean is above m' (last seed)
        return _log_capital(y, lam, m, +1)[:, -1] >= threshold

    def down(m: np.ndarray | float) -> np.ndarray:
        return _log_capital(y, lam, m, -1)[:, -1] >= threshold

    decision = np.full(n.shape, OPEN)
    decision[up(0.5)] = POSITIVE
    decision[down(0.5)] = NEGATIVE
    if margin is not None:
        m = margin / (2.0 * width)
        decision[up(0.5 - m) & down(0.5 + m)] = EQUIVALENT
    decision[flat] = DEGENERATE
    low, high = _sequence_ends(y, lam, threshold)
    defined = n > 0
    return LookResult(decision, n, mean, np.where(defined, low * 2 * width - width, np.nan),
                      np.where(defined, high * 2 * width - width, np.nan))


def _sequence_ends(y: np.ndarray, lam: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The confidence sequence's ends on the [0, 1] scale, by bisection: the largest ``m'`` that
    ``K⁺`` still rejects (running maximum: the running intersection) and the smallest ``K⁻`` does."""
    rows = y.shape[0]
    ends = []
    for side in (+1, -1):
        lo, hi = (np.zeros(rows), np.full(rows, 2 / 3)) if side > 0 else (np.full(rows, 1 / 3), np.ones(rows))
        for _ in range(50):
            mid = (lo + hi) / 2
            rejected = _log_capital(y, lam, mid, side)[:, -1] >= threshold
            # K⁺ rejects every m' below its end; K⁻ every m' above its end.
            if side > 0:
                lo, hi = np.where(rejected, mid, lo), np.where(rejected, hi, mid)
            else:
                lo, hi = np.where(rejected, lo, mid), np.where(rejected, mid, hi)
        ends.append(lo if side > 0 else hi)
    return ends[0], ends[1]


def betting_pvalue(diffs: np.ndarray, width: float, tuning_alpha: float = 0.05) -> float:
    """A p-value of "mean paired difference 0" valid for any distribution of differences in
    ``[−width, width]`` (a metric in a range of that width), at a fixed number of seeds too:
    ``min(1, 2 / max(sup_t K⁺_t, sup_t K⁻_t))`` at ``m = 0`` (module docstring). Ville's inequality
    bounds each capital's chance of reaching ``2/α`` by ``α/2``, so ``P(p ≤ α) ≤ α``.
    ``tuning_alpha`` only shapes the bets; any value keeps the guarantee. 1 with no finite value."""
    d = np.asarray(diffs, dtype=float)[None, :]
    y = rescale(d, width)
    if not np.isfinite(y).any():
        return 1.0
    lam = _bets(y, tuning_alpha)
    top = max(float(_log_capital(y, lam, 0.5, +1)[0, -1]), float(_log_capital(y, lam, 0.5, -1)[0, -1]))
    return float(min(1.0, 2.0 * np.exp(-top)))


def run_betting_design(diffs: np.ndarray, sizes: list[int], width: float, alpha: float,
                       margin: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`run_design` for the betting method: each comparison (``comparisons × sizes[-1]``
    differences, all there) decided at the first look where its capital reached ``2/alpha``;
    returns (decision, seeds used). For simulations: no interval is computed."""
    d = np.atleast_2d(np.asarray(diffs, dtype=float))
    y = rescale(d, width)
    lam = _bets(y, alpha)
    threshold = np.log(2.0 / alpha)
    pos = _log_capital(y, lam, 0.5, +1) >= threshold
    neg = _log_capital(y, lam, 0.5, -1) >= threshold
    eq = None
    if margin is not None:
        m = margin / (2.0 * width)
        eq = (_log_capital(y, lam, 0.5 - m, +1) >= threshold) & (_log_capital(y, lam, 0.5 + m, -1) >= threshold)
    decision = np.full(d.shape[0], OPEN)
    used = np.full(d.shape[0], sizes[-1])
    for size in sizes:
        live = decision == OPEN
        k = size - 1
        now = np.full(d.shape[0], OPEN)
        now[pos[:, k]] = POSITIVE
        now[neg[:, k]] = NEGATIVE
        if eq is not None:
            now[eq[:, k]] = EQUIVALENT
        hit = live & (now != OPEN)
        decision[hit] = now[hit]
        used[hit] = size
    return decision, used


__all__ = ["BETTING", "DECISIONS", "DEGENERATE", "EQUIVALENT", "GUARANTEES", "NEGATIVE", "NORMAL_THEORY", "OPEN",
           "POSITIVE", "SPENDINGS", "LookResult", "betting_pvalue", "boundaries", "decide_betting", "decide_look",
           "look_sizes", "rescale", "run_betting_design", "run_design", "spent"]
