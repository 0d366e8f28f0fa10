"""The Backend protocol: what every executor (local, ray, ...) offers the sweep.

A backend starts launches and reports outcomes; it knows nothing of specs,
stores or retries, which the sweep (``benchlab.execute.sweep``) owns.

Adding a backend: write ``benchlab/execute/<name>.py`` with a class that
implements ``Backend`` and decorate it with ``@register("<name>")``; the sweep
finds it by name (``--backend <name>``). Nothing in the core changes. A backend
that runs commands on other machines must bring the run directory's files
(train.log, metrics.json, metrics.jsonl) home before it reports the outcome.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from benchlab.errors import BackendUnavailable
from benchlab.plan import Run


@dataclass
class Launch:
    """One attempt of a run, ready to start."""

    run: Run
    attempt_id: int
    number: int
    run_dir: Path
    command: str
    env: dict[str, str]
    cwd: str
    timeout: float | None
    log_path: Path
    gpus: list[int] | None = None


@dataclass
class Outcome:
    """How an attempt ended, as the backend saw it."""

    launch: Launch
    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    interrupted: bool = False
    started: float = 0.0
    ended: float = 0.0
    node: str | None = None
    error: str | None = None  # the command could not even start (missing workdir, ...)
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessInfo:
    """What the ledger keeps to find (and kill) an attempt's processes after a crash."""

    pid: int | None
    pgid: int | None
    proc_start: float | None
    node: str | None = None


class Backend(Protocol):
    """An executor of launches."""

    name: str

    def fits(self, run: Run) -> bool:
        """Whether ``run`` can start now."""

    def start(self, launch: Launch) -> ProcessInfo:
        """Start ``launch``; returns at once."""

    def wait(self, timeout: float | None) -> list[Outcome]:
        """Block until at least one attempt ends, ``wake()`` is called, or ``timeout`` passes."""

    def wake(self) -> None:
        """Make a blocked ``wait`` return now (thread- and signal-safe)."""

    def running(self) -> int:
        """How many attempts are in flight."""

    def terminate_all(self, grace: float) -> list[Outcome]:
        """Stop every attempt in flight (TERM, ``grace`` seconds, KILL) and report them interrupted."""

    def close(self) -> None:
        """Release what the backend holds (threads, cluster connections)."""

    # Optional: ``cancel(attempt_id)`` stops one attempt at once (a search prunes a trial with it);
    # its outcome still comes back through ``wait``. A backend without it cannot prune.


BackendFactory = Callable[..., Backend]
_REGISTRY: dict[str, BackendFactory] = {}
_MODULES = {"local": "benchlab.execute.local", "ray": "benchlab.execute.ray"}


def register(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Class decorator: make a backend available by name."""

    def deco(factory: BackendFactory) -> BackendFactory:
        _REGISTRY[name] = factory
        return factory

    return deco


def get_backend(name: str) -> BackendFactory:
    """The backend factory registered as ``name`` (importing its module on first use)."""
    if name not in _REGISTRY and name in _MODULES:
        importlib.import_module(_MODULES[name])
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(set(_REGISTRY) | set(_MODULES)))
        raise BackendUnavailable(name, f"unknown backend; choose one of: {known}") from None


def run_dir_of(results: Path, run_id: str) -> Path:
    return results / "runs" / run_id
