"""Normalised score matrices of a results table: the input of the across-task statistics.

:func:`score_matrices` turns one metric's runs (one value per task, config and
seed) into one ``(runs, tasks)`` array of normalised scores per config, ready
for :func:`benchlab.stats.aggregate`, :func:`benchlab.stats.performance_profile`
and :func:`benchlab.stats.average_probability_of_improvement`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchlab.stats.aggregate import normalize
from benchlab.stats.describe import Goal


@dataclass
class ScoreMatrices:
    """Normalised scores per config over the same tasks.

    ``scores[config]`` has shape ``(runs, tasks)``: rows sorted by seed (so row ``i``
    of two configs is the same seed when both have the same seeds), columns in the
    order of ``tasks``, NaN padding where a task has fewer runs. ``low`` and ``high``
    (shape ``(tasks,)``) are the references used; ``warnings`` say what was left out.
    """

    tasks: list[str]
    scores: dict[str, np.ndarray]
    low: np.ndarray
    high: np.ndarray
    warnings: list[str] = field(default_factory=list)


def score_matrices(
    runs: pd.DataFrame,
    goal: Goal = "max",
    references: Mapping[str, tuple[float, float] | None] | None = None,
    configs: Sequence[str] | None = None,
) -> ScoreMatrices:
    """Normalise one metric's runs per task and arrange them per config.

    Args:
        runs: columns ``task, config, seed, value``, one row per run (e.g. one metric
            of :func:`benchlab.stats.reduce_runs`). NaN and infinite values are ignored.
        goal: the metric's goal; without a reference, a task is normalised from its
            worst (0) to its best (1) observed value over all configs.
        references: ``{task: (low, high)}``, the scores mapped to 0 and 1.
        configs: configs to include, in this order (default: as they appear).

    Tasks that some config lacks, and tasks whose low and high are equal, are left
    out with a warning.
    """
    runs = runs[np.isfinite(runs["value"].to_numpy(dtype=float))]
    configs = list(configs) if configs is not None else list(dict.fromkeys(runs["config"]))
    warnings: list[str] = []
    present = list(dict.fromkeys(runs["task"]))
    shared = [t for t in present if set(configs) <= set(runs.loc[runs["task"] == t, "config"])]
    if len(shared) < len(present):
        dropped = [t for t in present if t not in shared]
        warnings.append(f"aggregate: task(s) {', '.join(dropped)} lack some config and are left out")
    refs = dict(references or {})
    low, high, used, unreferenced = [], [], [], []
    for t in shared:
        ref = refs.get(t)
        if ref is not None:
            lo, hi = float(ref[0]), float(ref[1])
        else:
            vals = runs.loc[runs["task"] == t, "value"]
            worst, best = (vals.min(), vals.max()) if goal == "max" else (vals.max(), vals.min())
            lo, hi = float(worst), float(best)
            unreferenced.append(t)
        if lo == hi:
            warnings.append(f"aggregate: task {t} has equal low and high references; left out")
            continue
        low.append(lo)
        high.append(hi)
        used.append(t)
    if unreferenced:
        warnings.append(
            f"aggregate: no reference scores for {', '.join(unreferenced)}; normalised by the "
            "worst and best values observed over all configs"
        )
    lows, highs = np.array(low), np.array(high)
    scores: dict[str, np.ndarray] = {}
    if used:
        ordered = runs.sort_values("seed", kind="stable")
        values = ordered["value"].to_numpy(dtype=float)
        groups = ordered.groupby(["config", "task"], sort=False).indices
        for config in configs:
            per_task = [values[groups[(config, t)]] for t in used]
            matrix = np.full((max(len(v) for v in per_task), len(used)), np.nan)
            for j, v in enumerate(per_task):
                matrix[: len(v), j] = v
            scores[config] = normalize(matrix, lows, highs)
    elif shared:
        warnings.append("aggregate: no task can be normalised; the aggregate is empty")
    return ScoreMatrices(used, scores, lows, highs, warnings)


__all__ = ["ScoreMatrices", "score_matrices"]
