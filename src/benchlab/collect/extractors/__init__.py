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
from benchlab.errors import BenchlabError
from benchlab.run_files import LOG_FILE
from benchlab.spec import MetricSource

if TYPE_CHECKING:
    import numpy as np

Series = tuple["np.ndarray", "np.ndarray"]
Extractor = Callable[[Path, MetricSource], tuple[float, Series | None]]

# CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class ExtractFailed(BenchlabError):
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


# A number as logs print it, non-finite ones included: 816.18, -1e-3, .5, nan, NaN, inf, -inf, Infinity.
NUMBER = (r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
          r"|(?:[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)(?!\w))")  # not 'nanoseconds'



def _value_group_span(pattern: str) -> tuple[int, int] | None:
    """Where the value group (``(?P<value>...)``, else the first capturing group) sits in ``pattern``."""
    start = pattern.find("(?P<value>")
    i, depth, in_class, opened = 0, 0, False, None
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "]":
                i += 1  # a ']' first in a class is a literal
        elif c == "(":
            depth += 1
            if opened is None and (i == start or (start < 0 and pattern[i + 1:i + 2] != "?")):
                opened = (i, depth)
        elif c == ")":
            if opened is not None and depth == opened[1]:
                return opened[0], i + 1
            depth -= 1
        i += 1
    return None


def _non_finite_matches(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Matches of ``pattern`` with its value group widened to read any number, whose value is nan or ±inf.

    A value group such as ``[-+.\\deE]+`` cannot match ``nan``: the line that says
    the run diverged would be skipped and an older, finite value reported in its place.
    """
    span = _value_group_span(pattern.pattern)
    if span is None:
        return []
    name = "(?P<value>" if "value" in pattern.groupindex else "("
    widened = pattern.pattern[:span[0]] + name + NUMBER + ")" + pattern.pattern[span[1]:]
    try:
        wide = re.compile(widened, pattern.flags)
    except re.error:
        return []
    group = "value" if "value" in wide.groupindex else 1
    found = []
    for m in wide.finditer(text):
        raw = m.group(group)
        if raw and raw.lstrip("+-")[:1].lower() in ("n", "i"):
            found.append(m)
    return found


def extract_regex(run_dir: Path, source: MetricSource) -> tuple[float, Series | None]:
    """Last match (or every match, with ``series: true``) of a pattern over a log file.

    Lines whose value is ``nan`` or ``inf`` count even when the pattern's value
    group cannot match them (``[-+.\\deE]+``): a diverged run reports its ``nan``,
    never an older line's value.
    """
    assert source.regex is not None
    name = source.file or LOG_FILE
    text = strip_ansi(_file(run_dir, name).read_text(encoding="utf-8", errors="replace"))
    pattern = re.compile(source.regex)
    by_start = {m.start(): m for m in pattern.finditer(text)}
    # On the same line the widened match wins: '[-+.\\deE]+' reads '-inf' as '-'.
    by_start.update((m.start(), m) for m in _non_finite_matches(pattern, text))
    matches = [by_start[k] for k in sorted(by_start)]
    if not matches:
        raise ExtractFailed(f"no line of {name} matches {source.regex!r}")
    has_step = "step" in pattern.groupindex

    def value(m: re.Match[str], where: str) -> float:
        return _to_float(m.group("value") if "value" in m.re.groupindex else m.group(1), where)

    if source.series:
        points = [
            (_to_float(m.group("step"), f"{name} match {i + 1} step") if has_step else float(i),
             value(m, f"{name} match {i + 1}"))
            for i, m in enumerate(matches)
        ]
        steps, vals = _series(points)
        return float(vals[-1]), (steps, vals)
    return value(matches[-1], f"{name} last match"), None


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

