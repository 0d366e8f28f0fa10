"""Reading a finished run's metrics out of its run directory (``collect_run``).

Without a ``from`` source, a metric comes from benchlab's own files:
``metrics.json`` (final scalars) and ``metrics.jsonl`` (step series written by
``benchlab.log``). With one, the named extractor reads it (see
``benchlab.collect.extractors``). A metric with a series and no final scalar
takes the series' last value as its final value.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.collect import lm_eval as _lm_eval
from benchlab.collect.extractors import ExtractFailed, get_extractor
from benchlab.collect.files import FILE_PROBLEM, read_metrics_json, read_metrics_jsonl
from benchlab.names.run_files import METRICS_FILE, SERIES_FILE
from benchlab.spec import Metric

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Collected", "ExtractFailed", "collect_run"]


#: How many reported names a missing-metric message lists before it says "and N more".
NAMES_SHOWN = 12


@dataclass
class Collected:
    """What a run reported: final scalars, step series, and the problems found reading them.

    ``wanted`` names the spec's metrics: a missing one is matched against what the run did
    report that no other metric of the spec claims, for a "did you mean".
    """

    finals: dict[str, float] = field(default_factory=dict)
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    wanted: list[str] = field(default_factory=list)
    extracted: set[str] = field(default_factory=set)  # read by an extractor, not from benchlab's files
    # The lm-evaluation-harness file read whole (its provenance: versions, n-shot, n-samples,
    # model_args, partial tasks); None for other runs.
    lm_eval: _lm_eval.LmEvalResults | None = None
    notes: list[str] = field(default_factory=list)

    def failure(self, metric: str) -> tuple[str, str] | None:
        """``(failure class, message)`` of a run whose ``metric`` has no usable final value, or
        None if it has one: ``non-finite-metric`` when the run reported it as NaN or infinite,
        ``missing-metric`` when it did not report it."""
        from benchlab.names.failures import MISSING_METRIC, NON_FINITE_METRIC

        if metric in self.finals and not math.isfinite(self.finals[metric]):
            return NON_FINITE_METRIC, self._non_finite(metric)
        missing = self.missing(metric)
        return None if missing is None else (MISSING_METRIC, missing)

    def _non_finite(self, metric: str) -> str:
        import numpy as np

        value = self.finals[metric]
        where = ""
        if metric in self.series:
            steps, values = self.series[metric]
            bad = ~np.isfinite(values)
            if bad.any():
                first = int(np.argmax(bad))
                where = f", first at step {steps[first]:g} ({int(bad.sum())} of {len(values)} logged values)"
        # The name is right (the run did report it): what went wrong is the training or the logging.
        return (f"metric {metric!r} is not finite ({value}){where}: the run reported it, so the name is "
                "right; the training likely diverged (check the learning rate, gradient clipping and the "
                "loss scale, and the log near that step), or the value was computed as NaN or inf (an "
                "empty evaluation, a division by zero)")

    def missing(self, metric: str) -> str | None:
        """Why ``metric`` has no usable final value, or None if it has one."""
        if metric in self.finals:
            value = self.finals[metric]
            return None if math.isfinite(value) else self._non_finite(metric)
        if metric in self.problems:
            return self.problems[metric]
        whole_file = self.problems.get(FILE_PROBLEM)
        if whole_file:
            return f"metric {metric!r} was not reported: {whole_file}"
        reported = list(self.finals)
        if not reported:
            return f"metric {metric!r} was not reported; the run reported no metrics"
        shown = ", ".join(reported[:NAMES_SHOWN])
        if len(reported) > NAMES_SHOWN:
            shown += f" and {len(reported) - NAMES_SHOWN} more"
        message = f"metric {metric!r} was not reported; the run reported: {shown}"
        guess = self._guess(metric)
        return message + (f" (did you mean {guess!r}?)" if guess else "")

    def _guess(self, metric: str) -> str | None:
        """The reported name ``metric`` most likely meant: a close spelling, the same last path
        part (``eval/accuracy``), or the only reported name that no spec metric claims."""
        free = [name for name in self.finals if name not in self.wanted]
        if not free:
            return None
        lower = {name.lower(): name for name in free}
        if metric.lower() in lower:
            return lower[metric.lower()]
        tail = [name for name in free if name.replace(",", "/").split("/")[-1] == metric
                or name.split(",")[0].split("/")[-1] == metric]
        if len(tail) == 1:
            return tail[0]
        close = difflib.get_close_matches(metric, free, n=1, cutoff=0.6)
        if close:
            return close[0]
        return free[0] if len(free) == 1 else None


def collect_run(run_dir: Path, metrics: list[Metric], context: dict[str, str] | None = None, *,
                metrics_json: bool = True) -> Collected:
    """Every metric a run reported: the spec's metrics through their sources, plus all of its own files.

    ``context`` fills ``{task}`` and ``{config}`` in a source's file names and keys, so one
    metric can be read from a place that differs per task (``key: "{task}/accuracy"``).
    ``metrics_json=False`` skips ``metrics.json``: benchlab's own copy of what extractors read
    before, which must not outlive a change of the extractors.
    """
    out = Collected(wanted=[m.name for m in metrics])
    finals = read_metrics_json(run_dir / METRICS_FILE, out.problems) if metrics_json else {}
    series = read_metrics_jsonl(run_dir / SERIES_FILE)
    out.finals.update(finals)
    out.series.update(series)
    for name, (_, vals) in series.items():
        if name not in out.finals and len(vals):
            out.finals[name] = float(vals[-1])
    for metric in metrics:
        if metric.source is None:
            continue
        source = metric.source.for_run(context) if context else metric.source
        if source.kind == "lm_eval":
            # Whichever form names it, the file is read whole: its partial flag, standard errors
            # and provenance belong to the run, not only to the value picked.
            _read_every_lm_eval_metric(out, run_dir, source.options, metric.name, (context or {}).get("task"))
            continue
        try:
            final, curve = get_extractor(source.kind).read(run_dir, source.options)
        except ExtractFailed as exc:
            out.problems[metric.name] = str(exc)
            out.finals.pop(metric.name, None)
            continue
        out.finals[metric.name] = final
        out.extracted.add(metric.name)
        if curve is not None:
            out.series[metric.name] = curve
    return out


def _read_every_lm_eval_metric(out: Collected, run_dir: Path, source: Any, name: str, task: str | None) -> None:
    """Every ``task/metric,filter`` of the newest lm-evaluation-harness file into ``out``; ``name`` picks the
    metric's own value, or, in the ``task``/``key`` form, ``source.task``'s ``source.key``, whose
    standard error then becomes ``<name>_stderr`` (read once per run, however many metrics name the file)."""
    try:
        if out.lm_eval is None or out.lm_eval.provenance.get("folder") != source.lm_eval:
            found = _lm_eval.read_all(run_dir, source.lm_eval)
            found.provenance["folder"] = source.lm_eval
            out.lm_eval = found
            out.finals.update(found.values)
            out.extracted.update(found.values)
            out.notes.extend(n for n in found.notes if n not in out.notes)
        if source.task:
            value, stderr = _lm_eval.pick_key(out.lm_eval, source.task, source.key)
            if stderr is not None and math.isfinite(stderr):
                out.finals[f"{name}_stderr"] = stderr
                out.extracted.add(f"{name}_stderr")
        else:
            value = _lm_eval.pick(out.lm_eval, name, task)
    except ExtractFailed as exc:
        out.problems[name] = str(exc)
        out.finals.pop(name, None)
        return
    out.finals[name] = value
    out.extracted.add(name)
