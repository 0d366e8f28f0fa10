"""``report-tables.json``: the report's tables as ``benchlab report`` computed them, kept in the
results folder for the dashboard; written and read here only.

What the dashboard shows of a benchmark's statistics (each task's results table, the comparisons
with the baseline, the question-level comparisons, the leaderboard and the analysis' warnings) is a
:class:`ReportNumbers`: the report's own cells, as Markdown text. ``benchlab report`` writes it with
the :class:`NumbersKey` of what it was computed from; the dashboard takes it only while the key of
the folder as it is now is the same, and otherwise computes the tables again (it never writes the
file: it only reads).

The key names the content, not a time: the ledger's content digest
(:meth:`benchlab.ledger.Store.content_digest`: the benchmark record, the runs, the plan, the final
metrics, each attempt's outcome), a signature of the per-question record files
(:func:`benchlab.collect.samples.records_signature`), the analysis' options (how failed seeds
count, bootstrap resamples, seed), benchlab's release, a digest of its source and of the numeric
libraries' releases (:func:`code_digest`), and this file's format. A run added, a metric re-read
or a spec changed after the report moves the digest, so the tables are computed again at once;
tables another build of benchlab computed are computed again too.

Nothing in the file is used until all of it checks: JSON of this kind and format, the same key,
a SHA-256 that matches its numbers, and every field of the type it should have. Anything else (a
truncated or hand-edited file, another program's file of the same name, one of another format) is
ignored as if absent: the tables are computed again, and the page never fails on the file.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from benchlab.json_types import JsonObject
from benchlab.names.results_files import write_text_atomic

#: What the file says it is, and the version of its layout (a layout change moves it, so a file of
#: an earlier layout is computed again rather than misread).
KIND: Final = "benchlab report tables"
FORMAT: Final = 2
#: A file larger than this is no file ``benchlab report`` wrote (10,000 runs take ~100 kB): not read.
MOST_BYTES: Final = 64 * 1024 * 1024


def _release() -> str:
    from benchlab import __version__

    return __version__


#: The libraries whose release changes the numbers benchlab computes with them.
NUMERIC_LIBRARIES: Final = ("numpy", "scipy", "pandas")


def code_digest(package: Path | None = None) -> str:
    """SHA-256 of the code the tables are computed and rendered by: every source file of the
    benchlab package (``package``: its folder, by default the one imported), by its path within
    the package, and the releases of :data:`NUMERIC_LIBRARIES`.

    The release string alone does not move between two builds of one release (a development
    install, a patched copy): keyed on the source itself, tables another build computed are
    computed again rather than shown. Hashing the whole package (about 2 MB, 20-30 ms once a
    process) rather than a chosen list of modules leaves nothing to keep up to date.
    """
    if package is None:
        return _installed_code_digest()
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        data = path.read_bytes()
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    for name in NUMERIC_LIBRARIES:
        try:
            h.update(f"{name}=={version(name)}\0".encode())
        except PackageNotFoundError:
            h.update(f"{name} absent\0".encode())
    return h.hexdigest()


@functools.cache
def _installed_code_digest() -> str:
    import benchlab

    return code_digest(Path(benchlab.__file__).parent)


@dataclass(frozen=True)
class NumbersKey:
    """What a :class:`ReportNumbers` was computed from; equal keys give equal numbers."""

    ledger: str  # Store.content_digest() of the folder's ledger
    records: str | None  # collect.samples.records_signature() of its run folders; None: no records
    failed_as: str  # how failed seeds entered the statistics ("exclude" or "worst")
    reps: int  # bootstrap resamples
    seed: int  # seed of every random procedure
    release: str = field(default_factory=_release)  # benchlab's version that computed them
    code: str = field(default_factory=lambda: code_digest())  # its source and numeric libraries
    format: int = FORMAT

    def to_json(self) -> JsonObject:
        """The key as the file holds it."""
        return dict(asdict(self))


@dataclass(frozen=True)
class ShownColumn:
    """A column of a task's results table: its name (``report.columns``), header and kind."""

    name: str
    title: str
    numeric: bool


@dataclass(frozen=True)
class ShownRow:
    """A config's row of a task's results table: its rank and marks, then one cell per column
    and one per secondary metric (Markdown text, as BENCHMARK_REPORT.md prints them)."""

    rank: int | str
    tied: str
    config: str
    flag: str
    cells: tuple[str, ...]
    secondary: tuple[str, ...]


@dataclass(frozen=True)
class ShownTable:
    """A task's results table: its rows best first, then the configs with no completed seed."""

    name: str
    target: float | None
    columns: tuple[ShownColumn, ...]
    rows: tuple[ShownRow, ...]


@dataclass(frozen=True)
class ReportNumbers:
    """The report's own numbers, as ``benchlab report`` prints them (Markdown cells); the tables
    other than the tasks' are rows of cells, header first (empty where the report has none)."""

    primary: str
    goal: str  # "max" or "min"
    baseline: str | None
    task_tables: tuple[ShownTable, ...]
    secondary: tuple[str, ...]  # the secondary metrics the task tables show, in their order
    comparisons: tuple[tuple[str, ...], ...]
    leaderboard: tuple[tuple[str, ...], ...]
    warnings: tuple[str, ...]
    #: The report's question-level comparisons; empty without per-question records.
    questions: tuple[tuple[str, ...], ...] = ()

    def to_json(self) -> JsonObject:
        """The numbers as the file holds them."""
        return dict(asdict(self))

    @classmethod
    def from_json(cls, data: Any) -> ReportNumbers:
        """The numbers in ``data`` (:meth:`to_json`'s form); ``TypeError``, ``ValueError`` or
        ``KeyError`` when any field is missing or not of its type."""
        return cls(
            primary=_text(data["primary"]), goal=_text(data["goal"]), baseline=_text_or_none(data["baseline"]),
            task_tables=tuple(_table(t) for t in _list(data["task_tables"])),
            secondary=_texts(data["secondary"]), comparisons=_rows(data["comparisons"]),
            leaderboard=_rows(data["leaderboard"]), warnings=_texts(data["warnings"]),
            questions=_rows(data["questions"]))


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _text_or_none(value: Any) -> str | None:
    return None if value is None else _text(value)


def _texts(value: Any) -> tuple[str, ...]:
    return tuple(_text(v) for v in _list(value))


def _rows(value: Any) -> tuple[tuple[str, ...], ...]:
    return tuple(_texts(row) for row in _list(value))


def _table(data: Any) -> ShownTable:
    target = data["target"]
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float)):
        raise TypeError(f"target: expected a number, got {type(target).__name__}")
    columns = tuple(ShownColumn(_text(c["name"]), _text(c["title"]), _flag(c["numeric"]))
                    for c in _list(data["columns"]))
    rows = []
    for r in _list(data["rows"]):
        rank = r["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int | str):
            raise TypeError(f"rank: expected a number or text, got {type(rank).__name__}")
        cells = _texts(r["cells"])
        if len(cells) != len(columns):
            raise ValueError(f"a row of {len(cells)} cells under {len(columns)} columns")
        rows.append(ShownRow(rank, _text(r["tied"]), _text(r["config"]), _text(r["flag"]), cells,
                             _texts(r["secondary"])))
    return ShownTable(_text(data["name"]), target, columns, tuple(rows))


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _checksum(numbers: JsonObject) -> str:
    return hashlib.sha256(json.dumps(numbers, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def encode(numbers: ReportNumbers, key: NumbersKey) -> str:
    """``numbers`` computed from ``key`` as the file holds them (:func:`decode` reads them)."""
    body = numbers.to_json()
    return json.dumps({"kind": KIND, "format": FORMAT, "key": key.to_json(), "sha256": _checksum(body),
                       "numbers": body}, ensure_ascii=False, indent=1)


def decode(text: str | bytes, key: NumbersKey) -> ReportNumbers | None:
    """The numbers ``text`` holds (:func:`encode`'s form) when they were computed from ``key``;
    None when it holds anything else (another key, another format or kind, not JSON, a checksum
    or a field that does not check)."""
    try:
        data = json.loads(text)
        if not (isinstance(data, dict) and data.get("kind") == KIND and data.get("format") == FORMAT
                and data.get("key") == key.to_json() and isinstance(data.get("numbers"), dict)
                and data.get("sha256") == _checksum(data["numbers"])):
            return None
        return ReportNumbers.from_json(data["numbers"])
    except (UnicodeError, ValueError, TypeError, KeyError, RecursionError):
        return None


def write(path: Path, numbers: ReportNumbers, key: NumbersKey) -> None:
    """Write ``numbers`` computed from ``key`` to ``path``, whole or not at all (a temporary file
    of this process renamed over it, so two reports written at once never mix)."""
    write_text_atomic(path, encode(numbers, key))


def read(path: Path, key: NumbersKey) -> ReportNumbers | None:
    """The numbers ``path`` holds when they were computed from ``key``; None when there is no such
    file, or it holds anything else (:func:`decode`): the caller computes them again."""
    try:
        if path.stat().st_size > MOST_BYTES:
            return None
        return decode(path.read_bytes(), key)
    except OSError:
        return None


__all__ = ["FORMAT", "KIND", "MOST_BYTES", "NumbersKey", "ReportNumbers", "ShownColumn", "ShownRow", "ShownTable",
           "decode", "encode", "read", "write"]
