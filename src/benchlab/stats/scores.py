"""Normalised score matrices of a results table: the input of the across-task statistics.

:func:`score_matrices` turns one metric's runs (one value per task, config and
seed) into one ``(runs, tasks)`` array of normalised scores per config, ready
for :func:`benchlab.stats.aggregate`, :func:`benchlab.stats.performance_profile`
and :func:`benchlab.stats.average_probability_of_improvement`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from benchlab.names.choices import NormalizeChoice
from benchlab.stats.aggregate import normalize as normalize_scores
from benchlab.stats.describe import Goal
from benchlab.stats.runvalues import RunValues

if TYPE_CHECKING:
    import pandas as pd

Normalize = Literal["none", "observed"]
NORMALIZATIONS: tuple[str, ...] = tuple(m.value for m in NormalizeChoice)
# Raw-score aggregates are dominated by the tasks with the largest numbers; past this
# ratio of task scales the warning suggests reference scores.
SCALE_RATIO_WARNING = 10.0


@dataclass
class ScoreMatrices:
    """Normalised scores per config over the same tasks.

    ``scores[config]`` has shape ``(runs, tasks)``: rows sorted by seed (so row ``i``
    of two configs is the same seed when both have the same seeds), columns in the
    order of ``tasks``, NaN padding where a task has fewer runs. ``low`` and ``high``
    (shape ``(tasks,)``) are the values mapped to 0 and 1 (0 and 1 for raw scores);
    ``sources[task]`` says where they came from: ``"reference"``, ``"observed"``
    (worst and best over the configs compared) or ``"raw"`` (not normalised).
    ``method`` names the whole: ``"references"``, ``"observed"``, ``"none"`` or
    ``"mixed"``. ``warnings`` say what was left out.
    """

    tasks: list[str]
    scores: dict[str, np.ndarray]
    low: np.ndarray
    high: np.ndarray
    warnings: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    method: str = "none"


def _scale_warning(typical: dict[str, float]) -> str | None:
    """Why an aggregate of raw scores is dominated by its largest tasks, given each raw task's
    mean absolute value; None when their scales are within ``SCALE_RATIO_WARNING`` of each other."""
    if len(typical) < 2:
        return None
    small, large = min(typical, key=typical.__getitem__), max(typical, key=typical.__getitem__)
    if typical[large] > SCALE_RATIO_WARNING * typical[small]:
        ratio = (f"{typical[large] / typical[small]:.3g}×" if typical[small] > 0
                 else f"more than {SCALE_RATIO_WARNING:g}×")
        return (
            f"aggregate: raw scores (no reference scores); task scales differ by {ratio} "
            f"(mean |value| {typical[large]:.4g} on {large}, {typical[small]:.4g} on {small}), "
            "so the largest tasks dominate: give reference scores (spec tasks[].reference "
            "or --references), or --normalize observed"
        )
    return None


def _normalized_per_config(runs: RunValues, configs: list[str], used: list[str], lows: np.ndarray,
                           highs: np.ndarray) -> dict[str, np.ndarray]:
    """Each config's normalised scores, shape ``(num_seeds, num_tasks)`` over the tasks ``used``;
    NaN where a task has fewer seeds than the config's most."""
    scores: dict[str, np.ndarray] = {}
    groups = runs.groups("config", "task")
    for config in configs:
        # Rows sorted by seed (stable), so that row i of every config is the same seed.
        per_task = [runs.value[sorted(groups[(config, t)], key=runs.seed.__getitem__)]
                    for t in used]
        matrix = np.full((max(len(v) for v in per_task), len(used)), np.nan)
        for j, v in enumerate(per_task):
            matrix[: len(v), j] = v
        scores[config] = normalize_scores(matrix, lows, highs)
    return scores


def score_matrices(
    runs: pd.DataFrame | RunValues,
    goal: Goal = "max",
    references: Mapping[str, tuple[float, float] | None] | None = None,
    configs: Sequence[str] | None = None,
    normalize: Normalize = "none",
) -> ScoreMatrices:
    """Normalise one metric's runs per task and arrange them per config.

    Args:
        runs: columns ``task, config, seed, value``, one row per run (e.g. one metric
            of :func:`benchlab.stats.reduce_runs`), as a DataFrame or
            :class:`~benchlab.stats.runvalues.RunValues`. NaN and infinite values are ignored.
        goal: the metric's goal.
        references: ``{task: (low, high)}``, the scores mapped to 0 and 1. A task with a
            reference is always normalised by it.
        configs: configs to include, in this order (default: as they appear).
        normalize: what happens to a task without a reference. ``"none"`` (default):
            its raw scores are used, as rliable does, so the aggregate of a config does
            not depend on which other configs are compared; a warning suggests references
            when task scales differ by more than 10×. When some tasks have references and
            others not, the unreferenced ones are left out (mixing normalised and raw
            scores is meaningless). ``"observed"``: min–max normalised by the worst (0)
            and best (1) value observed over all ``configs``.

    Tasks that some config lacks, and tasks whose low and high are equal, are left
    out with a warning.
    """
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}; got {normalize!r}")
    if not isinstance(runs, RunValues):
        runs = RunValues.from_frame(runs)
    runs = runs.where(np.isfinite(runs.value).tolist())
    configs = list(configs) if configs is not None else list(dict.fromkeys(runs.config))
    warnings: list[str] = []
    # One pass over the table, not one boolean mask per task.
    by_task = runs.groups("task")
    present = [t for (t,) in by_task]
    configs_of = {t: {runs.config[i] for i in idx} for (t,), idx in by_task.items()}
    low_of = {t: float(runs.value[idx].min()) for (t,), idx in by_task.items()}
    high_of = {t: float(runs.value[idx].max()) for (t,), idx in by_task.items()}
    typical_abs = {t: float(np.abs(runs.value[idx]).mean()) for (t,), idx in by_task.items()}
    wanted = set(configs)
    shared = [t for t in present if wanted <= configs_of[t]]
    if len(shared) < len(present):
        dropped = [t for t in present if t not in shared]
        warnings.append(f"aggregate: task(s) {', '.join(dropped)} lack some config and are left out")
    refs = {t: r for t, r in (references or {}).items() if r is not None}
    unreferenced = [t for t in shared if t not in refs]
    if normalize == "none" and unreferenced and len(unreferenced) < len(shared):
        warnings.append(
            f"aggregate: no reference scores for {', '.join(unreferenced)} while other tasks have "
            "them; left out (give their references, or --normalize observed)"
        )
        shared = [t for t in shared if t in refs]
        unreferenced = []
    low, high, used = [], [], []
    sources: dict[str, str] = {}
    for t in shared:
        if t in refs:
            lo, hi = float(refs[t][0]), float(refs[t][1])
            source = "reference"
        elif normalize == "observed":
            low_t, high_t = low_of[t], high_of[t]
            worst, best = (low_t, high_t) if goal == "max" else (high_t, low_t)
            lo, hi = float(worst), float(best)
            source = "observed"
        else:
            lo, hi = 0.0, 1.0
            source = "raw"
        if lo == hi:
            warnings.append(f"aggregate: task {t} has equal low and high references; left out")
            continue
        low.append(lo)
        high.append(hi)
        used.append(t)
        sources[t] = source
    kinds = set(sources.values())
    method = ("none" if kinds <= {"raw"} else "references" if kinds == {"reference"}
              else "observed" if kinds == {"observed"} else "mixed")
    observed = [t for t in used if sources[t] == "observed"]
    if observed:
        warnings.append(
            f"aggregate: no reference scores for {', '.join(observed)}; normalised by the "
            "worst and best values observed over the configs compared (--normalize observed), "
            "so each config's aggregate depends on which others are compared"
        )
    scale = _scale_warning({t: typical_abs[t] for t in used if sources[t] == "raw"})
    if scale is not None:
        warnings.append(scale)
    lows, highs = np.array(low), np.array(high)
    scores = _normalized_per_config(runs, configs, used, lows, highs) if used else {}
    if not used and shared:
        warnings.append("aggregate: no task can be normalised; the aggregate is empty")
    return ScoreMatrices(used, scores, lows, highs, warnings, sources, method)


__all__ = ["NORMALIZATIONS", "Normalize", "ScoreMatrices", "score_matrices"]
