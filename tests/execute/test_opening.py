"""Opening a results folder (``benchlab.execute.opening``): everything checked and recorded before
a sweep's first launch, as one call on a real ledger, without a backend or a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlab import triage
from benchlab.errors import UserError
from benchlab.execute.opening import open_results_folder
from benchlab.ledger import COMPLETED, INTERRUPTED, CodeState, Store
from benchlab.plan import expand
from benchlab.spec import Spec

NO_GIT = CodeState(None, None, None, None)


def make_spec(tmp_path: Path, **extra: object) -> Spec:
    return Spec.model_validate({
        "name": "o", "tasks": [{"name": "t"}], "configs": [{"name": "a"}, {"name": "b"}], "seeds": 2,
        "command": "true", "workdir": str(tmp_path), "metrics": {"primary": {"name": "s", "goal": "max"}},
        **extra})


def test_opening_recovers_a_dead_sweeps_attempt_and_queues_what_is_left(tmp_path):
    spec = make_spec(tmp_path)
    runs = expand(spec)
    store = Store.create(tmp_path / "results")
    store.add_runs(runs)
    done, dead = runs[0], runs[1]
    attempt_id, _ = store.start_attempt(done.run_id, host="h")
    store.finish_attempt(attempt_id, done.run_id, status=COMPLETED, run_status=COMPLETED, exit_code=0,
                         ended=5.0, metrics={"s": 1.0})
    store.start_attempt(dead.run_id, host="h", gpus="1,2")  # left running by a sweep that died

    opened = open_results_folder(store, spec, tmp_path / "results", runs, code=NO_GIT)

    (lost,) = store.attempts(dead.run_id)
    assert (lost.status, lost.failure_class) == (INTERRUPTED, triage.LOST)
    assert opened.recovered.gpus == [1, 2] and opened.recovered.held == []
    assert opened.skipped == 1 and opened.failed == 0
    assert {r.run_id for r in opened.queue} == {r.run_id for r in runs[1:]}
    assert [v.id for v in store.versions()] == [opened.version_id]
    assert opened.warning is None  # no git: nothing to say of the code under test
    store.close()


def test_opening_refuses_a_missing_working_directory_before_anything_launches(tmp_path):
    spec = make_spec(tmp_path, workdir=str(tmp_path / "nowhere"))
    store = Store.create(tmp_path / "results")

    with pytest.raises(UserError, match="nowhere does not exist"):
        open_results_folder(store, spec, tmp_path / "results", expand(spec), code=NO_GIT)
    # A backend that runs elsewhere does not need it here.
    opened = open_results_folder(store, spec, tmp_path / "results", expand(spec), code=NO_GIT,
                                 check_workdirs=False)
    assert len(opened.queue) == 4
    store.close()


def test_rerun_all_grants_a_whole_budget_and_skips_nothing(tmp_path):
    spec = make_spec(tmp_path)
    runs = expand(spec)
    store = Store.create(tmp_path / "results")
    store.add_runs(runs)
    attempt_id, _ = store.start_attempt(runs[0].run_id, host="h")
    store.finish_attempt(attempt_id, runs[0].run_id, status=COMPLETED, run_status=COMPLETED, exit_code=0,
                         ended=5.0, metrics={"s": 1.0})

    opened = open_results_folder(store, spec, tmp_path / "results", runs, code=NO_GIT, rerun_all=True)

    assert opened.skipped == 0 and len(opened.queue) == 4 and opened.budget.charged == {}
    store.close()
