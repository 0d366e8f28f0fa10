"""Run directories: what one holds before its attempt starts, and writing them ahead.

A run directory gets ``config.yaml`` (the exact resolved config) and an empty
``train.log`` before its command starts. A retry first moves what the earlier
attempt left to ``attempts/<n>/``, so nothing it wrote can be read as the new
attempt's metrics.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import yaml

from benchlab.execute.base import run_dir_of
from benchlab.plan import Run

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_run_dir(run_dir: Path, run: Run, number: int) -> None:
    """Everything a run directory holds before attempt ``number`` starts."""
    prepare_run_dir(run_dir, number)
    (run_dir / "config.yaml").write_text(yaml.dump(run.resolved_config(), Dumper=_DUMPER, sort_keys=False))
    os.close(os.open(run_dir / "train.log", os.O_WRONLY | os.O_CREAT, 0o644))


def prepare_run_dir(run_dir: Path, number: int) -> None:
    """Make the run directory; an earlier attempt's files move to ``attempts/<n>/``."""
    try:
        run_dir.mkdir(parents=True)
        return  # new: nothing to move aside
    except FileExistsError:
        pass
    leftovers = [p for p in run_dir.iterdir() if p.name != "attempts"]
    if not leftovers:
        return
    keep = run_dir / "attempts" / str(max(1, number - 1))
    if keep.exists():
        keep = run_dir / "attempts" / f"{max(1, number - 1)}-{int(time.time())}"
    keep.mkdir(parents=True)
    for path in leftovers:
        shutil.move(str(path), keep / path.name)


class Preparer:
    """Writes the directories of upcoming first attempts while the sweep would otherwise wait.

    Creating files costs from tens of microseconds to a millisecond each, depending
    on the disk; done while runs are in flight, it no longer delays the next
    launch. It works in the sweep's own thread, one directory per :meth:`step`
    (a thread of its own would contend with the sweep for the interpreter and
    cost more than it saves). Retries are never prepared ahead: their
    predecessor's files must be moved aside first.
    """

    def __init__(self, results_dir: Path):
        self.results_dir = results_dir
        self._queued: OrderedDict[str, Run] = OrderedDict()
        self._ready: set[str] = set()

    def ahead(self, runs: Iterable[Run]) -> None:
        """Queue these runs' directories (those not queued or written before)."""
        for run in runs:
            if run.run_id not in self._ready and run.run_id not in self._queued:
                self._queued[run.run_id] = run

    def pending(self) -> bool:
        return bool(self._queued)

    def step(self) -> None:
        """Write the next queued directory; a failure is left for the launch to meet and report."""
        if not self._queued:
            return
        run_id, run = self._queued.popitem(last=False)
        try:
            write_run_dir(run_dir_of(self.results_dir, run_id), run, 1)
        except OSError:
            return
        self._ready.add(run_id)

    def claim(self, run_id: str) -> bool:
        """Whether the run's directory is written; False means: write it yourself."""
        self._queued.pop(run_id, None)
        if run_id in self._ready:
            self._ready.discard(run_id)
            return True
        return False
