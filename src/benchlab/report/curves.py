"""Learning curves for the report: read from the ledger, aligned on one grid, summarised.

Curves are read straight from the store's series blobs (one array per run), not
through the long results table, so 10,000 runs of 100 points cost one pass and
no per-point Python objects. All curves of one (metric, task) are put on a
common step grid: when every run logged the same steps (the usual case) they are
stacked as they are; otherwise each is linearly interpolated
(:func:`numpy.interp`) onto the steps inside the range all runs cover, thinned
to at most :data:`MAX_GRID` evenly spaced points.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import stdtrit

from benchlab.store import Store

MAX_GRID = 400


@dataclass
class CurveSet:
    """All curves of one (metric, task): ``values[config]`` has shape ``(runs, len(grid))``."""

    metric: str
    task: str
    grid: np.ndarray
    values: dict[str, np.ndarray]
    seeds: dict[str, list[int]]


def _grid(steps: list[np.ndarray]) -> np.ndarray:
    lo = max(float(s[0]) for s in steps)
    hi = min(float(s[-1]) for s in steps)
    if hi < lo:
        return np.empty(0)
    union = np.unique(np.concatenate(steps))
    union = union[(union >= lo) & (union <= hi)]
    if union.shape[0] > MAX_GRID:
        union = np.linspace(lo, hi, MAX_GRID)
    return union


def load_curves(results: Path | str) -> list[CurveSet]:
    """Every logged curve of the completed current runs, grouped by (metric, task)."""
    groups: dict[tuple[str, str], list[tuple[str, int, np.ndarray, np.ndarray]]] = defaultdict(list)
    with Store.open(results) as store:
        for _, task, config, seed, metric, steps, vals in store.series_rows():
            if steps.shape[0]:
                groups[(metric, task)].append((config, int(seed), steps, vals))
    out = []
    for (metric, task), runs in groups.items():
        cleaned = []
        for config, seed, s, v in runs:
            if np.any(np.diff(s) < 0) or np.isnan(s).any() or np.isnan(v).any():
                keep = ~(np.isnan(s) | np.isnan(v))
                order = np.argsort(s[keep], kind="stable")
                s, v = s[keep][order], v[keep][order]
            if s.shape[0]:
                cleaned.append((config, seed, s, v))
        if not cleaned:
            continue
        first = cleaned[0][2]
        same = all(s.shape == first.shape and np.array_equal(s, first) for _, _, s, _ in cleaned)
        if same:
            grid = first
            rows = np.stack([v for _, _, _, v in cleaned])
        else:
            grid = _grid([s for _, _, s, _ in cleaned])
            if grid.shape[0] == 0:
                continue
            rows = np.stack([np.interp(grid, s, v) for _, _, s, v in cleaned])
        values: dict[str, list[int]] = defaultdict(list)
        seeds: dict[str, list[int]] = defaultdict(list)
        for i, (config, seed, _, _) in enumerate(cleaned):
            values[config].append(i)
            seeds[config].append(seed)
        out.append(
            CurveSet(metric, task, grid, {c: rows[idx] for c, idx in values.items()}, dict(seeds))
        )
    return out


def mean_band(
    values: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and Student-t confidence band of the mean at each grid point.

    Args:
        values: shape ``(runs, g)``.

    Returns:
        ``(mean, low, high)``, each shape ``(g,)``; with one run the band is the mean itself.
    """
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, mean, mean
    half = stdtrit(n - 1, 0.5 + confidence / 2) * values.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half
