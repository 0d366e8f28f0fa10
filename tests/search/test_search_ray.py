"""A search over the Ray backend, on a real two-node Ray cluster on this machine."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from optuna.trial import TrialState
from searchkit import objective, write_search_bench

from benchlab.execute.ray import RayOptions
from benchlab.search import SearchRun
from benchlab.search.study import read_study
from benchlab.spec import load_spec
from benchlab_testing import start_ray_cluster

pytestmark = pytest.mark.slow

MB = 2**20


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    cluster, _ = start_ray_cluster({"num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False},
                                   {"num_cpus": 1, "object_store_memory": 80 * MB})
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_search_runs_its_trials_as_ray_tasks_and_completes_its_budget(tmp_path, ray_cluster):
    spec = load_spec(write_search_bench(tmp_path, budget=4))
    results = tmp_path / "results" / "tune"
    outcome = SearchRun(spec, results, backend="ray", jobs=2,
                        backend_options=RayOptions(address=ray_cluster.address, max_inflight=2)).run()
    assert outcome.exit_code == 0 and outcome.completed == 4 and outcome.counted == 4
    study = read_study(results / "search" / "search")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 4
    # each value is the objective at the trial's x, as the script on a Ray worker computed it
    for t in done:
        assert t.value == pytest.approx(objective(t.params["x"]), abs=1e-9)
    # the runs' files came home from the workers
    runs = list((results / "search" / "search" / "runs").iterdir())
    assert len(runs) == 4 and all((r / "metrics.json").exists() and (r / "provenance.json").exists() for r in runs)
