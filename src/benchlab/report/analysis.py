"""The statistics a report shows, from :func:`benchlab.stats.analyze` on the primary metric.

Kept apart so the rest of the report needs no statistics package to render:
without :mod:`benchlab.stats` (or with too little data) :func:`analyze_primary`
returns None and the report falls back to mean ± std without intervals or tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchlab.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.results import BenchmarkInfo

DEFAULT_REPS = 2_000


def analyze_primary(
    finals: pd.DataFrame, info: BenchmarkInfo, reps: int = DEFAULT_REPS, seed: int = 0
) -> dict[str, Any] | None:
    """``stats.analyze`` of the final primary metric, baseline and references from the spec.

    Returns the dict :func:`benchlab.stats.analyze` returns (``summary``,
    ``comparisons``, ``aggregate``, ``warnings``; empty lists and a warning when no
    run of the primary metric has completed), or None when the statistics package
    is not installed.
    """
    try:
        from benchlab.stats import analyze
    except ImportError:
        return None
    prim = finals[finals["metric"] == info.primary]
    if prim.empty:
        return {"summary": [], "comparisons": [], "aggregate": [],
                "warnings": [f"no completed run has a value of {info.primary!r} yet"]}
    configs = set(prim["config"])
    baseline = info.baseline if info.baseline in configs else None
    try:
        result: dict[str, Any] = analyze(
            prim,
            baseline=baseline,
            metric=info.primary,
            goal=info.goal or "max",  # type: ignore[arg-type]
            reps=reps,
            seed=seed,
            references=info.references or None,
            source="results",
        )
    except DataError as exc:
        return {"summary": [], "comparisons": [], "aggregate": [], "warnings": [str(exc)]}
    return result


def summary_index(analysis: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    """The analysis' per (task, config) summary rows, by key."""
    if not analysis:
        return {}
    return {(r["task"], r["config"]): r for r in analysis.get("summary", [])}
