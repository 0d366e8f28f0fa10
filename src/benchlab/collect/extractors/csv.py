"""``from: {csv: FILE, column: NAME}``: a column of a CSV file with a header row (``step_column``
names the step's column; else rows count the steps); the last row is the final value."""

from __future__ import annotations

import csv
from pathlib import Path

from pydantic import model_validator

from benchlab.collect.extractors import ExtractFailed, Extractor, Series, SharedOptions, as_series, run_file, to_float


class CsvOptions(SharedOptions):
    """A ``csv`` source: the file, ``column`` (the value's) and ``step_column``."""

    csv: str
    described = "a CSV file"

    @model_validator(mode="after")
    def _needs_column(self) -> CsvOptions:
        if not self.column:
            raise ValueError("a 'csv' source needs 'column', the column of the value")
        return self


def extract_csv(run_dir: Path, source: CsvOptions) -> tuple[float, Series | None]:
    """A column of a CSV file (with a header row); the last row is the final value."""
    assert source.column is not None
    path = run_file(run_dir, source.csv)
    with path.open(newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        for col in filter(None, (source.column, source.step_column)):
            if col not in header:
                raise ExtractFailed(f"{source.csv} has no column {col!r} (columns: {', '.join(header)})")
        points: list[tuple[float, float]] = []
        for i, row in enumerate(reader):
            cell = row.get(source.column)
            if cell is None or cell == "":
                continue
            value = to_float(cell, f"{source.csv} row {i + 2} {source.column}")
            step = (to_float(row[source.step_column], f"{source.csv} row {i + 2} {source.step_column}")
                    if source.step_column else float(i))
            points.append((step, value))
    if not points:
        raise ExtractFailed(f"{source.csv} column {source.column!r} has no values")
    steps, vals = as_series(points)
    return float(vals[-1]), (steps, vals) if source.series else None


EXTRACTOR = Extractor("csv", CsvOptions, extract_csv)
