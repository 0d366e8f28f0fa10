"""The ledger's file format: its name, its schema version and the tables as first written.

Tables::

    meta      key -> value (JSON): the benchmark's name, metrics, baseline, targets, ...
    runs      one row per run id: coordinates, params, command, status, whether current
    attempts  one row per launch of a run: status, exit code, signal, times, host, pid,
              process group, process start time, GPUs, failure class, error, log tail,
              GPU use (mean and max utilisation of its devices, peak memory of its processes)
    metrics   final scalars of a completed run (run_id, metric) -> value
    series    step series of a completed run (run_id, metric) -> steps, values (float64 blobs)
    spec_runs the run ids of the spec as ``benchlab run`` last ran it: the runs "in the spec"
    code      each state of the code under test seen at a launch (git commit, diff hash)
    attempt_code  attempt id -> the code state it was launched with

A new ledger is created with :data:`TABLES` and then every step of
:mod:`benchlab.ledger.migrations`, the same steps that bring an older ledger up to date, so
each table and column is written in one place.
"""

from __future__ import annotations

from typing import Final

from benchlab.names.results_files import LEDGER_FILE

#: The ledger's file in a results folder (spelt in ``results_files.py`` with the folder's others).
DB_NAME: Final = LEDGER_FILE

#: The version written into a ledger's ``meta`` (``schema_version``): one more than the number of
#: the last step of ``migrations.py`` (a test checks it), so a ledger a newer benchlab has brought
#: further says so, and this one refuses it rather than misread or overwrite what it cannot know.
#: Ledgers written before the number moved with the steps say 1; they are upgraded as before.
SCHEMA_VERSION = 7

#: The tables of the first ledgers; everything added since is a step of ``migrations.py``.
TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, name TEXT NOT NULL, task TEXT NOT NULL, config TEXT NOT NULL,
    seed INTEGER NOT NULL, params TEXT NOT NULL, command TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', current INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL, updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_coords ON runs (task, config, seed);
CREATE TABLE IF NOT EXISTS attempts (
    attempt_id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL REFERENCES runs(run_id),
    number INTEGER NOT NULL, status TEXT NOT NULL, exit_code INTEGER, signal INTEGER,
    started REAL NOT NULL, ended REAL, host TEXT, node TEXT, pid INTEGER, pgid INTEGER,
    proc_start REAL, gpus TEXT, failure_class TEXT, error TEXT, log_tail TEXT
);
CREATE INDEX IF NOT EXISTS attempts_run ON attempts (run_id);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL, metric TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, metric)
);
CREATE TABLE IF NOT EXISTS series (
    run_id TEXT NOT NULL, metric TEXT NOT NULL, steps BLOB NOT NULL, vals BLOB NOT NULL,
    PRIMARY KEY (run_id, metric)
);
"""
