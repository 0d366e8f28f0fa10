"""The sweep's small policies, checked by hand: busy share, queue order, retries, flags."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import pytest

from benchlab import triage
from benchlab.execute.queue import for_retry, order_queue
from benchlab.execute.sweep import busy_share
from benchlab.ledger import FlaggedPair
from benchlab.plan import expand
from benchlab.spec import Spec


def make_spec(**extra: object) -> Spec:
    return Spec.model_validate({
        "name": "p", "tasks": [{"name": "t"}], "command": "true",
        "configs": [{"name": "long"}, {"name": "short"},
                    {"name": "shared", "resources": {"gpus": 0.25}}],
        "seeds": 2, "metrics": {"primary": {"name": "s", "goal": "max"}}, **extra})


def test_busy_share_counts_overlapping_shares_once():
    # GPU 0 busy 0-3 (two runs overlapping 1-2), GPU 1 busy 0-1; span 0-3 on 2 devices.
    assert busy_share({0: [(0.0, 2.0), (1.0, 3.0)], 1: [(0.0, 1.0)]}, 2) == pytest.approx(4 / 6)
    # A device that never ran anything still counts as available.
    assert busy_share({0: [(10.0, 12.0)]}, 4) == pytest.approx(2 / 8)
    assert busy_share({}, 2) is None and busy_share({0: [(0.0, 1.0)]}, 0) is None


def test_queue_is_longest_first_with_unknown_in_front():
    runs = [r for r in expand(make_spec()) if r.seed == 0]
    todo = deque(runs)
    order_queue(todo, {("t", "long"): 30.0, ("t", "short"): 2.0})
    assert [r.config for r in todo] == ["shared", "long", "short"]


def test_queue_order_keeps_queue_order_among_equals_and_interleaves_nothing_new():
    # Seed-major runs of three configs, two of them known to take 5 s: the order must be what a
    # stable sort gives (unknown first, then longest, queue order among equals), runs of equal
    # expected length staying interleaved as they were queued.
    import random

    spec = make_spec(seeds=6, configs=[{"name": f"c{i}"} for i in range(5)])
    runs = expand(spec)
    random.Random(3).shuffle(runs)
    estimates = {("t", "c1"): 5.0, ("t", "c2"): 5.0, ("t", "c4"): 9.0}
    todo = deque(runs)
    order_queue(todo, estimates)

    def by_hand(r):
        e = estimates.get((r.task, r.config))
        return (0, 0.0) if e is None else (1, -e)

    assert list(todo) == sorted(runs, key=by_hand)
    assert [r.config for r in todo][:12] == [r.config for r in runs if r.config in ("c0", "c3")]


def test_retry_budget_defaults_and_overrides():
    run = expand(make_spec(retries=3, retry_on={"exception": 0}))[0]
    assert run.retries_for("timeout") == 0 and run.retries_for("launch-error") == 0
    assert run.retries_for("out-of-memory") == 1 and run.retries_for("exception") == 0
    assert run.retries_for("exit-code") == 3
    spec = make_spec(retry_on={"timeout": 2})
    assert expand(spec)[0].retries_for("timeout") == 2


def test_config_resources_replace_the_specs():
    spec = make_spec(resources={"gpus": 1, "cpus": 2})
    by_config = {r.config: r.resources for r in expand(spec)}
    assert by_config["long"].gpus == 1 and by_config["long"].cpus == 2
    assert by_config["shared"].gpus == 0.25 and by_config["shared"].cpus == 1


def test_out_of_memory_retry_of_a_share_asks_for_the_whole_device():
    runs = {r.config: r for r in expand(make_spec()) if r.seed == 0}
    again = for_retry(runs["shared"], triage.OOM)
    assert again.resources.gpus == 1.0 and again.run_id == runs["shared"].run_id
    assert for_retry(runs["shared"], triage.TIMEOUT) is runs["shared"]
    assert for_retry(runs["long"], triage.OOM) is runs["long"]  # CPU-only: nothing to widen


def test_flag_configs_needs_every_run_failed():
    run = SimpleNamespace
    runs = [run(run_id="a0", task="t", config="a", status="failed"),
            run(run_id="a1", task="t", config="a", status="failed"),
            run(run_id="b0", task="t", config="b", status="failed"),
            run(run_id="b1", task="t", config="b", status="completed")]
    attempts = [SimpleNamespace(run_id="a0", status="failed", failure_class="timeout"),
                SimpleNamespace(run_id="a1", status="failed", failure_class="exception"),
                SimpleNamespace(run_id="a1", status="failed", failure_class="out-of-memory")]
    assert triage.flag_configs(runs, attempts) == [
        FlaggedPair(task="t", config="a", failures=2, classes={"timeout": 1, "out-of-memory": 1})]


def test_shell_reported_signal_exit_is_a_signal():
    verdict = triage.classify(exit_code=139, signal=None, timed_out=False, tail="")
    assert verdict == triage.Verdict(triage.SIGNAL, "killed by SIGSEGV")
    assert triage.classify(exit_code=137, signal=None, timed_out=False, tail="").failure_class == triage.OOM


def test_queue_order_puts_a_retry_given_a_whole_gpu_ahead_of_its_configs_other_runs():
    # The same (task, config) with two GPU requests (an out-of-memory retry gets a whole device):
    # the wider request goes first among equal durations, each group in queue order.
    runs = [r for r in expand(make_spec(seeds=3)) if r.config == "shared"]
    widened = for_retry(runs[1], triage.OOM)
    todo = deque([runs[0], widened, runs[2]])
    order_queue(todo, {("t", "shared"): 4.0})
    assert [(r.seed, r.resources.gpus) for r in todo] == [(1, 1.0), (0, 0.25), (2, 0.25)]


def test_runs_that_never_fit_are_found_the_same_through_the_plan_ordered_runs():
    from benchlab.execute.queue import RunQueue

    plan = expand(make_spec(seeds=3))
    estimates = {("t", "long"): 30.0, ("t", "short"): 2.0}

    def why_never(run):
        return "no GPU" if run.resources.gpus > 0 else None

    def removed(among):
        queue = RunQueue(plan, estimates)
        queue.order()
        gone = queue.remove_never_fitting(why_never, among)
        return [(r.name, why) for r, why in gone], [r.name for r in queue]

    by_queue, by_plan = removed(None), removed(plan)
    assert by_plan == by_queue
    assert by_queue[0] == [("t/shared/s0", "no GPU"), ("t/shared/s1", "no GPU"), ("t/shared/s2", "no GPU")]
    assert by_queue[1] == ["t/long/s0", "t/long/s1", "t/long/s2", "t/short/s0", "t/short/s1", "t/short/s2"]


def test_the_backend_is_given_each_resource_request_of_the_queued_runs_once(tmp_path, monkeypatch):
    from benchlab.execute import local
    from benchlab.execute.queue import RunQueue
    from benchlab.execute.sweep import Sweep

    seen = []
    monkeypatch.setattr(local.LocalBackend, "for_sweep",
                        classmethod(lambda cls, context, **options: seen.append(context)))
    spec = make_spec(seeds=3)
    runs = expand(spec)
    queue = RunQueue(runs, {("t", "short"): 9.0})
    queue.order()
    Sweep(spec, tmp_path, backend="local")._make_backend(queue, runs)
    (context,) = seen
    # long and short share the spec's resources, shared has its own: two requests, each once.
    assert context.resources is not None
    assert sorted(r.gpus for r in context.resources) == [0.0, 0.25]
    assert [r.name for r in context.runs] == [r.name for r in queue]
