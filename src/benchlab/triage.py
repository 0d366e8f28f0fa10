"""Failure triage: what kind of failure an attempt's end was, read from its exit and log tail."""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlab.ledger import FAILED, FlaggedPair

# The failure classes are named once, in benchlab.names.failures; re-exported here (callers write triage.OOM).
from benchlab.names.failures import (  # noqa: F401
    CUDA,
    EXCEPTION,
    EXIT_CODE,
    INTERRUPTED,
    LAUNCH,
    LOST,
    MISSING_METRIC,
    NODE_DIED,
    NON_FINITE_METRIC,
    OOM,
    SIGNAL,
    TIMEOUT,
    USAGE,
)
from benchlab.secrets import Fingerprint, redact

TAIL_LINES = 20
TAIL_BYTES = 16384


_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|out of memory|MemoryError|"
                  r"Cannot allocate memory|std::bad_alloc|RESOURCE_EXHAUSTED", re.I)
# What a shell prints when it cannot run the command: `sh: 1: pyhton: not found` (dash),
# `bash: pyhton: command not found`, `sh: ./train.sh: Permission denied` (exit 126).
_NOT_FOUND = re.compile(r"command not found|: not found$|No such file or directory$|Permission denied$|"
                        r"cannot execute", re.I)
_SCRIPT_MISSING = re.compile(r"can't open file .*No such file or directory$")
_SHELL_PREFIX = re.compile(r"^(?:/\S*/)?(?:ba|da|z|k)?sh: (?:line )?\d*:? ?")
# argparse ends a usage error with `usage: prog ...` then `prog: error: ...`; click with
# `Usage: prog ...` then `Error: ...`.
_USAGE = re.compile(r"^usage: ", re.I)
_USAGE_ERROR = re.compile(r"^(?:\S+: )?error: ", re.I)
_CUDA = re.compile(r"CUDA error|cudaError|CUBLAS_STATUS|CUDNN_STATUS|NCCL error|"
                   r"device-side assert|illegal memory access", re.I)


def log_tail(path: Path, lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES,
             hide: Iterable[Fingerprint] = ()) -> str:
    """The last ``lines`` lines of a log, ANSI colours removed, reading at most ``max_bytes``
    from its end ("" when it cannot be read), with every value ``hide`` fingerprints (the
    secrets the runs were given, :func:`benchlab.secrets.known_fingerprints`) masked:
    a run that prints its token leaves it in its own log, never in what benchlab keeps of it."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return ""
    # Imported here: `benchlab status` classifies failures without loading the extractors.
    from benchlab.collect.extractors import strip_ansi

    text = strip_ansi(data.decode("utf-8", errors="replace"))
    if size > max_bytes:
        text = text.split("\n", 1)[-1]  # the first line read is likely cut
    return redact("\n".join(text.splitlines()[-lines:]), hide)


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


_NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '([\w.]+)'")


def _install_hint(exception_line: str) -> str:
    """`` (pip install 'benchlab[examples]')`` when the exception is a missing module that one of
    benchlab's extras brings, else nothing."""
    m = _NO_MODULE.match(exception_line)
    if not m:
        return ""
    from benchlab.names.extras import extra_of, install_hint

    extra = extra_of(m.group(1))
    return f" ({install_hint(extra)})" if extra else ""


def _launch_failure(exit_code: int | None, tail: str) -> Verdict | None:
    """A command the shell could not run: exit 126/127, or a last line saying it was not found."""
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    said = next((ln for ln in reversed(lines) if _NOT_FOUND.search(ln)), None)
    if exit_code in (126, 127):
        what = _SHELL_PREFIX.sub("", said) if said else ("not found" if exit_code == 127 else "not executable")
        return Verdict(LAUNCH, f"could not start: {what} (exit {exit_code})")
    if lines and _SCRIPT_MISSING.search(lines[-1]):
        # `python: can't open file '/x/trian.py': [Errno 2] No such file or directory` (exit 2)
        return Verdict(LAUNCH, f"could not start: {lines[-1]} (exit {exit_code})")
    if lines and said == lines[-1] and re.search(r"command not found|: not found$", said, re.I):
        # the run's own script called a program that is not installed, as its last act
        return Verdict(LAUNCH, f"a command was not found: {_SHELL_PREFIX.sub('', said)} (exit {exit_code})")
    return None


def _usage_failure(exit_code: int | None, tail: str) -> Verdict | None:
    """Exit 2 after a usage line that no traceback follows: the command refused its arguments."""
    if exit_code != 2:
        return None
    lines = tail.splitlines()
    usage = [i for i, ln in enumerate(lines) if _USAGE.match(ln)]
    if not usage or any(ln.startswith("Traceback (most recent call last)") for ln in lines[usage[-1]:]):
        return None
    error = next((ln.strip() for ln in lines[usage[-1]:] if _USAGE_ERROR.match(ln.strip())), None)
    return Verdict(USAGE, error or "exited with code 2 after printing its usage")


def classify(*, exit_code: int | None, signal: int | None, timed_out: bool, tail: str,
             timeout: float | None = None) -> Verdict:
    """Classify a failed attempt; the error is one line a person can act on."""
    if timed_out:
        return Verdict(TIMEOUT, f"timed out after {timeout:g}s" if timeout else "timed out")
    if signal is None:
        verdict = _launch_failure(exit_code, tail) or _usage_failure(exit_code, tail)
        if verdict is not None:
            return verdict
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
        return Verdict(EXCEPTION, exc + _install_hint(exc))
    if signal is not None:
        try:
            name = _signal.Signals(signal).name
        except ValueError:
            name = f"signal {signal}"
        return Verdict(SIGNAL, f"killed by {name}")
    return Verdict(EXIT_CODE, f"exited with code {exit_code}")


def flag_configs(runs: Iterable[Any], attempts: Iterable[Any]) -> list[FlaggedPair]:
    """(task, config) pairs whose every run failed: a broken config, not bad luck on one seed.

    ``runs`` are the ledger's current runs (``task``, ``config``, ``status``, ``run_id``) and
    ``attempts`` its attempts (``run_id``, ``failure_class``, ``status``, ``number``).
    Each flag says how many runs failed and how many of them ended in each failure class
    (their last attempt's).
    """
    last: dict[str, str] = {}
    for a in attempts:
        if a.status == FAILED:
            last[a.run_id] = a.failure_class or "unknown"
    groups: dict[tuple[str, str], list[Any]] = {}
    for r in runs:
        groups.setdefault((r.task, r.config), []).append(r)
    flagged = []
    for (task, config), members in groups.items():
        if members and all(r.status == FAILED for r in members):
            classes: dict[str, int] = {}
            for r in members:
                cls = last.get(r.run_id, "unknown")
                classes[cls] = classes.get(cls, 0) + 1
            flagged.append(FlaggedPair(task, config, len(members), classes))
    return flagged


@dataclass
class FailureGroup:
    """Failed runs that failed the same way: one class, one error, one log tail worth reading."""

    failure_class: str
    error: str
    attempts: list[Any]  # the runs' last attempts (``run_id``, ``log_tail``, ...), in ledger order

    @property
    def count(self) -> int:
        return len(self.attempts)


# What differs between two reports of one problem: addresses, hex ids, paths' run ids, numbers
# (a frame, a step, a seed, a pid, a time). Addresses and hex first, so their digits stay one token.
_VARYING = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"), "<n>"),
]


def problem_key(message: str) -> str:
    """``message`` with what varies from one occurrence of a problem to the next made alike
    (numbers, addresses, hex ids), so that one crash at frame 1234 and at frame 5678 is one
    group: ``"NaN at frame 1234 (0x7f3a...)"`` -> ``"NaN at frame <n> (<addr>)"``."""
    for pattern, token in _VARYING:
        message = pattern.sub(token, message)
    return message


def group_failures(attempts: Iterable[Any]) -> list[FailureGroup]:
    """Failed attempts grouped by what went wrong, largest group first.

    Attempts with the same class and error are one problem (twelve seeds that all hit the same
    argparse error). Where the error says little (``exited with code 1``, ``killed by SIGSEGV``),
    the last line of the log tail is part of the key, so different crashes stay apart. Numbers
    and addresses in the messages are made alike first (:func:`problem_key`): a crash that names
    the frame or the address it happened at is one problem, not one per run.
    """
    groups: dict[tuple[str, str, str], FailureGroup] = {}
    for a in attempts:
        cls, error = a.failure_class or "unknown", a.error or ""
        last = ""
        if cls in (EXIT_CODE, SIGNAL, "unknown"):
            last = next((ln.strip() for ln in reversed((a.log_tail or "").splitlines()) if ln.strip()), "")
        # An exit code or a signal is the problem itself, not a detail of it: kept as it is.
        key = (cls, error if cls in (EXIT_CODE, SIGNAL) else problem_key(error), problem_key(last))
        if key not in groups:
            groups[key] = FailureGroup(cls, error, [])
        groups[key].attempts.append(a)
    return sorted(groups.values(), key=lambda g: -g.count)  # stable: ledger order among equals
