"""The evaluation server's jobs: what the running server shares between requests, running one job
and recording its end, and answering for a job another server process is finishing."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from fastapi.responses import JSONResponse

from benchlab.errors import BenchlabError, DataError, EvaluationError
from benchlab.evaluate.config import EvalConfig
from benchlab.evaluate.jobs import INTERRUPTED, Job, JobStatus, JobStore
from benchlab.evaluate.judge import Judge, JudgeCache, judge_client
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.model import HttpSlots, ModelClient
from benchlab.evaluate.protocol import EvaluateRequest, reproducing_command
from benchlab.evaluate.runner import BenchmarkRun, RunSummary, evaluate
from benchlab.evaluate.sandbox import Sandbox
from benchlab.evaluate.scorers import Scorers

logger = logging.getLogger("benchlab.evaluate")

# A server refreshes its unfinished jobs' heartbeat this often; a job silent for STALE_AFTER_SECS
# lost its server.
HEARTBEAT_SECS = 2.0
STALE_AFTER_SECS = 10.0


class JobResult(TypedDict):
    """The JSON body of a job that ran: what a trainer gets, and the job ledger keeps."""

    job_id: str
    status: JobStatus
    rollout_id: int
    raw_metrics: dict[str, dict[str, dict[str, float]]]
    runs: list[RunSummary]
    samples_scored: int
    samples_asked: int
    output_dir: str
    log_path: str
    command: str
    warning: NotRequired[str]
    error: NotRequired[str]  # a partial job: why it is no result


class FailedBody(TypedDict):
    """The JSON body of a job that failed."""

    job_id: str
    status: JobStatus
    error: str
    raw_metrics: dict[str, dict[str, dict[str, float]]]  # always empty: nothing was measured


@dataclass
class ServerState:
    """What the running server shares between requests."""

    config: EvalConfig
    token: str | None
    store: JobStore
    sandbox: Sandbox | None  # None: no code benchmark, and no working sandbox either
    math_pool: MathVerifyPool
    warnings: list[str]
    slots: HttpSlots | None = None
    judge_slots: HttpSlots | None = None
    judge_cache: JudgeCache | None = None
    inflight: dict[str, tuple[str, asyncio.Task[JobResult]]] = field(default_factory=dict)


async def run_job(
    state: ServerState, job: Job, req: EvaluateRequest, runs: list[BenchmarkRun]
) -> JobResult:
    """Evaluate one job's runs and record its end in the job ledger; the body the client gets."""
    assert state.slots is not None
    out_dir = state.config.server.state_dir / "jobs" / job.job_id
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "job.log"
    state.store.set_running(job.job_id)
    m = state.config.model
    client = ModelClient(
        state.slots,
        req.router_url,
        m.name,
        timeout=m.request_timeout_secs,
        max_retries=m.max_retries,
        backoff=m.backoff_secs,
        max_backoff=m.max_backoff_secs,
        max_reply_bytes=m.max_reply_bytes,
    )
    with log_path.open("a", encoding="utf-8") as log_file:

        def log(line: str) -> None:
            log_file.write(line + "\n")
            log_file.flush()

        command = reproducing_command(state.config.model.name, req, runs)
        log(f"job {job.job_id} rollout {req.rollout_id}: {command}")
        judge = None
        if state.config.judge is not None and state.judge_slots is not None:
            judge = Judge(judge_client(state.config.judge, state.judge_slots), state.config.judge,
                          state.judge_cache)
        try:
            result = await evaluate(
                runs,
                client,
                Scorers(state.math_pool, state.sandbox, judge),
                deadline_secs=state.config.server.deadline_secs,
                out_dir=out_dir,
                log=log,
            )
        except DataError as exc:
            # The message names server files: it goes to the log, the client gets the gist.
            logger.error("job %s: %s", job.job_id, exc)
            log(f"failed: {exc}")
            message = "a dataset of this server could not be read; see the server log"
            state.store.fail(job.job_id, message)
            raise EvaluationError(message) from None
        except BenchlabError as exc:
            log(f"failed: {exc}")
            state.store.fail(job.job_id, str(exc))
            raise
        except Exception as exc:
            logger.exception("job %s failed", job.job_id)
            log(f"failed: {type(exc).__name__}: {exc}")
            state.store.fail(job.job_id, "internal error while evaluating; see the server log")
            raise
    body: JobResult = {
        "job_id": job.job_id,
        "status": JobStatus.PARTIAL if result.partial else JobStatus.COMPLETED,
        "rollout_id": req.rollout_id,
        "raw_metrics": result.raw_metrics,
        "runs": result.runs,
        "samples_scored": result.samples_scored,
        "samples_asked": result.samples_asked,
        "output_dir": str(out_dir),
        "log_path": str(log_path),
        "command": command,
    }
    if result.warning:
        body["warning"] = result.warning
    if result.partial:
        # Not a result: the job did not finish. The client gets an error status, and a repeat runs it again.
        body["error"] = (f"the evaluation did not finish: {result.warning}; send the request again "
                         "(or raise server.deadline_secs)")
        state.store.finish_partial(job.job_id, body)
    else:
        # Beside the per-question records (<benchmark>.jsonl) the nested metrics mark the folder as
        # an evaluation's, as `benchlab eval` writes it: two jobs compare question by question with
        # `benchlab compare STATE_DIR/jobs --baseline JOB --candidate JOB`.
        staged = out_dir / "raw_metrics.json.tmp"
        staged.write_text(json.dumps(result.raw_metrics, indent=2) + "\n", encoding="utf-8")
        os.replace(staged, out_dir / "raw_metrics.json")
        state.store.complete(job.job_id, body)
    return body


async def heartbeat(store: JobStore) -> None:
    """Refresh the heartbeat of this server's unfinished jobs every ``HEARTBEAT_SECS``, until cancelled.

    Each beat also fails the jobs of a server that died: one killed and restarted within
    ``STALE_AFTER_SECS`` left jobs that still looked alive when this server started.
    """
    while True:
        store.beat()
        orphans = store.mark_interrupted(STALE_AFTER_SECS)
        if orphans:
            logger.warning("%d job(s) of a server that stopped were unfinished; marked failed", orphans)
        await asyncio.sleep(HEARTBEAT_SECS)


async def handed_over(store: JobStore, job: Job, run_async: bool) -> JSONResponse | None:
    """The answer for a job another server process is finishing; None if that server died meanwhile."""
    if run_async:
        return JSONResponse({"job_id": job.job_id, "status": job.status, "status_url": f"/status/{job.job_id}",
                             "raw_metrics": {}}, status_code=202)
    while store.is_alive(job.job_id, STALE_AFTER_SECS):
        await asyncio.sleep(0.5)
    done = store.get(job.job_id)
    if done is None or done.status in (JobStatus.QUEUED, JobStatus.RUNNING) or done.error == INTERRUPTED:
        return None  # its server stopped without finishing it (marked failed by now, or soon): evaluate here
    if done.status == JobStatus.FAILED or done.result is None:
        return JSONResponse(failed_body(done.job_id, done.error or "failed"), status_code=502)
    return JSONResponse(done.result, status_code=504 if done.status == JobStatus.PARTIAL else 200)


def job_finished(state: ServerState, key: str, task: asyncio.Task[JobResult]) -> None:
    """Done-callback of a job's task: it leaves the in-flight map."""
    state.inflight.pop(key, None)
    if not task.cancelled():
        task.exception()  # retrieved here: an async job's failure lives on in the ledger


def report_warm_up(future: asyncio.Future[None]) -> None:
    """Done-callback of the math workers' start: log why they did not start."""
    if not future.cancelled() and future.exception() is not None:
        logger.error("math-verify workers did not start: %s", future.exception())


def failed_body(job_id: str, error: str) -> FailedBody:
    """The JSON body of a failed job."""
    return {"job_id": job_id, "status": JobStatus.FAILED, "error": error, "raw_metrics": {}}
