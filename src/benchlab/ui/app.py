"""The dashboard's web application: pages, their live parts, the change feed, the token.

Every page is HTML rendered here; its live part (``<main id="live">``) is fetched again by
``ui.js`` when ``/api/changes`` says that its benchmark's version moved (polled every second),
so a change shows within two seconds without a reload. A page sends the version it shows
(``?have=N``) and gets 204 while the server has nothing newer for it: the costly views are made
again at most as often as :data:`RECOMPUTE_SHARE` allows, not at every change of a live sweep.
The curves page draws with the plotly.js that the ``plotly`` package ships, served from that
package's own file.

With a token, every request needs it: ``Authorization: Bearer <token>``, or the cookie that
the one-time URL printed at start (``/login/<code>``) or any URL with ``?token=<token>`` sets.

A request whose ``Host`` header names another host than those the dashboard is served on
(:func:`benchlab.ui.hosts.served_hosts`) is refused with 400 (:class:`benchlab.ui.hosts.HostCheck`): a page of
another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) cannot read the
dashboard through the user's browser.
"""

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.exceptions import HTTPException

from benchlab.execute.status import duration_text  # as `benchlab status` prints its ETA
from benchlab.ledger import COMPLETED, FAILED, INTERRUPTED, PENDING, RUNNING, Status, read_only_ledgers
from benchlab.names.run_files import LOG_FILE
from benchlab.ui import tables, views
from benchlab.ui.first_tables import FirstTables
from benchlab.ui.hosts import HostCheck
from benchlab.ui.library import Library, NotFound, masked_file, tail

COOKIE = "benchlab_ui"
STATIC = Path(__file__).parent / "static"


@dataclass
class Access:
    """Who may look: nobody needs anything without a token; with one, the bearer, the holder
    of the session cookie, or the first opener of the one-time login code."""

    token: str | None = None
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    login_code: str | None = field(default_factory=lambda: secrets.token_urlsafe(24))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allows(self, bearer: str | None, cookie: str | None) -> bool:
        if self.token is None:
            return True
        if bearer is not None and hmac.compare_digest(bearer.encode(), self.token.encode()):
            return True
        return cookie is not None and hmac.compare_digest(cookie.encode(), self.session.encode())

    def is_token(self, value: str) -> bool:
        return self.token is not None and hmac.compare_digest(value.encode(), self.token.encode())

    def use_code(self, code: str) -> bool:
        """True the first time the login code is presented, never again."""
        with self._lock:
            if self.login_code is None or not hmac.compare_digest(code.encode(), self.login_code.encode()):
                return False
            self.login_code = None
            return True


#: How long a view that costs more than the page around it is served as it is while its benchmark
#: keeps changing: the report's tables (statistics over every run) and the curves. A sweep of short
#: runs changes its ledger many times a second; recomputing these at each change would take the
#: CPU the sweep needs.
NUMBERS_FRESH_S = 5.0
CURVES_FRESH_S = 1.0
#: The most of one core that recomputing one view may take while its benchmark keeps changing: a
#: view is served as it is for at least its last computation's CPU time over this share (a grid
#: of 10,000 runs that takes 0.1 s is made again at most every 2 s, the report's tables that take
#: 3 s every minute). Every view the pages show is bounded so, the cheap grid included, whatever
#: the benchmark's size and however many pages are open: the sweep keeps the rest of the machine.
RECOMPUTE_SHARE = 0.05


@dataclass(frozen=True)
class _Made:
    """A view as computed: the benchmark's ``version`` it was made at, when (``at``, the cache's
    clock) and the CPU seconds its computation took (``cost``)."""

    version: int
    value: Any
    at: float
    cost: float


class _Cache:
    """Views computed once per version of their benchmark (a computation per key at a time), and
    while it keeps changing, at most as often as :data:`RECOMPUTE_SHARE` allows."""

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time, share: float = RECOMPUTE_SHARE) -> None:
        self._values: dict[tuple[Any, ...], _Made] = {}
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._guard = threading.Lock()
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._share = share

    def get(self, key: tuple[Any, ...], version: int, make: Callable[[], Any],
            fresh_for: float = 0.0) -> tuple[int, Any]:
        """``(version it was made at, value)``: made again when ``version`` moved, unless the
        value is younger than ``fresh_for`` seconds or than its cost over the share (the caller
        then sees its older version)."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            hit = self._values.get(key)
            if hit is not None and (hit.version == version or
                                    self._clock() - hit.at < max(fresh_for, hit.cost / self._share)):
                return hit.version, hit.value
            # CPU time, not wall time: at nice 19 on a busy machine a computation waits for the
            # CPU far longer than it uses it, and only what it uses is taken from the sweep.
            started = self._cpu_clock()
            value = make()
            made = _Made(version, value, self._clock(), self._cpu_clock() - started)
            self._values[key] = made
            return made.version, made.value


def _when(ts: float | None) -> str:
    return "—" if ts is None else datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _duration(s: float | None) -> str:
    return duration_text(s)


#: The states a benchmark's counts show, in this order.
COUNTED_STATES = (COMPLETED, RUNNING, FAILED, PENDING, INTERRUPTED)


def _state_label(status: str) -> str:
    """A run's state as the pages say it: a pending run is "queued"."""
    return "queued" if status == PENDING else status


def _environment() -> Any:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("benchlab.ui", "templates"), autoescape=select_autoescape(["html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = _when
    env.filters["duration"] = _duration
    env.filters["cell"] = views.cell_html
    env.filters["state_label"] = _state_label
    env.globals["urlencode"] = urlencode
    env.globals["Status"] = Status
    env.globals["COUNTED_STATES"] = COUNTED_STATES
    return env


def plotly_js() -> Path | None:
    """plotly.js as the installed ``plotly`` package ships it, or None without the package."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
    return path if path.is_file() else None


class _ReadOnlyLedgers:
    """ASGI middleware: each request is handled inside :func:`~benchlab.ledger.read_only_ledgers`,
    so every ledger it opens (in its task, and in the worker threads it runs endpoints in, which
    inherit the context) refuses writes."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        with read_only_ledgers():
            await self.app(scope, receive, send)


class _Activity:
    """Whether requests are being served: how many are in flight and when the last one ended (or
    the app was made), so that the warm-up can leave its optional work until the pages a user just
    opened have been answered."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._in_flight = 0
        self._last = clock()
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._last = self._clock()

    def wait_quiet(self, quiet_s: float, limit_s: float, sleep: Callable[[float], None] = time.sleep) -> None:
        """Return once no request has been in flight for ``quiet_s`` seconds, or after ``limit_s``."""
        deadline = self._clock() + limit_s
        while self._clock() < deadline:
            with self._lock:
                if self._in_flight == 0 and self._clock() - self._last >= quiet_s:
                    return
            sleep(0.05)


class _Counted:
    """ASGI middleware: every request is counted in :class:`_Activity` while it is served."""

    def __init__(self, app: Any, activity: _Activity) -> None:
        self.app = app
        self.activity = activity

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.activity.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.activity.leave()


#: The warm-up's imports wait, where every benchmark's tables were kept by the report, until the
#: server has answered no request for this long (at most :data:`WARM_WAIT_LIMIT_S`): a user's
#: first pages are then served without sharing the interpreter with a second of imports. Counted
#: from the app's making too, which comes a few tenths of a second before the server listens.
WARM_QUIET_S = 1.0
WARM_WAIT_LIMIT_S = 10.0


def create_app(library: Library, *, token: str | None = None, warm_up: bool = True,
               allowed_hosts: list[str] | None = None, first_tables: FirstTables | None = None) -> Any:
    """The FastAPI application serving ``library``; ``token`` guards every request; ``warm_up``
    computes each benchmark's page in the background from the start; ``allowed_hosts`` (see
    :func:`benchlab.ui.hosts.served_hosts`) are the only ``Host`` names answered (None: any, for
    tests in process); ``first_tables`` (:mod:`benchlab.ui.first_tables`) computes the report's
    tables the report did not keep in a process of its own, started before this."""
    app = FastAPI(title="benchlab ui", docs_url=None, redoc_url=None, openapi_url=None)
    # Whatever a request opens through the library's readers is opened read-only; the rest of
    # the process (a program that built this app) still writes its ledgers.
    app.add_middleware(_ReadOnlyLedgers)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed_hosts=allowed_hosts)
    app.state.library = library
    access = Access(token=token)
    app.state.access = access
    cache = _Cache()
    activity = _Activity()
    app.add_middleware(_Counted, activity=activity)
    if warm_up:
        threading.Thread(target=_warm, args=(library, cache, partial(activity.wait_quiet, WARM_QUIET_S,
                                                                     WARM_WAIT_LIMIT_S), first_tables),
                         name="benchlab-ui-warm", daemon=True).start()
    _add_access(app, access)
    plotly = plotly_js()
    app.include_router(_page_router(library, cache, _environment(), plotly, first_tables))
    app.include_router(_data_router(library, cache, plotly))
    return app


def _warm(library: Library, cache: _Cache, quiet: Callable[[], None] = lambda: None,
          first: FirstTables | None = None) -> None:
    # The first page of each benchmark is computed before anyone asks, and the statistics'
    # imports paid at start, so that a first response is as quick as the next ones, and a
    # dashboard left open before a sweep starts does not pay them while the sweep runs. The
    # pages' cheap parts first: a page asked for meanwhile would wait for the imports' CPU. Then
    # the report's tables that `benchlab report` kept and that are still current (a digest of the
    # ledger and one small file, no statistics), and only then the tables of the benchmarks whose
    # kept tables were missing or stale: taken from the first-tables worker where one was started
    # (this process imports nothing meanwhile, so that the worker has the other core), else
    # computed here after the imports.
    try:
        with read_only_ledgers():
            found = library.benchmarks()
            for b in found:
                v = library.version_of(b.key)
                cache.get(("overview", b.key), v, partial(views.overview, b))
                cache.get(("benchmark", b.key), v, partial(views.benchmark_view, b))
            missing = []
            for b in found:
                v = library.version_of(b.key)  # before the digest: a change meanwhile is seen as one
                kept = tables.kept_numbers(b.folder)
                if kept is None:
                    missing.append(b)
                else:
                    cache.get(("numbers", b.key), v, partial(_given, kept))
            if first is not None:
                for b in missing:
                    cache.get(("numbers", b.key), library.version_of(b.key),
                              partial(tables.report_numbers, b.folder, first))
                first.wait()
                missing = []
            if not missing:
                quiet()  # nothing waits on the imports now: the pages being asked for go first
            tables.load_analysis()
            for b in missing:
                cache.get(("numbers", b.key), library.version_of(b.key), partial(tables.report_numbers, b.folder))
    except Exception:  # noqa: BLE001 - a page computes it again, and shows the error there
        pass


def _given(value: Any) -> Any:
    return value


def _has(request: Request, version: int) -> bool:
    """Whether the page asking already shows ``version`` of what it asks for (``?have=N``)."""
    return request.query_params.get("have") == str(version)


def _unchanged(version: int) -> Response:
    """The answer to a page that already shows ``version``: nothing to render, send or put in place
    (while a sweep runs, a page asks about once a second and a costly view is made less often)."""
    return Response(status_code=204, headers={"X-Version": str(version), "Cache-Control": "no-store"})


def _add_access(app: FastAPI, access: Access) -> None:
    """The token guard in front of every request, the one-time login links, and 404 for what is not there."""
    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Any]) -> Any:
        if access.token is None:
            return await call_next(request)
        path = request.url.path
        if path.startswith("/login/"):
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and access.is_token(given):
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = path + (f"?{urlencode(rest)}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            _set_cookie(response)
            return response
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        if access.allows(bearer, request.cookies.get(COOKIE)):
            return await call_next(request)
        return PlainTextResponse("unauthorized: open the URL that `benchlab ui` printed, or send "
                                 "'Authorization: Bearer <token>'", status_code=401)

    def _set_cookie(response: Any) -> None:
        response.set_cookie(COOKIE, access.session, httponly=True, samesite="strict")

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Any:
        return PlainTextResponse("not found", status_code=404)

    @app.get("/login/{code}")
    def login(code: str) -> Any:
        if not access.use_code(code):
            return PlainTextResponse("this login link was used already: ask for a new one, or send the token "
                                     "('Authorization: Bearer <token>' or ?token=<token>)", status_code=401)
        response = RedirectResponse("/", status_code=303)
        _set_cookie(response)
        return response


def _page_router(library: Library, cache: _Cache, env: Any, plotly: Path | None,
                 first: FirstTables | None = None) -> APIRouter:
    """The HTML pages: the benchmarks, one benchmark, its numbers and curves, one run."""
    router = APIRouter()

    def page(name: str, request: Request, version: int, bench: str, **context: Any) -> Any:
        fragment = request.query_params.get("fragment") == "1"
        if fragment and _has(request, version):
            return _unchanged(version)
        text = env.get_template(name).render(fragment=fragment, bench=bench, version=version,
                                             request=request, **context)
        return HTMLResponse(text, headers={"X-Version": str(version), "Cache-Control": "no-store"})

    @router.get("/", response_class=HTMLResponse)
    def index(request: Request) -> Any:
        versions = library.versions()
        total = sum(versions.values())
        benches = [b for b in library.benchmarks() if b.key in versions]
        rows = [cache.get(("overview", b.key), versions[b.key], partial(views.overview, b))[1] for b in benches]
        # Folders whose benchmarks share a name are told apart by their folder.
        names = [r.name for r in rows]
        where = {b.key: str(b.folder) for b, r in zip(benches, rows, strict=True) if names.count(r.name) > 1}
        return page("index.html", request, total, "*", rows=rows, where=where, title="Benchmarks")

    @router.get("/b/{key}", response_class=HTMLResponse)
    def benchmark(request: Request, key: str) -> Any:
        bench = library.get(key)
        version, view = cache.get(("benchmark", key), library.version_of(key),
                                  lambda: views.benchmark_view(bench))
        return page("benchmark.html", request, version, key, view=view, title=view.overview.name,
                    seeds_shown=views.SEEDS_SHOWN)

    @router.get("/b/{key}/numbers", response_class=HTMLResponse)
    def numbers(request: Request, key: str) -> Any:
        """The report's tables of the benchmark, as HTML to put in its page."""
        bench = library.get(key)
        version, numbers = cache.get(("numbers", key), library.version_of(key),
                                     partial(tables.report_numbers, bench.folder, first), NUMBERS_FRESH_S)
        if _has(request, version):
            return _unchanged(version)
        text = env.get_template("numbers.html").render(numbers=numbers, bench=key)
        return HTMLResponse(text, headers={"X-Version": str(version), "Cache-Control": "no-store"})

    @router.get("/b/{key}/curves", response_class=HTMLResponse)
    def curves(request: Request, key: str, task: str | None = None, metric: str | None = None,
               x: str = "step", seeds: int = 0) -> Any:
        bench = library.get(key)
        version, view = cache.get(("benchmark", key), library.version_of(key),
                                  lambda: views.benchmark_view(bench))
        choices = view.curves
        if choices and (task, metric) not in choices:
            task, metric = choices[0] if task is None else next(
                ((t, m) for t, m in choices if t == task), choices[0])
        return page("curves.html", request, version, key, view=view, task=task, metric=metric,
                    x="time" if x == "time" else "step", seeds=bool(seeds), choices=choices,
                    has_plotly=plotly is not None, title=f"{view.overview.name}: curves")

    @router.get("/b/{key}/runs/{run_id}", response_class=HTMLResponse)
    def run(request: Request, key: str, run_id: str) -> Any:
        bench = library.get(key)
        folder = library.run_dir(key, run_id)
        version = library.version_of(key)
        view = views.run_view(bench, folder, run_id)
        return page("run.html", request, version, key, run=view, title=view.name,
                    bench_name=views.overview(bench).name)
    return router


def _data_router(library: Library, cache: _Cache, plotly: Path | None) -> APIRouter:
    """What the pages fetch: the change counter, curve data, run logs and files, static files."""
    router = APIRouter()

    @router.get("/api/changes")
    def changes(since: int = -1) -> Any:
        """Each benchmark's version and their sum; ``changed`` names those past ``since``'s sum."""
        versions = library.versions()
        total = sum(versions.values())
        return JSONResponse({"version": total, "changed": total != since, "benchmarks": versions},
                            headers={"Cache-Control": "no-store"})

    @router.get("/b/{key}/curves.json")
    def curves_json(request: Request, key: str, task: str, metric: str) -> Any:
        bench = library.get(key)
        version, data = cache.get(("curves", key, task, metric), library.version_of(key),
                                  partial(views.curves_data, bench, task, metric), CURVES_FRESH_S)
        if _has(request, version):
            return _unchanged(version)
        return JSONResponse({**data.to_json(), "version": version}, headers={"Cache-Control": "no-store"})

    @router.get("/b/{key}/runs/{run_id}/log", response_class=PlainTextResponse)
    def run_log(key: str, run_id: str, lines: int = views.LOG_TAIL_LINES) -> Any:
        path = library.run_dir(key, run_id) / LOG_FILE
        if not path.is_file():
            raise NotFound(run_id)
        return PlainTextResponse(tail(path, max(1, min(lines, 10_000))), headers={"Cache-Control": "no-store"})

    @router.get("/b/{key}/runs/{run_id}/files/{name:path}")
    def run_file(key: str, run_id: str, name: str) -> Any:
        path = library.run_file(key, run_id, name)
        masked = masked_file(path)
        if masked is not None:
            return StreamingResponse(masked, media_type="text/plain; charset=utf-8")
        return FileResponse(path, media_type="text/plain; charset=utf-8")

    @router.get("/static/{name}")
    def static(name: str) -> Any:
        if name == "plotly.min.js" and plotly is not None:
            return FileResponse(plotly, media_type="text/javascript")
        path = STATIC / name
        if name not in {p.name for p in STATIC.iterdir()}:
            raise HTTPException(404)
        return FileResponse(path)
    return router
