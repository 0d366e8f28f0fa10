"""Explicit control/candidate pairs of runs (``benchlab analyze --pairs pairs.csv``).

Where the pairing is not "same task, same seed" (a checkpoint against the one it was fine-tuned
from, a run against its re-run on new hardware), a CSV names the pairs: columns ``control`` and
``candidate`` (``baseline`` is accepted for ``control``), each a run id or a run name
(``task/config/s3``). Each metric is compared once over all pairs, paired row by row, with
:func:`benchlab.stats.compare`; Holm's correction runs across the metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import DataError
from benchlab.json_types import JsonObject
from benchlab.names.benchmark_info import goal_of

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PairedComparison:
    """One metric compared over the explicit pairs; ``diff = candidate - control``."""

    metric: str
    goal: str
    n: int
    mean_control: float | None
    mean_candidate: float | None
    mean_diff: float | None
    diff_ci_low: float | None
    diff_ci_high: float | None
    t_pvalue: float | None
    wilcoxon_pvalue: float | None
    p_holm: float | None
    significant: bool | None
    warnings: list[str] = field(default_factory=list)
    #: The method behind ``significant`` (:mod:`benchlab.stats.verdict`); None when withheld.
    decided_by: str | None = None

    def to_json(self) -> JsonObject:
        return asdict(self)


def read_pairs(path: Path) -> list[tuple[str, str]]:
    """The (control, candidate) pairs of a CSV with columns ``control`` (or ``baseline``) and ``candidate``."""
    import csv

    if not path.is_file():
        raise DataError(f"{path}: {'is a folder; expected a CSV of pairs' if path.is_dir() else 'no such file'}")
    rows = list(csv.DictReader(path.read_text().splitlines()))
    if not rows:
        raise DataError(f"{path}: no pairs; expected a header control,candidate and one row per pair")
    cols = set(rows[0])
    control = "control" if "control" in cols else "baseline" if "baseline" in cols else None
    if control is None or "candidate" not in cols:
        raise DataError(f"{path}: expected columns control (or baseline) and candidate; found {', '.join(cols)}")
    out = []
    for i, row in enumerate(rows, start=2):
        a, b = (row.get(control) or "").strip(), (row.get("candidate") or "").strip()
        if not a or not b:
            raise DataError(f"{path}:{i}: an empty {control if not a else 'candidate'}")
        out.append((a, b))
    return out


def run_values(table: pd.DataFrame, summary: str = "final") -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """``{run key: {metric: value}}`` of a long-format table with a ``run_id`` or ``run`` column,
    keyed by both the run id (where there is one) and the name ``task/config/sSEED``; and the
    name of each key (for messages)."""
    from benchlab.stats import reduce_runs, validate_table

    checked = validate_table(table, "table")
    ids = None
    if "run_id" in table.columns:
        ids = {(str(t), str(c), int(s)): str(r) for t, c, s, r in
               table[["task", "config", "seed", "run_id"]].drop_duplicates().itertuples(index=False, name=None)}
    runs, _ = reduce_runs(checked, summary)  # type: ignore[arg-type]
    values: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for task, config, metric, seed, value in runs[["task", "config", "metric", "seed", "value"]].itertuples(
            index=False, name=None):
        name = f"{task}/{config}/s{int(seed)}"
        keys = [name] + ([ids[(task, config, int(seed))]] if ids and (task, config, int(seed)) in ids else [])
        for key in keys:
            values.setdefault(key, {})[str(metric)] = float(value)
            names[key] = name
    return values, names


def compare_pairs(table: pd.DataFrame, pairs: list[tuple[str, str]], *, metric: str | None = None,
                  goal: str | dict[str, str] = "max", summary: str = "final", alpha: float = 0.05, reps: int = 10_000,
                  seed: int = 0, ranges: Mapping[str, tuple[float, float]] | None = None,
                  assume_normal: Sequence[str] = ()) -> list[PairedComparison]:
    """Each metric (or only ``metric``) compared over ``pairs``, paired row by row; ``goal`` is
    one for every metric, or one per metric name (``max`` where not named). The verdict is the
    default one of :mod:`benchlab.stats.verdict` (``ranges``: ``{metric: (low, high)}``;
    ``assume_normal``: metrics whose t verdict stands without a range)."""
    import numpy as np

    from benchlab.stats import compare, holm, is_significant
    from benchlab.stats.analysis import ComparisonRow
    from benchlab.stats.verdict import decide

    values, _ = run_values(table, summary)
    missing = sorted({k for pair in pairs for k in pair if k not in values})
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        example = next(iter(values), "task/config/s0")
        raise DataError(f"--pairs: no completed run named {shown}; runs are named by id or as {example}")
    metrics = [metric] if metric else sorted({m for v in values.values() for m in v})
    raw = []
    for i, met in enumerate(metrics):
        both = [(values[a].get(met), values[b].get(met)) for a, b in pairs]
        kept = [(x, y) for x, y in both if x is not None and y is not None]
        if not kept:
            continue
        control = np.array([x for x, _ in kept])
        cand = np.array([y for _, y in kept])
        met_goal = goal_of(goal, met)
        cmp = compare(control, cand, True, met_goal, reps, seed=seed + i,
                      label=f"{met} over {len(kept)} pairs")
        note = list(cmp.warnings)
        if len(kept) < len(both):
            note.append(f"{met}: {len(both) - len(kept)} pair(s) without the metric on a side left out")
        raw.append((met, met_goal, control, cand, cmp, note))
    adjusted = holm([cmp.t_pvalue for _, _, _, _, cmp, _ in raw])
    # Each metric is its own family for the range test, as the t-test's Holm family spans metrics here.
    decided = []
    for (met, _, c, d, cmp, note), p in zip(raw, adjusted, strict=True):
        row = ComparisonRow(task="pairs", metric=met, baseline="control", candidate="candidate", paired=True,
                            n=cmp.n, mean_diff=cmp.mean_diff, t_pvalue=cmp.t_pvalue,
                            wilcoxon_pvalue=cmp.wilcoxon_pvalue, p_holm=p)
        (one,) = decide([row], [(c, d)], [is_significant(p, cmp.diff_ci_low, cmp.diff_ci_high, alpha)],
                        ranges or {}, assume_normal, alpha, note)
        decided.append(one)
    return [PairedComparison(met, met_goal, cmp.n, float(c.mean()), float(d.mean()), cmp.mean_diff, cmp.diff_ci_low,
                             cmp.diff_ci_high, cmp.t_pvalue, cmp.wilcoxon_pvalue, p, v.significant, note,
                             v.decided_by)
            for (met, met_goal, c, d, cmp, note), p, v in zip(raw, adjusted, decided, strict=True)]


__all__ = ["PairedComparison", "compare_pairs", "read_pairs", "run_values"]
