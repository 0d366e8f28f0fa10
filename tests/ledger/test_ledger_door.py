"""SQLite's errors leave the ledger package as LedgerError (ledger/door.py): a caller outside it
catches one benchlab error, while the package's own code still sees sqlite3's."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from benchlab.errors import LedgerError, StoreError
from benchlab.ledger import DB_NAME, LedgerWatch, Store, has_attempts, is_disk_full


def _ledger(folder: Path) -> Path:
    with Store.create(folder) as store:
        store._set_meta(name="tiny")
    return folder


def test_a_damaged_ledger_is_refused_with_the_ledgers_error_carrying_sqlites(tmp_path: Path):
    (tmp_path / DB_NAME).write_bytes(b"not a database, " * 256)
    with pytest.raises(StoreError, match="unreadable ledger .file is not a database.; `benchlab collect --rebuild"):
        Store.open(tmp_path)  # opening says so in its own words, as it did
    with pytest.raises(LedgerError, match="not a database") as raised:
        has_attempts(tmp_path / DB_NAME)
    assert isinstance(raised.value, StoreError)
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)
    assert raised.value.code == sqlite3.SQLITE_NOTADB
    with pytest.raises(LedgerError, match="not a database"):
        LedgerWatch(tmp_path / DB_NAME).data_version()


def test_a_method_a_generator_and_a_transaction_translate_at_the_door(tmp_path: Path):
    folder = _ledger(tmp_path)
    with Store.open(folder) as store:
        store.conn.execute("DROP TABLE series")
        with pytest.raises(LedgerError, match="no such table"):
            list(store.series_rows())  # raised at the first row, after the call returned
        store.conn.execute("DROP TABLE runs")
        with pytest.raises(LedgerError, match="no such table"):
            store.counts()
        with pytest.raises(LedgerError, match="no such table"):
            with store.transaction():
                store.counts()


def test_the_packages_own_code_still_sees_sqlites_errors(tmp_path: Path):
    # A private member is inside the door: the package's own `except sqlite3...` keeps working.
    folder = _ledger(tmp_path)
    with Store.open(folder) as store:
        store.conn.execute("DROP TABLE meta")
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            store._set_meta(name="again")


def test_a_full_disk_is_recognised_from_the_translated_error_and_it_pickles():
    full = LedgerError("database or disk is full", sqlite3.SQLITE_FULL)
    assert is_disk_full(full) and not is_disk_full(LedgerError("database is locked", sqlite3.SQLITE_BUSY))
    again = pickle.loads(pickle.dumps(full))
    assert type(again) is LedgerError and str(again) == str(full) and again.code == sqlite3.SQLITE_FULL
