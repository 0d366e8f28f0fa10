"""The plan in the ledger: which runs a sweep launches, and recording which runs are in the spec.

Which runs are *in the spec*: those of the ``spec_runs`` table, which each
``benchlab run`` replaces in one transaction with the runs its spec names now (gathered
beforehand a step at a time while its first runs go: :class:`PlanRecorder`).
Every other run (a removed config, a cut seed, a changed definition) stays on
record with its attempts but is "not in the spec": it leaves the results table,
the counts and the report. A ledger with no plan recorded (written before the
table existed, or rebuilt from run directories) counts its current runs as in
the spec.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from benchlab.ledger.records import COMPLETED, FAILED, PLAN_DIGEST, PLAN_RECORDING, TO_RUN_STATES

if TYPE_CHECKING:
    from benchlab.ledger.store import Store
    from benchlab.plan import Run

#: Runs recorded per step: a step is one transaction of a few tens of milliseconds.
PLAN_STEP_RUNS = 2000


@dataclass(frozen=True)
class ToDo:
    """What a sweep finds of its plan in the ledger: the runs to launch, in plan order, and how
    many of the plan's runs are finished already (completed, failed)."""

    runs: list[Run]
    completed: int
    failed: int
    #: The ids of the plan's completed runs, in plan order.
    completed_ids: list[str] = field(default_factory=list)


def runs_to_do(runs: Iterable[Run], statuses: dict[str, str], *, rerun_failed: bool = False,
               rerun_all: bool = False) -> ToDo:
    """The runs of ``runs`` a sweep launches: those not finished yet (a run the ledger does not
    know is pending), the failed ones too with ``rerun_failed``, every one with ``rerun_all``.

    ``statuses`` may leave pending runs out (:meth:`Store.statuses` with ``pending=False``)."""
    plan = runs if isinstance(runs, list) else list(runs)
    if not statuses:  # a new ledger: every run is to do, and none is finished
        return ToDo(list(plan), 0, 0)
    wanted = {*TO_RUN_STATES, FAILED} if rerun_failed else set(TO_RUN_STATES)
    todo: list[Run] = []
    completed: list[str] = []
    failed = 0
    get = statuses.get
    # One pass over the plan, asking only the runs the ledger knows (at 100,000 runs each pass
    # is tens of milliseconds before the first launch).
    for r in plan:
        state = get(r.run_id)
        if state is None:
            todo.append(r)
            continue
        if rerun_all or state in wanted:
            todo.append(r)
        if state == COMPLETED:
            completed.append(r.run_id)
        elif state == FAILED:
            failed += 1
    return ToDo(todo, len(completed), failed, completed)


class _ParamsText:
    """A run's params as the ledger stores them (sorted JSON), made once per params object:
    the runs of a (task, config) share one, and at 100,000 runs the JSON is a second."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[Any, str]] = {}  # holds the object, so its id is not reused

    def __call__(self, params: dict[str, Any]) -> str:
        made = self._made.get(id(params))
        if made is None:
            made = self._made[id(params)] = (params, json.dumps(params, sort_keys=True, default=str))
        return made[1]


def plan_digest(run_ids: Iterable[str]) -> str:
    """A digest of a plan: its run ids, in order."""
    import hashlib

    return hashlib.sha256("\n".join(run_ids).encode()).hexdigest()


class PlanRecorder:
    """Records a sweep's plan in the ledger a step at a time, so that the first runs launch at once.

    Recording 100,000 runs (their rows, and which runs are in the spec) takes over a second;
    a sweep starts its first runs first and calls :meth:`step` between launches. It stays
    safe to kill at any moment:

    - a run is in the ``runs`` table before its first attempt (:meth:`ensure`, in the
      launch's transaction), so no attempt is ever recorded without its run;
    - the new plan is gathered in ``spec_runs_next`` and replaces ``spec_runs`` in one
      transaction, with the runs it supersedes, only once it is whole: until then readers
      see the plan before (on a new folder: the runs recorded so far), and the
      ``plan_recording`` meta key says that a plan of so many runs is being recorded;
    - a sweep killed part-way leaves that key behind (``benchlab status`` tells it), and the
      next ``benchlab run`` records the plan again from the start; rows already written
      are kept, none is written twice.

    A plan whose digest matches the one recorded is not written at all: a resume of the
    same spec pays nothing.
    """

    def __init__(self, store: Store, runs: Sequence[Run], step: int = PLAN_STEP_RUNS):
        self.store = store
        self.runs = runs
        self.step_runs = max(1, step)
        self.digest = plan_digest(map(attrgetter("run_id"), runs))
        self._next = 0  # runs[:_next] are recorded
        self._params = _ParamsText()
        self._positions: list[tuple[str, int]] | None = None  # (run id, position in the plan), by id
        self.done = False

    def start(self) -> None:
        """Begin (one transaction), or find the plan already recorded."""
        conn = self.store.conn
        recorded = conn.execute("SELECT value FROM meta WHERE key = ?", (PLAN_DIGEST,)).fetchone()
        if recorded is not None and json.loads(recorded[0]) == self.digest and self.store.plan_recording() is None:
            self.done = True
            return
        with self.store.transaction() as c:
            c.execute("DROP TABLE IF EXISTS spec_runs_next")
            c.execute("CREATE TABLE spec_runs_next (run_id TEXT PRIMARY KEY, position INTEGER NOT NULL)")
            c.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                          [(PLAN_RECORDING, json.dumps({"runs": len(self.runs), "started": time.time()}))])
            c.execute("DELETE FROM meta WHERE key = ?", (PLAN_DIGEST,))

    def _rows(self, runs: Iterable[Run], now: float) -> list[tuple[Any, ...]]:
        params = self._params
        return [(r.run_id, r.name, r.task, r.config, r.seed, params(r.params), r.command, now, now) for r in runs]

    def ensure(self, run: Run) -> None:
        """Make sure ``run`` has its row before an attempt of it is recorded (joins the caller's
        transaction)."""
        if self.done:
            return
        self.store.conn.executemany(_UPSERT_RUN, self._rows([run], time.time()))

    def step(self) -> None:
        """Record the next ``step_runs`` runs; the last step swaps the plan in."""
        if self.done:
            return
        if self._positions is None:
            # In id order, the plan's index grows at its end: a third faster than in plan order.
            self._positions = sorted((r.run_id, i) for i, r in enumerate(self.runs))
        chunk = self.runs[self._next:self._next + self.step_runs]
        with self.store.transaction() as c:
            c.executemany(_UPSERT_RUN, self._rows(chunk, time.time()))
            c.executemany("INSERT OR IGNORE INTO spec_runs_next VALUES (?, ?)",
                          self._positions[self._next:self._next + len(chunk)])
            self._next += len(chunk)
            if self._next >= len(self.runs):
                self._swap(c)
        if self._next >= len(self.runs):
            self.done = True

    def finish(self) -> None:
        """Record what is left."""
        while not self.done:
            self.step()

    def _swap(self, c: sqlite3.Connection) -> None:
        # A run whose coordinates the new plan gives another id (its definition changed) stops
        # being current; a run of the plan is current again.
        c.execute("UPDATE runs SET current = 0 WHERE current = 1 AND run_id NOT IN (SELECT run_id FROM "
                  "spec_runs_next) AND EXISTS (SELECT 1 FROM runs p JOIN spec_runs_next n USING (run_id) "
                  "WHERE p.task = runs.task AND p.config = runs.config AND p.seed = runs.seed)")
        c.execute("DROP TABLE IF EXISTS spec_runs")
        c.execute("ALTER TABLE spec_runs_next RENAME TO spec_runs")
        c.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (PLAN_DIGEST, json.dumps(self.digest)))
        c.execute("DELETE FROM meta WHERE key = ?", (PLAN_RECORDING,))


_UPSERT_RUN = ("INSERT INTO runs (run_id, name, task, config, seed, params, command, created, updated)"
               " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(run_id) DO UPDATE SET current = 1")
