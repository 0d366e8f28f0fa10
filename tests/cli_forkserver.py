"""A fork server for the tests' `benchlab` commands: one process per test worker imports the heavy
third-party libraries once (numpy, pandas, scipy, matplotlib, pydantic, typer, rich), then forks a
fresh process for every command, which runs ``python -m benchlab ARGS`` as the interpreter would.

Each command still runs in a process of its own, with its own working directory, environment,
standard streams, exit code and pid (a timeout kills it as ``subprocess.run`` does); what it is
spared is importing the libraries again, about two seconds of CPU per command, which on two cores
was a good part of the suite's time. benchlab's own library modules that the commands import are
imported ahead too (``PRELOAD_BENCHLAB``; about 0.15-0.25 s of CPU a command): none of
them reads the environment, the working directory or a stream when imported, which
tests/test_cli_forkserver.py checks, so each command still runs every line of its own code with
what it was given. ``benchlab.cli`` is imported by every command from scratch: its consoles read the
terminal, ``COLUMNS`` and ``NO_COLOR`` when they are made. A command whose environment differs from
the server's in what is read at import (``PYTHON*``, locale, thread counts, matplotlib's settings)
runs in a plain subprocess instead (see ``benchlab_testing.run_cli``).

Protocol, over a Unix socket, one connection per command: the client sends a length-prefixed JSON
request ``{"args", "cwd", "env"}`` with three descriptors attached (stdin, stdout, stderr); the
server answers ``{"pid": N}`` when the command has started and ``{"code": N}`` when it has ended
(negative: killed by that signal, as ``subprocess`` says it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

PRELOAD = ("numpy", "pandas", "scipy.special", "scipy.stats", "matplotlib", "matplotlib.figure",
           "matplotlib.backends.backend_agg", "pydantic", "typer", "click", "rich.console", "rich.table",
           "yaml", "jinja2", "psutil", "pyarrow")

#: benchlab's modules imported ahead, with what they import: the command-level modules of the
#: commands the tests run most (run, report, status, compare, analyze, export, diff, collect, logs).
#: One missing here is imported by the command itself; one that fails to import here is too (and
#: fails there, as it would in a plain process).
PRELOAD_BENCHLAB = (
    "benchlab.spec.load", "benchlab.spec.paths", "benchlab.results", "benchlab.triage", "benchlab.evalrules",
    "benchlab.execute.sweep", "benchlab.execute.local", "benchlab.execute.status", "benchlab.execute.gpus",
    "benchlab.execute.provenance", "benchlab.execute.watch", "benchlab.execute.api",
    "benchlab.collect.rebuild", "benchlab.collect.reread", "benchlab.collect.lm_eval", "benchlab.collect.samples_table",
    "benchlab.stats.results_analysis", "benchlab.report.writer", "benchlab.report.comparison",
    "benchlab.report.numbers", "benchlab.report.plots", "benchlab.report.profiles", "benchlab.report.html",
    "benchlab.report.questions", "benchlab.history.export", "benchlab.history.diff", "benchlab.history.diff_text",
    "benchlab.history.diff_questions", "benchlab.history.merge", "benchlab.names.extras",
)

#: What the preloaded modules (or the interpreter) read from the environment when they are imported:
#: a command whose environment differs from the server's in one of these is not forked.
IMPORT_TIME_ENV = ("PYTHON", "LANG", "LC_", "OMP_", "OPENBLAS_", "MKL_", "NUMEXPR_", "MPL", "MATPLOTLIB", "TZ",
                   "NPY_", "GOTO_", "VECLIB_", "PYDANTIC", "TYPER", "_TYPER", "TERMINAL_WIDTH", "GITHUB_ACTIONS",
                   "FORCE_COLOR", "PY_COLORS", "BENCHLAB_FLUSH_S")


def send_message(conn: socket.socket, obj: object, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    payload = struct.pack("!I", len(data)) + data
    if fds:
        sent = socket.send_fds(conn, [payload], fds)
        conn.sendall(payload[sent:])
    else:
        conn.sendall(payload)


def recv_message(conn: socket.socket, want_fds: int = 0) -> tuple[object, list[int]]:
    head = b""
    fds: list[int] = []
    while len(head) < 4:
        if want_fds and not fds:
            chunk, fds, _, _ = socket.recv_fds(conn, 4 - len(head), want_fds)
        else:
            chunk = conn.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        head += chunk
    (size,) = struct.unpack("!I", head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        body += chunk
    return json.loads(body), list(fds)


def _die_with_parent() -> None:
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _serve(path: str) -> dict:
    """Accept commands until killed; returns only in a forked command's process, with its request."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the per-command handlers are reaped by the kernel
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            return _handle(conn)
        conn.close()


def _handle(conn: socket.socket) -> dict:
    """In a handler process: start the command, report its pid and, once it ends, its exit code."""
    try:
        req, fds = recv_message(conn, want_fds=3)
        pid = os.fork()
    except BaseException:
        os._exit(1)
    if pid == 0:
        conn.close()
        _become_command(req, fds)  # type: ignore[arg-type]
        return req  # type: ignore[return-value]
    for fd in fds:
        os.close(fd)
    try:
        send_message(conn, {"pid": pid})
        _, status, usage = os.wait4(pid, 0)
        send_message(conn, {"code": os.waitstatus_to_exitcode(status), "cpu": usage.ru_utime + usage.ru_stime})
    finally:
        os._exit(0)


def _become_command(req: dict, fds: list[int]) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # a fresh interpreter seeds numpy's global generator from the OS
        numpy.random.seed()
    sys.path[0] = os.getcwd()  # as `python -m` sets it


def _exit(code: int) -> None:
    """End as the interpreter ends a program (its threads joined, its exit functions run, the
    streams flushed, its garbage collected) but without tearing down every module one by one: with
    the preloaded libraries that teardown alone costs more than the imports it saved."""
    import atexit
    import gc
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    _die_with_parent()
    for name in PRELOAD + PRELOAD_BENCHLAB:
        try:
            __import__(name)
        except Exception:  # a library that is not installed is imported by the command, if at all
            pass
    request = _serve(sys.argv[1])
    import runpy

    sys.argv = ["benchlab", *request["args"]]
    try:
        runpy.run_module("benchlab", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    _exit(code)
