"""``from: {jsonl: FILE, key: FIELD}``: a field of every line of a JSON-lines file that has it
(``step_key`` names the step's field; else lines count the steps). The last is the final value."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import model_validator

from benchlab.collect.extractors import ExtractFailed, Extractor, Series, SharedOptions, as_series, run_file, to_float


class JsonlOptions(SharedOptions):
    """A ``jsonl`` source: the file, ``key`` (the value's field) and ``step_key``."""

    jsonl: str
    described = "a JSONL file"

    @model_validator(mode="after")
    def _needs_key(self) -> JsonlOptions:
        if not self.key:
            raise ValueError("a 'jsonl' source needs 'key', the field of the value")
        return self


def extract_jsonl(run_dir: Path, source: JsonlOptions) -> tuple[float, Series | None]:
    """A field of every line of a JSON-lines file that has it."""
    assert source.key is not None
    path = run_file(run_dir, source.jsonl)
    points: list[tuple[float, float]] = []
    for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        if not isinstance(rec, dict) or source.key not in rec:
            continue
        value = to_float(rec[source.key], f"{source.jsonl}:{i + 1} {source.key}")
        step = (to_float(rec[source.step_key], f"{source.jsonl}:{i + 1} {source.step_key}")
                if source.step_key and source.step_key in rec else float(len(points)))
        points.append((step, value))
    if not points:
        raise ExtractFailed(f"no line of {source.jsonl} has the key {source.key!r}")
    steps, vals = as_series(points)
    return float(vals[-1]), (steps, vals) if source.series else None


EXTRACTOR = Extractor("jsonl", JsonlOptions, extract_jsonl)
