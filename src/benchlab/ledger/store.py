"""The ledger: one SQLite file (WAL) per results folder, the single source of truth for run state.

A run's metrics are written in the same transaction that marks it completed,
so a crash can never leave a run half-recorded, and re-collecting replaces
rather than adds. ``runs.current`` is 0 for a run whose coordinates
(task, config, seed) were taken over by a changed spec. ``runs.budget_from`` is the attempt number
from which failures count against the run's retry budget: 1, until
``--rerun-failed`` grants a new budget. Which runs are "in the spec": see
:mod:`benchlab.ledger.plan`; the tables: :mod:`benchlab.ledger.schema`.

Opening a ledger to write it (``create=True``) brings an older file up to date
(:func:`benchlab.ledger.migrations.upgrade`); readers of an older ledger see the columns added
since as None.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from benchlab.ledger.meta import MetaRecords
from benchlab.ledger.plan import PLAN_STEP_RUNS, PlanRecorder, _ParamsText
from benchlab.ledger.records import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    PARTIAL_NOTE_PREFIX,
    PENDING,
    PLAN_DIGEST,
    PLAN_RECORDING,
    RUNNING,
    AttemptRecord,
    AttemptTimes,
    CodeState,
    CurveName,
    GpuUse,
    OpenRun,
    PartialAttempt,
    Placement,
    PlanProgress,
    RunRecord,
    RunSeries,
    RunState,
    SeedRun,
    SeedSeries,
)

if TYPE_CHECKING:
    import numpy as np

    from benchlab.plan import Run

_ATTEMPT_COLUMNS = ("attempt_id, run_id, number, status, exit_code, signal, started, ended, host, node, pid,"
                    " pgid, proc_start, gpus, failure_class, error, log_tail")
_GPU_USE_COLUMNS = ("gpu_util_mean", "gpu_util_max", "gpu_mem_peak_mib")
#: What :meth:`Store.content_digest` hashes, table by table, each in a stable order.
_DIGESTED = (
    ("meta", "SELECT key, value FROM meta ORDER BY key"),
    ("runs", "SELECT run_id, task, config, seed, status, current FROM runs ORDER BY rowid"),
    ("spec_runs", "SELECT run_id, position FROM spec_runs ORDER BY position, run_id"),
    ("metrics", "SELECT run_id, metric, value FROM metrics ORDER BY rowid"),
    ("attempts", "SELECT attempt_id, run_id, number, status, exit_code, failure_class, error FROM attempts"
                 " ORDER BY attempt_id"),
)


class Store(MetaRecords):
    """The SQLite ledger of one results folder."""

    # ------------------------------------------------------------------ runs

    def register(self, runs: Iterable[Run]) -> None:
        """Record the runs of the current plan; runs they replace (same coordinates) stop being current."""
        now = time.time()
        params = _ParamsText()
        rows = [(r.run_id, r.name, r.task, r.config, r.seed, params(r.params), r.command, now, now) for r in runs]
        with self.transaction() as c:
            c.execute("CREATE TEMP TABLE IF NOT EXISTS plan (run_id TEXT PRIMARY KEY, task TEXT, "
                      "config TEXT, seed INTEGER)")
            c.execute("DELETE FROM plan")
            c.executemany("INSERT INTO plan VALUES (?, ?, ?, ?)", [(r[0], r[2], r[3], r[4]) for r in rows])
            c.executemany(
                "INSERT INTO runs (run_id, name, task, config, seed, params, command, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET current = 1",
                rows)
            c.execute("UPDATE runs SET current = 0 WHERE run_id NOT IN (SELECT run_id FROM plan) AND "
                      "EXISTS (SELECT 1 FROM plan p WHERE p.task = runs.task AND "
                      "p.config = runs.config AND p.seed = runs.seed)")

    def set_plan(self, run_ids: Iterable[str]) -> None:
        """Make ``run_ids`` the runs in the spec, replacing the plan before (one transaction)."""
        with self.transaction() as c:
            c.execute("DELETE FROM spec_runs")
            c.executemany("INSERT OR IGNORE INTO spec_runs VALUES (?, ?)",
                          ((rid, i) for i, rid in enumerate(run_ids)))
            c.execute("DELETE FROM meta WHERE key IN (?, ?)", (PLAN_DIGEST, PLAN_RECORDING))

    def record_plan(self, runs: Sequence[Run], *, step: int | None = None) -> PlanRecorder:
        """Start recording ``runs`` as the plan (what ``register`` and ``set_plan`` do together), a
        step of ``step`` runs at a time (default :data:`PLAN_STEP_RUNS`): see :class:`PlanRecorder`.
        A plan already recorded as it is is not written again."""
        recorder = PlanRecorder(self, runs, PLAN_STEP_RUNS if step is None else step)
        recorder.start()
        return recorder

    def plan_recording(self) -> PlanProgress | None:
        """The plan a sweep is recording, or began recording and stopped part-way (how many runs it
        names, how many are recorded so far, when it started); None when the plan on record is whole."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (PLAN_RECORDING,)).fetchone()
        if row is None:
            return None
        try:
            (recorded,) = self.conn.execute("SELECT COUNT(*) FROM spec_runs_next").fetchone()
        except sqlite3.OperationalError:  # swapped in since the meta row was read
            recorded = None
        found = json.loads(row[0])
        return PlanProgress(int(found["runs"]), recorded, found.get("started"))

    def add_to_plan(self, run_ids: Iterable[str]) -> None:
        """Add ``run_ids`` to the runs in the spec, after those already there (a search adds each
        trial's runs as it asks for the trial)."""
        with self.transaction() as c:
            (start,) = c.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM spec_runs").fetchone()
            c.executemany("INSERT OR IGNORE INTO spec_runs VALUES (?, ?)",
                          ((rid, start + i) for i, rid in enumerate(run_ids)))
            c.execute("DELETE FROM meta WHERE key = ?", (PLAN_DIGEST,))  # no longer the recorded plan

    def has_plan(self) -> bool:
        """Whether a sweep recorded which runs are in the spec (older ledgers have no plan)."""
        try:
            return self.conn.execute("SELECT 1 FROM spec_runs LIMIT 1").fetchone() is not None
        except sqlite3.OperationalError:  # a ledger from before the plan table, opened read-only
            return False

    def _in_spec_sql(self, alias: str = "runs") -> str:
        """An SQL condition on ``alias`` (a row of ``runs``): the run is in the spec (never handed
        out: callers ask for the records they need)."""
        if self.has_plan():
            return f"{alias}.run_id IN (SELECT run_id FROM main.spec_runs)"
        return f"{alias}.current = 1"

    def add_runs(self, runs: Iterable[Run]) -> None:
        """Record runs as they are, current, leaving any run already on record untouched."""
        now = time.time()
        params = _ParamsText()
        with self.transaction() as c:
            c.executemany(
                "INSERT OR IGNORE INTO runs (run_id, name, task, config, seed, params, command, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(r.run_id, r.name, r.task, r.config, r.seed, params(r.params), r.command, now, now) for r in runs])

    def statuses(self, *, pending: bool = True, ids: Collection[str] | None = None) -> dict[str, str]:
        """Run id -> status of every run on record; with ``pending=False``, of the runs that are not
        pending only (a resume of 100,000 runs that just began reads a few rows, not all); with
        ``ids``, of those runs only (those on record)."""
        if ids is not None:
            wanted, found = list(ids), dict[str, str]()
            for i in range(0, len(wanted), 500):  # within SQLite's limit on a statement's parameters
                chunk = wanted[i:i + 500]
                found.update(self.conn.execute(
                    f"SELECT run_id, status FROM runs WHERE run_id IN ({','.join('?' * len(chunk))})", chunk))
            return found if pending else {k: v for k, v in found.items() if v != PENDING.value}
        if pending:
            return dict(self.conn.execute("SELECT run_id, status FROM runs"))
        return dict(self.conn.execute("SELECT run_id, status FROM runs WHERE status != ?", (PENDING.value,)))

    def runs(self, current_only: bool = True) -> list[RunRecord]:
        """The runs in the spec; with ``current_only=False``, every run on record (``in_spec`` tells)."""
        cond = self._in_spec_sql()
        q = f"SELECT run_id, name, task, config, seed, params, command, status, current, {cond} FROM runs"
        if current_only:
            q += f" WHERE {cond}"
        parsed: dict[str, Any] = {}  # the runs of a (task, config) share their params' text: parsed once

        def params(text: str) -> Any:
            found = parsed.get(text)
            if found is None:
                found = parsed[text] = json.loads(text)
            return found

        return [RunRecord(r[0], r[1], r[2], r[3], r[4], params(r[5]), r[6], r[7], bool(r[8]), bool(r[9]))
                for r in self.conn.execute(q + " ORDER BY rowid")]

    def set_status(self, run_id: str, status: str) -> None:
        self.conn.execute("UPDATE runs SET status = ?, updated = ? WHERE run_id = ?",
                          (status, time.time(), run_id))

    # ------------------------------------------------------------------ attempts

    def start_attempt(self, run_id: str, *, host: str, pid: int | None = None,
                      pgid: int | None = None, proc_start: float | None = None,
                      gpus: str | None = None, node: str | None = None,
                      started: float | None = None) -> tuple[int, int]:
        """Record a launch; returns (attempt_id, attempt number)."""
        started = time.time() if started is None else started
        with self.transaction() as c:
            (number,) = c.execute("SELECT COUNT(*) + 1 FROM attempts WHERE run_id = ?",
                                  (run_id,)).fetchone()
            cur = c.execute(
                "INSERT INTO attempts (run_id, number, status, started, host, node, pid, pgid,"
                f" proc_start, gpus) VALUES (?, ?, '{RUNNING}', ?, ?, ?, ?, ?, ?, ?)",
                (run_id, number, started, host, node, pid, pgid, proc_start, gpus))
            c.execute(f"UPDATE runs SET status = '{RUNNING}', updated = ? WHERE run_id = ?",
                      (started, run_id))
        return int(cur.lastrowid or 0), int(number)

    def set_process(self, attempt_id: int, pid: int | None, pgid: int | None, proc_start: float | None,
                    *, gpus: list[int] | None = None) -> None:
        """Record what the backend started: its process (None where it has no local pid) and the
        GPUs it chose."""
        self.conn.execute(
            "UPDATE attempts SET pid = ?, pgid = ?, proc_start = ?, gpus = COALESCE(?, gpus)"
            " WHERE attempt_id = ?",
            (pid, pgid, proc_start, ",".join(map(str, gpus)) if gpus else None, attempt_id))

    def set_placements(self, placements: Iterable[Placement]) -> None:
        """Record what a cluster scheduler says of attempts (job id, state, reason; node and GPUs
        once they run), in one transaction."""
        now = time.time()
        with self.transaction() as c:
            for p in placements:
                c.execute("INSERT INTO placements VALUES (?, ?, ?, ?, ?) ON CONFLICT (attempt_id) DO UPDATE SET"
                          " job_id = excluded.job_id, state = excluded.state, reason = excluded.reason,"
                          " updated = excluded.updated", (p.attempt_id, p.job_id, p.state, p.reason, now))
                if p.node is not None or p.gpus or p.started is not None:
                    c.execute("UPDATE attempts SET node = COALESCE(?, node), gpus = COALESCE(?, gpus),"
                              " started = COALESCE(?, started) WHERE attempt_id = ?",
                              (p.node, ",".join(map(str, p.gpus)) if p.gpus else None, p.started,
                               p.attempt_id))

    def placements(self, attempt_ids: Iterable[int] | None = None) -> dict[int, Placement]:
        """What the scheduler last said of attempts, by attempt id (empty for a ledger that never
        ran on a cluster scheduler)."""
        try:
            rows = self.conn.execute("SELECT p.attempt_id, p.job_id, p.state, p.reason, a.node, a.gpus"
                                     " FROM placements p JOIN attempts a USING (attempt_id)").fetchall()
        except sqlite3.OperationalError:  # an older ledger, opened read-only: no such table
            return {}
        wanted = None if attempt_ids is None else set(attempt_ids)
        return {r[0]: Placement(r[0], r[1], r[2], r[3], r[4],
                                [int(g) for g in r[5].split(",") if g.isdigit()] if r[5] else None)
                for r in rows if wanted is None or r[0] in wanted}

    def finish_attempt(self, attempt_id: int, run_id: str, *, status: str, run_status: str,
                       exit_code: int | None = None, signal: int | None = None,
                       ended: float | None = None, node: str | None = None,
                       failure_class: str | None = None,
                       error: str | None = None, log_tail: str | None = None,
                       metrics: dict[str, float] | None = None,
                       series: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> None:
        """Close an attempt and, in the same transaction, replace the run's metrics.

        ``node`` is where it ran, when only the end tells (a cluster backend)."""
        ended = time.time() if ended is None else ended
        with self.transaction() as c:
            c.execute(
                "UPDATE attempts SET status = ?, exit_code = ?, signal = ?, ended = ?, node = COALESCE(?, node),"
                " failure_class = ?, error = ?, log_tail = ? WHERE attempt_id = ?",
                (status, exit_code, signal, ended, node, failure_class, error, log_tail, attempt_id))
            c.execute("UPDATE runs SET status = ?, updated = ? WHERE run_id = ?",
                      (run_status, ended, run_id))
            if metrics is not None or series is not None:
                self.replace_metrics(run_id, metrics or {}, series or {})

    def replace_metrics(self, run_id: str, metrics: dict[str, float],
                        series: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Make ``metrics`` and ``series`` the run's whole record of metrics (what was there is
        dropped); joins the caller's transaction, so a run's status and metrics change together."""
        with self.transaction() as c:
            c.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
            c.execute("DELETE FROM series WHERE run_id = ?", (run_id,))
            c.executemany("INSERT INTO metrics VALUES (?, ?, ?)",
                          [(run_id, k, float(v)) for k, v in metrics.items()])
            if not series:
                return
            import numpy as np

            c.executemany("INSERT INTO series VALUES (?, ?, ?, ?)", [
                (run_id, k, np.ascontiguousarray(s, dtype="<f8").tobytes(),
                 np.ascontiguousarray(v, dtype="<f8").tobytes())
                for k, (s, v) in series.items()])

    def _has_gpu_use(self) -> bool:
        # Once there, the columns stay: ask the file until they are.
        if not getattr(self, "_gpu_columns", False):
            have = {row[1] for row in self.conn.execute("PRAGMA table_info(attempts)")}
            self._gpu_columns = all(c in have for c in _GPU_USE_COLUMNS)
        return self._gpu_columns

    def attempts(self, run_id: str | None = None, status: str | None = None) -> list[AttemptRecord]:
        extra = (", " + ", ".join(_GPU_USE_COLUMNS)) if self._has_gpu_use() else ""
        q = f"SELECT {_ATTEMPT_COLUMNS}{extra} FROM attempts"
        cond, args = [], []
        if run_id is not None:
            cond.append("run_id = ?")
            args.append(run_id)
        if status is not None:
            cond.append("status = ?")
            args.append(status)
        if cond:
            q += " WHERE " + " AND ".join(cond)
        return [AttemptRecord(*row) for row in self.conn.execute(q + " ORDER BY attempt_id", args)]

    def gpu_attempts(self) -> list[tuple[str, AttemptRecord]]:
        """(run name, attempt) for the latest attempt placed on GPUs of each run in the spec, in
        launch order: what the runs used and, where the sampler measured it, how."""
        extra = (", " + ", ".join("a." + c for c in _GPU_USE_COLUMNS)) if self._has_gpu_use() else ""
        cols = ", ".join("a." + c.strip() for c in _ATTEMPT_COLUMNS.split(","))
        latest: dict[str, tuple[str, AttemptRecord]] = {}
        for row in self.conn.execute(f"SELECT r.name, {cols}{extra} FROM attempts a JOIN runs r USING (run_id)"
                                     f" WHERE {self._in_spec_sql('r')} AND a.gpus IS NOT NULL AND a.gpus != ''"
                                     " ORDER BY a.attempt_id"):
            rec = AttemptRecord(*row[1:])
            latest.pop(rec.run_id, None)  # re-insert: the order is the latest attempt's
            latest[rec.run_id] = (row[0], rec)
        return list(latest.values())

    def set_gpu_use(self, attempt_id: int, use: GpuUse) -> None:
        """Record what an attempt did with its GPUs (the sweep's sampler measured it)."""
        self.conn.execute("UPDATE attempts SET gpu_util_mean = ?, gpu_util_max = ?, gpu_mem_peak_mib = ?"
                          " WHERE attempt_id = ?", (use.util_mean, use.util_max, use.mem_peak_mib, attempt_id))

    # ------------------------------------------------------------------ retry budgets

    def charged_failures(self, run_ids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """Failed attempts per run and failure class that count against the retry budget: those
        from the run's ``budget_from`` on. Interrupted attempts (stopped by the user, or cut short
        when benchlab itself died) are never charged."""
        rows = self.conn.execute(
            "SELECT a.run_id, COALESCE(a.failure_class, ''), COUNT(*) FROM attempts a JOIN runs r USING (run_id)"
            f" WHERE a.status = '{FAILED}' AND a.number >= r.budget_from GROUP BY a.run_id, a.failure_class")
        wanted = None if run_ids is None else set(run_ids)
        out: dict[str, dict[str, int]] = {}
        for rid, cls, n in rows:
            if wanted is None or rid in wanted:
                out.setdefault(rid, {})[cls] = int(n)
        return out

    def last_charged_failure(self, run_id: str) -> str | None:
        """The failure class of the run's latest charged failure, or None."""
        row = self.conn.execute(
            "SELECT a.failure_class FROM attempts a JOIN runs r USING (run_id) WHERE a.run_id = ? AND"
            f" a.status = '{FAILED}' AND a.number >= r.budget_from ORDER BY a.number DESC LIMIT 1",
            (run_id,)).fetchone()
        return None if row is None else row[0]

    def new_budget(self, run_ids: Iterable[str]) -> None:
        """Grant these runs a fresh retry budget (``--rerun-failed``): failures so far stop counting."""
        with self.transaction() as c:
            c.executemany("UPDATE runs SET budget_from = (SELECT COUNT(*) + 1 FROM attempts a"
                          " WHERE a.run_id = runs.run_id) WHERE run_id = ?", [(r,) for r in run_ids])

    def durations(self) -> dict[tuple[str, str], float]:
        """Mean duration of completed attempts per (task, config): the scheduler's estimates."""
        rows = self.conn.execute(
            "SELECT r.task, r.config, AVG(a.ended - a.started) FROM attempts a JOIN runs r"
            f" USING (run_id) WHERE a.status = '{COMPLETED}' GROUP BY r.task, r.config")
        return {(t, c): d for t, c, d in rows}

    # ------------------------------------------------------------------ metrics

    def metric_rows(self, current_only: bool = True) -> list[tuple[str, str, str, int, str, float]]:
        """(run_id, task, config, seed, metric, value) of every completed run's final scalars
        (of the runs in the spec; of every run with ``current_only=False``)."""
        q = ("SELECT r.run_id, r.task, r.config, r.seed, m.metric, m.value FROM metrics m"
             f" JOIN runs r USING (run_id) WHERE r.status = '{COMPLETED}'")
        if current_only:
            q += " AND " + self._in_spec_sql("r")
        # In the plan's order (runs are registered in it), not in completion order: the same runs
        # make the same table and report, whichever finished first (ties are broken by order).
        return list(self.conn.execute(q + " ORDER BY r.rowid, m.rowid"))

    def series_rows(self, current_only: bool = True) -> Iterator[tuple[str, str, str, int, str,
                                                                       np.ndarray, np.ndarray]]:
        import numpy as np
        q = ("SELECT r.run_id, r.task, r.config, r.seed, s.metric, s.steps, s.vals FROM series s"
             f" JOIN runs r USING (run_id) WHERE r.status = '{COMPLETED}'")
        if current_only:
            q += " AND " + self._in_spec_sql("r")
        for rid, task, cfg, seed, metric, steps, vals in self.conn.execute(q + " ORDER BY r.rowid, s.rowid"):
            yield (rid, task, cfg, seed, metric, np.frombuffer(steps, dtype="<f8"),
                   np.frombuffer(vals, dtype="<f8"))

    def counts(self, in_spec: bool = True) -> dict[str, int]:
        """Runs by status: of the runs in the spec, or (``in_spec=False``) of those not in it."""
        cond = self._in_spec_sql()
        return dict(self.conn.execute(
            f"SELECT status, COUNT(*) FROM runs WHERE {cond if in_spec else f'NOT ({cond})'} GROUP BY status"))

    def plan_ids(self) -> list[str]:
        """The ids of the runs in the spec in their plan order (seeds ``--until-decided`` or a
        search added after the spec's own); empty when no sweep recorded a plan."""
        if not self.has_plan():
            return []
        return [rid for (rid,) in self.conn.execute("SELECT run_id FROM spec_runs ORDER BY position")]

    def in_spec_ids(self) -> set[str]:
        """The ids of the runs in the spec."""
        return {rid for (rid,) in self.conn.execute(f"SELECT run_id FROM runs WHERE {self._in_spec_sql()}")}

    # ------------------------------------------------------------------ what readers show

    def run_states(self, task: str | None = None) -> list[RunState]:
        """The runs in the spec with their state, in plan order; with ``task``, that task's only, in
        the order SQLite reads them (the dashboard keys them by config and seed)."""
        if task is None:
            return [RunState(*row) for row in self.conn.execute(
                f"SELECT run_id, name, task, config, seed, status FROM runs WHERE {self._in_spec_sql()}"
                " ORDER BY rowid")]
        return [RunState(*row) for row in self.conn.execute(
            f"SELECT run_id, name, task, config, seed, status FROM runs WHERE {self._in_spec_sql()} AND task = ?",
            (task,))]

    def open_runs(self) -> list[OpenRun]:
        """The runs in the spec still to finish (pending, running, interrupted), each with the start
        of its latest attempt: what an ETA is estimated from."""
        return [OpenRun(*row) for row in self.conn.execute(
            "SELECT r.task, r.config, r.status, (SELECT MAX(a.started) FROM attempts a WHERE a.run_id = r.run_id)"
            f" FROM runs r WHERE {self._in_spec_sql('r')} AND r.status IN (?, ?, ?)",
            (PENDING, RUNNING, INTERRUPTED))]

    def last_activity(self) -> float | None:
        """When the ledger last changed: the latest run update or attempt start or end (None if empty)."""
        (last,) = self.conn.execute("SELECT MAX(updated) FROM runs").fetchone()
        (ended,) = self.conn.execute("SELECT MAX(COALESCE(ended, started)) FROM attempts").fetchone()
        return max([v for v in (last, ended) if v is not None], default=None)

    def curve_names(self) -> set[CurveName]:
        """Every (task, metric) that a run in the spec recorded a step series of."""
        return {CurveName(*row) for row in self.conn.execute(
            f"SELECT DISTINCT r.task, s.metric FROM series s JOIN runs r USING (run_id)"
            f" WHERE {self._in_spec_sql('r')}")}

    def attempt_times(self, task: str) -> list[AttemptTimes]:
        """Start and end of every attempt of ``task``'s runs in the spec, in launch order."""
        return [AttemptTimes(*row) for row in self.conn.execute(
            "SELECT a.run_id, a.started, a.ended FROM attempts a JOIN runs r USING (run_id)"
            f" WHERE r.task = ? AND {self._in_spec_sql('r')} ORDER BY a.attempt_id", (task,))]

    def completed_series(self, task: str, metric: str) -> list[SeedSeries]:
        """``metric``'s step series of ``task``'s completed runs in the spec, in the order recorded
        (only these: the ledger holds every run's, 1,000,000 points at 10,000 runs)."""
        import numpy as np

        return [SeedSeries(config, int(seed), np.frombuffer(steps, dtype="<f8"), np.frombuffer(vals, dtype="<f8"))
                for config, seed, steps, vals in self.conn.execute(
                    "SELECT r.config, r.seed, s.steps, s.vals FROM series s JOIN runs r USING (run_id)"
                    f" WHERE r.status = ? AND {self._in_spec_sql('r')} AND r.task = ? AND s.metric = ?"
                    " ORDER BY s.rowid", (COMPLETED, task, metric))]

    def run_record(self, run_id: str) -> RunRecord | None:
        """One run as on record (in the spec or not), or None."""
        row = self.conn.execute(
            f"SELECT run_id, name, task, config, seed, params, command, status, current, {self._in_spec_sql()}"
            " FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), row[6], row[7],
                         bool(row[8]), bool(row[9]))

    def metrics_of_run(self, run_id: str) -> dict[str, float | None]:
        """A run's final scalars, by metric name (empty until it completed)."""
        return dict(self.conn.execute("SELECT metric, value FROM metrics WHERE run_id = ? ORDER BY metric",
                                      (run_id,)))

    def series_of_run(self, run_id: str) -> list[RunSeries]:
        """A run's step series, by metric name."""
        import numpy as np

        return [RunSeries(metric, np.frombuffer(steps, dtype="<f8"), np.frombuffer(vals, dtype="<f8"))
                for metric, steps, vals in self.conn.execute(
                    "SELECT metric, steps, vals FROM series WHERE run_id = ? ORDER BY metric", (run_id,)).fetchall()]

    def completed_runs_by_seed(self) -> list[SeedRun]:
        """The completed runs in the spec, by task, config and seed."""
        return [SeedRun(task, config, int(seed), rid) for task, config, seed, rid in self.conn.execute(
            f"SELECT task, config, seed, run_id FROM runs WHERE status = ? AND {self._in_spec_sql()}"
            " ORDER BY task, config, seed", (COMPLETED,))]

    def content_digest(self) -> str:
        """A SHA-256 (hex) of everything the report's tables are computed from: the benchmark
        record and the other ``meta`` records, every run's coordinates and state, the plan, the
        final metrics and each attempt's outcome (status, exit code, failure class, error).

        Two ledgers with the same digest give the same tables, and any write that could change a
        table changes it (a run completing, a metric re-read, a failure re-classified, the spec's
        plan or baseline); the same content written in another order may give another digest,
        which costs only a recomputation. What no table shows is left out: the logged curves
        (``series``), the attempts' times, hosts, processes and log tails. Values are hashed by
        their ``repr``, which writes a float exactly. About 0.1 s at 10,000 runs."""
        import hashlib

        digest = hashlib.sha256()
        for table, query in _DIGESTED:
            try:
                rows = self.conn.execute(query).fetchall()
            except sqlite3.OperationalError:  # an older ledger opened read-only, before the table existed
                rows = None
            digest.update(f"{table}\0{rows!r}\n".encode())
        return digest.hexdigest()

    def partial_runs(self) -> list[PartialAttempt]:
        """The completed runs in the spec whose completing attempt notes a partial evaluation, by
        name (one scan of the attempts; only the matching rows are read)."""
        return [PartialAttempt(*row) for row in self.conn.execute(
            "SELECT runs.name, attempts.error, runs.task, runs.config, runs.seed"
            " FROM attempts JOIN runs ON runs.run_id = attempts.run_id"
            f" WHERE attempts.status = ? AND runs.status = ? AND {self._in_spec_sql()}"
            " AND attempts.error LIKE ? ORDER BY runs.name", (COMPLETED, COMPLETED, PARTIAL_NOTE_PREFIX + "%"))]

    # ------------------------------------------------------------------ reading run folders again

    def reread_failed(self, run_id: str, attempt_id: int, *, failure_class: str, error: str,
                      demote_run: bool) -> None:
        """A run's folder read again lacks a metric: its attempt failed (``failure_class``, why);
        with ``demote_run`` a completed run becomes failed (its ``updated`` left as it was)."""
        with self.transaction() as c:
            if demote_run:
                c.execute("UPDATE runs SET status = ? WHERE run_id = ?", (FAILED, run_id))
            c.execute("UPDATE attempts SET status = ?, failure_class = ?, error = ? WHERE attempt_id = ?",
                      (FAILED, failure_class, error, attempt_id))

    def reread_completed(self, run_id: str, attempt_id: int, note: str) -> None:
        """A failed run's folder read again holds its metrics: the run and its attempt become
        completed, the attempt's error saying when and why (``note``)."""
        with self.transaction() as c:
            c.execute("UPDATE runs SET status = ?, updated = ? WHERE run_id = ?",
                      (COMPLETED, time.time(), run_id))
            c.execute("UPDATE attempts SET status = ?, error = ? WHERE attempt_id = ?",
                      (COMPLETED, note, attempt_id))

    # ------------------------------------------------------------------ code under test

    def code_id(self, state: CodeState) -> int:
        """The id of a code state, recorded the first time it is seen."""
        with self.transaction() as c:
            c.execute("INSERT OR IGNORE INTO code (git_commit, dirty, diff_sha256, tree_sha256) VALUES (?, ?, ?, ?)",
                      (state.commit, state.dirty, state.diff_sha256, state.tree_sha256))
            (cid,) = c.execute("SELECT code_id FROM code WHERE git_commit IS ? AND dirty IS ? AND "
                               "diff_sha256 IS ?", (state.commit, state.dirty, state.diff_sha256)).fetchone()
        return int(cid)

    def tag_attempt(self, attempt_id: int, code_id: int) -> None:
        """Record the code state an attempt was launched with (joins the launch's transaction)."""
        self.conn.execute("INSERT OR REPLACE INTO attempt_code VALUES (?, ?)", (attempt_id, code_id))

    def completed_code(self, run_ids: Iterable[str]) -> dict[CodeState, int]:
        """How many of ``run_ids``' completed runs ran with each code state (their last completed
        attempt's); runs from before code states were recorded are left out."""
        try:
            rows = self.conn.execute(
                "SELECT a.run_id, MAX(a.attempt_id) FROM attempts a JOIN runs r USING (run_id)"
                f" WHERE a.status = '{COMPLETED}' AND r.status = '{COMPLETED}' GROUP BY a.run_id").fetchall()
            codes = {cid: CodeState(commit, None if dirty is None else bool(dirty), diff, tree)
                     for cid, commit, dirty, diff, tree in self.conn.execute(
                         "SELECT code_id, git_commit, dirty, diff_sha256, tree_sha256 FROM code")}
            tagged = dict(self.conn.execute("SELECT attempt_id, code_id FROM attempt_code"))
        except sqlite3.OperationalError:  # an older ledger, opened read-only
            return {}
        wanted = set(run_ids)
        out: dict[CodeState, int] = {}
        for rid, aid in rows:
            if rid in wanted and aid in tagged:
                state = codes[tagged[aid]]
                out[state] = out.get(state, 0) + 1
        return out
