"""The helper a run calls to report metrics: ``from benchlab import log``.

It depends on nothing but the standard library, so any training script can use
it, and it is cheap enough to call every step. Lines are buffered and written
at most every half second (and at exit), so a run killed mid-way loses at most
that much of its curve, never a line half-written.

Files, in the run directory (``$BENCHLAB_RUN_DIR``, or the current directory
when a script runs outside benchlab):

- ``metrics.jsonl``: one JSON object per ``log(step=..., **values)`` call;
- ``metrics.json``: the final scalars, merged by ``summary(**values)``;
- ``metrics.jsonl.cache``: the numbers of ``metrics.jsonl`` in binary, so that
  the collector need not parse text it can check instead (see below).

The cache is never a second source of truth: it names the length and SHA-1 of the
``metrics.jsonl`` it describes, and the collector uses it only when the file
still has exactly that length and digest; otherwise (an edited or foreign file, a
run killed between the two writes, a record with a non-number value) it parses
the text. Layout, little-endian: the line ``benchlab metrics cache 1``, then
records, each a kind byte and a body:

- ``B``: ``uint32`` record count *n*, ``uint32`` byte length of a JSON list of
  the *k* metric names, that list, then *n* × (1 + *k*) ``float64``: per record
  its step and its values in the order of the names;
- ``T``: ``uint64`` byte length of ``metrics.jsonl`` and its 20-byte SHA-1;
  written after every flush, the last one covers the whole file.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import operator
import os
import struct
import sys
import time
from array import array
from operator import itemgetter
from pathlib import Path
from typing import Any

from benchlab.names.run_files import METRICS_FILE, SERIES_FILE


def _flush_every() -> float:
    """Seconds between writes; a search that prunes on live curves asks for fewer
    (``BENCHLAB_FLUSH_S``). A value that is not a positive number is ignored."""
    try:
        value = float(os.environ.get("BENCHLAB_FLUSH_S") or 0.5)
    except ValueError:
        return 0.5
    return value if value > 0 else 0.5


_FLUSH_EVERY_S = _flush_every()
# Records kept as values before they become text, whatever the clock says: memory stays
# bounded in a loop that logs millions of steps within half a second.
_PENDING_MAX = 8192

CACHE_NAME = "metrics.jsonl.cache"
CACHE_MAGIC = b"benchlab metrics cache 1\n"
CACHE_BLOCK = struct.Struct("<cII")
CACHE_TRAILER = struct.Struct("<cQ20s")

_monotonic = time.monotonic


def _fmt(value: Any) -> str:
    if type(value) is float:
        # repr is the shortest exact form; JSON has no inf/nan literals of its own,
        # and Python's json module reads back exactly these spellings.
        if math.isfinite(value):
            return repr(value)
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if type(value) is int:
        return str(value)
    return json.dumps(value)


def _line(step: Any, values: dict[str, Any]) -> str:
    return "".join(['{"step": ', _fmt(step), *(f", {json.dumps(k)}: {_fmt(v)}" for k, v in values.items()), "}\n"])


def _number(value: Any) -> Any:
    """A number of another library (numpy, torch scalars) as the Python int or float it
    holds; anything else unchanged."""
    if type(value) is int or type(value) is float or type(value) is bool or isinstance(value, str | bytes):
        return value
    if isinstance(value, int | float):  # subclasses: numpy.float64, IntEnum
        return int(value) if isinstance(value, int) else float(value)
    if getattr(value, "ndim", 0) != 0:
        return value  # an array of several numbers is not one number
    if getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return bool(value)
    try:
        return operator.index(value)
    except TypeError:
        pass
    if hasattr(type(value), "__float__"):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    return value


def _plain(value: Any) -> bool:
    return type(value) is int or type(value) is float


class _Cache:
    """Writes ``metrics.jsonl.cache`` next to the text, block by block, as the text is flushed."""

    def __init__(self, path: Path):
        self.path = path
        self.ok = True
        self.length = 0  # bytes of metrics.jsonl this cache covers
        self._sha = hashlib.sha1(usedforsecurity=False)
        self._blocks: list[bytes] = []
        self._fh: Any = None

    def add(self, keys: tuple[str, ...], flat: list[Any]) -> None:
        if not self.ok:
            return
        try:
            numbers = array("d", flat)
        except OverflowError:  # an int beyond float64: the text holds it, the cache cannot
            self.disable()
            return
        if sys.byteorder != "little":
            numbers.byteswap()
        names = json.dumps(list(keys)).encode()
        self._blocks += (CACHE_BLOCK.pack(b"B", len(flat) // (len(keys) + 1), len(names)), names,
                         numbers.tobytes())

    def commit(self, text: bytes) -> None:
        """``text`` was just appended to metrics.jsonl: write its blocks and a trailer covering it."""
        if not self.ok:
            return
        self._sha.update(text)
        self.length += len(text)
        blocks, self._blocks = self._blocks, []
        try:
            if self._fh is None:
                fresh = self.length == len(text)  # this logger's first text: a new cache
                self._fh = open(self.path, "wb" if fresh else "ab")  # noqa: SIM115
                if fresh:
                    self._fh.write(CACHE_MAGIC)
            self._fh.write(b"".join([*blocks, CACHE_TRAILER.pack(b"T", self.length, self._sha.digest())]))
            self._fh.flush()
        except OSError:
            self.disable()

    def disable(self) -> None:
        """From here on the collector parses the text; a stale cache file is removed."""
        if not self.ok:
            return
        self.ok = False
        self._blocks = []
        self.close()
        try:
            os.remove(self.path)
        except OSError:
            pass

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class Logger:
    """Appends step records to ``<run_dir>/metrics.jsonl`` and final scalars to ``metrics.json``."""

    def __init__(self, run_dir: str | os.PathLike[str] | None = None):
        self.run_dir = Path(run_dir if run_dir is not None else os.environ.get("BENCHLAB_RUN_DIR", "."))
        # Records not yet turned into text: their steps, and their values as the call's own
        # keyword dict (all plain numbers) or, for a record holding anything else, its finished
        # line. Checks and formatting happen per block of records, in few calls, at flush.
        self._steps: list[Any] = []
        self._records: list[dict[str, Any] | str] = []
        self._text: list[str] = []  # finished text, waiting for the next flush
        self._last_step: Any = None
        self._count = 0  # records already turned into text
        self._due = _monotonic() + _FLUSH_EVERY_S
        self._fh: Any = None
        self._cache = _Cache(self.run_dir / CACHE_NAME)

    def log(self, step: int | float | None = None, **values: Any) -> None:
        """Record one step: ``log(step=10, loss=0.3, accuracy=0.9)``.

        Without ``step``, the step is one more than the previous one when that was an
        integer, else the number of records logged before (so 0, 1, 2, ... from the start).
        Numbers of numpy or torch are stored as the Python number they hold; a value that
        JSON cannot hold raises ``TypeError`` here, and nothing of the call is kept.
        """
        if step is None:
            step = self._next_step()
        record: dict[str, Any] | str = values
        if type(step) is not int and type(step) is not float:
            step, record = self._convert(step, values)
        else:
            for value in values.values():
                if type(value) is not float and type(value) is not int:
                    step, record = self._convert(step, values)
                    break
        self._steps.append(step)
        self._records.append(record)
        if len(self._steps) >= _PENDING_MAX:
            self._seal()
        if _monotonic() >= self._due:
            self.flush()

    def _next_step(self) -> Any:
        last = self._steps[-1] if self._steps else self._last_step
        if type(last) is int:
            return last + 1
        return self._count + len(self._steps)

    @staticmethod
    def _convert(step: Any, values: dict[str, Any]) -> tuple[Any, dict[str, Any] | str]:
        step = _number(step)
        values = {k: _number(v) for k, v in values.items()}
        if _plain(step) and all(map(_plain, values.values())):
            return step, values
        try:
            return step, _line(step, values)  # formatted now: a bad value fails this call
        except TypeError as exc:
            raise TypeError(f"benchlab.log: step {step!r} or a value of {sorted(values)} "
                            f"cannot be written as JSON ({exc})") from None

    def _seal(self) -> None:
        """Turn the pending records into text (and cache blocks)."""
        steps, records = self._steps, self._records
        if not steps:
            return
        self._steps, self._records = [], []
        self._count += len(steps)
        self._last_step = steps[-1]
        if set(map(type, records)) == {dict}:
            keys = tuple(records[0])
            # Every record with the first one's fields in the first one's order: one block. (The
            # same fields in another order are written in the order they were logged, below.)
            if all(tuple(r) == keys for r in records):
                self._block(keys, steps, records)  # type: ignore[arg-type]
                return
        start = 0
        for end in range(1, len(records) + 1):
            if end < len(records) and _shape(records[end]) == _shape(records[start]):
                continue
            first = records[start]
            if isinstance(first, str):
                self._text += records[start:end]  # type: ignore[arg-type]
                self._cache.disable()  # the cache holds numbers only
            else:
                self._block(tuple(first), steps[start:end], records[start:end])  # type: ignore[arg-type]
            start = end

    def _block(self, keys: tuple[str, ...], steps: list[Any], records: list[dict[str, Any]]) -> None:
        """Records with the same plain-number fields, in one formatting call."""
        n, width = len(steps), len(keys) + 1
        flat: list[Any] = [None] * (n * width)
        flat[0::width] = steps
        for j, key in enumerate(keys, 1):
            flat[j::width] = map(itemgetter(key), records)
        template = '{"step": %r' + "".join(", " + json.dumps(k) + ": %r" for k in keys) + "}\n"
        text = (template * n) % tuple(flat)
        # Only a nan or an infinity puts an 'n' in a number's repr; JSON spells those differently.
        if text.count("n") != template.count("n") * n:
            text = "".join(_line(flat[i], dict(zip(keys, flat[i + 1:i + width], strict=True)))
                           for i in range(0, len(flat), width))
        self._text.append(text)
        self._cache.add(keys, flat)

    def summary(self, **values: Any) -> None:
        """Merge final scalars into ``metrics.json`` (written at once, atomically)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / METRICS_FILE
        current: dict[str, Any] = {}
        if path.exists():
            try:
                current = json.loads(path.read_text())
            except (OSError, ValueError):
                current = {}
        current.update({k: _number(v) for k, v in values.items()})
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(current, indent=1, allow_nan=True))
        os.replace(tmp, path)

    def flush(self) -> None:
        """Write buffered step records to disk."""
        self._due = _monotonic() + _FLUSH_EVERY_S
        self._seal()
        if not self._text:
            return
        data = "".join(self._text).encode("utf-8")
        self._text.clear()
        if self._fh is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.run_dir / SERIES_FILE, "ab")  # noqa: SIM115
            if self._fh.tell() != self._cache.length:
                self._cache.disable()  # text this logger did not write: not in its cache
        self._fh.write(data)
        self._fh.flush()
        self._cache.commit(data)

    def close(self) -> None:
        """Flush and close the files; later calls reopen them."""
        self.flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._cache.close()


def _shape(record: dict[str, Any] | str) -> tuple[str, ...] | None:
    return None if isinstance(record, str) else tuple(record)


_default: Logger | None = None


def _logger() -> Logger:
    global _default
    if _default is None:
        _default = Logger()
        atexit.register(_default.close)
    return _default


def log(step: int | float | None = None, **values: Any) -> None:
    """Record one step of the current run: ``log(step=epoch, loss=..., accuracy=...)``."""
    _logger().log(step, **values)


def summary(**values: Any) -> None:
    """Record the current run's final scalars: ``summary(accuracy=0.97, fit_time=1.2)``."""
    _logger().summary(**values)
