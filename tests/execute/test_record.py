"""Recording one ended attempt (``benchlab.execute.record``): what a backend's typed ``Outcome``
says (failure class, devices, the scheduler's job) reaches the ledger and ``provenance.json``."""

from __future__ import annotations

import json
from pathlib import Path

from benchlab import triage
from benchlab.execute.base import Launch, Outcome, TransferNote
from benchlab.execute.provenance import GitState, SweepProvenance
from benchlab.execute.record import Recorder, record_attempt
from benchlab.execute.rundir import write_run_dir
from benchlab.ledger import COMPLETED, FAILED, PENDING, Store
from benchlab.names.run_files import LOG_FILE, PROVENANCE_FILE, run_dir_of
from benchlab.plan import Run, expand
from benchlab.spec import Spec

SHARED = SweepProvenance(git=GitState(), python="3.11.7", python_executable="/usr/bin/python3",
                         platform="Linux", host="here", cpu_count=2, cpu_model=None, packages={})


def _started(tmp_path: Path) -> tuple[Store, Run, Launch, Recorder]:
    spec = Spec.model_validate({"name": "r", "tasks": [{"name": "t"}], "configs": [{"name": "a"}], "seeds": 1,
                                "command": "true", "metrics": {"primary": {"name": "score", "goal": "max"}}})
    (run,) = expand(spec)
    store = Store.create(tmp_path)
    store.add_runs([run])
    attempt_id, number = store.start_attempt(run.run_id, host="here")
    run_dir = run_dir_of(tmp_path, run.run_id)
    write_run_dir(run_dir, run, number)
    launch = Launch(run=run, attempt_id=attempt_id, number=number, run_dir=run_dir, command=run.command,
                    env={}, cwd=str(tmp_path), timeout=None, log_path=run_dir / LOG_FILE)
    recorder = Recorder(primary="score", metrics=spec.metrics.all, shared=lambda: SHARED,
                        gpu_models={0: "A100", 3: "H100"})
    return store, run, launch, recorder


def test_backend_failure_class_is_recorded_and_retried_run_left_pending(tmp_path):
    store, run, launch, recorder = _started(tmp_path)
    outcome = Outcome(launch=launch, exit_code=None, started=10.0, ended=14.5, error="worker node died",
                      failure_class=triage.NODE_DIED, gpus=[3], job_id="812")
    asked: list[str] = []

    result = record_attempt(store, outcome, recorder, gpus=[0], retried=lambda c: asked.append(c) or True)

    assert (result.status, result.failure_class, result.error) == (FAILED, triage.NODE_DIED, "worker node died")
    assert result.retried and result.duration == 4.5 and asked == [triage.NODE_DIED]
    (attempt,) = store.attempts(run.run_id)
    assert (attempt.status, attempt.failure_class, attempt.error) == (FAILED, triage.NODE_DIED, "worker node died")
    assert store.statuses()[run.run_id] == PENDING  # kept for its retry, in the same write
    prov = json.loads((launch.run_dir / PROVENANCE_FILE).read_text())
    # The outcome's devices win over those placed at start; the job's id is the run's record.
    assert prov["gpus"] == [3] and prov["gpu_models"] == ["H100"]
    assert prov["transfer"]["job_id"] == "812"  # the protocol's name, whichever scheduler
    assert not any(key.startswith("slurm") for key in prov["transfer"])
    store.close()


def test_error_without_class_is_a_launch_failure_and_transfer_note_is_kept(tmp_path):
    store, run, launch, recorder = _started(tmp_path)
    note = TransferNote(files_cap_bytes=1024, skipped_files="big.bin")
    outcome = Outcome(launch=launch, exit_code=None, started=1.0, ended=2.0, error="could not start", transfer=note)

    result = record_attempt(store, outcome, recorder, gpus=[0])

    assert (result.status, result.failure_class, result.retried) == (FAILED, triage.LAUNCH, False)
    assert store.statuses()[run.run_id] == FAILED
    prov = json.loads((launch.run_dir / PROVENANCE_FILE).read_text())
    assert prov["gpus"] == [0] and prov["gpu_models"] == ["A100"]  # no word from the outcome: the start's
    assert prov["transfer"] == {"files_cap_bytes": "1024", "skipped_files": "big.bin"}
    store.close()


def test_completed_attempt_records_primary_value_and_defers_provenance(tmp_path):
    store, run, launch, recorder = _started(tmp_path)
    (launch.run_dir / "metrics.json").write_text(json.dumps({"score": 0.75}))
    later: list = []

    result = record_attempt(store, Outcome(launch=launch, exit_code=0, started=0.0, ended=3.0), recorder,
                            later=later)

    assert (result.status, result.value, result.metric, result.failure_class) == (COMPLETED, 0.75, "score", None)
    assert store.statuses()[run.run_id] == COMPLETED
    # Put off until the next run has started; written when the caller gets to it.
    assert not (launch.run_dir / PROVENANCE_FILE).exists() and len(later) == 1
    later[0]()
    assert json.loads((launch.run_dir / PROVENANCE_FILE).read_text())["exit_code"] == 0
    store.close()


def test_missing_primary_metric_fails_the_attempt(tmp_path):
    store, run, launch, recorder = _started(tmp_path)

    result = record_attempt(store, Outcome(launch=launch, exit_code=0, started=0.0, ended=1.0), recorder)

    assert (result.status, result.failure_class) == (FAILED, triage.MISSING_METRIC)
    assert "score" in (result.error or "")
    store.close()


def test_a_backends_failure_class_reaches_the_sweeps_retry_and_the_ledger(tmp_path):
    import dataclasses

    from benchlab.execute.debug import DebugBackend
    from benchlab.execute.events import EventKind
    from benchlab.execute.sweep import Sweep
    from benchlab.ledger import CodeState

    class NodeDiesOnce(DebugBackend):
        """Its first attempt's node dies: a failure only the backend can name."""

        def start(self, launch):
            info = super().start(launch)
            if launch.number == 1:
                self._ended[-1] = dataclasses.replace(self._ended[-1], exit_code=None, error="worker node died",
                                                      failure_class=triage.NODE_DIED)
            return info

    def target(launch, log):
        (launch.run_dir / "metrics.json").write_text(json.dumps({"score": 1.0}))
        return 0

    spec = Spec.model_validate({"name": "r", "tasks": [{"name": "t"}], "configs": [{"name": "a"}], "seeds": 1,
                                "command": "true", "workdir": str(tmp_path),
                                "metrics": {"primary": {"name": "score", "goal": "max"}}})
    events = []
    result = Sweep(spec, tmp_path / "results", backend=NodeDiesOnce(target), on_event=events.append,
                   code=CodeState(None, None, None, None)).run()

    assert (result.completed, result.failed) == (1, 0)
    assert [(e.kind, e.failure_class) for e in events if e.kind is EventKind.RETRY] == \
        [(EventKind.RETRY, triage.NODE_DIED)]
    with Store.open(tmp_path / "results") as store:
        assert [(a.failure_class, a.error) for a in store.attempts()] == \
            [(triage.NODE_DIED, "worker node died"), (None, None)]
