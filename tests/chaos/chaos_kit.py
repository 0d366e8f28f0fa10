"""What the chaos tests share: benchlab started in the background, and checks of a ledger."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from benchlab_testing import started

SRC = str(Path(__file__).parents[2] / "src")


def start(root: Path, *args: str, ctrl_c: bool = False) -> subprocess.Popen[str]:
    """``benchlab *args`` in ``root``; with ``ctrl_c``, SIGINT as a terminal leaves it (pytest-xdist's
    workers ignore SIGINT, and a process started ignoring it never raises KeyboardInterrupt)."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "COLUMNS": "200", "NO_COLOR": "1"}
    return started(subprocess.Popen([sys.executable, "-m", "benchlab", *args], cwd=root, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    preexec_fn=_default_sigint if ctrl_c else None))


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def completed(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status = 'completed'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def wait_for(cond: Callable[[], bool], within: float = 60.0, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + within
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"benchlab exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check_ledger(db: Path) -> dict[str, int]:
    """Integrity, and completions per run: each run completed at most once."""
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    per_run = dict(con.execute("SELECT run_id, COUNT(*) FROM attempts WHERE status = 'completed' "
                               "GROUP BY run_id"))
    assert set(per_run.values()) <= {1}, per_run
    return dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status"))


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def survivors(key_prefix: str) -> list[psutil.Process]:
    """Live processes whose environment holds an attempt key starting with ``key_prefix``."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            key = proc.environ().get("BENCHLAB_ATTEMPT_KEY", "")
            if key.startswith(key_prefix) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found
