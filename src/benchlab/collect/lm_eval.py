"""lm-evaluation-harness results: ``<output_path>/<model>/results_<timestamp>.json``.

The file holds ``results`` (per task, metric keys of the form ``metric,filter``
such as ``exact_match,strict-match`` or ``pass_at_1,none``, with ``*_stderr``
companions that may be the string ``"N/A"``), ``versions``, ``n-shot`` and
``config``. With ``--output_path {run_dir}`` in a run's command, the newest
results file anywhere under the run directory is the run's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchlab.collect.extractors import EXTRACTORS, ExtractFailed, Series
from benchlab.spec import MetricSource


def newest_results(folder: Path) -> Path:
    """The most recent ``results_*.json`` under ``folder`` (by the timestamp in its name, then mtime)."""
    found = sorted(folder.rglob("results_*.json"), key=lambda p: (p.name, p.stat().st_mtime))
    if not found:
        raise ExtractFailed(f"no lm-evaluation-harness results_*.json under {folder.name or folder}/ "
                            "(was the command run with --output_path {run_dir}?)")
    return found[-1]


def read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ExtractFailed(f"{path.name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ExtractFailed(f"{path.name} has no 'results' object: not an lm-evaluation-harness file")
    return data


def flatten(data: dict[str, Any]) -> dict[str, float]:
    """Every numeric result as ``task/metric,filter`` -> value (stderr entries that are 'N/A' dropped)."""
    out = {}
    for task, metrics in data["results"].items():
        if not isinstance(metrics, dict):
            continue
        for key, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            out[f"{task}/{key}"] = float(value)
    return out


def extract_lm_eval(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    assert source.lm_eval is not None and source.task and source.key
    folder = run_dir / source.lm_eval
    data = read_results(newest_results(folder))
    results = data["results"]
    if source.task not in results:
        raise ExtractFailed(f"task {source.task!r} is not in the results "
                            f"(tasks: {', '.join(sorted(results))})")
    metrics = results[source.task]
    if source.key not in metrics:
        keys = sorted(k for k in metrics if k != "alias" and "_stderr" not in k)
        raise ExtractFailed(f"{source.task} has no metric {source.key!r} (metrics: {', '.join(keys)})")
    value = metrics[source.key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExtractFailed(f"{source.task} {source.key}: expected a number, got {value!r}")
    return float(value), None


EXTRACTORS["lm_eval"] = extract_lm_eval
