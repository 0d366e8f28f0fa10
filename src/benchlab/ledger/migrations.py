"""Bringing a ledger written by an older benchlab up to date, as ordered, numbered steps.

A ledger is never rewritten: each step adds what a later benchlab needs (a table, a column with
a default) and is applied only where it is missing, so a ledger of any age, one made by the
current benchlab included, ends at the same schema and keeps every row. A new ledger is
:data:`benchlab.ledger.schema.TABLES` followed by every step, so each table and column is
written here once. Steps run when a ledger is opened to be written (a sweep, a rebuild);
readers of an older ledger opened read-only see what the steps would add as missing (None).

To change the schema, append a step: never edit or reorder one that shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


@dataclass(frozen=True)
class Migration:
    """One step: ``number`` (its place in the order), what it adds, whether a ledger has it, and
    how to add it."""

    number: int
    adds: str
    is_applied: Callable[[sqlite3.Connection], bool]
    apply: Callable[[sqlite3.Connection], None]


def _table(name: str, ddl: str) -> tuple[Callable[[sqlite3.Connection], bool], Callable[[sqlite3.Connection], None]]:
    def apply(conn: sqlite3.Connection) -> None:
        conn.executescript(ddl)

    return (lambda conn: name in _tables(conn)), apply


def _column(table: str, column: str, decl: str) -> tuple[Callable[[sqlite3.Connection], bool],
                                                         Callable[[sqlite3.Connection], None]]:
    def apply(conn: sqlite3.Connection) -> None:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")

    return (lambda conn: column in _columns(conn, table)), apply


def _gpu_use_columns() -> tuple[Callable[[sqlite3.Connection], bool], Callable[[sqlite3.Connection], None]]:
    added = (("gpu_util_mean", "REAL"), ("gpu_util_max", "REAL"), ("gpu_mem_peak_mib", "INTEGER"))

    def apply(conn: sqlite3.Connection) -> None:
        have = _columns(conn, "attempts")
        for column, decl in added:
            if column not in have:
                conn.execute(f"ALTER TABLE attempts ADD COLUMN {column} {decl}")

    return (lambda conn: {c for c, _ in added} <= _columns(conn, "attempts")), apply


#: Every step, in the order they are applied.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "spec_runs: which runs are in the spec",
              *_table("spec_runs", "CREATE TABLE IF NOT EXISTS spec_runs "
                                   "(run_id TEXT PRIMARY KEY, position INTEGER NOT NULL);")),
    Migration(2, "code and attempt_code: the code under test at each launch",
              *_table("attempt_code", """
CREATE TABLE IF NOT EXISTS code (
    code_id INTEGER PRIMARY KEY AUTOINCREMENT, git_commit TEXT, dirty INTEGER, diff_sha256 TEXT,
    UNIQUE (git_commit, dirty, diff_sha256)
);
CREATE TABLE IF NOT EXISTS attempt_code (attempt_id INTEGER PRIMARY KEY, code_id INTEGER NOT NULL);
""")),
    Migration(3, "placements: where a cluster scheduler holds an attempt",
              *_table("placements", """
CREATE TABLE IF NOT EXISTS placements (
    attempt_id INTEGER PRIMARY KEY, job_id TEXT NOT NULL, state TEXT, reason TEXT, updated REAL
);
""")),
    Migration(4, "runs.budget_from: the attempt from which failures count against the retry budget",
              *_column("runs", "budget_from", "INTEGER NOT NULL DEFAULT 1")),
    Migration(5, "code.tree_sha256: the tracked files' contents at the commit",
              *_column("code", "tree_sha256", "TEXT")),
    Migration(6, "attempts' GPU use: mean and max utilisation, peak memory",
              *_gpu_use_columns()),
)


def pending(conn: sqlite3.Connection) -> list[Migration]:
    """The steps a ledger lacks, in order."""
    return [step for step in MIGRATIONS if not step.is_applied(conn)]


def upgrade(conn: sqlite3.Connection) -> list[int]:
    """Apply the steps ``conn``'s ledger lacks, in order; the numbers of those applied."""
    done = []
    for step in pending(conn):
        step.apply(conn)
        done.append(step.number)
    return done
