"""Learning curves for the report's figures: the results table's curves, aligned by
:mod:`benchlab.stats.curves`, and their mean and Student-t band from :mod:`benchlab.stats`.

The curves come from :class:`benchlab.results.Curves`, read with the results table (one
array per run, not a row per point, so 10,000 runs of 100 points cost one pass). All curves of one (metric, task)
are put on the grid :func:`benchlab.stats.curves.common_grid` gives: the steps inside the
range every run covers. A figure cannot show more points than it has pixels, so a grid of
more than :data:`MAX_GRID` steps is decimated to that many of its own steps, evenly spaced,
before :func:`benchlab.stats.curves.align` interpolates onto it: a plotting step only, and
every point drawn is a point of the aligned curves the statistics see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from benchlab.stats.curves import align, common_grid
from benchlab.stats.describe import t_interval

if TYPE_CHECKING:
    from benchlab.results import Curves

MAX_GRID = 400


@dataclass
class CurveSet:
    """All curves of one (metric, task): ``values[config]`` has shape ``(runs, len(grid))``."""

    metric: str
    task: str
    grid: np.ndarray
    values: dict[str, np.ndarray]
    seeds: dict[str, list[int]]


def decimate(grid: np.ndarray, most: int = MAX_GRID) -> np.ndarray:
    """At most ``most`` of ``grid``'s steps, evenly spaced by index, first and last kept."""
    if grid.shape[0] <= most:
        return grid
    return grid[np.unique(np.linspace(0, grid.shape[0] - 1, most).round().astype(int))]


def curve_sets(curves: Curves) -> list[CurveSet]:
    """Every logged curve of the results table, grouped by (metric, task) and aligned."""
    out = []
    for (metric, task), runs in curves.groups().items():
        aligned = curve_set(metric, task, runs)
        if aligned is not None:
            out.append(aligned)
    return out


def curve_set(
    metric: str, task: str, runs: Sequence[tuple[str, int, np.ndarray, np.ndarray]]
) -> CurveSet | None:
    """The curves of one (metric, task), ``[(config, seed, steps, values), ...]``, aligned on
    one grid; None when they have no point or share no step range."""
    # A curve with no finite point has nothing to align or draw.
    runs = [r for r in runs if np.any(~(np.isnan(r[2]) | np.isnan(r[3])))]
    if not runs:
        return None
    curves = [(s, v) for _, _, s, v in runs]
    # The grid stats.align would make (the steps of points with a value), decimated first:
    # aligning onto all of it and then decimating gives the same points at far less cost.
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


def mean_band(
    values: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and the Student-t confidence band of the mean (:func:`benchlab.stats.t_interval`)
    at each grid point.

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
