"""The failure classes: what kind of failure an attempt's end was, as kept in the ledger's
``attempts.failure_class``.

Named here once. :mod:`benchlab.triage` decides which class an attempt's end
belongs to; a spec's ``retry_on`` gives the retryable ones a budget of their own.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

TIMEOUT: Final = "timeout"
OOM: Final = "out-of-memory"
CUDA: Final = "cuda-error"
EXCEPTION: Final = "exception"
SIGNAL: Final = "signal"
EXIT_CODE: Final = "exit-code"
MISSING_METRIC: Final = "missing-metric"
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
                     "missing-metric", "launch-error", "usage-error", "node-died", "cancelled", "preempted"]

RETRY_CLASSES: tuple[str, ...] = get_args(RetryClass)
