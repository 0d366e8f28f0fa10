"""The status model's own rules, without a ledger: the ETA and the benchmark's state."""

from __future__ import annotations

import pytest

from benchlab.execute.status import benchmark_state, duration_text, estimate_eta
from benchlab.ledger import OpenRun


def test_eta_spreads_the_work_left_over_the_runs_running():
    durations = {("t", "a"): 10.0, ("t", "b"): 30.0}
    now = 1_000.0
    left = [OpenRun("t", "a", "running", now - 4),  # 6 s left of its 10
            OpenRun("t", "b", "running", now - 50),  # past its 30 s: nothing left
            OpenRun("t", "b", "pending", None),  # 30
            OpenRun("t", "c", "interrupted", now - 99)]  # no (task, config) mean: the mean of all, 20
    assert estimate_eta(left, durations, now) == pytest.approx((6 + 0 + 30 + 20) / 2)


def test_eta_is_unknown_before_any_attempt_completed():
    assert estimate_eta([OpenRun("t", "a", "pending", None)], {}, 0.0) is None


@pytest.mark.parametrize(("counts", "state"), [
    ({}, "empty"),
    ({"completed": 3, "running": 1, "failed": 2}, "running"),
    ({"completed": 3, "failed": 2}, "failed runs"),
    ({"completed": 3, "failed": 2, "interrupted": 1}, "stopped"),
    ({"completed": 3, "pending": 1}, "stopped"),
    ({"completed": 3}, "done"),
])
def test_benchmark_state_from_counts(counts, state):
    assert benchmark_state(counts) == state


def test_duration_text():
    assert [duration_text(s) for s in (None, 20.4, 725, 11_220)] == ["—", "20s", "12m05s", "3h07m"]


def _folder_with_runs(folder):
    """A ledger of three runs of t/a: s0 completed, s1 running, s2 still pending."""
    from benchlab.ledger import COMPLETED, Store
    from benchlab.plan import Run

    runs = [Run(run_id=f"id{s}{'x' * 6}", benchmark="b", task="t", config="a", seed=s, params={}, command="x")
            for s in range(3)]
    with Store.create(folder) as store:
        store._set_meta(name="b")
        store.register(runs)
        done, _ = store.start_attempt(runs[0].run_id, host="h")
        store.finish_attempt(done, runs[0].run_id, status=COMPLETED, run_status=COMPLETED, metrics={"score": 1.0})
        store.start_attempt(runs[1].run_id, host="h")
    return runs


def test_run_states_of_a_folder_without_a_ledger_are_pending_and_create_no_ledger(tmp_path):
    from benchlab.execute.status import run_states
    from benchlab.names.results_files import LEDGER_FILE

    assert run_states(tmp_path, ["a", "b"]) == {"a": "pending", "b": "pending"}
    assert not (tmp_path / LEDGER_FILE).exists()


def test_run_states_find_is_running_and_find_run_read_the_ledger(tmp_path):
    from benchlab.errors import UsageError
    from benchlab.execute.status import find_run, is_running, run_states

    runs = _folder_with_runs(tmp_path)
    ids = [r.run_id for r in runs]
    assert run_states(tmp_path, [*ids, "unknown"]) == {
        ids[0]: "completed", ids[1]: "running", ids[2]: "pending", "unknown": "pending"}
    assert [is_running(tmp_path, rid) for rid in ids] == [False, True, False]
    assert find_run(tmp_path, "t/a/s1").run_id == ids[1]
    assert find_run(tmp_path, "id2").run_id == ids[2]
    with pytest.raises(UsageError, match="run 'id' is ambiguous"):
        find_run(tmp_path, "id")
    with pytest.raises(UsageError, match=r"no run 't/a/s9' in this results folder \(runs are named like: t/a/s0"):
        find_run(tmp_path, "t/a/s9")
