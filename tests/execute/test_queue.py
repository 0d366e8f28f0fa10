"""The queue policy as pure code (``benchlab.execute.queue``): the one ETA rule, the retry budget
and the order, checked by hand without a ledger or a process."""

from __future__ import annotations

import pytest

from benchlab import triage
from benchlab.execute.queue import Eta, RetryBudget, RunQueue, estimate_eta
from benchlab.execute.status import estimate_eta as status_eta
from benchlab.ledger import PENDING, RUNNING, OpenRun
from benchlab.plan import expand
from benchlab.spec import Spec


def make_spec(**extra: object) -> Spec:
    return Spec.model_validate({
        "name": "q", "tasks": [{"name": "t"}], "command": "true",
        "configs": [{"name": "a"}, {"name": "b"}], "seeds": 2,
        "metrics": {"primary": {"name": "s", "goal": "max"}}, **extra})


def test_eta_spreads_work_left_over_slots_less_what_running_runs_did():
    estimates = {("t", "a"): 10.0, ("t", "b"): 30.0}
    left = [("t", "a", None), ("t", "b", None), ("t", "a", 96.0), ("t", "b", 50.0)]
    # Queued: 10 + 30; running: a started 4 s ago (6 left), b 50 s ago (past its 30: 0 left).
    assert estimate_eta(left, estimates, 100.0, slots=2) == pytest.approx((10 + 30 + 6 + 0) / 2)
    # Without a slot count, the work is spread over the runs running now (two).
    assert estimate_eta(left, estimates, 100.0) == pytest.approx(46 / 2)
    # Never over more slots than runs left.
    assert estimate_eta([("t", "b", None)], estimates, 0.0, slots=8) == pytest.approx(30.0)


def test_eta_guesses_unknown_configs_from_fallback_then_mean_and_is_none_without_any():
    assert estimate_eta([("t", "new", None)], {("t", "a"): 10.0, ("t", "b"): 30.0}, 0.0) == pytest.approx(20.0)
    assert estimate_eta([("t", "new", None)], {("t", "a"): 10.0}, 0.0, fallback=4.0) == pytest.approx(4.0)
    assert estimate_eta([("t", "new", None)], {}, 0.0) is None
    assert estimate_eta([], {}, 0.0) == 0.0


def test_status_model_and_sweep_share_one_eta():
    durations = {("t", "a"): 12.0, ("t", "b"): 8.0}
    open_runs = [OpenRun("t", "a", RUNNING, 95.0), OpenRun("t", "b", PENDING, None),
                 OpenRun("t", "c", PENDING, None), OpenRun("t", "b", RUNNING, 99.0)]
    # a: 12 - 5 = 7 left; b queued 8; c unknown: the mean 10; b running: 8 - 1 = 7; two running.
    by_hand = (7 + 8 + 10 + 7) / 2
    assert status_eta(open_runs, durations, 100.0) == pytest.approx(by_hand)
    runs = {r.config: r for r in expand(make_spec(configs=[{"name": c} for c in "abc"], seeds=1))}
    eta = Eta(dict(durations), jobs=2)
    got = eta.get([runs["b"], runs["c"]], [(runs["a"], 95.0), (runs["b"], 99.0)], now=100.0)
    assert got == pytest.approx(by_hand)


def test_eta_prefers_this_sweeps_mean_duration_for_unknown_configs():
    runs = {r.config: r for r in expand(make_spec(configs=[{"name": "a"}, {"name": "z"}], seeds=1))}
    eta = Eta({("t", "a"): 100.0}, jobs=1)
    eta.record(3.0)
    eta.record(5.0)
    assert eta.get([runs["z"]], [], now=0.0) == pytest.approx(4.0)


def test_retry_budget_counts_per_failure_class_over_the_runs_life():
    spec = make_spec(retries=1, seeds=1)
    run = expand(spec)[0]
    budget = RetryBudget({run.run_id: {triage.EXCEPTION: 1}})  # one crash charged by an earlier sweep
    assert not budget.allows_another(run)(triage.EXCEPTION)
    # A timeout is not retried by default; a node that died is, twice, whatever ``retries`` says.
    assert not budget.allows_another(run)(triage.TIMEOUT)
    assert budget.charge(run, triage.NODE_DIED) is True
    assert budget.charge(run, triage.NODE_DIED) is True
    assert budget.charge(run, triage.NODE_DIED) is False
    assert budget.charge(run, triage.EXCEPTION) is False


def test_queue_runs_longest_first_and_a_retry_jumps_the_queue():
    runs = expand(make_spec())
    queue = RunQueue(runs, {("t", "a"): 1.0, ("t", "b"): 5.0})
    queue.order()
    assert [r.config for r in queue] == ["b", "b", "a", "a"]
    first = queue.take_first(lambda r: r.config == "a")
    assert first is not None and first.config == "a" and [r.config for r in queue] == ["b", "b", "a"]
    queue.retry_first(first)
    assert list(queue)[0] is first
