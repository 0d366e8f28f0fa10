"""An older ledger is brought up to date by the numbered steps of benchlab.ledger.migrations,
keeping every row; a new ledger and an upgraded one end with the same tables and columns."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from benchlab.ledger import DB_NAME, FAILED, Store
from benchlab.ledger.migrations import MIGRATIONS, pending, upgrade

#: The tables as the first ledgers were written (before the plan, code states, placements,
#: retry budgets and GPU use were recorded), spelt here as such a file holds them.
FIRST_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, name TEXT NOT NULL, task TEXT NOT NULL, config TEXT NOT NULL,
    seed INTEGER NOT NULL, params TEXT NOT NULL, command TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', current INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL, updated REAL NOT NULL
);
CREATE TABLE attempts (
    attempt_id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id),
    number INTEGER NOT NULL, status TEXT NOT NULL, exit_code INTEGER, signal INTEGER,
    started REAL NOT NULL, ended REAL, host TEXT, node TEXT, pid INTEGER, pgid INTEGER,
    proc_start REAL, gpus TEXT, failure_class TEXT, error TEXT, log_tail TEXT
);
CREATE TABLE metrics (run_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, metric));
CREATE TABLE series (
    run_id TEXT NOT NULL, metric TEXT NOT NULL, steps BLOB NOT NULL, vals BLOB NOT NULL,
    PRIMARY KEY (run_id, metric)
);
"""


def _first_schema_ledger(folder: Path) -> Path:
    """A results folder whose ledger an early benchlab wrote: two runs of one task, one completed
    with a score and a curve, one failed twice."""
    folder.mkdir(parents=True)
    db = folder / DB_NAME
    conn = sqlite3.connect(db)
    conn.executescript(FIRST_SCHEMA)
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"), ("name", json.dumps("old"))])
    conn.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
        ("r1", "t/a/s0", "t", "a", 0, "{}", "python run.py", "completed", 1, 10.0, 20.0),
        ("r2", "t/a/s1", "t", "a", 1, '{"lr": 0.1}', "python run.py", "failed", 1, 10.0, 30.0)])
    conn.executemany(
        "INSERT INTO attempts (run_id, number, status, exit_code, started, ended, host, failure_class, error)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            ("r1", 1, "completed", 0, 11.0, 19.0, "h", None, None),
            ("r2", 1, "failed", 1, 12.0, 14.0, "h", "crash", "boom"),
            ("r2", 2, "failed", 1, 15.0, 17.0, "h", "crash", "boom")])
    conn.execute("INSERT INTO metrics VALUES ('r1', 'score', 0.75)")
    conn.execute("INSERT INTO series VALUES ('r1', 'score', ?, ?)",
                 (np.array([0.0, 5.0]).astype("<f8").tobytes(), np.array([0.25, 0.75]).astype("<f8").tobytes()))
    conn.commit()
    conn.close()
    return db


def _shape(db: Path) -> dict[str, list[tuple[str, str, int, object]]]:
    """Each table's columns (name, type, not null, default), the way SQLite reports them."""
    conn = sqlite3.connect(db)
    try:
        tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                             " AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        return {t: [(r[1], r[2], r[3], r[4]) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


def test_steps_are_numbered_in_order_from_one():
    assert [step.number for step in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


def test_a_first_schema_ledger_is_upgraded_when_a_sweep_opens_it_and_keeps_its_rows(tmp_path: Path):
    db = _first_schema_ledger(tmp_path / "old")
    conn = sqlite3.connect(db)
    assert [step.number for step in pending(conn)] == [1, 2, 3, 4, 5, 6]
    conn.close()

    with Store.create(tmp_path / "old") as store:  # what `benchlab run` does with its folder
        assert pending(store.conn) == []
        runs = {r.run_id: r for r in store.runs()}
        assert {rid: (r.name, r.status, r.params) for rid, r in runs.items()} == {
            "r1": ("t/a/s0", "completed", {}), "r2": ("t/a/s1", "failed", {"lr": 0.1})}
        assert store.metric_rows() == [("r1", "t", "a", 0, "score", 0.75)]
        (series,) = store.completed_series("t", "score")
        assert series.steps.tolist() == [0.0, 5.0] and series.values.tolist() == [0.25, 0.75]
        attempts = store.attempts()
        assert [(a.run_id, a.number, a.status) for a in attempts] == [
            ("r1", 1, "completed"), ("r2", 1, FAILED), ("r2", 2, FAILED)]
        assert all(a.gpu_use is None for a in attempts)
        # The retry budget counts from the first attempt (budget_from's default): both failures.
        assert store.charged_failures() == {"r2": {"crash": 2}}
        assert store._meta()["name"] == "old"

    fresh = tmp_path / "new"
    Store.create(fresh).close()
    assert _shape(db) == _shape(fresh / DB_NAME)


def test_upgrading_applies_only_the_missing_steps_and_twice_is_once(tmp_path: Path):
    db = _first_schema_ledger(tmp_path / "old")
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for step in MIGRATIONS[:3]:  # a ledger from when the plan tables existed, nothing after
            step.apply(conn)
        assert upgrade(conn) == [4, 5, 6]
        assert upgrade(conn) == []
        assert {"gpu_util_mean", "gpu_util_max", "gpu_mem_peak_mib"} <= {
            r[1] for r in conn.execute("PRAGMA table_info(attempts)")}
    finally:
        conn.close()


def test_an_old_ledger_opened_read_only_is_read_as_it_is(tmp_path: Path):
    db = _first_schema_ledger(tmp_path / "old")
    with Store.open(tmp_path / "old", read_only=True) as store:
        assert [r.run_id for r in store.runs()] == ["r1", "r2"]
        assert [a.gpu_use for a in store.attempts()] == [None, None, None]
        assert store.placements() == {} and store.completed_code(["r1"]) == {}
    conn = sqlite3.connect(db)
    try:
        assert len(pending(conn)) == len(MIGRATIONS)  # nothing was written
    finally:
        conn.close()
