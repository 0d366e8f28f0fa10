"""benchlab's own run files: ``metrics.json`` and ``metrics.jsonl``."""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.names.run_files import METRICS_FILE
from benchlab.runlog import CACHE_BLOCK, CACHE_MAGIC, CACHE_NAME, CACHE_TRAILER

if TYPE_CHECKING:
    import numpy as np


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer beyond float64, as JSON's 1e400 reads: infinite
        return math.inf if value > 0 else -math.inf


#: The key in ``problems`` of a problem with the whole file rather than with one metric.
FILE_PROBLEM = "*"


def json_error(name: str, exc: ValueError) -> str:
    """``exc`` from ``json.loads`` of file ``name``, said as where and what."""
    if isinstance(exc, json.JSONDecodeError):
        if not exc.doc.strip():
            return f"{name} is not valid JSON at line 1: the file is empty"
        return f"{name} is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    return f"{name} is not valid JSON ({exc})"


def read_file(path: Path) -> bytes:
    """The bytes of ``path`` in a few system calls (``open``, ``fstat``, ``read``, ``close``):
    a run's files are read back between its end and the next run's start, where the checks of
    a buffered file object (``isatty``, two seeks, a second ``fstat``) double the cost."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # A byte more than its size, so that a short read says the end was reached (a file read
        # short only there, within the 1 GiB a call is asked for) and one that grew is read on.
        want = min(os.fstat(fd).st_size + 1, 1 << 30)
        chunks = []
        while True:
            chunk = os.read(fd, want)
            chunks.append(chunk)
            if len(chunk) < want:
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)
            want = 1 << 20
    finally:
        os.close(fd)


def read_metrics_json(path: Path, problems: dict[str, str]) -> dict[str, float]:
    """Numeric top-level entries of ``metrics.json`` (nested mappings flattened with '/').

    A problem with the whole file goes into ``problems`` under :data:`FILE_PROBLEM`."""
    try:
        raw = read_file(path)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    try:
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError as exc:
        problems[FILE_PROBLEM] = json_error(path.name, exc)
        return {}
    out: dict[str, float] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}/{k}" if prefix else str(k), v)
            return
        num = _number(node)
        if num is not None:
            out[prefix] = num
        elif prefix:
            problems[prefix] = f"metric {prefix!r} in {path.name} is not a number ({node!r})"

    if isinstance(data, dict):
        walk("", data)
    else:
        problems[FILE_PROBLEM] = f"{path.name} must hold a JSON object, got {type(data).__name__}"
    return out


#: ``provenance.json``'s ``metrics_json`` when benchlab wrote the run's ``metrics.json`` from
#: what extractors read: a copy that may be rewritten, unlike a file the run wrote itself.
RECORDED_BY_BENCHLAB = "written by benchlab from the extracted metrics"


def write_extracted_metrics(run_dir: Path, finals: dict[str, float], extracted: set[str], *,
                            replace: bool = False) -> bool:
    """Put ``finals`` into the run's ``metrics.json`` when an extractor read any of them, so
    that the folder holds its metrics in benchlab's own form (and ``collect --rebuild`` needs
    no extractor). A ``metrics.json`` that is there already is the run's own and is left alone,
    unless ``replace`` (it is benchlab's earlier copy). Returns whether the file was written."""
    path = run_dir / METRICS_FILE
    if not extracted or (path.exists() and not replace) or not run_dir.is_dir():
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(finals, indent=1) + "\n")
    tmp.replace(path)
    return True


#: The size of ``metrics.jsonl`` from which its cache is read rather than its text parsed.
CACHE_WORTH_BYTES = 16 * 1024


def read_metrics_jsonl(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Step series from ``metrics.jsonl``: metric -> (steps, values), float64 arrays in file order.

    A line without ``step`` takes its line number. A torn last line (the run was
    killed while writing) is skipped. When ``benchlab.log`` wrote the file, its
    binary cache is read instead, if it still describes these very bytes.
    """
    try:
        data = read_file(path)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    # A small file is parsed as fast as its cache is read (a few hundred lines): the cache's own
    # open, checksum and blocks would cost more than they save.
    cached = read_cache(path.with_name(CACHE_NAME), data) if len(data) > CACHE_WORTH_BYTES else None
    if cached is not None:
        return cached
    return parse_metrics_jsonl(data.decode("utf-8", errors="replace"))


def parse_metrics_jsonl(text: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Step series from the text of a ``metrics.jsonl`` (see :func:`read_metrics_jsonl`)."""
    text = text.strip()
    if not text:
        return {}
    one = _one_metric(text)
    if one is not None:
        return one
    try:
        # One parse of the whole file is several times faster than one per line.
        records = json.loads("[" + text.replace("\n", ",") + "]")
    except ValueError:
        # blank lines, a torn last line, a bad record: line by line, skipping what does not parse
        records = []
        for ln in text.splitlines():
            try:
                records.append(json.loads(ln))
            except ValueError:
                continue
    if set(map(type, records)) != {dict}:
        records = [r for r in records if isinstance(r, dict)]
    if not records:
        return {}
    try:
        return _columns_fast(records)
    except (KeyError, TypeError, ValueError, OverflowError):
        return _columns_slow(records)


_NUMBERS = {int, float}


def read_cache(path: Path, jsonl: bytes) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """The series of ``metrics.jsonl.cache`` (layout in ``benchlab.runlog``), or None unless
    its last trailer names the length and SHA-1 of ``jsonl`` and every block is whole."""
    import numpy as np

    try:
        buf = read_file(path)
    except OSError:
        return None
    end = len(buf) - CACHE_TRAILER.size
    if end < len(CACHE_MAGIC) or not buf.startswith(CACHE_MAGIC):
        return None
    kind, length, digest = CACHE_TRAILER.unpack_from(buf, end)
    if kind != b"T" or length != len(jsonl) or hashlib.sha1(jsonl, usedforsecurity=False).digest() != digest:
        return None
    # A run that flushes often leaves many small blocks, mostly of the same keys: their key
    # lists are parsed once, and the blocks joined in one copy when they all agree.
    blocks: list[tuple[tuple[str, ...], np.ndarray]] = []
    parsed: dict[bytes, tuple[str, ...]] = {}
    pos = len(CACHE_MAGIC)
    try:
        while pos < end:
            kind = buf[pos:pos + 1]
            if kind == b"T":
                pos += CACHE_TRAILER.size
                continue
            if kind != b"B":
                return None
            _, n, size = CACHE_BLOCK.unpack_from(buf, pos)
            pos += CACHE_BLOCK.size
            raw = buf[pos:pos + size]
            keys = parsed.get(raw)
            if keys is None:
                keys = parsed[raw] = tuple(json.loads(raw))
            pos += size
            block = np.frombuffer(buf, dtype="<f8", count=n * (len(keys) + 1), offset=pos).reshape(n, len(keys) + 1)
            pos += block.nbytes
            blocks.append((keys, block))
    except (struct.error, ValueError, TypeError):
        return None
    if pos != end:
        return None
    out = {}
    if len(parsed) == 1:
        (keys,) = parsed.values()
        table = np.concatenate([b for _, b in blocks]).astype(float)  # native byte order, one copy
        for j, key in enumerate(keys, 1):
            out[key] = (table[:, 0].copy(), table[:, j].copy())
        return out
    parts: dict[str, list[np.ndarray]] = {}
    for keys, block in blocks:
        for j, key in enumerate(keys, 1):
            parts.setdefault(key, []).append(block[:, [0, j]])
    for key, pieces in parts.items():
        pairs = np.concatenate(pieces).astype(float)
        out[key] = (pairs[:, 0].copy(), pairs[:, 1].copy())
    return out


def _one_metric(text: str) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """The file as ``benchlab.log`` writes one metric, ``{"step": S, "KEY": V}`` on every line,
    read without building a dict per line (None if it is anything else).

    With one field there is no order to check: a line of any other shape changes one
    of the counts below, and anything but plain numbers fails the parse or the type check.
    """
    import numpy as np

    end = text.find("\n")
    try:
        head = json.loads(text if end < 0 else text[:end])
    except ValueError:
        return None
    if not isinstance(head, dict) or len(head) != 2 or next(iter(head)) != "step":
        return None
    key = list(head)[1]
    sep = ", " + json.dumps(key) + ": "
    n = text.count("\n") + 1
    if not (text.count('{"step": ') == text.count(sep) == text.count("}") == text.count("{") == n):
        return None
    flat_text = text.replace('{"step": ', "").replace(sep, ", ").replace("}\n", ", ")
    try:
        flat = json.loads("[" + flat_text[:-1] + "]")  # [:-1]: the last line's '}'
    except ValueError:
        return None
    if len(flat) != 2 * n or not set(map(type, flat)) <= _NUMBERS:
        return None
    try:
        pairs = np.array(flat, dtype=float).reshape(n, 2)
    except OverflowError:
        return None
    return {key: (pairs[:, 0].copy(), pairs[:, 1].copy())}


def _columns_fast(records: list[dict[str, Any]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every record has a numeric step and the same numeric fields: one array per field.

    The checks run through map/set so that they stay in C: this path reads every
    logged point of every run.
    """
    import numpy as np
    n = len(records)
    keys = [k for k in records[0] if k != "step"]
    if set(map(len, records)) != {len(keys) + 1}:
        raise KeyError("ragged records")
    step_list = [r["step"] for r in records]
    if not set(map(type, step_list)) <= _NUMBERS:
        raise TypeError("non-numeric step")
    steps = np.array(step_list, dtype=float)
    out = {}
    for key in keys:
        column = [r[key] for r in records]
        if not set(map(type, column)) <= _NUMBERS:
            raise TypeError("non-numeric value")
        out[key] = (steps, np.array(column, dtype=float))
    assert len(steps) == n
    return out


def _columns_slow(records: list[dict[str, Any]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    import numpy as np
    steps: dict[str, list[float]] = {}
    values: dict[str, list[float]] = {}
    for i, rec in enumerate(records):
        step = _number(rec.get("step"))
        if step is None:
            step = float(i)
        for key, raw in rec.items():
            if key == "step":
                continue
            val = _number(raw)
            if val is None:
                continue
            steps.setdefault(key, []).append(step)
            values.setdefault(key, []).append(val)
    return {k: (np.asarray(steps[k], dtype=float), np.asarray(values[k], dtype=float)) for k in steps}
