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
