"""The results folder's lock: one ``benchlab run`` (or rebuild) at a time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchlab.errors import ResultsNotFound
from benchlab.ledger.files import disk_full, is_disk_full
from benchlab.ledger.schema import DB_NAME
from benchlab.names.results_files import LOCK_FILE as LOCK_NAME

#: Suffix of a ledger that ``collect --rebuild`` is building (and of SQLite's files beside it):
#: never read as a ledger.
REBUILDING = ".rebuilding"


def rebuild_leftovers(folder: Path | str) -> list[Path]:
    """The files of a ledger being rebuilt in ``folder``: a rebuild's work, or what a killed one left."""
    return sorted(Path(folder).glob(f"{DB_NAME}{REBUILDING}*"))


def lock_holder(folder: Path | str) -> str | None:
    """Who holds the folder's lock now, as its holder wrote it ("benchlab run, pid N on host since
    HH:MM:SS"), or None. Told from the holder's pid on this host, without touching the lock
    (even a shared lock, held for an instant, would turn a sweep starting then away)."""
    import re
    import socket

    import psutil

    try:
        text = (Path(folder) / LOCK_NAME).read_text().strip()
    except OSError:
        return None
    found = re.search(r"pid (\d+) on (\S+)", text)
    if found is None or found.group(2) != socket.gethostname():
        return None
    return text if psutil.pid_exists(int(found.group(1))) else None


class ResultsLock:
    """An exclusive lock on a results folder, held by one ``benchlab run`` at a time.

    It is an ``flock`` on a file, so the kernel releases it when the holder dies,
    even by ``kill -9``: a crashed sweep never leaves the folder locked.
    """

    def __init__(self, results_dir: Path, purpose: str = "benchlab run", name: str = LOCK_NAME):
        self.path = Path(results_dir) / name
        self.purpose = purpose
        self._fh: Any = None

    def acquire(self) -> None:
        import fcntl
        import os
        import socket

        from benchlab.errors import ResultsLocked, UserError

        folder = self.path.parent
        if folder.exists() and not folder.is_dir():
            raise ResultsNotFound(folder, f"{folder} is a file, not a results folder; name a folder with "
                                          "--results (it is created if missing)")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+")  # noqa: SIM115 - held for the sweep's lifetime
        except OSError as exc:
            if is_disk_full(exc):
                raise disk_full(folder) from None
            raise UserError(f"cannot write into the results folder {folder} ({exc.strerror or exc}); "
                            "it may be read-only (an archive): name another with --results") from None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown process"
            fh.close()
            raise ResultsLocked(self.path.parent, holder) from None
        # Holding the lock, this process knows no rebuild is running: what one left is removed.
        for stale in rebuild_leftovers(folder):
            stale.unlink(missing_ok=True)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{self.purpose}, pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> ResultsLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
