"""lm-evaluation-harness results: ``<output_path>/<model>/results_<timestamp>.json``.

The file holds ``results`` (per task, metric keys of the form ``metric,filter``
such as ``exact_match,strict-match`` or ``pass_at_1,none``, with ``*_stderr``
companions that may be the string ``"N/A"``), ``groups`` (the same for task
groups such as ``mmlu``), ``versions``, ``n-shot``, ``n-samples`` (per task
``original`` and ``effective``: fewer effective samples means ``--limit`` cut
the run short) and ``config`` (``model``, ``model_args``, ``limit``). With
``--output_path {run_dir}`` in a run's command, the newest results file
anywhere under the run directory is the run's.

Whichever way a spec names a value, ``read_all`` reads the file whole: every
``(task, metric, filter)`` as ``task/metric,filter``, standard errors included
as values of their own (``task/metric_stderr,filter``), the tasks cut short by
``--limit`` and the file's provenance. Then ``task`` and ``key`` pick one value
(``pick_key``), or the metric's own name does (``pick``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from benchlab.collect.extractors import ExtractFailed
from benchlab.json_types import JsonObject
from benchlab.ledger import PARTIAL_NOTE_PREFIX


def newest_results(folder: Path) -> Path:
    """The most recent ``results_*.json`` under ``folder`` (by the timestamp in its name, then mtime)."""
    found = sorted(folder.rglob("results_*.json"), key=lambda p: (p.name, p.stat().st_mtime))
    if not found:
        raise ExtractFailed(f"no lm-evaluation-harness results_*.json under {folder.name or folder}/ "
                            "(was the command run with --output_path {run_dir}?)")
    return found[-1]


def read_results(path: Path) -> JsonObject:
    """The results file at ``path`` as lm-evaluation-harness wrote it; ExtractFailed unless it has ``results``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ExtractFailed(f"{path.name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ExtractFailed(f"{path.name} has no 'results' object: not an lm-evaluation-harness file")
    return data


def is_stderr(key: str) -> bool:
    """Whether a metric key (``acc_stderr,none``) is a standard error."""
    return key.split(",", 1)[0].endswith("_stderr")


#: What a run's provenance keeps of a results file (under ``lm_eval``). Values the file gives are
#: copied as they are (``object``: the harness's versions write them differently); ``run_config``,
#: ``partial`` and ``notes`` are benchlab's reading of it; ``file`` and ``folder`` say where it was.
LmEvalProvenance = TypedDict("LmEvalProvenance", {
    "versions": object,
    "n-shot": object,
    "n-samples": JsonObject,
    "model": object,
    "model_args": object,
    "limit": object,
    "run_config": JsonObject,
    "model_name": object,
    "date": object,
    "lm_eval_version": object,
    "git_hash": object,
    "partial": dict[str, dict[str, int]],
    "notes": list[str],
    "file": str,
    "folder": str | None,
}, total=False)


@dataclass
class LmEvalResults:
    """Everything one results file reports.

    ``values``: ``task/metric,filter`` -> value, groups and standard errors
    included; a standard error the harness could not compute (``"N/A"``) is NaN
    here (null in the ledger) and named in ``notes``. ``partial``: task ->
    ``(effective, original)`` samples, for tasks cut short by ``--limit``.
    ``provenance``: versions, n-shot, n-samples, model and its arguments, date,
    harness version, the file's name.
    """

    values: dict[str, float] = field(default_factory=dict)
    #: ``task/key`` -> what the file holds there when it is not a number (for a clear message).
    non_numeric: JsonObject = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: dict[str, tuple[int, int]] = field(default_factory=dict)
    provenance: LmEvalProvenance = field(default_factory=lambda: LmEvalProvenance())

    def partial_note(self) -> str | None:
        """``partial evaluation (--limit): gsm8k 100 of 1319 samples``, or None when every task ran whole."""
        if not self.partial:
            return None
        return PARTIAL + ", ".join(f"{t} {e} of {o} samples" for t, (e, o) in sorted(self.partial.items()))


PARTIAL = PARTIAL_NOTE_PREFIX + " (--limit): "
# Entries of a task's results that are not metrics (0.4.13 adds its name and sample count).
_NOT_METRICS = {"alias", "name", "sample_len", "sample_count"}


def flatten(data: JsonObject) -> LmEvalResults:
    """Every result of an lm-evaluation-harness file (its ``results`` and ``groups``), as ``LmEvalResults``."""
    out = LmEvalResults()
    not_available = []
    for section in ("results", "groups"):
        entries = data.get(section)
        if not isinstance(entries, dict):
            continue
        for task, metrics in entries.items():
            if not isinstance(metrics, dict):
                continue
            for key, value in metrics.items():
                name = f"{task}/{key}"
                if key in _NOT_METRICS:
                    continue
                if isinstance(value, int | float) and not isinstance(value, bool):
                    out.values[name] = float(value)
                elif is_stderr(key) and isinstance(value, str) and value.strip().upper() == "N/A":
                    out.values[name] = math.nan
                    if name not in not_available:
                        not_available.append(name)
                else:
                    out.non_numeric[name] = value
    if not_available:
        out.notes.append(
            "lm-evaluation-harness could not compute these standard errors (\"N/A\"), kept as null: "
            + ", ".join(not_available)
        )
    raw_samples = data.get("n-samples")
    samples: dict[str, Any] = raw_samples if isinstance(raw_samples, dict) else {}
    for task, counts in samples.items():
        if isinstance(counts, dict):
            effective, original = counts.get("effective"), counts.get("original")
            if isinstance(effective, int) and isinstance(original, int) and effective < original:
                out.partial[task] = (effective, original)
    note = out.partial_note()
    if note:
        out.notes.append(note)
    raw_config = data.get("config")
    config: dict[str, Any] = raw_config if isinstance(raw_config, dict) else {}
    out.provenance = {
        "versions": data.get("versions", {}),
        "n-shot": data.get("n-shot", {}),
        "n-samples": samples,
        "model": config.get("model"),
        "model_args": config.get("model_args"),
        "limit": config.get("limit"),
        # What actually ran: the seed, batch size and sampling settings the harness used.
        "run_config": {k: config.get(k) for k in ("random_seed", "batch_size", "gen_kwargs")},
        "model_name": data.get("model_name"),
        "date": data.get("date"),
        "lm_eval_version": data.get("lm_eval_version"),
        "git_hash": data.get("git_hash"),
        "partial": {t: {"effective": e, "original": o} for t, (e, o) in sorted(out.partial.items())},
        "notes": list(out.notes),
    }
    return out


def read_all(run_dir: Path, folder: str) -> LmEvalResults:
    """Every result of the newest results file under ``folder`` (of the run directory), without
    declaring them."""
    path = newest_results(run_dir / folder)
    found = flatten(read_results(path))
    found.provenance["file"] = str(path.relative_to(run_dir)) if path.is_relative_to(run_dir) else str(path)
    return found


def pick(results: LmEvalResults, name: str, task: str | None) -> float:
    """The value a metric named ``name`` stands for: ``name`` itself (``gsm8k/exact_match,strict-match``),
    else ``<task>/<name>`` for the run's task (``exact_match,strict-match``)."""
    for candidate in (name, f"{task}/{name}" if task else None):
        if candidate is not None and candidate in results.values:
            return results.values[candidate]
    shown = [k for k in results.values if not is_stderr(k.split("/", 1)[1])]
    if task:
        shown = [k for k in shown if k.startswith(f"{task}/")] or shown
    listed = ", ".join(shown[:12]) + (f" and {len(shown) - 12} more" if len(shown) > 12 else "")
    raise ExtractFailed(f"no lm-evaluation-harness metric {name!r}"
                        + (f" (nor {task}/{name})" if task else "") + f"; the results hold: {listed}")


def stderr_key(key: str) -> str:
    """The standard error's key of a metric key: ``exact_match,strict-match`` ->
    ``exact_match_stderr,strict-match``."""
    head, _, filt = key.partition(",")
    return f"{head}_stderr" + (f",{filt}" if filt else "")


def pick_key(results: LmEvalResults, task: str, key: str) -> tuple[float, float | None]:
    """``task``'s value of ``key`` and its standard error (None when the file has none; NaN
    when the harness could not compute it)."""
    tasks = sorted({name.split("/", 1)[0] for name in results.values} | set(results.non_numeric))
    if task not in tasks:
        raise ExtractFailed(f"task {task!r} is not in the results (tasks: {', '.join(tasks)})")
    name = f"{task}/{key}"
    if name not in results.values:
        if name in results.non_numeric:
            raise ExtractFailed(f"{task} {key}: expected a number, got {results.non_numeric[name]!r}")
        keys = sorted(k.split("/", 1)[1] for k in results.values
                      if k.startswith(f"{task}/") and not is_stderr(k.split("/", 1)[1]))
        raise ExtractFailed(f"{task} has no metric {key!r} (metrics: {', '.join(keys)})")
    return results.values[name], results.values.get(f"{task}/{stderr_key(key)}")
