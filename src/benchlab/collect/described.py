"""What run directories say of their benchmark, for a ledger rebuilt without the spec.

Each run directory holds ``config.yaml`` (benchmark, task, config, seed) and, once an
attempt ended, ``provenance.json`` with the metrics the run was judged by
(``"metrics": {"primary": ..., "goals": {...}}``). Together they give the ledger's
benchmark description when ``benchmark.json`` is gone.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from benchlab.errors import ResultsNotFound
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.names.run_files import CONFIG_FILE, PROVENANCE_FILE


def _judged_by(run_dir: Path) -> dict[str, Any] | None:
    try:
        prov = json.loads((run_dir / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    metrics = prov.get("metrics") if isinstance(prov, dict) else None
    if isinstance(metrics, dict) and isinstance(metrics.get("primary"), str):
        return metrics
    return None


def _latest_judgement(runs_dir: Path) -> dict[str, Any] | None:
    """The metrics the most recently ended run was judged by."""
    dirs = sorted((p for p in runs_dir.iterdir() if (p / PROVENANCE_FILE).exists()),
                  key=lambda p: (p / PROVENANCE_FILE).stat().st_mtime, reverse=True)
    return next((j for j in map(_judged_by, dirs) if j is not None), None)


def described_primary(runs_dir: Path) -> str:
    """The primary metric the runs under ``runs_dir`` were judged by."""
    judged = _latest_judgement(runs_dir)
    if judged is None:
        raise ResultsNotFound(runs_dir.parent, f"{runs_dir.parent}/benchmark.json is missing and no run's "
                                               "provenance.json names its metrics: cannot tell which metric "
                                               "decides whether a run completed")
    return str(judged["primary"])


def described_meta(runs_dir: Path) -> BenchmarkInfo:
    """The ledger's benchmark record (name, primary metric, goals, tasks, configs, seeds)
    as the run directories give it."""
    judged = _latest_judgement(runs_dir) or {}
    names: Counter[str] = Counter()
    tasks: dict[str, None] = {}
    configs: dict[str, None] = {}
    seeds: set[int] = set()
    for run_dir in sorted(runs_dir.iterdir()):
        try:
            cfg = yaml.safe_load((run_dir / CONFIG_FILE).read_text())
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(cfg, dict):
            continue
        names[str(cfg.get("benchmark"))] += 1
        tasks[str(cfg.get("task"))] = None
        configs[str(cfg.get("config"))] = None
        seeds.add(int(cfg.get("seed", 0)))
    goals = {str(k): str(v) for k, v in (judged.get("goals") or {}).items()}
    return BenchmarkInfo(
        name=names.most_common(1)[0][0] if names else runs_dir.parent.name,
        # No run names its metrics: the record says so with no primary (the rebuild then asks for one).
        primary=judged.get("primary"),  # type: ignore[arg-type]
        goal=goals, metrics=list(goals), baseline=None,
        tasks=list(tasks), configs=list(configs), seeds=sorted(seeds))
