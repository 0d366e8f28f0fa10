"""The evaluation server: the HTTP API a trainer delegates evaluation to.

``POST /evaluate`` takes ``{rollout_id, router_url, benchmarks: [{name, ...}]}``,
evaluates every benchmark against ``router_url + /v1`` and answers
``{job_id, status, raw_metrics, runs, output_dir, log_path, command}``; with
``"async": true`` it answers at once with a ``job_id`` to poll at
``GET /status/{job_id}``. ``GET /health`` and ``GET /benchmarks`` describe the
server. Every error is ``{"error": message}``.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from benchlab.errors import BenchlabError, DataError, EvaluationError, UserError
from benchlab.evaluate.config import BenchmarkConfig, EvalConfig
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.jobs import Job, JobStatus, JobStore
from benchlab.evaluate.judge import Judge, JudgeCache, judge_client
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.model import HttpSlots, ModelClient, served_model_identity
from benchlab.evaluate.protocol import (
    ApiError,
    ErrorBody,
    EvaluateRequest,
    JobBody,
    QueuedBody,
    evaluation_key,
    reproducing_command,
    resolve_runs,
    tighten_schema,
)
from benchlab.evaluate.runner import BenchmarkRun, evaluate
from benchlab.evaluate.sandbox import Sandbox, sandbox_from_settings
from benchlab.evaluate.scorers import Scorers

logger = logging.getLogger("benchlab.evaluate")

MIN_TOKEN_LENGTH = 16
# A server refreshes its unfinished jobs' heartbeat this often; a job silent for STALE_AFTER_SECS
# lost its server.
HEARTBEAT_SECS = 2.0
STALE_AFTER_SECS = 10.0


def check_token(token: str, where: str = "the token") -> None:
    """UserError unless ``token`` is at least ``MIN_TOKEN_LENGTH`` characters and not only whitespace.

    A guessable token on a server bound to a public address hands the evaluation
    (and the model endpoint behind it) to anyone on the network. Surrounding
    whitespace does not count.
    """
    hint = "(e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
    if not token.strip():
        raise UserError(
            f"{where} is only whitespace; use a random token of at least {MIN_TOKEN_LENGTH} characters {hint}"
        )
    if len(token.strip()) < MIN_TOKEN_LENGTH:
        raise UserError(
            f"{where} has {len(token.strip())} characters, fewer than {MIN_TOKEN_LENGTH}; use a random token {hint}"
        )


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, declared or streamed (chunked)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body over {self.limit} bytes"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await JSONResponse({"error": too_large}, status_code=413)(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised while the route reads its body: FastAPI passes HTTPException through.
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited_receive, send)


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
    inflight: dict[str, tuple[str, asyncio.Task[dict[str, Any]]]] = field(default_factory=dict)


async def _run_job(
    state: ServerState, job: Job, req: EvaluateRequest, runs: list[BenchmarkRun]
) -> dict[str, Any]:
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
    body: dict[str, Any] = {
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


async def _heartbeat(store: JobStore) -> None:
    while True:
        store.beat()
        await asyncio.sleep(HEARTBEAT_SECS)


async def _handed_over(store: JobStore, job: Job, run_async: bool) -> JSONResponse | None:
    """The answer for a job another server process is finishing; None if that server died meanwhile."""
    if run_async:
        return JSONResponse({"job_id": job.job_id, "status": job.status, "status_url": f"/status/{job.job_id}",
                             "raw_metrics": {}}, status_code=202)
    while store.is_alive(job.job_id, STALE_AFTER_SECS):
        await asyncio.sleep(0.5)
    done = store.get(job.job_id)
    if done is None or done.status in (JobStatus.QUEUED, JobStatus.RUNNING):
        return None  # its server stopped without finishing it: evaluate here
    if done.status == JobStatus.FAILED or done.result is None:
        return JSONResponse(_failed_body(done.job_id, done.error or "failed"), status_code=502)
    return JSONResponse(done.result, status_code=504 if done.status == JobStatus.PARTIAL else 200)


def _finished(state: ServerState, key: str, task: asyncio.Task[dict[str, Any]]) -> None:
    state.inflight.pop(key, None)
    if not task.cancelled():
        task.exception()  # retrieved here: an async job's failure lives on in the ledger


def _report_warm_up(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("math-verify workers did not start: %s", future.exception())


def _failed_body(job_id: str, error: str) -> dict[str, Any]:
    return {"job_id": job_id, "status": JobStatus.FAILED, "error": error, "raw_metrics": {}}


def create_app(config: EvalConfig, *, token: str | None, sandbox: Sandbox | None = None) -> FastAPI:
    """The FastAPI application. ``token`` None turns authentication off (loopback only: the CLI checks).

    Raises UserError for a token shorter than 16 characters or made of whitespace.
    """
    if token is not None:
        check_token(token, f"${config.server.token_env}")
        token = token.strip()  # a trailing newline from a secrets file is not part of it
    server = config.server
    # A broken dataset stops the start-up (DataError), not a trainer's request.
    for bench in config.benchmarks.values():
        load_items(bench)
    server.state_dir.mkdir(parents=True, exist_ok=True)
    warnings: list[str] = []
    if sandbox is None:
        try:
            sandbox = sandbox_from_settings(config.sandbox)
        except EvaluationError as exc:
            if any(b.scorer == "code" for b in config.benchmarks.values()):
                raise
            warnings.append(f"no code sandbox ({exc}); only needed by code benchmarks")
    if sandbox is not None and sandbox.warning:
        warnings.append(sandbox.warning)
    if token is None:
        warnings.append("authentication is off (--no-auth)")
    store = JobStore(server.state_dir / "jobs.sqlite")
    interrupted = store.mark_interrupted(STALE_AFTER_SECS)
    if interrupted:
        logger.warning(
            "%d job(s) were unfinished when the server last stopped; marked failed", interrupted
        )
    for w in warnings:
        logger.warning("%s", w)
    state = ServerState(
        config,
        token,
        store,
        sandbox,
        MathVerifyPool(config.math.workers, config.math.timeout_secs),
        warnings,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        state.slots = HttpSlots(config.model.concurrency)
        if config.judge is not None:
            state.judge_slots = HttpSlots(config.judge.concurrency)
            state.judge_cache = JudgeCache(server.state_dir / "judge_cache.sqlite")
        if any(b.scorer == "math" for b in config.benchmarks.values()):
            # In the background: the server answers /health at once, the first job finds warm workers.
            warming = asyncio.get_running_loop().run_in_executor(None, state.math_pool.start, 1)
            warming.add_done_callback(_report_warm_up)
        beating = asyncio.ensure_future(_heartbeat(store))
        try:
            yield
        finally:
            # A graceful stop (uvicorn has closed its listener and finished the open requests) lets
            # the jobs still running finish, with their heartbeat on: a new server started meanwhile
            # on the same state folder hands their results on instead of running them again.
            running = [task for _, task in state.inflight.values()]
            if running:
                logger.warning("finishing %d running job(s) before stopping", len(running))
                await asyncio.wait(running, timeout=config.server.deadline_secs + 60)
            for task in running:
                task.cancel()
            beating.cancel()
            await state.slots.aclose()
            if state.judge_slots is not None:
                await state.judge_slots.aclose()
            if state.judge_cache is not None:
                state.judge_cache.close()
            state.math_pool.close()
            store.close()

    app = FastAPI(
        title="benchlab evaluation server",
        version="1",
        lifespan=lifespan,
        description="Runs evaluation benchmarks against an OpenAI-compatible model endpoint.",
    )
    app.state.bench = state
    errors: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 429, 502, 504)
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            app.openapi_schema = tighten_schema(
                get_openapi(title=app.title, version=app.version, description=app.description,
                            routes=app.routes),
                config,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    app.add_middleware(BodyLimit, limit=server.max_request_bytes)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            problems.append(
                f"{where}: {err.get('msg', 'invalid')}" if where else str(err.get("msg", "invalid"))
            )
        message = "invalid request: " + "; ".join(problems)
        if request.method == "POST" and "json" not in request.headers.get("content-type", ""):
            message += " (send the body as JSON, with 'Content-Type: application/json')"
        return JSONResponse({"error": message}, status_code=400)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s", request.url.path)
        return JSONResponse({"error": "internal server error"}, status_code=500)

    def authorize(request: Request) -> None:
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

    @app.get("/health")
    async def health() -> dict[str, Any]:
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

    @app.get("/benchmarks", dependencies=[Depends(authorize)], responses=errors)
    async def benchmarks() -> dict[str, Any]:
        """The benchmarks this server can run, with their scorer, size and default parameters."""
        out = []
        for name, bench in sorted(config.benchmarks.items()):
            out.append(
                {
                    "name": name,
                    "scorer": bench.scorer,
                    "api": bench.api,
                    "num_prompts": _count(bench),
                    "description": bench.description,
                    "defaults": bench.defaults.model_dump(),
                }
            )
        return {"benchmarks": out}

    @app.post(
        "/evaluate",
        dependencies=[Depends(authorize)],
        responses={**errors, 202: {"model": QueuedBody}},
        response_model=JobBody,
    )
    async def evaluate_endpoint(req: EvaluateRequest) -> JSONResponse:
        """Evaluate the benchmarks against ``router_url``; with ``async`` answer at once with a job id."""
        runs = resolve_runs(state.config, req)
        defining = req.model_dump(exclude_none=True, exclude={"run_async"})
        try:
            key = evaluation_key(req, runs, state.config.model.name)
        except (OSError, DataError) as exc:
            logger.error("dataset of %s: %s", [r.name for r in runs], exc)
            raise ApiError(502, "a dataset of this server could not be read; see the server log") from None
        identity = None
        if key not in state.inflight:
            elsewhere = store.running_elsewhere(key, STALE_AFTER_SECS)
            if elsewhere is not None:
                # The server before this one is still finishing it (a graceful restart): its result.
                handed = await _handed_over(store, elsewhere, req.run_async)
                if handed is not None:
                    return handed
            assert state.slots is not None
            identity = await served_model_identity(state.slots, req.router_url)
        if key in state.inflight:  # also one that started while the model was asked who it is
            job_id, task = state.inflight[key]
        else:
            if identity is not None and server.reuse_results_secs > 0:
                previous = store.reusable(key, identity, time.time() - server.reuse_results_secs)
                if previous is not None and previous.result is not None:
                    return JSONResponse(previous.result)
            if len(state.inflight) >= server.max_running_jobs:
                raise ApiError(
                    429,
                    f"{len(state.inflight)} evaluations are running, the most this server runs at once "
                    "(server.max_running_jobs); try again later",
                )
            job = store.create(key, defining, identity)
            task = asyncio.ensure_future(_run_job(state, job, req, runs))
            job_id = job.job_id
            state.inflight[key] = (job_id, task)
            task.add_done_callback(functools.partial(_finished, state, key))
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
            return JSONResponse(_failed_body(job_id, str(exc)), status_code=502)
        except Exception:
            return JSONResponse(
                _failed_body(job_id, "internal error while evaluating"), status_code=500
            )

    @app.get(
        "/status/{job_id}",
        dependencies=[Depends(authorize)],
        responses=errors,
        response_model=JobBody,
    )
    async def status(job_id: str) -> JSONResponse:
        """A job's state: queued, running, completed (with ``raw_metrics``) or failed (with ``error``)."""
        job = store.get(job_id) if len(job_id) == 32 else None
        if job is None:
            raise ApiError(404, f"no job {job_id[:64]!r}")
        if job.status in (JobStatus.COMPLETED, JobStatus.PARTIAL) and job.result is not None:
            return JSONResponse(job.result)
        if job.status == JobStatus.FAILED:
            return JSONResponse(_failed_body(job.job_id, job.error or "failed"))
        return JSONResponse({"job_id": job.job_id, "status": job.status, "raw_metrics": {}})

    return app


def _count(bench: BenchmarkConfig) -> int | None:
    try:
        return len(load_items(bench))
    except (BenchlabError, OSError):
        return None
