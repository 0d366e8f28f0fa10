"""What the journey tests share: the commands a user types, run for real, and a few looks at
what they leave behind (the ledger read as `benchlab status --json` prints it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchlab_testing import run_cli, started

SRC = str(Path(__file__).parents[2] / "src")


def benchlab(root: Path, *args: str, code: int | None = 0, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``benchlab ARGS`` in ``root``; with ``code``, its exit code must be that one."""
    proc = run_cli(*args, cwd=root, timeout=timeout)
    if code is not None:
        assert proc.returncode == code, f"benchlab {' '.join(args)} exited {proc.returncode}, not {code}:\n" \
                                        f"{proc.stdout}\n{proc.stderr}"
    return proc


def status(root: Path, results: str) -> dict:
    return json.loads(benchlab(root, "status", results, "--json").stdout)


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    """``benchlab ARGS`` in the background, as a user starts a long sweep in another shell."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "200",
           "NO_COLOR": "1"}
    return started(subprocess.Popen([sys.executable, "-m", "benchlab", *args], cwd=root, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE))


def wait_for(cond: Callable[[], bool], within: float = 120.0) -> None:
    """Until ``cond()`` holds (a bounded wait for a state, never a fixed sleep)."""
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "r", "GIT_AUTHOR_EMAIL": "r@example.org", "GIT_COMMITTER_NAME": "r",
           "GIT_COMMITTER_EMAIL": "r@example.org", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env).stdout
