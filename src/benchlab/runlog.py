"""The helper a run calls to report metrics: ``from benchlab import log``.

It depends on nothing but the standard library, so any training script can use
it, and it is cheap enough to call every step. Lines are buffered and written
at most every half second (and at exit), so a run killed mid-way loses at most
that much of its curve, never a line half-written.

Files, in the run directory (``$BENCHLAB_RUN_DIR``, or the current directory
when a script runs outside benchlab):

- ``metrics.jsonl``: one JSON object per ``log(step=..., **values)`` call;
- ``metrics.json``: the final scalars, merged by ``summary(**values)``.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import time
from pathlib import Path
from typing import Any

_FLUSH_EVERY_S = 0.5


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


class Logger:
    """Appends step records to ``<run_dir>/metrics.jsonl`` and final scalars to ``metrics.json``."""

    def __init__(self, run_dir: str | os.PathLike[str] | None = None):
        self.run_dir = Path(run_dir if run_dir is not None else os.environ.get("BENCHLAB_RUN_DIR", "."))
        self._text: list[str] = []  # finished lines, waiting for the next flush
        # Consecutive records with the same plain-number fields are kept as one flat list and
        # turned into text in one formatting call: per step, a log() call only appends numbers.
        self._block_keys: tuple[str, ...] | None = None
        self._block: list[int | float] = []
        self._last_flush = time.monotonic()
        self._auto_step = 0
        self._fh: Any = None

    def log(self, step: int | float | None = None, **values: Any) -> None:
        """Record one step: ``log(step=10, loss=0.3, accuracy=0.9)``.

        Without ``step``, steps count 0, 1, 2, ... in call order.
        """
        if step is None:
            step = self._auto_step
        self._auto_step = int(step) + 1 if type(step) is int else self._auto_step + 1
        keys = tuple(values)
        plain = type(step) is int or type(step) is float
        for value in values.values():
            if type(value) is not float and type(value) is not int:
                plain = False
                break
        if plain:
            if keys != self._block_keys:
                self._seal()
                self._block_keys = keys
            self._block.append(step)
            self._block += values.values()
        else:
            self._seal()
            self._text.append(_line(step, values))  # formatted now: a bad value fails this call
        if time.monotonic() - self._last_flush >= _FLUSH_EVERY_S:
            self.flush()

    def _seal(self) -> None:
        """Turn the block of plain-number records into text."""
        flat, keys = self._block, self._block_keys
        if not flat or keys is None:
            return
        template = '{"step": %r' + "".join(", " + json.dumps(k) + ": %r" for k in keys) + "}\n"
        n = len(flat) // (len(keys) + 1)
        text = (template * n) % tuple(flat)
        # Only a nan or an infinity puts an 'n' in a number's repr; JSON spells those differently.
        if text.count("n") != template.count("n") * n:
            width = len(keys) + 1
            text = "".join(_line(flat[i], dict(zip(keys, flat[i + 1:i + width], strict=True)))
                           for i in range(0, len(flat), width))
        self._text.append(text)
        self._block = []

    def summary(self, **values: Any) -> None:
        """Merge final scalars into ``metrics.json`` (written at once, atomically)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / "metrics.json"
        current: dict[str, Any] = {}
        if path.exists():
            try:
                current = json.loads(path.read_text())
            except (OSError, ValueError):
                current = {}
        current.update(values)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(current, indent=1, allow_nan=True))
        os.replace(tmp, path)

    def flush(self) -> None:
        """Write buffered step records to disk."""
        self._last_flush = time.monotonic()
        self._seal()
        if not self._text:
            return
        if self._fh is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._fh.write("".join(self._text))
        self._fh.flush()
        self._text.clear()

    def close(self) -> None:
        """Flush and close the file; later calls reopen it."""
        self.flush()
        if self._fh is not None:
            self._fh.close()
            self._fh = None


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
