"""The statistics a report shows, from :func:`benchlab.stats.analyze` on the primary metric.

Kept apart so the report's other modules format what :mod:`benchlab.stats` returns
and compute no statistics of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchlab.errors import DataError
from benchlab.stats.analysis import Analysis

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.results import BenchmarkInfo

DEFAULT_REPS = 2_000


def analyze_primary(
    finals: pd.DataFrame,
    info: BenchmarkInfo,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    *,
    failed_as: str = "exclude",
    planned: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    failed_runs: Sequence[tuple[str, str, Any]] = (),
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> Analysis:
    """``stats.analyze`` of the final primary metric, baseline and references from the spec,
    every planned seed accounted for (:func:`benchlab.stats.accounting.analyze_seeds`).

    Returns the :class:`~benchlab.stats.analysis.Analysis` that
    :func:`benchlab.stats.accounting.analyze_seeds` returns (empty, with a warning, when no
    run of the primary metric has completed or failed, or the table cannot be analysed).
    """
    from benchlab.stats.accounting import analyze_seeds
    from benchlab.stats.ranges import normal_metrics

    prim = finals[finals["metric"] == info.primary]
    if prim.empty and not failed_runs:
        return Analysis(warnings=[f"no completed run has a value of {info.primary!r} yet"])
    configs = set(prim["config"]) | {c for _, c, _ in failed_runs}
    baseline = info.baseline if info.baseline in configs else None
    try:
        result = analyze_seeds(
            prim,
            failed_as=failed_as,
            planned=planned,
            failed_runs=failed_runs,
            ranges=ranges,
            assume_normal=normal_metrics(info.spec),
            baseline=baseline if baseline in set(prim["config"]) else None,
            metric=info.primary,
            goal=info.goal or "max",
            reps=reps,
            seed=seed,
            references=info.references or None,
            source="results",
        )
    except DataError as exc:
        return Analysis(warnings=[str(exc)])
    return result
