"""Learning curves: alignment on a common step grid, and one number per curve.

A curve is ``(steps, values)``, two arrays of shape ``(p,)``. Summaries:

- ``final``: mean of the last ``k`` logged points (k=1 by default);
- ``auc``: trapezoid area under the curve divided by the step range, i.e. the
  curve's average height (same units as the metric);
- ``max``: the largest value;
- ``slope``: least-squares slope (units per step) over the last ``fraction`` of the
  step range (the last 25% by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from benchlab.choices import SummaryChoice

Summary = Literal["final", "auc", "max", "slope"]
SUMMARIES: tuple[str, ...] = tuple(m.value for m in SummaryChoice)


def _clean(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    if not (np.isnan(s).any() or np.isnan(v).any()) and bool(np.all(s[1:] >= s[:-1])):
        return s, v  # already clean, as logged curves nearly always are: no sort to pay for
    keep = ~(np.isnan(s) | np.isnan(v))
    s, v = s[keep], v[keep]
    order = np.argsort(s, kind="stable")
    return s[order], v[order]


def common_grid(curves_steps: Sequence[np.ndarray]) -> np.ndarray:
    """The steps on which a set of curves can all be compared.

    The union of every curve's steps inside the range they all cover
    ``[max of first steps, min of last steps]``. Shape ``(g,)``; empty when the
    ranges do not overlap.
    """
    if len(curves_steps):
        first = np.asarray(curves_steps[0], dtype=float)
        if (first.shape[0] and bool(np.all(first[1:] > first[:-1]))
                and all(np.array_equal(first, s) for s in curves_steps[1:])):
            return first.copy()  # every curve logged the same increasing steps: they are the grid
    firsts = [float(np.nanmin(s)) for s in curves_steps if len(s)]
    lasts = [float(np.nanmax(s)) for s in curves_steps if len(s)]
    if not firsts:
        return np.empty(0)
    lo, hi = max(firsts), min(lasts)
    allsteps = np.unique(np.concatenate([np.asarray(s, dtype=float) for s in curves_steps]))
    allsteps = allsteps[~np.isnan(allsteps)]
    return allsteps[(allsteps >= lo) & (allsteps <= hi)]


def align(
    curves: Sequence[tuple[np.ndarray, np.ndarray]], grid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Interpolate curves linearly onto one grid.

    Args:
        curves: ``[(steps, values), ...]``, each array of shape ``(p_i,)``.
        grid: shape ``(g,)``; by default :func:`common_grid` of the curves.

    Returns:
        ``(grid, values)`` with ``values`` of shape ``(len(curves), g)``.
    """
    cleaned = [_clean(s, v) for s, v in curves]
    if grid is None:
        grid = common_grid([s for s, _ in cleaned])
    out = np.empty((len(cleaned), grid.shape[0]))
    for i, (s, v) in enumerate(cleaned):
        out[i] = np.interp(grid, s, v) if s.shape[0] else np.nan
    return grid, out


def summarize(
    steps: np.ndarray,
    values: np.ndarray,
    summary: Summary = "final",
    k: int = 1,
    fraction: float = 0.25,
) -> float | None:
    """One number for one curve (see the module docstring); ``None`` when undefined.

    Args:
        steps, values: shape ``(p,)``; NaN points are dropped.
        summary: ``final``, ``auc``, ``max`` or ``slope``.
        k: points averaged by ``final``.
        fraction: trailing share of the step range fitted by ``slope``.

    ``auc`` needs two distinct steps (a single point has no area: ``None``);
    ``slope`` needs two distinct steps in its window.
    """
    s, v = _clean(steps, values)
    if s.shape[0] == 0:
        return None
    if summary == "final":
        return float(v[-k:].mean())
    if summary == "max":
        return float(v.max())
    if summary == "auc":
        span = s[-1] - s[0]
        if span <= 0:
            return None
        area = float(np.sum((v[1:] + v[:-1]) * np.diff(s)) / 2)
        return area / float(span)
    if summary == "slope":
        start = s[-1] - fraction * (s[-1] - s[0])
        window = s >= start
        ws, wv = s[window], v[window]
        if np.unique(ws).shape[0] < 2:
            return None
        ds = ws - ws.mean()
        return float(np.sum(ds * (wv - wv.mean())) / np.sum(ds**2))
    raise ValueError(f"summary must be one of {', '.join(SUMMARIES)}; got {summary!r}")


__all__ = ["SUMMARIES", "Summary", "align", "common_grid", "summarize"]
