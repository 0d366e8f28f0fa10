"""Whether the sweep of a results folder is alive: the one decision ``benchlab status``, the
dashboard and anyone else reading a ledger use before they call its runs "running".

The ledger says "running" for the attempts a sweep launched until that sweep records how they
ended. A sweep killed with ``kill -9`` (or stopped by a full disk) records nothing, so its runs
stay "running" in the ledger although nothing runs them any more; the next ``benchlab run``
records them as interrupted and runs them again. Until then a reader tells the sweep is gone
from the results folder's lock: a sweep holds it while it runs, the kernel frees it when its
process dies, and the lock file names the holder's pid and host.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path

from benchlab.ledger import INTERRUPTED, LOCK_NAME, RUNNING

ALIVE = "alive"
GONE = "gone"
UNKNOWN = "unknown"  # held from another host: this one cannot see its process

_HOLDER = re.compile(r"pid (\d+) on (\S+)")


@dataclass(frozen=True)
class SweepLiveness:
    """Whether a results folder's sweep is alive (``state``), and who holds its lock (``holder``,
    the lock file's text) or held it last."""

    state: str
    holder: str | None

    @property
    def is_gone(self) -> bool:
        return self.state == GONE


def sweep_liveness(folder: Path | str) -> SweepLiveness:
    """Whether the sweep of ``folder`` is alive, told from its lock file without taking the lock
    (even a shared lock, held for an instant, would turn a sweep starting then away): alive when
    the holder it names runs on this host, gone when it names a process of this host that no
    longer exists or names none, unknown when it names another host."""
    try:
        text = (Path(folder) / LOCK_NAME).read_text().strip()
    except OSError:
        return SweepLiveness(GONE, None)  # no sweep ever held it: none can be running
    found = _HOLDER.search(text)
    if found is None:
        return SweepLiveness(GONE, text or None)
    if found.group(2) != socket.gethostname():
        return SweepLiveness(UNKNOWN, text)
    return SweepLiveness(ALIVE if _lives(int(found.group(1))) else GONE, text)


def _lives(pid: int) -> bool:
    """Whether ``pid`` is a live process: one killed but not yet reaped by its parent (a zombie)
    holds no lock and runs nothing."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return psutil.pid_exists(pid)


def as_seen(status: str, liveness: SweepLiveness) -> str:
    """A run's status as a reader should show it: "running" of a sweep that is gone is
    "interrupted" (what the next ``benchlab run`` records it as)."""
    return INTERRUPTED if status == RUNNING and liveness.is_gone else status


def counts_as_seen(counts: dict[str, int], liveness: SweepLiveness) -> dict[str, int]:
    """Run counts by status with :func:`as_seen` applied."""
    out: dict[str, int] = {}
    for status, n in counts.items():
        key = as_seen(status, liveness)
        out[key] = out.get(key, 0) + n
    return out


__all__ = ["ALIVE", "GONE", "UNKNOWN", "SweepLiveness", "as_seen", "counts_as_seen", "sweep_liveness"]
