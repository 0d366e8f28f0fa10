"""The range of values a metric can take: declared in the spec, or known from its source.

A metric's ``range: [low, high]`` in the spec wins. Without one, the metrics
that are proportions by construction get ``[0, 1]``: lm-evaluation-harness
accuracies, exact-match rates, F1 and pass@k read through an ``lm_eval``
source, and the accuracies and no-answer rates that ``benchlab eval`` writes
(``<benchmark>/<mode>/accuracy``). Everything else is unbounded (None).

It reads the spec as the ledger keeps it (a mapping), not the spec's models, so that the
report and ``analyze`` bound their intervals without loading the spec package; the
``TASK/METRIC`` keys it writes are the ones :func:`benchlab.stats.accounting.range_of` reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from benchlab.json_types import JsonObject

#: lm-evaluation-harness metric names (the part of a key before the comma) that are proportions.
_LM_EVAL_PROPORTION = re.compile(
    r"^(acc|acc_norm|acc_mutual_info|exact_match|em|f1|mc1|mc2|mcc_acc|pass@\d+|pass_at_\d+"
    r"|prompt_level_(strict|loose)_acc|inst_level_(strict|loose)_acc|contains|match)$"
)
#: The flat names ``benchlab eval`` writes: ``<benchmark>/<mode>/<metric>``.
_EVAL_PROPORTION = re.compile(r"^[^/]+/(pass@\d+(\[avg-of-\d+\])?|majority@\d+)/(accuracy|no_answer)$")


def default_range(name: str, source: JsonObject | None = None) -> tuple[float, float] | None:
    """``(0, 1)`` for a metric that is a proportion by construction (module docstring), else None.

    Args:
        name: the metric's name in the spec.
        source: its ``from`` mapping as the spec states it (``{"lm_eval": ..., "key": ...}``).
    """
    if source and source.get("lm_eval") is not None:
        key = str(source.get("key") or "").split(",")[0].strip()
        if _LM_EVAL_PROPORTION.match(key):
            return (0.0, 1.0)
    if not source and _EVAL_PROPORTION.match(name):
        return (0.0, 1.0)
    return None


def metric_ranges(spec: JsonObject) -> dict[str, tuple[float, float]]:
    """``{metric: (low, high)}`` of every bounded metric of a spec (as dumped to the ledger), and
    ``{"TASK/METRIC": (low, high)}`` for each task's own ``range`` (which wins for that task)."""
    metrics = spec.get("metrics") or {}
    entries = [metrics.get("primary"), *(metrics.get("secondary") or [])]
    out: dict[str, tuple[float, float]] = {}
    for m in entries:
        if isinstance(m, str):
            m = {"name": m}
        if not isinstance(m, Mapping) or "name" not in m:
            continue
        declared = m.get("range")
        if declared is not None:
            out[str(m["name"])] = (float(declared[0]), float(declared[1]))
            continue
        found = default_range(str(m["name"]), m.get("from") or m.get("source"))
        if found is not None:
            out[str(m["name"])] = found
    for task in spec.get("tasks") or []:
        if isinstance(task, Mapping) and isinstance(task.get("range"), Mapping):
            for metric, (low, high) in task["range"].items():
                out[f"{task['name']}/{metric}"] = (float(low), float(high))
    return out


def normal_metrics(spec: JsonObject) -> list[str]:
    """The metrics of a spec (as dumped to the ledger) that declare ``assume: normal``: their t verdict
    stands without a range (:mod:`benchlab.stats.verdict`)."""
    metrics = spec.get("metrics") or {}
    entries = [metrics.get("primary"), *(metrics.get("secondary") or [])]
    return [str(m["name"]) for m in entries
            if isinstance(m, Mapping) and "name" in m and m.get("assume") == "normal"]


__all__ = ["default_range", "metric_ranges", "normal_metrics"]
