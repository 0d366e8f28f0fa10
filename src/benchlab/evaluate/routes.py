"""The evaluation server's routes: health, the benchmarks it runs, evaluating and a job's status."""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from benchlab.errors import BenchlabError, DataError
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.jobs import JobStatus
from benchlab.evaluate.model import served_model_identity
from benchlab.evaluate.protocol import (
    ApiError,
    BenchmarkInfo,
    BenchmarksBody,
    ErrorBody,
    EvaluateRequest,
    HealthBody,
    JobBody,
    QueuedBody,
    body_hash,
    evaluation_key,
    resolve_runs,
)
from benchlab.evaluate.serving import (
    STALE_AFTER_SECS,
    ServerState,
    failed_body,
    handed_over,
    job_finished,
    run_job,
)

logger = logging.getLogger("benchlab.evaluate")

# Every route but /health may answer with one of these, always as {"error": message, "detail": message}.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 429, 502, 504)
}


router = APIRouter()


def current_state(request: Request) -> ServerState:
    """The shared state of the server that answers ``request``."""
    state: ServerState = request.app.state.bench
    return state


# A route's parameter of this type receives the server's shared state.
State = Annotated[ServerState, Depends(current_state)]


def authorize(request: Request) -> None:
    """401 unless the request carries the server's bearer token (when authentication is on)."""
    state = current_state(request)
    if state.token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), state.token.encode()
    ):
        raise ApiError(
            401, "missing or wrong bearer token (header 'Authorization: Bearer <token>')"
        )

@router.get("/health")
async def health(state: State) -> HealthBody:
    """Liveness, the sandbox's isolation (network, file system and the caps of its one writable place)
    and any warnings."""
    return {
        "status": "ok",
        "sandbox": state.sandbox.describe()
        if state.sandbox
        else {"mode": None, "network_isolated": False, "filesystem": None},
        "auth": state.token is not None,
        "warnings": state.warnings,
    }

@router.get("/openapi.json", dependencies=[Depends(authorize)], include_in_schema=False)
async def openapi_document(request: Request) -> JSONResponse:
    """The API description: what this server takes, its caps and benchmark names included (token needed)."""
    return JSONResponse(request.app.openapi())


@router.get("/docs", dependencies=[Depends(authorize)], include_in_schema=False)
async def swagger_page(request: Request) -> HTMLResponse:
    """The interactive API documentation (Swagger UI) over ``/openapi.json``."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{request.app.title} - API")


@router.get("/redoc", dependencies=[Depends(authorize)], include_in_schema=False)
async def redoc_page(request: Request) -> HTMLResponse:
    """The API documentation (ReDoc) over ``/openapi.json``."""
    return get_redoc_html(openapi_url="/openapi.json", title=f"{request.app.title} - API")


@router.get("/benchmarks", dependencies=[Depends(authorize)], responses=ERROR_RESPONSES)
async def benchmarks(state: State) -> BenchmarksBody:
    """The benchmarks this server can run, with their scorer, size and default parameters."""
    out: list[BenchmarkInfo] = []
    for name, bench in sorted(state.config.benchmarks.items()):
        out.append(
            {
                "name": name,
                "scorer": bench.scorer,
                "api": bench.api,
                "num_prompts": _count(bench),
                "description": bench.description,
                "defaults": bench.defaults,
            }
        )
    return {"benchmarks": out}

@router.post(
    "/evaluate",
    dependencies=[Depends(authorize)],
    responses={**ERROR_RESPONSES, 202: {"model": QueuedBody}},
    response_model=JobBody,
)
async def evaluate_endpoint(req: EvaluateRequest, state: State) -> JSONResponse:
    """Evaluate the benchmarks against ``router_url``; with ``async`` answer at once with a job id."""
    runs = resolve_runs(state.config, req)
    try:
        key = evaluation_key(req, runs, state.config.model.name)
    except (OSError, DataError) as exc:
        logger.error("dataset of %s: %s", [r.name for r in runs], exc)
        raise ApiError(502, "a dataset of this server could not be read; see the server log") from None
    if req.request_id is not None:
        earlier = state.store.by_request_id(req.request_id)
        if earlier is not None:
            if earlier.body_hash != body_hash(req):
                raise ApiError(
                    409,
                    f"request_id: {req.request_id[:64]!r} was sent before with another body (job "
                    f"{earlier.job_id}); a new evaluation needs a new request_id, a retry the same body",
                )
            if earlier.status == JobStatus.COMPLETED and earlier.result is not None:
                return JSONResponse(earlier.result)  # the same request, sent again: its answer
            # Still running: joined below (same body, same evaluation); failed or partial: evaluated again.
    reuse_secs = state.config.server.reuse_results_secs
    identity = None
    if key not in state.inflight:
        elsewhere = state.store.running_elsewhere(key, STALE_AFTER_SECS)
        if elsewhere is not None:
            # The server before this one is still finishing it (a graceful restart): its result.
            handed = await handed_over(state.store, elsewhere, req.run_async)
            if handed is not None:
                return handed
        if reuse_secs > 0:
            assert state.slots is not None
            identity = await served_model_identity(state.slots, req.router_url)
    if key in state.inflight:  # also one that started while the model was asked who it is
        job_id, task = state.inflight[key]
    else:
        if identity is not None and reuse_secs > 0:
            # Opt-in (server.reuse_results_secs): a finished evaluation handed to another request.
            previous = state.store.reusable(key, identity, time.time() - reuse_secs)
            if previous is not None and previous.result is not None:
                return JSONResponse(previous.result)
        if len(state.inflight) >= state.config.server.max_running_jobs:
            raise ApiError(
                429,
                f"{len(state.inflight)} evaluations are running, the most this server runs at once "
                "(server.max_running_jobs); try again later",
            )
        job = state.store.create(key, req, identity)
        task = asyncio.ensure_future(run_job(state, job, req, runs))
        job_id = job.job_id
        state.inflight[key] = (job_id, task)
        task.add_done_callback(functools.partial(job_finished, state, key))
    if req.run_async:
        return JSONResponse(
            {
                "job_id": job_id,
                "status": JobStatus.QUEUED,
                "status_url": f"/status/{job_id}",
                "raw_metrics": {},
            },
            status_code=202,
        )
    try:
        # shield: a client that hangs up does not cancel the evaluation; its retry joins it.
        body = await asyncio.shield(task)
        return JSONResponse(body, status_code=504 if body["status"] == JobStatus.PARTIAL else 200)
    except BenchlabError as exc:
        return JSONResponse(failed_body(job_id, str(exc)), status_code=502)
    except Exception:
        return JSONResponse(
            failed_body(job_id, "internal error while evaluating"), status_code=500
        )

@router.get(
    "/status/{job_id}",
    dependencies=[Depends(authorize)],
    responses=ERROR_RESPONSES,
    response_model=JobBody,
)
async def status(job_id: str, state: State) -> JSONResponse:
    """A job's state: queued, running, completed (with ``raw_metrics``) or failed (with ``error``)."""
    job = state.store.get(job_id) if len(job_id) == 32 else None
    if job is None:
        raise ApiError(404, f"no job {job_id[:64]!r}")
    if job.status in (JobStatus.COMPLETED, JobStatus.PARTIAL) and job.result is not None:
        return JSONResponse(job.result)
    if job.status == JobStatus.FAILED:
        return JSONResponse(failed_body(job.job_id, job.error or "failed"))
    return JSONResponse({"job_id": job.job_id, "status": job.status, "raw_metrics": {}})


def _count(bench: BenchmarkConfig) -> int | None:
    try:
        return len(load_items(bench))
    except (BenchlabError, OSError):
        return None
