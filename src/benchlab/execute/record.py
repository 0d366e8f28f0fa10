"""Recording one ended attempt: collect its metrics, judge it, write its provenance, and enter
it in the ledger, as one operation with one typed answer (:class:`AttemptResult`).

The sweep decides what comes next (count it, retry it, report it); this module only says what
the attempt was. Every backend's :class:`~benchlab.execute.base.Outcome` goes through
:func:`record_attempt`, so an attempt that ended on Slurm is judged as one that ended here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchlab import triage
from benchlab.collect import collect_run
from benchlab.collect.files import RECORDED_BY_BENCHLAB, write_extracted_metrics
from benchlab.evalrules import settings_of
from benchlab.execute.base import Outcome
from benchlab.execute.logcap import LogCap
from benchlab.execute.provenance import AttemptProvenance, SweepProvenance, write_provenance
from benchlab.ledger import COMPLETED, FAILED, INTERRUPTED, PENDING, PRUNED, Store
from benchlab.secrets import Fingerprint

if TYPE_CHECKING:
    from benchlab.execute.gpu_sampler import GpuSampler
    from benchlab.spec import Metric


@dataclass(frozen=True)
class AttemptResult:
    """What one ended attempt was, as recorded: its status (``completed``, ``failed``,
    ``interrupted``, ``pruned``), and for a failure its class and message; for a completed
    attempt the primary metric's final value."""

    status: str
    duration: float
    failure_class: str | None = None
    error: str | None = None
    value: float | None = None
    metric: str | None = None
    #: Whether the ledger now holds the run as pending again: a failure its budget retries.
    retried: bool = False


@dataclass(frozen=True)
class Recorder:
    """What recording an attempt needs beyond the attempt itself, the same for every attempt
    of a sweep: the metrics to collect, the provenance every run shares, the devices' models."""

    primary: str
    metrics: list[Metric]
    #: Provenance common to every run of the sweep (read once, in the background).
    shared: Callable[[], SweepProvenance]
    gpu_models: Mapping[int, str]
    sampler: GpuSampler | None = None
    #: The secrets the runs were given (their fingerprints): masked in the log tail kept of a
    #: failure, so that a run printing its token leaves it in its own log only.
    hide: tuple[Fingerprint, ...] = ()
    #: The sweep's keeper of the runs' logs (``log_cap_mb``; None: no cap): each log is cut to
    #: its cap here, whichever backend ran it, before anything reads it.
    logs: LogCap | None = None


def _cap_log(outcome: Outcome, recorder: Recorder) -> None:
    """The attempt's log in its final form: head, the line counting the bytes dropped, tail."""
    if recorder.logs is not None:
        recorder.logs.finish(outcome.launch.log_path)


def _verdict(outcome: Outcome, recorder: Recorder) -> tuple[triage.Verdict | None, Any, str | None]:
    """The attempt's failure (None: it completed), what was collected of it (a completed exit
    only), and the log's tail where reading it was part of the judgement."""
    launch = outcome.launch
    if outcome.interrupted:
        return triage.Verdict(triage.INTERRUPTED, "interrupted by the user"), None, None
    if outcome.error:
        return triage.Verdict(outcome.failure_class or triage.LAUNCH, outcome.error), None, None
    if outcome.exit_code != 0 or outcome.timed_out:
        tail = triage.log_tail(launch.log_path, hide=recorder.hide)
        return triage.classify(exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out,
                               tail=tail, timeout=launch.timeout), None, tail
    collected = collect_run(launch.run_dir, recorder.metrics, launch.run.context())
    failure = collected.failure(recorder.primary)
    return (triage.Verdict(*failure) if failure else None), collected, None


def _provenance_writer(outcome: Outcome, recorder: Recorder, gpus: list[int] | None,
                       collected: Any) -> Callable[[], None] | None:
    """A call that writes the attempt's ``provenance.json`` (None: its run directory is gone)."""
    launch = outcome.launch
    run, run_dir = launch.run, launch.run_dir
    if not run_dir.exists():
        return None
    wrote_metrics = collected is not None and write_extracted_metrics(run_dir, collected.finals,
                                                                      collected.extracted)
    lm_eval = collected.lm_eval.provenance if collected is not None and collected.lm_eval is not None else None
    attempt = AttemptProvenance(
        run_id=run.run_id, run=run.name, attempt=launch.number, started=outcome.started, ended=outcome.ended,
        exit_code=outcome.exit_code, signal=outcome.signal, timed_out=outcome.timed_out, node=outcome.node,
        gpus=gpus, gpu_models=[recorder.gpu_models.get(i) for i in gpus or ()], command=launch.command,
        primary=recorder.primary, goals={m.name: m.goal for m in recorder.metrics},
        metrics_json=RECORDED_BY_BENCHLAB if wrote_metrics else None, lm_eval=lm_eval,
        # What the field's rules want recorded of an lm-eval or vLLM run (benchlab.evalrules).
        evaluation=settings_of(run.command, lm_eval), interrupted=outcome.interrupted,
        transfer=outcome.transfer_json())
    return functools.partial(write_provenance, run_dir, recorder.shared(), attempt)


def record_attempt(store: Store, outcome: Outcome, recorder: Recorder, *, gpus: list[int] | None = None,
                   retried: Callable[[str], bool] | None = None, later: list[Callable[[], None]] | None = None,
                   write_ledger: bool = True) -> AttemptResult:
    """Collect and record one ended attempt; what it was.

    ``gpus``: the devices it held (the outcome's, else those the backend placed it on at start).
    ``retried(failure_class)`` says whether a failure of that class will be retried: the run is
    then recorded as pending in the same transaction as the failed attempt, so a crash in between
    cannot leave it failed with budget left.

    ``later``: where a completed attempt's ``provenance.json`` is put off to, so that the next run
    starts first. Killed in between, that run's folder lacks the file, which the ledger does not
    need; rebuilt from its folders, the ledger would count the run as to do again. A failed
    attempt's is written at once: its retry moves its files aside.

    ``write_ledger`` False writes only the run directory's files (a lost ledger is not written to:
    it may now be someone's backup); the attempt counts as interrupted."""
    launch = outcome.launch
    run = launch.run
    gpus = outcome.gpus if outcome.gpus is not None else gpus
    duration = outcome.ended - outcome.started
    use = recorder.sampler.finish(launch.attempt_id) if recorder.sampler is not None else None
    _cap_log(outcome, recorder)
    failure, collected, tail = _verdict(outcome, recorder)
    write = _provenance_writer(outcome, recorder, gpus, collected)
    if write is not None and (later is None or failure is not None or not write_ledger):
        write()
        write = None
    if not write_ledger:
        return AttemptResult(INTERRUPTED, duration)
    if use is not None:
        store.set_gpu_use(launch.attempt_id, use)
    if failure is None:
        # A completed attempt's error holds a note that qualifies it, such as a partial lm-eval run.
        note = collected.lm_eval.partial_note() if collected.lm_eval is not None else None
        store.finish_attempt(launch.attempt_id, run.run_id, status=COMPLETED, run_status=COMPLETED,
                             exit_code=outcome.exit_code, ended=outcome.ended, node=outcome.node,
                             error=note, metrics=collected.finals, series=collected.series)
        if write is not None and later is not None:
            later.append(write)
        return AttemptResult(COMPLETED, duration, value=collected.finals.get(recorder.primary),
                             metric=recorder.primary)
    status = INTERRUPTED if failure.failure_class == triage.INTERRUPTED else FAILED
    if tail is None:
        tail = triage.log_tail(launch.log_path, hide=recorder.hide)
    again = status == FAILED and retried is not None and retried(failure.failure_class)
    store.finish_attempt(launch.attempt_id, run.run_id, status=status, run_status=PENDING if again else status,
                         exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                         node=outcome.node, failure_class=failure.failure_class, error=failure.error, log_tail=tail)
    return AttemptResult(status, duration, failure_class=failure.failure_class, error=failure.error, retried=again)


def record_pruned(store: Store, outcome: Outcome, recorder: Recorder, reason: str) -> AttemptResult:
    """Record an attempt its feeder pruned: what it logged until then is kept (the search report
    draws pruned curves), and its run is done: pruned, neither failed nor retried."""
    launch = outcome.launch
    run = launch.run
    if recorder.sampler is not None:
        recorder.sampler.finish(launch.attempt_id)
    _cap_log(outcome, recorder)
    collected = collect_run(launch.run_dir, recorder.metrics, run.context())
    store.finish_attempt(launch.attempt_id, run.run_id, status=PRUNED, run_status=PRUNED,
                         exit_code=outcome.exit_code, signal=outcome.signal, ended=outcome.ended,
                         node=outcome.node, error=reason, metrics=collected.finals, series=collected.series)
    return AttemptResult(PRUNED, outcome.ended - outcome.started, error=reason)
