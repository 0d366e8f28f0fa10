"""Which runs a sweep launches, and which failed runs a status or a report lists with their last attempt."""

from __future__ import annotations

from types import SimpleNamespace

from benchlab.ledger import AttemptRecord, RunRecord, Status, runs_to_do
from benchlab.names.failures import failed_runs


def run(run_id: str, status: str = "pending") -> RunRecord:
    return RunRecord(run_id, f"t/c/{run_id}", "t", "c", 0, {}, "true", status, True)


def attempt(attempt_id: int, run_id: str, status: str, failure_class: str | None = None) -> AttemptRecord:
    return AttemptRecord(attempt_id, run_id, attempt_id, status, 1, None, 0.0, 1.0, None, None, None, None,
                         None, None, failure_class, None, None)


PLAN = [SimpleNamespace(run_id=i) for i in ("a", "b", "c", "d", "e", "new")]
STATUSES = {"a": "pending", "b": "running", "c": "completed", "d": "failed", "e": "interrupted"}


def test_a_sweep_launches_what_is_not_finished_and_a_run_the_ledger_does_not_know():
    found = runs_to_do(PLAN, STATUSES)  # type: ignore[arg-type]
    assert [r.run_id for r in found.runs] == ["a", "b", "e", "new"]
    assert (found.completed, found.failed) == (1, 1)


def test_rerun_failed_adds_the_failed_runs_in_plan_order_and_rerun_all_takes_every_run():
    assert [r.run_id for r in runs_to_do(PLAN, STATUSES, rerun_failed=True).runs] == [  # type: ignore[arg-type]
        "a", "b", "d", "e", "new"]
    assert len(runs_to_do(PLAN, STATUSES, rerun_all=True).runs) == len(PLAN)  # type: ignore[arg-type]


def test_a_status_read_back_from_the_ledger_equals_its_member():
    assert Status("failed") is Status.FAILED
    assert {"failed": 1}.get(Status.FAILED) == 1
    assert f"{Status.COMPLETED}" == "completed"


def test_failed_runs_come_with_their_attempts_and_the_last_one_says_why():
    runs = [run("x", "failed"), run("y", "completed"), run("z", "failed"), run("w", "failed")]
    attempts = [attempt(1, "x", "failed", "timeout"), attempt(2, "y", "completed"),
                attempt(3, "x", "failed", "out-of-memory"), attempt(4, "z", "failed", "exception")]
    found = failed_runs(runs, attempts)
    assert [f.run.run_id for f in found] == ["x", "z", "w"]  # the runs' order, every failed run kept
    assert [len(f.attempts) for f in found] == [2, 1, 0]
    assert [f.last.failure_class if f.last else None for f in found] == ["out-of-memory", "exception", None]
