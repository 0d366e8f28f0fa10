"""Reading a finished run's metrics out of its run directory.

Without a ``from`` source, a metric comes from benchlab's own files:
``metrics.json`` (final scalars) and ``metrics.jsonl`` (step series written by
``benchlab.log``). With one, the named extractor reads it (see
``benchlab.collect.extractors``). A metric with a series and no final scalar
takes the series' last value as its final value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.collect import lm_eval as _lm_eval  # noqa: F401  (registers the extractor)
from benchlab.collect import tensorboard as _tensorboard  # noqa: F401  (registers the extractor)
from benchlab.collect.extractors import EXTRACTORS, ExtractFailed
from benchlab.collect.files import read_metrics_json, read_metrics_jsonl
from benchlab.spec import Metric

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Collected", "ExtractFailed", "collect_run"]


@dataclass
class Collected:
    """What a run reported: final scalars, step series, and the problems found reading them."""

    finals: dict[str, float] = field(default_factory=dict)
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)

    def missing(self, metric: str) -> str | None:
        """Why ``metric`` has no usable final value, or None if it has one."""
        if metric in self.finals:
            value = self.finals[metric]
            return None if math.isfinite(value) else f"metric {metric!r} is not finite ({value})"
        return self.problems.get(metric, f"metric {metric!r} was not reported")


def collect_run(run_dir: Path, metrics: list[Metric], context: dict[str, str] | None = None) -> Collected:
    """Every metric a run reported: the spec's metrics through their sources, plus all of its own files.

    ``context`` fills ``{task}`` and ``{config}`` in a source's file names and keys, so one
    metric can be read from a place that differs per task (``key: "{task}/accuracy"``).
    """
    out = Collected()
    finals = read_metrics_json(run_dir / "metrics.json", out.problems)
    series = read_metrics_jsonl(run_dir / "metrics.jsonl")
    out.finals.update(finals)
    out.series.update(series)
    for name, (_, vals) in series.items():
        if name not in out.finals and len(vals):
            out.finals[name] = float(vals[-1])
    for metric in metrics:
        if metric.source is None:
            continue
        source = metric.source.for_run(context) if context else metric.source
        try:
            final, curve = EXTRACTORS[source.kind](run_dir, source)
        except ExtractFailed as exc:
            out.problems[metric.name] = str(exc)
            out.finals.pop(metric.name, None)
            continue
        out.finals[metric.name] = final
        if curve is not None:
            out.series[metric.name] = curve
    return out
