"""The sweep's watch over its own ledger must never weaken the ledger.

SQLite's locks are POSIX locks, held per process: closing *any* descriptor of the file in the
sweep's process drops them all. A reader in another process (``benchlab status``, the dashboard,
the sqlite3 shell) that then closes its connection believes it is the last one, folds the
write-ahead log into the file and deletes it; the sweep's later commits go to the deleted log
and are lost.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchlab.ledger import LedgerGuard, Store

READ = ("import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1])\n"
        "row = c.execute(\"SELECT value FROM meta WHERE key = 'probe'\").fetchone()\n"
        "c.close()\n"
        "print(row[0] if row else 'none')\n")


def read_probe(db: Path) -> str:
    """What another process sees, opening the ledger read-write and closing it as tools do."""
    return subprocess.run([sys.executable, "-c", READ, str(db)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_checks_of_the_ledger_keep_the_sweeps_locks_so_its_commits_stay_visible(tmp_path):
    store = Store.create(tmp_path)
    db = store.path
    guard = LedgerGuard(store, every_s=0.0)
    try:
        store._set_meta(probe="first")
        for _ in range(3):
            assert guard.check(force=True) is None
            assert read_probe(db) == '"first"'
        # The log is still the sweep's: no reader took the file for its own and removed it.
        assert Path(f"{db}-wal").exists()
        store._set_meta(probe="second")
        assert read_probe(db) == '"second"'
    finally:
        store.close()
        guard.close()


def test_a_checkpoint_held_back_by_a_reader_is_not_taken_for_a_truncated_ledger(tmp_path):
    """A reader's snapshot (the dashboard's, `benchlab status`'s) lets a checkpoint fold only the
    log's older frames into the file: page 1 with the grown page count is copied, the last page,
    changed again since the snapshot, stays in the log, and the file is shorter than its header
    says. The ledger is whole; a sweep watched by the dashboard used to stop here."""
    import sqlite3

    store = Store.create(tmp_path)
    db = store.path
    store.conn.execute("CREATE TABLE scratch (x TEXT)")
    guard = LedgerGuard(store, every_s=0.0)
    reader = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        for _ in range(40):  # the ledger grows by a few pages, a commit each
            store.conn.execute("INSERT INTO scratch VALUES (?)", ("x" * 500,))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM scratch").fetchone()
        store.conn.execute("INSERT INTO scratch VALUES ('y')")  # the last page again, page 1 unchanged
        _, frames, folded = store.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert 0 < folded < frames
        header = db.read_bytes()[:100]
        assert db.stat().st_size < int.from_bytes(header[28:32], "big") * int.from_bytes(header[16:18], "big")
        assert guard.check(force=True) is None
        reader.execute("COMMIT")
        store.checkpoint()
        assert guard.check(force=True) is None
    finally:
        reader.close()
        store.close()
        guard.close()


def test_a_ledger_cut_short_under_the_sweep_is_still_noticed_with_its_log_in_use(tmp_path):
    store = Store.create(tmp_path)
    db = store.path
    guard = LedgerGuard(store, every_s=0.0)
    try:
        store._set_meta(probe="x" * 20_000)
        store.checkpoint()
        store._set_meta(other="y")  # the log holds a frame again, of a page the cut does not reach
        with open(db, "r+b") as fh:
            fh.truncate(db.stat().st_size // 2)
        assert "truncated" in (guard.check(force=True) or "")
    finally:
        store.close()
        guard.close()
