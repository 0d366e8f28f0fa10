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
