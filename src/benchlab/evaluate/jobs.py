"""The server's job ledger: every evaluation request and its outcome, in SQLite.

A job is keyed by a hash of what defines it (``protocol.evaluation_key``), so
a client that retries a request while its evaluation runs joins it instead of
starting another. A finished job's result is handed out again only to the same
request: one that carries the same ``request_id`` and the same body (its
``body_hash``); the reuse of results across requests (``reusable``, by model
identity and age) is the server's opt-in. Finished jobs outlive the server
process. Each server process owns the jobs it runs and refreshes their
heartbeat; a job whose heartbeat stopped (its server died) is marked failed by
any server running on the same ledger, at its start and on every heartbeat
after, so a client polling its status sees it fail and a retry runs it again,
while a job whose old server is still finishing it (a graceful restart) is left
to it, and the new server hands its result on.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from benchlab.evaluate.openai_api import SamplingFields

if TYPE_CHECKING:
    from benchlab.evaluate.protocol import EvaluateRequest
    from benchlab.evaluate.serving import JobResult

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id      TEXT PRIMARY KEY,
    request_key TEXT NOT NULL,
    status      TEXT NOT NULL,          -- queued | running | completed | partial | failed
    request     TEXT NOT NULL,          -- JSON
    result      TEXT,                   -- JSON, when completed or partial
    error       TEXT,                   -- when failed
    created     REAL NOT NULL,
    finished    REAL,
    model_identity TEXT,                -- hash of the router's /v1/models when the job started
    owner       TEXT,                   -- the server process running it
    heartbeat   REAL,                   -- last time that server said it was still at it
    request_id  TEXT,                   -- the client's id of the request, when it sent one
    body_hash   TEXT                    -- hash of the request's body as the client sent it
);
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (request_key, created);
"""

INTERRUPTED = "the server stopped before the job finished; send the request again"


class JobStatus(StrEnum):
    """The state of a job (``jobs.status``, and ``status`` in the server's answers)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    PARTIAL = "partial"  # stopped by the deadline: metrics over what finished, never reused
    FAILED = "failed"


class BenchmarkIdentity(TypedDict):
    """One benchmark of an ``EvaluationIdentity``: its name, the sampling sent, its data's digest."""

    name: str
    sampling: SamplingFields
    data: str


class EvaluationIdentity(TypedDict):
    """The parts of a request that define its evaluation (``protocol.evaluation_key`` builds it)."""

    rollout_id: int
    router_url: str
    model: str
    benchmarks: list[BenchmarkIdentity]


def request_key(request: EvaluationIdentity) -> str:
    """A stable hash of the parts of a request that define its evaluation."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """One row of the ledger; ``request`` is what the client asked, ``result`` the completed response body."""

    job_id: str
    request_key: str
    status: JobStatus
    request: EvaluateRequest
    result: JobResult | None
    error: str | None
    created: float
    finished: float | None
    request_id: str | None = None
    body_hash: str | None = None


class JobStore:
    """Jobs in ``path`` (SQLite, WAL). One connection, guarded by a lock; every call is short."""

    def __init__(self, path: Path, owner: str | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # This server process: the jobs it runs carry it, with a heartbeat (see ``beat``).
        self.owner = owner or uuid.uuid4().hex
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(jobs)")}
        for column, kind in (("model_identity", "TEXT"), ("owner", "TEXT"), ("heartbeat", "REAL"),
                             ("request_id", "TEXT"), ("body_hash", "TEXT")):
            if column not in columns:  # a ledger written before the column existed
                self._db.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
        self._db.execute("CREATE INDEX IF NOT EXISTS jobs_by_request_id ON jobs (request_id, created)")
        self._lock = threading.Lock()

    def _row(self, row: tuple[Any, ...] | None) -> Job | None:
        if row is None:
            return None
        # Here, not at the top: the protocol module imports this one (for ``request_key``).
        from benchlab.evaluate.protocol import EvaluateRequest

        return Job(
            row[0],
            row[1],
            JobStatus(row[2]),
            EvaluateRequest.model_validate(json.loads(row[3])),
            json.loads(row[4]) if row[4] else None,
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
        )

    _COLUMNS = "job_id, request_key, status, request, result, error, created, finished, request_id, body_hash"

    def create(self, key: str, request: EvaluateRequest, model_identity: str | None = None) -> Job:
        """A new queued job for ``request``, against the model ``model_identity`` names (None: unknown).

        The ledger keeps the request's fields as the client could have sent them, without ``async``
        (how it is answered is no part of it) and without the fields it left out.
        """
        from benchlab.evaluate.protocol import body_hash

        digest = body_hash(request)
        job = Job(uuid.uuid4().hex, key, JobStatus.QUEUED, request, None, None, time.time(), None,
                  request.request_id, digest)
        stored = request.model_dump(exclude_none=True, exclude={"run_async"})
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (job_id, request_key, status, request, created, model_identity, owner, heartbeat, "
                "request_id, body_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.job_id, key, job.status, json.dumps(stored), job.created, model_identity, self.owner,
                 job.created, request.request_id, digest),
            )
        return job

    def by_request_id(self, request_id: str) -> Job | None:
        """The latest job the client sent with ``request_id``."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLUMNS} FROM jobs WHERE request_id = ? ORDER BY created DESC LIMIT 1",
                (request_id,),
            ).fetchone()
        return self._row(row)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)
            ).fetchone()
        return self._row(row)

    def reusable(self, key: str, model_identity: str, finished_after: float) -> Job | None:
        """The latest completed job for ``key`` against the same model, finished after ``finished_after``."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLUMNS} FROM jobs WHERE request_key = ? AND status = ? AND model_identity = ? "
                "AND finished > ? ORDER BY created DESC LIMIT 1",
                (key, JobStatus.COMPLETED, model_identity, finished_after),
            ).fetchone()
        return self._row(row)

    # A job's end is written only while it is unfinished: once another server marked it failed (this
    # one's heartbeat had stopped, as when its process was frozen), what it says later is ignored.
    _UNFINISHED = f"status IN ('{JobStatus.QUEUED}', '{JobStatus.RUNNING}')"

    def set_running(self, job_id: str) -> None:
        with self._lock:
            self._db.execute(f"UPDATE jobs SET status = ? WHERE job_id = ? AND {self._UNFINISHED}",
                             (JobStatus.RUNNING, job_id))

    def complete(self, job_id: str, result: JobResult) -> None:
        with self._lock:
            self._db.execute(
                f"UPDATE jobs SET status = ?, result = ?, finished = ? WHERE job_id = ? AND {self._UNFINISHED}",
                (JobStatus.COMPLETED, json.dumps(result), time.time(), job_id),
            )

    def finish_partial(self, job_id: str, result: JobResult) -> None:
        """The job stopped before it finished: its body (with what was scored) is kept, never reused."""
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET status = ?, result = ?, error = ?, finished = ? "
                f"WHERE job_id = ? AND {self._UNFINISHED}",
                (JobStatus.PARTIAL, json.dumps(result), result.get("error"), time.time(), job_id),
            )

    def fail(self, job_id: str, error: str) -> None:
        with self._lock:
            self._db.execute(
                f"UPDATE jobs SET status = ?, error = ?, finished = ? WHERE job_id = ? AND {self._UNFINISHED}",
                (JobStatus.FAILED, error, time.time(), job_id),
            )

    def beat(self) -> None:
        """Say that this server is still running its unfinished jobs."""
        with self._lock:
            self._db.execute("UPDATE jobs SET heartbeat = ? WHERE owner = ? AND status IN (?, ?)",
                             (time.time(), self.owner, JobStatus.QUEUED, JobStatus.RUNNING))

    def running_elsewhere(self, key: str, fresh_within: float) -> Job | None:
        """The unfinished job for ``key`` that another server (one shutting down gracefully) still runs."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLUMNS} FROM jobs WHERE request_key = ? AND status IN (?, ?) AND owner != ? "
                "AND heartbeat > ? ORDER BY created DESC LIMIT 1",
                (key, JobStatus.QUEUED, JobStatus.RUNNING, self.owner, time.time() - fresh_within),
            ).fetchone()
        return self._row(row)

    def is_alive(self, job_id: str, fresh_within: float) -> bool:
        """Whether ``job_id`` is unfinished and its server said so within ``fresh_within`` seconds."""
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM jobs WHERE job_id = ? AND status IN (?, ?) AND heartbeat > ?",
                (job_id, JobStatus.QUEUED, JobStatus.RUNNING, time.time() - fresh_within),
            ).fetchone()
        return row is not None

    def mark_interrupted(self, stale_after: float) -> int:
        """Fail the unfinished jobs whose server stopped: no heartbeat for ``stale_after`` seconds.

        A job whose server is still finishing it (a graceful restart: the old
        process drains while the new one starts) is left to it. The server calls
        this at its start and on every heartbeat: a server killed and restarted
        within ``stale_after`` leaves jobs that still look alive at the start.
        """
        with self._lock:
            cur = self._db.execute(
                "UPDATE jobs SET status = ?, error = ?, finished = ? WHERE status IN (?, ?) AND owner IS NOT ? "
                "AND (heartbeat IS NULL OR heartbeat < ?)",
                (JobStatus.FAILED, INTERRUPTED, time.time(), JobStatus.QUEUED, JobStatus.RUNNING, self.owner,
                 time.time() - stale_after),
            )
        return cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()
