"""Noticing that the ledger a sweep writes to was deleted, replaced or overwritten under it."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.ledger.store import Store


_SQLITE_MAGIC = b"SQLite format 3\0"


def _page_size_and_count(header: bytes) -> tuple[int, int]:
    page_size = int.from_bytes(header[16:18], "big")
    return (65536 if page_size == 1 else page_size), int.from_bytes(header[28:32], "big")


def _header_problem(header: bytes, size: int) -> str | None:
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return "is no longer a SQLite database (truncated or overwritten)"
    page_size, pages = _page_size_and_count(header)
    if size < page_size * pages:
        return f"was truncated ({size} of {page_size * pages} bytes left)"
    return None


def _short_but_logged(header: bytes, size: int, wal: Path) -> bool:
    """Whether the file is shorter than its header says only because its last pages are still
    in the write-ahead log.

    A checkpoint held back by a reader's snapshot (the dashboard's, ``benchlab status``'s)
    copies into the file the newest frames the snapshot allows: page 1, with the grown page
    count, but not a last page changed again since the snapshot, whose newest frame is newer.
    The ledger is whole; the file alone reads as damaged until a checkpoint completes. A frame
    belongs to the log as it is now when it carries the salts of the log's header (a log that
    started over keeps its old frames behind new salts)."""
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return False
    page_size, pages = _page_size_and_count(header)
    need = set(range(size // page_size + 1, pages + 1))
    try:
        with open(wal, "rb") as fh:
            head = fh.read(32)
            if len(head) < 32 or int.from_bytes(head[8:12], "big") != page_size:
                return False
            salts = head[16:24]
            at = 32
            while need:
                fh.seek(at)
                frame = fh.read(24)
                if len(frame) < 24 or frame[8:16] != salts:
                    break
                need.discard(int.from_bytes(frame[:4], "big"))
                at += 24 + page_size
    except OSError:
        return False
    return not need


class LedgerGuard:
    """Notices that the ledger a sweep writes to is no longer the file at its path.

    A sweep's connection keeps writing into the file it opened, even after that file
    was deleted, renamed to a backup or overwritten; this compares the file at the
    path with the one opened (device and inode), its header with its size, and the
    ``ledger_id`` stored inside it with the one read at the start.
    """

    def __init__(self, store: Store, every_s: float = 1.0):
        self.path = store.path
        # One descriptor, held until the sweep's connection is closed: closing any descriptor of
        # the ledger in this process would drop every POSIX lock SQLite holds on it, and a reader
        # in another process could then take the file for its own and fold the write-ahead log
        # away under the sweep, whose later commits would be lost. See ``close``.
        self._fd = os.open(self.path, os.O_RDONLY)
        st = os.fstat(self._fd)
        self._key = (st.st_dev, st.st_ino)
        # The file alone is read below (immutable, write-ahead log left out). After a crash
        # mid-checkpoint (a full disk, a kill) the file is torn until the log is folded back in,
        # and the id may still be only in the log: fold it in first. The sweep holds the results
        # lock, so no other writer is in the way.
        store.checkpoint()
        self._identity = self._stored_identity()
        self.every_s = every_s
        self._next = 0.0

    def _stored_identity(self) -> str | None:
        """The ``ledger_id`` in the database file itself, write-ahead log left out: a file copied
        over the ledger shows there, whatever the log still holds."""
        conn = sqlite3.connect(f"file:{self.path}?immutable=1", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'ledger_id'").fetchone()
        except sqlite3.OperationalError:
            return None  # no meta table in the file yet
        finally:
            conn.close()
        return None if row is None else str(json.loads(row[0]))

    def check(self, *, force: bool = False) -> str | None:
        """What happened to the ledger, or None; between ``every_s`` apart it answers None at once."""
        now = time.monotonic()
        if not force and now < self._next:
            return None
        self._next = now + self.every_s
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        if (st.st_dev, st.st_ino) != self._key:
            return "was replaced by another file"
        try:
            header, size = os.pread(self._fd, 100, 0), os.fstat(self._fd).st_size
            problem = _header_problem(header, size)
            if problem is not None and _short_but_logged(header, size, self.path.with_name(f"{self.path.name}-wal")):
                return None  # the file alone cannot be read until a checkpoint completes: look again next time
        except OSError as exc:
            problem = f"cannot be read ({exc.strerror or exc})"
        if problem is not None:
            return problem
        try:
            identity = self._stored_identity()
        except sqlite3.DatabaseError:
            # Our own connection may be folding the log into the file at this instant: look again.
            time.sleep(0.2)
            try:
                identity = self._stored_identity()
            except sqlite3.DatabaseError as exc:
                return f"cannot be read ({exc})"
        if self._identity is not None and identity != self._identity:
            return "was overwritten by another ledger"
        return None

    def close(self) -> None:
        """Let the ledger go; only after the sweep's own connection is closed (see ``__init__``)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
