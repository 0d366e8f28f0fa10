"""Extractors for runs that cannot write benchlab's files: regex over a log, JSON, JSON lines, CSV.

Each extractor is ``(run_dir, source) -> (final value, series or None)`` and is
registered by the source's kind in ``EXTRACTORS``; a new format plugs in by
adding an entry. Paths in a source are relative to the run directory.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.collect.files import json_error
from benchlab.spec import MetricSource

if TYPE_CHECKING:
    import numpy as np

Series = tuple["np.ndarray", "np.ndarray"]
Extractor = Callable[[Path, MetricSource], tuple[float, Series | None]]

# CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class ExtractFailed(Exception):
    """A metric could not be read; the message says where and why."""


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colour codes and the like)."""
    return _ANSI.sub("", text)


def _to_float(raw: Any, where: str) -> float:
    if isinstance(raw, bool):
        raise ExtractFailed(f"{where}: expected a number, got {raw!r}")
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise ExtractFailed(f"{where}: expected a number, got {raw!r}") from None


def _file(run_dir: Path, name: str) -> Path:
    path = run_dir / name
    if not path.exists():
        present = sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []
        raise ExtractFailed(f"could not find {name} in the run directory; "
                            f"files there: {', '.join(present) or 'none'}")
    return path


def _series(points: list[tuple[float, float]]) -> Series:
    import numpy as np
    arr = np.asarray(points, dtype=float).reshape(-1, 2)
    return arr[:, 0].copy(), arr[:, 1].copy()


def extract_regex(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    """Last match (or every match, with ``series: true``) of a pattern over a log file."""
    assert source.regex is not None
    name = source.file or "train.log"
    text = strip_ansi(_file(run_dir, name).read_text(encoding="utf-8", errors="replace"))
    pattern = re.compile(source.regex)
    has_step = "step" in pattern.groupindex
    points: list[tuple[float, float]] = []
    last: re.Match[str] | None = None
    for i, m in enumerate(pattern.finditer(text)):
        last = m
        if source.series:
            value = _to_float(m.group("value") if "value" in pattern.groupindex else m.group(1),
                              f"{name} match {i + 1}")
            step = _to_float(m.group("step"), f"{name} match {i + 1} step") if has_step else float(i)
            points.append((step, value))
    if last is None:
        raise ExtractFailed(f"no line of {name} matches {source.regex!r}")
    if source.series:
        steps, vals = _series(points)
        return float(vals[-1]), (steps, vals)
    raw = last.group("value") if "value" in pattern.groupindex else last.group(1)
    return _to_float(raw, f"{name} last match"), None


def _dig(data: Any, key: str, where: str) -> Any:
    node = data
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit() and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            keys = ", ".join(map(str, node.keys())) if isinstance(node, dict) else type(node).__name__
            raise ExtractFailed(f"{where}: no key {part!r} on the path {key!r} (found: {keys})")
    return node


def extract_json(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    """A value at a dotted key path of a JSON file; a list there is read as a series."""
    import numpy as np
    assert source.json_file is not None and source.key is not None
    path = _file(run_dir, source.json_file)
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        raise ExtractFailed(json_error(source.json_file, exc)) from None
    node = _dig(data, source.key, source.json_file)
    if isinstance(node, list):
        vals = [_to_float(v, f"{source.json_file} {source.key}[{i}]") for i, v in enumerate(node)]
        if not vals:
            raise ExtractFailed(f"{source.json_file} {source.key}: empty list")
        steps = np.arange(len(vals), dtype=float)
        return vals[-1], (steps, np.asarray(vals)) if source.series else None
    return _to_float(node, f"{source.json_file} {source.key}"), None


def extract_jsonl(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    """A field of every line of a JSON-lines file that has it."""
    assert source.jsonl is not None and source.key is not None
    path = _file(run_dir, source.jsonl)
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
        value = _to_float(rec[source.key], f"{source.jsonl}:{i + 1} {source.key}")
        step = (_to_float(rec[source.step_key], f"{source.jsonl}:{i + 1} {source.step_key}")
                if source.step_key and source.step_key in rec else float(len(points)))
        points.append((step, value))
    if not points:
        raise ExtractFailed(f"no line of {source.jsonl} has the key {source.key!r}")
    steps, vals = _series(points)
    return float(vals[-1]), (steps, vals) if source.series else None


def extract_csv(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    """A column of a CSV file (with a header row); the last row is the final value."""
    assert source.csv is not None and source.column is not None
    path = _file(run_dir, source.csv)
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
            value = _to_float(cell, f"{source.csv} row {i + 2} {source.column}")
            step = (_to_float(row[source.step_column], f"{source.csv} row {i + 2} {source.step_column}")
                    if source.step_column else float(i))
            points.append((step, value))
    if not points:
        raise ExtractFailed(f"{source.csv} column {source.column!r} has no values")
    steps, vals = _series(points)
    return float(vals[-1]), (steps, vals) if source.series else None


EXTRACTORS: dict[str, Extractor] = {
    "regex": extract_regex,
    "json": extract_json,
    "jsonl": extract_jsonl,
    "csv": extract_csv,
}

