"""`benchlab ui`: the live dashboard of one or more results folders."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from benchlab.cli.app import app, err_console
from benchlab.errors import UsageError

if TYPE_CHECKING:
    from benchlab.ui.first_tables import FirstTables


def _is_loopback(host: str) -> bool:
    from benchlab.cli.cmd_serve import _is_loopback as loopback

    return loopback(host)


@app.command()
def ui(
    results: list[Path] = typer.Argument(None, help="Results folders, or folders whose subfolders are results folders "
                                         "[default: ./results, or the current folder when it holds benchlab.db].",
                                         show_default=False),
    host: str = typer.Option("127.0.0.1", help="Address to bind; anything but loopback needs --token."),
    port: int = typer.Option(8050, help="Port to listen on."),
    token: str | None = typer.Option(None, "--token", envvar="BENCHLAB_UI_TOKEN",
                                     help="Require this token: 'Authorization: Bearer <token>', or the cookie "
                                          "that the one-time URL printed at start sets."),
    allow_host: list[str] = typer.Option([], "--allow-host", help="Also answer requests for this host name (a "
                                         "proxy's or DNS name of this machine); repeatable. Others get 400."),
    log_level: str = typer.Option("warning", help="uvicorn log level."),
    nice: bool = typer.Option(True, "--nice/--no-nice", help="Run at the lowest CPU priority (nice 19), so that "
                              "a sweep on the same machine is never slowed by the dashboard."),
) -> None:
    """Serve a live, read-only dashboard: sweeps, seed grids, curves with seed bands, comparisons, logs."""
    from benchlab.names.extras import require

    require("serve", "benchlab ui")
    if not _is_loopback(host) and not token:
        raise UsageError(f"refusing to listen on {host} without a token: pass --token (or set $BENCHLAB_UI_TOKEN); "
                   "browsers then log in with the one-time URL printed here")
    if token is not None and len(token) < 8:
        raise UsageError(f"--token must be at least 8 characters, got {len(token)}")
    from benchlab.names.results_files import LEDGER_FILE

    if not results:
        here = Path.cwd()
        results = [here] if (here / LEDGER_FILE).exists() else [here / "results"]
    if nice:
        # The dashboard yields the CPU to a sweep on the same machine: it gets what the runs leave.
        os.nice(19 - os.nice(0))
    from benchlab.ui.first_tables import FirstTables

    # First, so that the tables the report never kept are computed on another core while this
    # process imports the web stack (the worker inherits the niceness).
    first = FirstTables.start(list(results))
    try:
        _serve(results, first, host, port, token, allow_host, log_level)
    finally:
        first.close()


def _serve(results: list[Path], first: FirstTables, host: str, port: int, token: str | None,
           allow_host: list[str], log_level: str) -> None:
    from benchlab.ui import Library, create_app
    from benchlab.ui.hosts import served_hosts

    library = Library(list(results))
    application = create_app(library, token=token, allowed_hosts=served_hosts(host, allow_host),
                             first_tables=first)
    import uvicorn

    shown = f"[{host}]" if ":" in host else host
    names = ", ".join(b.key for b in library.benchmarks()) or "none yet"
    err_console.print(f"benchlab ui on http://{shown}:{port}/ (benchmarks: {names}; read-only)", markup=False)
    if token:
        code = application.state.access.login_code
        err_console.print(f"open once to log in: http://{shown}:{port}/login/{code}", markup=False)
        err_console.print("or send 'Authorization: Bearer <token>'; any URL with ?token=<token> logs in too",
                          markup=False)
    try:
        uvicorn.run(application, host=host, port=port, log_level=log_level, access_log=False)
    finally:
        library.close()
