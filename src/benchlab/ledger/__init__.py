"""The ledger of a results folder: one SQLite file, reached only through this package.

Every SQL statement on a results folder's ledger is written in this package; the rest of
benchlab reads and writes the typed records below through :class:`Store`. Its parts:

- ``schema.py``: the file's name, its schema version and the tables as first written;
- ``migrations.py``: the numbered steps that bring an older ledger up to date (and make a new one);
- ``records.py``: the typed records and the run states (plain data, no database);
- ``connection.py``: opening a ledger (to write, or read-only) and its transactions;
- ``meta.py``: the records kept in the ``meta`` table (the benchmark, versions, hardware, ...);
- ``store.py``: :class:`Store`, built on both: runs, attempts, metrics and what readers ask for;
- ``plan.py``: which runs a sweep launches, and recording which runs are in the spec;
- ``files.py``, ``guard.py``, ``lock.py``: the ledger as a file in its folder (watching it, a
  full disk, backups, noticing it was replaced, the folder's lock).

Import from ``benchlab.ledger``: the modules inside are its own business.
"""

from __future__ import annotations

from benchlab.ledger.connection import find_db, read_only_ledgers
from benchlab.ledger.door import guard as _guard
from benchlab.ledger.files import LedgerWatch, disk_full, has_attempts, is_disk_full, ledger_backups
from benchlab.ledger.guard import LedgerGuard
from benchlab.ledger.lock import LOCK_NAME, REBUILDING, ResultsLock, lock_holder, rebuild_leftovers
from benchlab.ledger.plan import PLAN_STEP_RUNS, PlanRecorder, ToDo, plan_digest, runs_to_do
from benchlab.ledger.records import (
    COMPLETED,
    CPU_BOUND_BELOW_PCT,
    FAILED,
    INTERRUPTED,
    PARTIAL_NOTE_PREFIX,
    PENDING,
    PRUNED,
    REGISTRATION_KEY,
    RUNNING,
    TO_RUN_STATES,
    AnalysisPlan,
    AttemptRecord,
    AttemptTimes,
    CodeState,
    CurveName,
    DatasetSum,
    FlaggedPair,
    GpuUse,
    HostRecord,
    OpenRun,
    PartialAttempt,
    Placement,
    PlanProgress,
    Registration,
    RunRecord,
    RunSeries,
    RunState,
    SearchRecord,
    SeedRun,
    SeedSeries,
    SequentialDesignRecord,
    SequentialPairRecord,
    SequentialRecord,
    Status,
    VersionRecord,
)
from benchlab.ledger.schema import DB_NAME, SCHEMA_VERSION
from benchlab.ledger.store import Store

__all__ = [
    "COMPLETED", "CPU_BOUND_BELOW_PCT", "DB_NAME", "FAILED", "INTERRUPTED", "LOCK_NAME", "PARTIAL_NOTE_PREFIX",
    "PENDING", "PLAN_STEP_RUNS", "PRUNED", "REBUILDING", "REGISTRATION_KEY", "RUNNING", "SCHEMA_VERSION",
    "TO_RUN_STATES", "AnalysisPlan", "AttemptRecord", "AttemptTimes", "CodeState", "CurveName", "DatasetSum",
    "FlaggedPair", "GpuUse", "HostRecord", "LedgerGuard", "LedgerWatch", "OpenRun", "PartialAttempt", "Placement",
    "PlanProgress", "PlanRecorder", "Registration", "ResultsLock", "RunRecord", "RunSeries", "RunState",
    "SearchRecord", "SeedRun", "SeedSeries",
    "SequentialDesignRecord", "SequentialPairRecord", "SequentialRecord", "Status", "Store", "ToDo",
    "VersionRecord", "disk_full", "find_db",
    "has_attempts", "is_disk_full", "ledger_backups", "lock_holder", "plan_digest", "read_only_ledgers",
    "rebuild_leftovers", "runs_to_do",
]

# What SQLite raises leaves the package as a LedgerError: every exported function and class is
# guarded at this door (door.py), so no module outside the ledger catches sqlite3's errors.
for _name in __all__:
    globals()[_name] = _guard(globals()[_name])
del _name
