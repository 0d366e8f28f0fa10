"""One value per run, without pandas: what the statistics of a table work on once curves are reduced.

:class:`RunValues` holds the columns ``task, config, metric, seed, value`` of
:func:`benchlab.stats.reduce_runs`' result as plain lists and one float array, and groups
them in order of first appearance, as ``DataFrame.groupby(..., sort=False)`` does. The
statistics after the reduction (:func:`benchlab.stats.analyze`'s descriptions, comparisons
and aggregates) read it, so that a table of final values, which needs no reduction, is
analysed without importing pandas: ``benchlab analyze`` on a plain CSV starts in half the
time (``docs/performance.md``).

:func:`parse_final_values` reads such a table from CSV text, and gives up (None) on anything
that is not plainly one finite final value per run, which then takes the pandas path with its
checks and messages.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlab.names.long_format import COLUMNS, REQUIRED_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

#: Strings pandas' CSV reader takes as missing by default: a table holding one is left to it.
_PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
# What Python's float() and pandas' reader both take as the same decimal number (no "1_000").
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass
class RunValues:
    """One value per run: columns of equal length (``value`` a float array, NaN allowed)."""

    task: list[str]
    config: list[str]
    metric: list[str]
    seed: list[Any]
    value: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    @property
    def empty(self) -> bool:
        return len(self.task) == 0

    @classmethod
    def from_frame(cls, runs: pd.DataFrame) -> RunValues:
        """From a table with the columns ``task, config, metric, seed, value`` (``metric``
        defaults to ``"value"``), e.g. :func:`benchlab.stats.reduce_runs`' result."""
        metric = (runs["metric"].tolist() if "metric" in runs.columns else ["value"] * len(runs))
        return cls(runs["task"].tolist(), runs["config"].tolist(), metric, runs["seed"].tolist(),
                   runs["value"].to_numpy(dtype=float))

    def to_frame(self) -> pd.DataFrame:
        """The long-format table of these values (final values: ``step`` NaN)."""
        import pandas as pd

        return pd.DataFrame({"task": self.task, "config": self.config, "seed": self.seed,
                             "metric": self.metric, "step": np.full(len(self), np.nan),
                             "value": self.value})

    def column(self, name: str) -> Sequence[Any]:
        out: Sequence[Any] = getattr(self, name)
        return out

    def groups(self, *keys: str) -> dict[tuple[Any, ...], list[int]]:
        """Row positions per distinct ``keys`` tuple, in order of first appearance."""
        columns = [self.column(k) for k in keys]
        out: dict[tuple[Any, ...], list[int]] = {}
        for i, key in enumerate(zip(*columns, strict=True)):
            out.setdefault(key, []).append(i)
        return out

    def take(self, rows: Sequence[int] | np.ndarray) -> RunValues:
        """The rows at ``rows``, in that order."""
        idx = [int(i) for i in rows]
        return RunValues([self.task[i] for i in idx], [self.config[i] for i in idx],
                         [self.metric[i] for i in idx], [self.seed[i] for i in idx],
                         self.value[np.asarray(idx, dtype=np.intp)])

    def where(self, keep: Iterable[bool]) -> RunValues:
        """The rows where ``keep`` is true."""
        return self.take([i for i, k in enumerate(keep) if k])


def parse_final_values(lines: Iterable[str]) -> RunValues | None:
    """A CSV of final values (columns ``task, config, seed, value``; optional ``metric``,
    ``benchmark``, an all-empty ``step``) as :class:`RunValues`, or None where the table is not
    plainly one finite value per run.

    None (the caller reads the table with pandas instead, which checks it and names what is
    wrong) for: a missing column, no rows, a ragged row, a name pandas would read as a number or
    as missing, a seed that is not an integer, a value that is not a finite number, a step, or
    a second value for the same run.
    """
    reader = csv.reader(lines)
    header = next(reader, None)
    if not header or len(set(header)) != len(header) or not set(REQUIRED_COLUMNS) <= set(header):
        return None
    if not set(header) <= set(COLUMNS):
        return None
    at = {name: header.index(name) for name in header}
    task: list[str] = []
    config: list[str] = []
    metric: list[str] = []
    seed: list[Any] = []
    value: list[float] = []
    seen: set[tuple[str, str, str, int]] = set()
    i_task, i_config, i_seed, i_value = at["task"], at["config"], at["seed"], at["value"]
    i_metric, i_step = at.get("metric"), at.get("step")
    for row in reader:
        if len(row) != len(header):
            return None
        names = [row[i_task], row[i_config]] + ([row[i_metric]] if i_metric is not None else [])
        if any(not _plain_name(n) for n in names):
            return None
        if i_step is not None and row[i_step] != "":
            return None
        text = row[i_seed]
        if not _INTEGER.fullmatch(text):
            return None
        s = int(text)
        if not _NUMBER.fullmatch(row[i_value]):
            return None
        v = float(row[i_value])
        if not math.isfinite(v):
            return None
        m = row[i_metric] if i_metric is not None else "value"
        key = (names[0], names[1], m, s)
        if key in seen:
            return None
        seen.add(key)
        task.append(names[0])
        config.append(names[1])
        metric.append(m)
        seed.append(s)
        value.append(v)
    if not task:
        return None
    return RunValues(task, config, metric, seed, np.array(value, dtype=float))


def _plain_name(text: str) -> bool:
    """A name pandas reads back as the same string (not missing, not a number, not a date...)."""
    if text in _PANDAS_NA or text != text.strip():
        return False
    try:
        float(text)
    except ValueError:
        return text.lower() not in ("true", "false")
    return False


__all__ = ["RunValues", "parse_final_values"]
