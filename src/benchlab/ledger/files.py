"""The ledger as a file beside others in a results folder: reading it without writing, watching
it change, a full disk, the backups a rebuild keeps."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from benchlab.errors import DiskFull, LedgerError
from benchlab.ledger.records import RUNNING
from benchlab.ledger.schema import DB_NAME


def has_attempts(db: Path) -> bool:
    """Whether the ledger file ``db`` holds any attempt, read without writing anything (a folder this
    process cannot write, an archived one, cannot hold the WAL index a read-only open needs: it is
    opened as immutable). Raises ``LedgerError`` for a file that is no readable ledger."""
    how = "mode=ro" if os.access(db.parent, os.W_OK) else "immutable=1"
    conn = sqlite3.connect(f"file:{db}?{how}", uri=True, timeout=30)
    try:
        (attempts,) = conn.execute("SELECT COUNT(*) FROM (SELECT 1 FROM attempts LIMIT 1)").fetchone()
    finally:
        conn.close()
    return bool(attempts)


class LedgerWatch:
    """A read-only connection of its own to a ledger, kept open for cheap checks of whether it
    changed (the dashboard polls it): ``LedgerError`` where the file is being replaced or locked."""

    def __init__(self, db: Path):
        self.path = db
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                         isolation_level=None, check_same_thread=False, timeout=5)
        return self._conn

    def data_version(self) -> int:
        """SQLite's ``data_version``: it changes when another connection commits."""
        (version,) = self._connection().execute("PRAGMA data_version").fetchone()
        return int(version)

    def running_ids(self) -> list[str]:
        """The ids of the runs on record as running."""
        return [r for (r,) in self._connection().execute("SELECT run_id FROM runs WHERE status = ?", (RUNNING,))]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or a quota) is full: ENOSPC/EDQUOT, or SQLite's SQLITE_FULL."""
    import errno

    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, LedgerError):  # SQLite's error, translated at the ledger's door
        return exc.code == sqlite3.SQLITE_FULL
    return isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def disk_full(folder: Path) -> DiskFull:
    """The one message for a full disk: which folder, how much is free, and that nothing is lost."""
    import shutil

    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    return DiskFull(folder, f"no space left on the disk of {folder} ({free}): benchlab stopped; what finished "
                            "is recorded. Free some space and run the same command again to finish.")


def ledger_backups(folder: Path | str) -> list[Path]:
    """The ledger backups ``benchlab collect --rebuild`` kept in a results folder, oldest first."""
    return sorted((p for p in Path(folder).glob(f"{DB_NAME}.bak-*") if not p.name.endswith(("-wal", "-shm"))),
                  key=lambda p: (p.stat().st_mtime, p.name))
