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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from benchlab.names.choices import SummaryChoice
from benchlab.stats.describe import t_interval

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


# --------------------------------------------------------------------------- the curves a report draws
# Every logged curve of a results table, grouped by (metric, task), aligned on one grid and banded:
# what the learning-curve figures and the dashboard's curve page draw, computed here once.

#: The most steps of a (metric, task)'s grid that are kept for drawing: a figure cannot show more
#: points than it has pixels, so a longer grid is thinned to that many of its own steps, evenly
#: spaced, before the curves are interpolated onto it (every point drawn is a point of the aligned
#: curves).
MAX_GRID = 400

#: One run's curve as the results table holds it: ``(config, seed, steps, values)``.
RunCurve = tuple[str, int, np.ndarray, np.ndarray]


class GroupedCurves(Protocol):
    """What holds the logged curves (:class:`benchlab.results.Curves`): them by (metric, task)."""

    def groups(self) -> Mapping[tuple[str, str], Sequence[RunCurve]]: ...


@dataclass(frozen=True)
class CurveBand:
    """A config's mean curve and the Student-t 95% band of the mean at each step, each shape
    ``(g,)``; with one run the band is the mean itself."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class CurveSet:
    """All curves of one (metric, task): ``values[config]`` has shape ``(runs, len(grid))``, the
    runs' curves aligned on ``grid``; ``bands[config]`` their mean and band (computed with the set)."""

    metric: str
    task: str
    grid: np.ndarray
    values: dict[str, np.ndarray]
    seeds: dict[str, list[int]]
    bands: dict[str, CurveBand] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bands:
            # Frozen: the bands are part of the value, computed once when it is made.
            object.__setattr__(self, "bands", {c: CurveBand(*mean_band(v)) for c, v in self.values.items()})


def decimate(grid: np.ndarray, most: int = MAX_GRID) -> np.ndarray:
    """At most ``most`` of ``grid``'s steps, evenly spaced by index, first and last kept."""
    if grid.shape[0] <= most:
        return grid
    return grid[np.unique(np.linspace(0, grid.shape[0] - 1, most).round().astype(int))]


def curve_sets(curves: GroupedCurves) -> list[CurveSet]:
    """Every logged curve of a results table (:class:`benchlab.results.Curves`), grouped by
    (metric, task) and aligned."""
    out = []
    for (metric, task), runs in curves.groups().items():
        aligned = curve_set(metric, task, runs)
        if aligned is not None:
            out.append(aligned)
    return out


def curve_set(metric: str, task: str, runs: Sequence[RunCurve]) -> CurveSet | None:
    """The curves of one (metric, task), ``[(config, seed, steps, values), ...]``, aligned on
    one grid (:func:`common_grid`, thinned to :data:`MAX_GRID` steps, then :func:`align`); None
    when they have no point or share no step range."""
    shared = _on_shared_steps(runs)
    if shared is not None:
        grid, rows = shared
    else:
        # A curve with no finite point has nothing to align or draw.
        runs = [r for r in runs if np.any(~(np.isnan(r[2]) | np.isnan(r[3])))]
        if not runs:
            return None
        curves = [(s, v) for _, _, s, v in runs]
        # The grid align would make (the steps of points with a value), thinned first: aligning
        # onto all of it and then thinning gives the same points at far less cost.
        grid = decimate(common_grid([s[~(np.isnan(s) | np.isnan(v))] for s, v in curves]))
        if grid.shape[0] == 0:
            return None
        _, rows = align(curves, grid)
    values: dict[str, list[int]] = {}
    seeds: dict[str, list[int]] = {}
    for i, (config, seed, _, _) in enumerate(runs):
        values.setdefault(config, []).append(i)
        seeds.setdefault(config, []).append(seed)
    return CurveSet(metric, task, grid, {c: rows[idx] for c, idx in values.items()}, seeds)


def _on_shared_steps(runs: Sequence[RunCurve]) -> tuple[np.ndarray, np.ndarray] | None:
    """What :func:`curve_set` aligns when every run logged the same increasing steps and no NaN,
    as a sweep's runs nearly always do: the thinned grid and each run's values at its steps,
    ``(runs, len(grid))``, taken as logged; None for any other set of runs.

    The same numbers as interpolating (:func:`align`): every step of the grid is one of the
    run's own, where ``np.interp`` returns the logged value itself. One array operation for the
    whole set instead of a few per run (10,000 runs of 100 points: ~0.3 s less).
    """
    if not runs:
        return None
    p = len(runs[0][2])
    if p == 0 or any(len(r[2]) != p or len(r[3]) != p for r in runs):
        return None
    steps = np.asarray(np.stack([r[2] for r in runs]), dtype=float)
    values = np.asarray(np.stack([r[3] for r in runs]), dtype=float)
    first = steps[0].copy()
    if (np.isnan(steps).any() or np.isnan(values).any() or not bool(np.all(first[1:] > first[:-1]))
            or not bool(np.all(steps == first))):
        return None
    grid = decimate(first)
    return grid, values[:, np.searchsorted(first, grid)]


def mean_band(values: np.ndarray, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and the Student-t confidence band of the mean
    (:func:`benchlab.stats.describe.t_interval`) at each grid point.

    Args:
        values: shape ``(runs, g)``.

    Returns:
        ``(mean, low, high)``, each shape ``(g,)``; with one run the band is the mean itself.
    """
    mean = values.mean(axis=0)
    if values.shape[0] < 2:
        return mean, mean, mean
    low, high = t_interval(values.T, confidence)
    return mean, np.asarray(low), np.asarray(high)


__all__ = ["MAX_GRID", "SUMMARIES", "CurveBand", "CurveSet", "GroupedCurves", "Summary", "align", "common_grid",
           "curve_set", "curve_sets", "decimate", "mean_band", "summarize"]
