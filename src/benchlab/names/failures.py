"""The failure classes: what kind of failure an attempt's end was, as kept in the ledger's
``attempts.failure_class``.

Named here once. :mod:`benchlab.triage` decides which class an attempt's end
belongs to; a spec's ``retry_on`` gives the retryable ones a budget of their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

if TYPE_CHECKING:
    from benchlab.ledger import AttemptRecord, RunRecord

TIMEOUT: Final = "timeout"
OOM: Final = "out-of-memory"
CUDA: Final = "cuda-error"
EXCEPTION: Final = "exception"
SIGNAL: Final = "signal"
EXIT_CODE: Final = "exit-code"
MISSING_METRIC: Final = "missing-metric"
NON_FINITE_METRIC: Final = "non-finite-metric"  # found, but NaN or infinite: diverged, not misnamed
LAUNCH: Final = "launch-error"  # the command could not start: it will not start the next time either
USAGE: Final = "usage-error"  # the command rejected its arguments (argparse's exit 2): the same again next time
INTERRUPTED: Final = "interrupted"  # stopped by the user; not a fault of the run, not retried
LOST: Final = "orchestrator-died"  # benchlab itself died under the attempt
NODE_DIED: Final = "node-died"  # a cluster worker or node died under the attempt
CANCELLED: Final = "cancelled"  # the cluster's scheduler cancelled the job (scancel, an administrator)
PREEMPTED: Final = "preempted"  # the scheduler took the job's resources for another job; not the run's fault

#: The classes a spec may give its own retry budget (``retry_on``): every class but
#: ``interrupted`` and ``orchestrator-died``. A Literal so that the spec's schema lists them.
RetryClass = Literal["timeout", "out-of-memory", "cuda-error", "exception", "signal", "exit-code",
                     "missing-metric", "non-finite-metric", "launch-error", "usage-error", "node-died", "cancelled",
                     "preempted"]

RETRY_CLASSES: tuple[str, ...] = get_args(RetryClass)


@dataclass(frozen=True)
class FailedRun:
    """A run that failed for good, with its attempts (oldest first): the last one says why."""

    run: RunRecord
    attempts: list[AttemptRecord]

    @property
    def last(self) -> AttemptRecord | None:
        """The attempt that ended the run (None: the ledger holds none, a rebuilt oddity)."""
        return self.attempts[-1] if self.attempts else None


def failed_runs(runs: Iterable[RunRecord], attempts: Iterable[AttemptRecord]) -> list[FailedRun]:
    """The failed runs of ``runs``, in their order, each with its attempts (``attempts`` in the
    ledger's order, as :meth:`benchlab.ledger.Store.attempts` returns them)."""
    from benchlab.ledger import FAILED  # here: the spec reads the classes above without the ledger

    failed = {r.run_id: r for r in runs if r.status == FAILED}
    tries: dict[str, list[AttemptRecord]] = {}
    for a in attempts:
        if a.run_id in failed:
            tries.setdefault(a.run_id, []).append(a)
    return [FailedRun(run, tries.get(run_id, [])) for run_id, run in failed.items()]
