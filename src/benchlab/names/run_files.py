"""The run directories of a results folder (``<results>/runs/<run id>/``) and the names of their
files, spelt here once. The results folder's own files (the ledger, ``benchmark.json``,
``versions/``, the report) are named in ``results_files.py``.

What writes each one:

- ``config.yaml``: benchlab, before the command starts: the run's exact resolved config.
- ``train.log``: the command's stdout and stderr, as they came.
- ``metrics.json``: the run's final metrics, ``{"name": value}`` (``benchlab.summary`` or the
  training script itself); also what ``benchlab eval`` writes into its output folder.
- ``metrics.jsonl``: the logged curves, one JSON object per ``benchlab.log`` call.
- ``provenance.json``: benchlab, when the attempt ends: host, versions, GPUs, timings.

A module-level ``str`` each, so that code shipped to Ray workers by value carries the names
without importing benchlab there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

#: The folder of a results folder that holds one directory per run.
RUNS_DIR: Final = "runs"

CONFIG_FILE: Final = "config.yaml"
LOG_FILE: Final = "train.log"
METRICS_FILE: Final = "metrics.json"
SERIES_FILE: Final = "metrics.jsonl"
PROVENANCE_FILE: Final = "provenance.json"


def runs_dir(results: Path) -> Path:
    """The folder of ``results`` that holds the run directories."""
    return results / RUNS_DIR


def run_dir_of(results: Path, run_id: str) -> Path:
    """The directory of run ``run_id`` in the results folder ``results``."""
    return results / RUNS_DIR / run_id
