"""Reading a running trial's curve as it is written: the new lines of its ``metrics.jsonl``.

``benchlab.log`` appends whole lines (at most every ``BENCHLAB_FLUSH_S`` seconds); a reader
that keeps its offset reads each byte once, and leaves a line without its newline for the
next read.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from benchlab.names.run_files import SERIES_FILE


class CurveTail:
    """The points of one metric that a run's ``metrics.jsonl`` gained since the last ``read``."""

    def __init__(self, run_dir: Path, metric: str):
        self.path = run_dir / SERIES_FILE
        self.metric = metric
        self._offset = 0
        self._lines = 0  # a record without 'step' takes its line number, as the collector does

    def read(self) -> list[tuple[float, float]]:
        """New (step, value) points, in file order; NaN and non-number values are left out."""
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size < self._offset:
                    self._offset = self._lines = 0  # a new attempt began the file again
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        if end == 0:
            return []
        self._offset += end
        points: list[tuple[float, float]] = []
        for line in data[:end].splitlines():
            self._lines += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            value = record.get(self.metric)
            step = record.get("step", self._lines - 1)
            if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(step, int | float):
                continue
            if math.isfinite(value):
                points.append((float(step), float(value)))
        return points
