"""The debug backend runs each attempt in the calling thread: the sweep's loop, its retry budget
and its ETA are checked here without starting a process."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import IO

import pytest

from benchlab import triage
from benchlab.execute.base import Launch, get_backend
from benchlab.execute.debug import DebugBackend
from benchlab.execute.events import EventKind, SweepEvent
from benchlab.execute.sweep import Sweep
from benchlab.ledger import COMPLETED, FAILED, CodeState, Store
from benchlab.spec import Spec

NO_GIT = CodeState(None, None, None, None)


def make_spec(tmp_path: Path, **extra: object) -> Spec:
    return Spec.model_validate({
        "name": "dbg", "tasks": [{"name": "t"}], "configs": [{"name": "a"}], "seeds": 3, "command": "true",
        "workdir": str(tmp_path), "metrics": {"primary": {"name": "score", "goal": "max"}}, **extra})


def scores(launch: Launch, log: IO[str]) -> int:
    """A run that reports its seed as its score."""
    (launch.run_dir / "metrics.json").write_text(json.dumps({"score": float(launch.run.seed)}))
    return 0


def sweep(tmp_path: Path, spec: Spec, target, **kwargs: object) -> tuple[Sweep, list[SweepEvent]]:
    events: list[SweepEvent] = []
    return Sweep(spec, tmp_path / "results", backend=DebugBackend(target), on_event=events.append, jobs=1,
                 code=NO_GIT, **kwargs), events


def test_debug_backend_runs_each_attempt_in_the_calling_thread(tmp_path):
    seen: list[tuple[int, str]] = []

    def target(launch: Launch, log: IO[str]) -> int:
        seen.append((os.getpid(), threading.current_thread().name))
        return scores(launch, log)

    s, events = sweep(tmp_path, make_spec(tmp_path), target)
    result = s.run()

    assert (result.completed, result.failed, result.exit_code) == (3, 0, 0)
    assert seen == [(os.getpid(), threading.current_thread().name)] * 3
    finished = [e for e in events if e.kind is EventKind.FINISH]
    assert sorted(e.value for e in finished) == [0.0, 1.0, 2.0]
    assert [e.kind for e in events][:2] == [EventKind.BEGIN, EventKind.START]
    with Store.open(tmp_path / "results") as store:
        assert set(store.statuses().values()) == {COMPLETED}


def test_an_out_of_memory_failure_is_retried_once_then_completes(tmp_path):
    def target(launch: Launch, log: IO[str]) -> int:
        if launch.number == 1:
            log.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
            return 1
        return scores(launch, log)

    s, events = sweep(tmp_path, make_spec(tmp_path, seeds=1), target)
    result = s.run()

    assert (result.completed, result.failed) == (1, 0)
    retry, finish = [e for e in events if e.kind in (EventKind.RETRY, EventKind.FINISH)]
    assert (retry.kind, retry.attempt, retry.failure_class) == (EventKind.RETRY, 1, triage.OOM)
    assert (finish.kind, finish.attempt, finish.status) == (EventKind.FINISH, 2, COMPLETED)
    with Store.open(tmp_path / "results") as store:
        assert [(a.status, a.failure_class) for a in store.attempts()] == [(FAILED, triage.OOM), (COMPLETED, None)]


def test_a_run_that_always_raises_fails_after_its_retry_budget(tmp_path):
    calls: list[int] = []

    def target(launch: Launch, log: IO[str]) -> int:
        calls.append(launch.number)
        raise ValueError("broken")  # written to the log; counts as exit 1

    s, events = sweep(tmp_path, make_spec(tmp_path, seeds=1, retries=2), target)
    result = s.run()

    assert (result.completed, result.failed, result.exit_code) == (0, 1, 1)
    assert calls == [1, 2, 3]  # retries: 2 is three attempts
    assert [e.kind for e in events if e.run is not None][-1] is EventKind.FINISH
    assert [e.failure_class for e in events if e.kind is EventKind.RETRY] == [triage.EXCEPTION] * 2
    with Store.open(tmp_path / "results") as store:
        (attempt, *_) = store.attempts()
        assert "ValueError: broken" in (attempt.log_tail or "")


def test_the_eta_after_the_first_run_is_its_duration_times_the_runs_left(tmp_path):
    seen: list[tuple[float | None, float | None]] = []  # (duration, ETA) as each finish reported them

    def on_event(event: SweepEvent) -> None:
        if event.kind is EventKind.FINISH:  # the progress object lives on: read it now
            seen.append((event.duration, event.progress.eta_s))

    Sweep(make_spec(tmp_path), tmp_path / "results", backend=DebugBackend(scores), on_event=on_event, jobs=1,
          code=NO_GIT).run()

    (first_duration, first_eta), *_, (_, last_eta) = seen
    # One slot, two runs left, each expected to take as long as the first did.
    assert first_duration is not None and first_eta == pytest.approx(2 * first_duration)
    assert last_eta == 0.0


@pytest.mark.slow
def test_a_spec_can_name_the_debug_backend_and_its_commands_run_in_the_foreground(tmp_path):
    assert get_backend("debug") is DebugBackend
    script = tmp_path / "run.py"
    script.write_text("import json, os\n"
                      "d = os.environ['BENCHLAB_RUN_DIR']\n"
                      "json.dump({'score': int(os.environ['BENCHLAB_SEED']) * 2}, open(d + '/metrics.json', 'w'))\n")
    spec = make_spec(tmp_path, backend="debug", seeds=2, command=f"{sys.executable} {script}")
    events: list[SweepEvent] = []

    result = Sweep(spec, tmp_path / "results", on_event=events.append, code=NO_GIT).run()

    assert (result.completed, result.failed) == (2, 0)
    assert sorted(e.value for e in events if e.kind is EventKind.FINISH) == [0.0, 2.0]
