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
import multiprocessing as mp
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from benchlab.errors import EvaluationError


def _worker(conn: Connection) -> None:
    import logging

    # math-verify logs a warning on every call when its signal timeout is off.
    logging.disable(logging.CRITICAL)
    from math_verify import parse, verify

    # Warm up the parser's lazy imports, then tell the pool this worker is ready:
    # the comparison timeout must not include start-up.
    verify(parse("$1$", parsing_timeout=None), parse("$1$", parsing_timeout=None), timeout_seconds=None)  # type: ignore[arg-type]
    conn.send("ready")
    while True:
        try:
            gold, pred = conn.recv()
        except EOFError:
            return
        try:
            g = parse(f"${gold}$", parsing_timeout=None)  # type: ignore[arg-type]
            p = parse(f"${pred}$", parsing_timeout=None)  # type: ignore[arg-type]
            # Gold first: verify() is asymmetric (e.g. sets and intervals in gold).
            result: Any = bool(g) and bool(p) and bool(verify(g, p, timeout_seconds=None))
        except Exception as exc:  # a parser bug on odd input is a wrong answer, not a crash
            result = f"error: {type(exc).__name__}"
        conn.send(result)


class _Worker:
    STARTUP_SECS = 120.0

    def __init__(self, ctx: Any) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        try:
            ready = self.conn.poll(self.STARTUP_SECS) and self.conn.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise EvaluationError("a math-verify worker process did not start (is math-verify installed?)")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class MathVerifyPool:
    """``workers`` math-verify processes; ``equivalent`` gives up after ``timeout`` seconds.

    Processes start on first use (importing sympy takes about a second) and are
    stopped by ``close``. Safe to call from any thread and from the event loop.
    """

    def __init__(self, workers: int = 2, timeout: float = 10.0) -> None:
        self.workers = max(1, workers)
        self.timeout = timeout
        self._ctx = mp.get_context("spawn")  # fork in a threaded server can copy held locks
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="mathverify")
        self.timeouts = 0

    def _take(self) -> _Worker:
        with self._lock:
            if len(self._all) < self.workers and self._idle.empty():
                worker = _Worker(self._ctx)
                self._all.append(worker)
                return worker
        return self._idle.get()

    def equivalent(self, gold: str, pred: str) -> tuple[bool, str]:
        """Whether ``pred`` equals ``gold`` mathematically, and a short reason when it does not."""
        worker = self._take()
        try:
            worker.conn.send((gold, pred))
            if worker.conn.poll(self.timeout):
                result = worker.conn.recv()
                self._idle.put(worker)
                if isinstance(result, str):
                    return False, result
                return bool(result), "" if result else "not equivalent"
        except (EOFError, OSError, BrokenPipeError):
            pass
        # Hung or died: kill it and start a fresh one in its place.
        with self._lock:
            self.timeouts += 1
            worker.kill()
            replacement = _Worker(self._ctx)
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
