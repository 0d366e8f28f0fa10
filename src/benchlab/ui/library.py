"""The results folders a dashboard shows, what changed in them, and the files it may read.

A :class:`Library` is given folders: each is a results folder (it holds a ledger) or a root
whose subfolders are results folders, looked at again every few seconds so that a sweep started
after the dashboard appears in it. Each benchmark gets a name for its URLs: its folder's name,
made unique with a suffix where two folders share one.

What changed is told by a version number per benchmark, bumped when its fingerprint moves: the
ledger's ``PRAGMA data_version`` (SQLite changes it when another connection commits) and the
sizes of the log and curve files of its running runs. A fingerprint costs one pragma and a few
``stat`` calls, so any number of open pages polling it costs the sweep nothing it would notice.

Every ledger is opened read-only, and a run's files are served only from inside its run
directory: anything else is :class:`NotFound`, which the server turns into a 404.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchlab.errors import BenchlabError, LedgerError, ResultsNotFound
from benchlab.ledger import DB_NAME, LedgerWatch
from benchlab.names.run_files import LOG_FILE, RUNS_DIR, SERIES_FILE, run_dir_of, runs_dir
from benchlab.secrets import known_fingerprints, redact
from benchlab.triage import log_tail

#: How often a root folder is looked at again for new benchmarks, and how long a computed
#: fingerprint is trusted (many pages polling at once share one look).
RESCAN_S = 3.0
FINGERPRINT_TTL_S = 0.2

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class NotFound(BenchlabError):
    """What a URL names does not exist, or lies outside the results folders (served as a 404)."""


@dataclass
class Benchmark:
    """One results folder as the dashboard shows it: ``key`` names it in URLs."""

    key: str
    folder: Path
    version: int = 0
    _fingerprint: tuple[object, ...] | None = None
    _checked: float = float("-inf")
    _running: list[str] = field(default_factory=list)
    _data_version: int | None = None
    _watch: LedgerWatch | None = None

    def watch(self) -> LedgerWatch:
        """A read-only connection of its own to the ledger, kept open for the cheap checks."""
        if self._watch is None:
            self._watch = LedgerWatch(self.folder / DB_NAME)
        return self._watch

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None


def _is_results(folder: Path) -> bool:
    return (folder / DB_NAME).is_file()


class Library:
    """The benchmarks under the folders given, their versions, and safe paths into them."""

    def __init__(self, paths: list[Path], *, clock: Callable[[], float] = time.monotonic) -> None:
        if not paths:
            raise ResultsNotFound(Path("."), "no results folder given")
        for p in paths:
            if not p.is_dir():
                raise ResultsNotFound(p, f"{p}: no such folder")
        self.paths = [p.resolve() for p in paths]
        self._clock = clock
        self._lock = threading.Lock()
        self._by_key: dict[str, Benchmark] = {}
        self._scanned = float("-inf")
        self._scan()
        if not self._by_key and not any(not _is_results(p) for p in self.paths):
            raise ResultsNotFound(self.paths[0], f"{self.paths[0]}: no {DB_NAME} here")
        self._version_base = 0

    # ------------------------------------------------------------------ folders

    def _folders(self) -> list[Path]:
        found: list[Path] = []
        for p in self.paths:
            if _is_results(p):
                found.append(p)
            else:
                found += sorted(c for c in p.iterdir() if c.is_dir() and _is_results(c))
        return found

    def _scan(self) -> None:
        known = {b.folder for b in self._by_key.values()}
        for folder in self._folders():
            if folder in known:
                continue
            key, n = folder.name, 2
            while key in self._by_key:
                key, n = f"{folder.name}-{n}", n + 1
            self._by_key[key] = Benchmark(key, folder)
        self._scanned = self._clock()

    def benchmarks(self) -> list[Benchmark]:
        """Every benchmark, in the order found (a root's new subfolders after a short delay)."""
        with self._lock:
            if self._clock() - self._scanned > RESCAN_S:
                self._scan()
            return list(self._by_key.values())

    def get(self, key: str) -> Benchmark:
        """The benchmark named ``key`` in URLs, or :class:`NotFound`."""
        for b in self.benchmarks():
            if b.key == key:
                return b
        raise NotFound(key)

    def close(self) -> None:
        for b in self._by_key.values():
            b.close()

    # ------------------------------------------------------------------ changes

    def versions(self) -> dict[str, int]:
        """Each benchmark's version: a number that grows whenever something it shows changed."""
        out = {}
        for b in self.benchmarks():
            with self._lock:
                self._refresh(b)
                out[b.key] = b.version
        return out

    def version_of(self, key: str) -> int:
        b = self.get(key)
        with self._lock:
            self._refresh(b)
            return b.version

    def _refresh(self, b: Benchmark) -> None:
        now = self._clock()
        if now - b._checked < FINGERPRINT_TTL_S:
            return
        b._checked = now
        try:
            watch = b.watch()
            data_version = watch.data_version()
            if data_version != b._data_version or b._fingerprint is None:
                b._data_version = data_version
                b._running = watch.running_ids()
            sizes = []
            for rid in b._running:
                for name in (LOG_FILE, SERIES_FILE):
                    try:
                        sizes.append((run_dir_of(b.folder, rid) / name).stat().st_size)
                    except OSError:
                        sizes.append(-1)
            fingerprint: tuple[object, ...] = (data_version, tuple(b._running), tuple(sizes))
        except LedgerError as exc:
            # A ledger being replaced or locked for long: shown as a change, looked at again next time.
            fingerprint = ("error", str(exc))
            b.close()
        if fingerprint != b._fingerprint:
            b._fingerprint = fingerprint
            b.version += 1

    # ------------------------------------------------------------------ files

    def run_dir(self, key: str, run_id: str) -> Path:
        """The run directory of ``run_id`` in benchmark ``key``; :class:`NotFound` for anything
        that is not a plain run id, or whose folder resolves outside the results folder."""
        b = self.get(key)
        if not _RUN_ID.match(run_id) or run_id in (".", ".."):
            raise NotFound(run_id)
        runs = runs_dir(b.folder).resolve()
        path = (runs / run_id).resolve()
        if path.parent != runs:
            raise NotFound(run_id)
        return path

    def run_file(self, key: str, run_id: str, name: str) -> Path:
        """A file inside a run directory, never one outside it (``..``, absolute paths, links out)."""
        folder = self.run_dir(key, run_id)
        if not name or name.startswith("/") or "\\" in name or "\x00" in name:
            raise NotFound(name)
        path = (folder / name).resolve()
        if not path.is_relative_to(folder) or not path.is_file():
            raise NotFound(name)
        return path


def masked_file(path: Path) -> Iterator[bytes] | None:
    """A run's file as the dashboard serves it, line by line, with the secrets the folder's runs
    were given and every credential of a known format masked (a run may print its token into any
    file it writes; :func:`benchlab.secrets.redact`). ``path`` is ``<folder>/runs/<id>/...``."""
    folder = next((p.parent for p in path.parents if p.name == RUNS_DIR), None)
    hide = known_fingerprints(folder) if folder is not None else []

    def lines() -> Iterator[bytes]:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    yield raw  # not text: served as it is
                    continue
                yield redact(text, hide).encode("utf-8")

    return lines()


def tail(path: Path, lines: int = 200) -> str:
    """The last ``lines`` lines of a run's log as the dashboard shows it (colour codes removed,
    the secrets the folder's runs were given masked); ``path`` is ``<folder>/runs/<id>/<log>``."""
    return log_tail(path, lines, max_bytes=256 * 1024, hide=known_fingerprints(path.parent.parent.parent))
