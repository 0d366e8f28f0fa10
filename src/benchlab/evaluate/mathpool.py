"""Math equivalence through math-verify, in worker processes that are killed when they hang.

math-verify parses answers with latex2sympy and compares them with sympy, which
evaluates what it parses: ``9^{9^{9^9}}`` never finishes. Its own timeout uses
SIGALRM, which only works in a main thread, so inside a server it is off. Here
every comparison runs in a separate process with a wall-clock limit; a worker
past the limit is killed and replaced, and the comparison counts as not equal.

Each worker is owned by one thread of a small thread pool, so the event loop
awaits comparisons without blocking and never shares a pipe between callers.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchlab.errors import EvaluationError


def serve_worker() -> None:
    """The worker's loop: JSON ``[gold, pred]`` lines on stdin, a JSON verdict line on stdout."""
    import logging

    # math-verify logs a warning on every call when its signal timeout is off.
    logging.disable(logging.CRITICAL)
    from math_verify import parse, verify

    def compare(gold: str, pred: str) -> bool | str:
        try:
            g = parse(f"${gold}$", parsing_timeout=None)  # type: ignore[arg-type]
            p = parse(f"${pred}$", parsing_timeout=None)  # type: ignore[arg-type]
            # Gold first: verify() is asymmetric (e.g. sets and intervals in gold).
            return bool(g) and bool(p) and bool(verify(g, p, timeout_seconds=None))
        except Exception as exc:  # a parser bug on odd input is a wrong answer, not a crash
            return f"error: {type(exc).__name__}"

    compare("1", "1")  # warm up the parser's lazy imports before saying ready
    out = sys.stdout
    out.write('"ready"\n')
    out.flush()
    for line in sys.stdin:
        gold, pred = json.loads(line)
        out.write(json.dumps(compare(gold, pred)) + "\n")
        out.flush()


_WORKER_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "HOME")


class _Worker:
    """One worker process, started with ``python -c`` (not multiprocessing: no re-import of __main__)."""

    STARTUP_SECS = 120.0

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from benchlab.evaluate.mathpool import serve_worker; serve_worker()",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            # Only what finding Python packages needs: the server's secrets stay with the server.
            env={k: v for k, v in os.environ.items() if k in _WORKER_ENV},
            text=True,
            bufsize=1,
        )
        if self.read(self.STARTUP_SECS) != "ready":
            self.kill()
            raise EvaluationError(
                "a math-verify worker process did not start (is math-verify installed?)"
            )

    def read(self, timeout: float) -> Any:
        """The next verdict, or None when none came within ``timeout`` seconds or the worker died."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, gold: str, pred: str, timeout: float) -> Any:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps([gold, pred]) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self.read(timeout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


class MathVerifyPool:
    """``workers`` math-verify processes; ``equivalent`` gives up after ``timeout`` seconds.

    Processes start on first use (importing sympy takes about a second) and are
    stopped by ``close``. Safe to call from any thread and from the event loop.
    """

    def __init__(self, workers: int = 2, timeout: float = 10.0) -> None:
        self.workers = max(1, workers)
        self.timeout = timeout
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=self.workers, thread_name_prefix="mathverify"
        )
        self.timeouts = 0

    def start(self, count: int | None = None) -> None:
        """Start ``count`` workers (all when None) now, about a second each, rather than on first use."""
        with self._lock:
            while len(self._all) < min(self.workers, count or self.workers):
                worker = _Worker()
                self._all.append(worker)
                self._idle.put(worker)

    def _take(self) -> _Worker:
        with self._lock:
            if len(self._all) < self.workers and self._idle.empty():
                worker = _Worker()
                self._all.append(worker)
                return worker
        return self._idle.get()

    def equivalent(self, gold: str, pred: str) -> tuple[bool, str]:
        """Whether ``pred`` equals ``gold`` mathematically, and a short reason when it does not."""
        worker = self._take()
        result = worker.ask(gold, pred, self.timeout)
        if result is not None:
            self._idle.put(worker)
            if isinstance(result, str):
                return False, result
            return bool(result), "" if result else "not equivalent"
        # Hung or died: kill it and start a fresh one in its place.
        with self._lock:
            self.timeouts += 1
            worker.kill()
            replacement = _Worker()
            self._all[self._all.index(worker)] = replacement
        self._idle.put(replacement)
        return False, f"math-verify gave no verdict within {self.timeout:g}s"

    async def aequivalent(self, gold: str, pred: str) -> tuple[bool, str]:
        """``equivalent`` for the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.equivalent, gold, pred)

    def close(self) -> None:
        """Stop every worker process."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for worker in self._all:
                worker.kill()
            self._all.clear()
