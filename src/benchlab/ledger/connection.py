"""Opening a ledger: the connection, its modes, and a write transaction."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Self

from benchlab.errors import NewerLedger, ResultsNotFound, StoreError
from benchlab.ledger.files import disk_full, is_disk_full
from benchlab.ledger.migrations import upgrade
from benchlab.ledger.schema import DB_NAME, SCHEMA_VERSION, TABLES

#: Whether the ledgers opened in this context are opened read-only (see :func:`read_only_ledgers`).
_READ_ONLY: ContextVar[bool] = ContextVar("benchlab_ledgers_read_only", default=False)


@contextmanager
def read_only_ledgers() -> Iterator[None]:
    """Within this block, every ledger opened without an explicit ``read_only`` is opened read-only.

    A server that only shows results (the dashboard) handles each request in it: the readers a
    request goes through (``results.read``, the report's gathering) open ledgers themselves, and
    this makes each of them unable to write one without a flag on every call. It is a context
    variable, not a switch of the process: the tasks and worker threads a request starts
    (asyncio, anyio) inherit it, and nothing else in the process does, so a program that builds
    a dashboard still writes its own ledgers.
    """
    token = _READ_ONLY.set(True)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


def find_db(results: Path | str) -> Path:
    """The ledger of a results folder (or the file itself), or ``ResultsNotFound``."""
    path = Path(results)
    if path.is_file() and path.name.endswith(".db"):
        return path
    db = path / DB_NAME
    if not db.exists():
        if not path.exists():
            raise ResultsNotFound(path, f"{path}: no such results folder")
        raise ResultsNotFound(path, f"{path}: no {DB_NAME} here; is it a benchlab results folder? "
                                    "(`benchlab collect --rebuild` recreates it from runs/)")
    return db


class LedgerConnection:
    """The connection to one ledger file: opening it (to write, read-only beside a live sweep, or
    as an unchanging archive), transactions, and the file's journal."""

    def __init__(self, db_path: Path | str, *, create: bool = False, read_only: bool | None = None):
        self.path = Path(db_path)
        if not create and not self.path.exists():
            raise ResultsNotFound(self.path, f"{self.path}: no such ledger")
        if read_only is None:
            read_only = _READ_ONLY.get()
        if read_only and not create and os.access(self.path.parent, os.W_OK):
            # A reader beside a live sweep (``benchlab ui``): SQLite refuses every write on this
            # connection, and still sees the sweep's commits as they land (WAL).
            self.read_only = True
            try:
                self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, isolation_level=None,
                                            check_same_thread=False, timeout=30)
                self.conn.execute("PRAGMA busy_timeout=30000")
                self.conn.execute("SELECT 1 FROM runs LIMIT 1")
                self._refuse_newer()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: unreadable ledger ({exc})") from None
            return
        #: Opened from a folder this process cannot write (an archive): read as an unchanging file.
        self.read_only = not create and not os.access(self.path.parent, os.W_OK)
        if self.read_only:
            try:
                self.conn = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True, isolation_level=None,
                                            check_same_thread=False)
                self.conn.execute("SELECT 1 FROM runs LIMIT 1")
                self._refuse_newer()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: unreadable ledger ({exc})") from None
            return
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA busy_timeout=30000")
            # Before anything is written (the journal mode is written into the file, and so are
            # the upgrade's steps): a newer benchlab's ledger is left exactly as it was.
            self._refuse_newer()
            self.conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a crashed process in WAL mode (only an OS crash can
            # lose the last commits), and much faster than FULL.
            self.conn.execute("PRAGMA synchronous=NORMAL")
            if create:
                self.conn.executescript(TABLES)
                upgrade(self.conn)
                self._set_default_meta()
                # Every step is applied now: the ledger is at this benchlab's version.
                self.conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                                  (json.dumps(SCHEMA_VERSION),))
            else:
                self.conn.execute("SELECT 1 FROM runs LIMIT 1")
        except sqlite3.DatabaseError as exc:
            if is_disk_full(exc):
                raise disk_full(self.path.parent) from None
            raise StoreError(f"{self.path}: unreadable ledger ({exc}); `benchlab collect --rebuild "
                             f"{self.path.parent}` recreates it from the run directories") from None

    @classmethod
    def open(cls, results: Path | str, *, read_only: bool | None = None) -> Self:
        """The ledger of a results folder; ``read_only`` (default: True inside
        :func:`read_only_ledgers`, else False) opens it so that this connection can never write."""
        return cls(find_db(results), read_only=read_only)

    @classmethod
    def create(cls, results_dir: Path | str) -> Self:
        results_dir = Path(results_dir)
        results_dir.mkdir(parents=True, exist_ok=True)
        return cls(results_dir / DB_NAME, create=True)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a transaction opened inside another joins it (one commit)."""
        if self.conn.in_transaction:
            yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            if self.conn.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _refuse_newer(self) -> None:
        """Raise :class:`~benchlab.errors.NewerLedger` when the ledger's schema version is above
        this benchlab's (a ledger without one, or without a meta table yet, is not newer)."""
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:  # no meta table: a new file, or not a ledger at all
            return
        try:
            schema = int(json.loads(row[0])) if row is not None else 0
        except (TypeError, ValueError):
            return  # not a number any release wrote: the records' own checks speak about it
        if schema > SCHEMA_VERSION:
            self.conn.close()
            raise NewerLedger(self.path, schema)

    def _set_default_meta(self) -> None:
        import uuid

        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                          (json.dumps(SCHEMA_VERSION),))
        # Tells this ledger from a copy of another put in its place (see LedgerGuard).
        self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('ledger_id', ?)", (json.dumps(uuid.uuid4().hex),))

    # ------------------------------------------------------------------ the file

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file and empty it."""
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def as_single_file(self) -> None:
        """Leave WAL mode: the database is one self-contained file from now on (to be renamed)."""
        self.conn.execute("PRAGMA journal_mode=DELETE")
