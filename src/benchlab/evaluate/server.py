"""The evaluation server: the HTTP API a trainer delegates evaluation to.

``POST /evaluate`` takes ``{rollout_id, router_url, benchmarks: [{name, ...}]}``,
evaluates every benchmark against ``router_url + /v1`` and answers
``{job_id, status, raw_metrics, runs, output_dir, log_path, command}``; with
``"async": true`` it answers at once with a ``job_id`` to poll at
``GET /status/{job_id}``. ``GET /health`` and ``GET /benchmarks`` describe the
server. Every refusal is ``{"error": message, "detail": message}``, one line naming the field
or header at fault, and is logged once per kind within the log's repeat window. Every route,
the API description (``/openapi.json``, ``/docs``, ``/redoc``) included, needs the token but
``/health``; without a token the server answers only the host names it is served on.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from benchlab.errors import EvaluationError, UserError
from benchlab.evaluate.config import EvalConfig
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.jobs import JobStore
from benchlab.evaluate.judge import JudgeCache
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.model import HttpSlots
from benchlab.evaluate.protocol import ApiError, tighten_schema
from benchlab.evaluate.routes import router
from benchlab.evaluate.sandbox import Sandbox, sandbox_from_settings
from benchlab.evaluate.serving import STALE_AFTER_SECS, ServerState, heartbeat, report_warm_up
from benchlab.json_types import JsonObject
from benchlab.ui.hosts import HostCheck

logger = logging.getLogger("benchlab.evaluate")

MIN_TOKEN_LENGTH = 16


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


def refusal(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The answer to a refused request: its status and one line, under ``error`` and ``detail``.

    Logged with the status in the format string, so the log's repeat filter (``guard.RepeatFilter``)
    writes one line per kind of refusal per window however many a client sends.
    """
    logger.warning(f"refused with HTTP {status}: %s", message[:300])
    return JSONResponse({"error": message, "detail": message}, status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, declared or streamed (chunked); 408 for one
    that has not fully arrived ``timeout`` seconds after the application first asked for it.

    The 408 closes the connection (``Connection: close``): what is left of a late body is never read.
    """

    def __init__(self, app: Any, limit: int, timeout: float | None = None) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body over {self.limit} bytes (server.max_request_bytes)"
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await refusal(413, f"body: {too_large}", {"Connection": "close"})(scope, receive, send)
            return
        received = 0
        deadline: float | None = None
        loop = asyncio.get_running_loop()

        complete = False

        async def limited_receive() -> Any:
            nonlocal received, deadline, complete
            if self.timeout is None or complete:  # after the body, a wait for a disconnect is no body read
                message = await receive()
            else:
                deadline = deadline or loop.time() + self.timeout
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    # Raised while the route reads its body: FastAPI passes HTTPException through.
                    raise HTTPException(
                        408, f"body: not received within {self.timeout:g}s (server.body_timeout_secs)",
                        headers={"Connection": "close"},
                    ) from None
            if message["type"] == "http.request":
                complete = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise HTTPException(413, f"body: {too_large}", headers={"Connection": "close"})
            return message

        await self.app(scope, limited_receive, send)


def create_app(config: EvalConfig, *, token: str | None, sandbox: Sandbox | None = None,
               allowed_hosts: list[str] | None = None) -> FastAPI:
    """The FastAPI application. ``token`` None turns authentication off (loopback only: the CLI checks).

    ``allowed_hosts`` (``benchlab.ui.hosts.served_hosts``) are the only ``Host`` names answered
    (None: any; ``serve --no-auth`` passes its own). Raises UserError for a token shorter than 16
    characters or made of whitespace.
    """
    if token is not None:
        check_token(token, f"${config.server.token_env}")
        token = token.strip()  # a trailing newline from a secrets file is not part of it
    state = _open_state(config, token, sandbox)
    app = FastAPI(
        title="benchlab evaluation server",
        version="1",
        lifespan=functools.partial(_lifespan, state=state),
        description="Runs evaluation benchmarks against an OpenAI-compatible model endpoint.",
        # Served by routes.py behind the token, like every route but /health.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.bench = state

    def openapi() -> JsonObject:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            app.openapi_schema = tighten_schema(
                get_openapi(title=app.title, version=app.version, description=app.description,
                            routes=app.routes),
                config,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(BodyLimit, limit=config.server.max_request_bytes, timeout=config.server.body_timeout_secs)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed_hosts=allowed_hosts)  # outermost: checked before anything
    _add_error_handlers(app)
    app.include_router(router)
    return app


def _open_state(config: EvalConfig, token: str | None, sandbox: Sandbox | None) -> ServerState:
    """Check the datasets, pick the sandbox, open the job ledger (failing the jobs a dead server left)."""
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
    return ServerState(
        config,
        token,
        store,
        sandbox,
        MathVerifyPool(config.math.workers, config.math.timeout_secs),
        warnings,
    )


@asynccontextmanager
async def _lifespan(app: FastAPI, *, state: ServerState) -> AsyncIterator[None]:
    config = state.config
    state.slots = HttpSlots(config.model.concurrency)
    if config.judge is not None:
        state.judge_slots = HttpSlots(config.judge.concurrency)
        state.judge_cache = JudgeCache(config.server.state_dir / "judge_cache.sqlite")
    if any(b.scorer == "math" for b in config.benchmarks.values()):
        # In the background: the server answers /health at once, the first job finds warm workers.
        warming = asyncio.get_running_loop().run_in_executor(None, state.math_pool.start, 1)
        warming.add_done_callback(report_warm_up)
    beating = asyncio.ensure_future(heartbeat(state.store))
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
        state.store.close()


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal is one line (``refusal``), a validation error's naming the fields."""
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return refusal(exc.status, exc.message)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"path: no route {request.url.path[:100]!r}"
        elif exc.status_code == 405:
            message = f"method: {request.method} is not allowed on {request.url.path[:100]!r}"
        return refusal(exc.status_code, message, dict(exc.headers) if exc.headers else None)

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
        return refusal(400, message)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s", request.url.path)
        return JSONResponse({"error": "internal server error"}, status_code=500)
