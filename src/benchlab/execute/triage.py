"""Failure triage: what kind of failure an attempt's end was, read from its exit and log tail."""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAIL_LINES = 20
TAIL_BYTES = 16384

# Failure classes, in the ledger's `attempts.failure_class`.
TIMEOUT = "timeout"
OOM = "out-of-memory"
CUDA = "cuda-error"
EXCEPTION = "exception"
SIGNAL = "signal"
EXIT_CODE = "exit-code"
MISSING_METRIC = "missing-metric"
LAUNCH = "launch-error"
INTERRUPTED = "interrupted"
LOST = "orchestrator-died"
NODE_DIED = "node-died"  # a cluster worker or node died under the attempt

_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|out of memory|MemoryError|"
                  r"Cannot allocate memory|std::bad_alloc|RESOURCE_EXHAUSTED", re.I)
_CUDA = re.compile(r"CUDA error|cudaError|CUBLAS_STATUS|CUDNN_STATUS|NCCL error|"
                   r"device-side assert|illegal memory access", re.I)


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log, ANSI colours removed (reads at most 16 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return ""
    # Imported here: `benchlab status` classifies failures without loading the extractors.
    from benchlab.collect.extractors import strip_ansi

    text = strip_ansi(data.decode("utf-8", errors="replace"))
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class Verdict:
    failure_class: str
    error: str


def _last_exception(tail: str) -> str | None:
    """The exception line of the last Python traceback in ``tail``: the first unindented line after it."""
    lines = tail.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last)")]
    if not starts:
        return None
    for line in lines[starts[-1] + 1:]:
        if line.strip() and not line[0].isspace():
            return line.strip()
    return None


def classify(*, exit_code: int | None, signal: int | None, timed_out: bool, tail: str,
             timeout: float | None = None) -> Verdict:
    """Classify a failed attempt; the error is one line a person can act on."""
    if timed_out:
        return Verdict(TIMEOUT, f"timed out after {timeout:g}s" if timeout else "timed out")
    if signal is None and exit_code is not None and 128 < exit_code <= 128 + 64:
        # A shell reports a child killed by signal N as exit code 128 + N.
        signal = exit_code - 128
    exc = _last_exception(tail)
    if _OOM.search(tail):
        line = next((ln.strip() for ln in reversed(tail.splitlines()) if _OOM.search(ln)), None)
        return Verdict(OOM, exc or line or "out of memory")
    if signal == _signal.SIGKILL or exit_code == 137:
        return Verdict(OOM, "killed by SIGKILL (likely the host's out-of-memory killer)")
    if _CUDA.search(tail):
        line = next((ln.strip() for ln in reversed(tail.splitlines()) if _CUDA.search(ln)), "CUDA error")
        return Verdict(CUDA, line)
    if exc:
        return Verdict(EXCEPTION, exc)
    if signal is not None:
        try:
            name = _signal.Signals(signal).name
        except ValueError:
            name = f"signal {signal}"
        return Verdict(SIGNAL, f"killed by {name}")
    return Verdict(EXIT_CODE, f"exited with code {exit_code}")


def flag_configs(runs: Iterable[Any], attempts: Iterable[Any]) -> list[dict[str, Any]]:
    """(task, config) pairs whose every run failed: a broken config, not bad luck on one seed.

    ``runs`` are the ledger's current runs (``task``, ``config``, ``status``, ``run_id``) and
    ``attempts`` its attempts (``run_id``, ``failure_class``, ``status``, ``number``).
    Each flag is ``{"task", "config", "failures", "classes"}``: how many runs failed and
    how many of them ended in each failure class (their last attempt's).
    """
    last: dict[str, str] = {}
    for a in attempts:
        if a.status == "failed":
            last[a.run_id] = a.failure_class or "unknown"
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in runs:
        groups.setdefault((r.task, r.config), []).append(r)
    flagged = []
    for (task, config), members in groups.items():
        if members and all(r.status == "failed" for r in members):
            classes: dict[str, int] = {}
            for r in members:
                cls = last.get(r.run_id, "unknown")
                classes[cls] = classes.get(cls, 0) + 1
            flagged.append({"task": task, "config": config, "failures": len(members),
                            "classes": classes})
    return flagged
