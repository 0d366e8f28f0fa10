"""`benchlab search` with real Optuna and real subprocess trials: optimum, pruning, crash, honesty."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
import yaml
from optuna.trial import TrialState
from searchkit import objective, write_search_bench

from benchlab.errors import ResultsNotFound
from benchlab.results import load
from benchlab.search import SearchRun
from benchlab.search.study import FAILURE_ATTR, RETRY_OF_ATTR, open_study, read_study
from benchlab.spec import load_spec
from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


def _study(results: Path) -> optuna.Study:
    return read_study(results / "search" / "search")


def _attempts(results: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(results / "search" / "search" / "benchlab.db")
    try:
        return con.execute("SELECT r.config, a.status, r.status FROM attempts a JOIN runs r USING (run_id)").fetchall()
    finally:
        con.close()


def test_a_search_finds_the_optimum_of_a_known_function_within_its_budget(tmp_path):
    spec = write_search_bench(tmp_path, budget=16)
    proc = run_cli("search", str(spec), "-j", "1", "--json", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["counted"] == 16 and out["completed"] == 16 and out["failed"] == 0
    x = out["best_params"]["x"]
    # the maximum of -(x - 0.3)**2 on [-1, 1] is at 0.3; 16 TPE trials come within 0.1 of it
    assert abs(x - 0.3) < 0.1
    assert out["best_value"] == pytest.approx(objective(x), abs=1e-9)
    study = _study(tmp_path / "results" / "tune")
    values = [t.value for t in study.get_trials(states=(TrialState.COMPLETE,))]
    assert len(values) == 16 and out["best_value"] == max(values)
    # every trial is one run (one task, one search seed), run on the search seed only
    trials = load(tmp_path / "results" / "tune", search=True)
    assert set(trials["seed"]) == {7} and trials["trial"].nunique() == 16


def test_pruning_kills_the_trials_process_group_and_records_it_pruned_not_failed(tmp_path):
    spec_path = write_search_bench(tmp_path, budget=2, pruner="median",
                                   params='{x: 0.0, steps: 400, nap: 0.02, child: "1"}')
    spec = load_spec(spec_path)
    results = tmp_path / "results" / "tune"
    folder = results / "search" / "search"
    # The good trial first, then a bad one: the pruner has the first's curve to compare with.
    study = open_study(spec, folder, "final")
    study.enqueue_trial({"x": 0.3})
    study.enqueue_trial({"x": -1.0})
    del study
    started = time.monotonic()
    result = SearchRun(spec, results, jobs=1).run()
    assert result.completed == 1 and result.pruned == 1 and result.failed == 0 and result.exit_code == 0
    study = read_study(folder)
    states = {t.params["x"]: t.state for t in study.trials}
    assert states == {0.3: TrialState.COMPLETE, -1.0: TrialState.PRUNED}
    bad = next(t for t in study.trials if t.params["x"] == -1.0)
    assert bad.intermediate_values and max(bad.intermediate_values) < 399  # stopped well before its end
    # one attempt, recorded pruned (never retried, not a failure)
    rows = [(status, run_status) for config, status, run_status in _attempts(results) if config == "base[trial=1]"]
    assert rows == [("pruned", "pruned")]
    # the child it left in its process group died with it
    run_dir = next(p for p in (folder / "runs").iterdir()
                   if yaml.safe_load((p / "config.yaml").read_text())["config"] == "base[trial=1]")
    child = int((run_dir / "child.pid").read_text())
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    # the good trial ran 400 steps of 20 ms; the pruned one far fewer
    assert time.monotonic() - started < 2 * 400 * 0.02


def _wait_for(predicate, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_kill_9_mid_search_then_the_same_command_completes_the_budget_exactly(tmp_path):
    spec = write_search_bench(tmp_path, budget=6, params='{x: 0.0, steps: 5, nap: 0.3, child: ""}')
    results = tmp_path / "results" / "tune"
    ledger = results / "search" / "search" / "benchlab.db"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen([sys.executable, "-m", "benchlab", "search", str(spec), "-j", "2"], cwd=tmp_path,
                                 stdout=log, stderr=subprocess.STDOUT, env=env)

    runs = results / "search" / "search" / "runs"

    def state() -> tuple[int, int]:
        # Read from the run directories, not the ledger: a reader of the ledger from another
        # process is not what this test is about.
        if not runs.is_dir():
            return 0, 0
        dirs = list(runs.iterdir())
        done = sum((d / "provenance.json").exists() for d in dirs)
        started = sum((d / "train.log").exists() and (d / "metrics.jsonl").exists() for d in dirs)
        return done, started - done

    try:
        _wait_for(lambda: state()[0] >= 2 and state()[1] == 2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    study = _study(results)
    running = {t.number: t.params for t in study.trials if t.state == TrialState.RUNNING}
    assert len(running) == 2
    proc = run_cli("search", str(spec), "-j", "2", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "were running when the last search stopped" in proc.stdout
    study = _study(results)
    by_state: dict[TrialState, list[optuna.trial.FrozenTrial]] = {}
    for t in study.trials:
        by_state.setdefault(t.state, []).append(t)
    # exactly the budget completed; the two killed trials failed with their reason and were asked again once
    assert len(by_state[TrialState.COMPLETE]) == 6
    assert TrialState.RUNNING not in by_state and TrialState.WAITING not in by_state
    failed = {t.number: t for t in by_state[TrialState.FAIL]}
    assert set(failed) == set(running)
    assert all("stopped before it finished" in t.user_attrs[FAILURE_ATTR] for t in failed.values())
    again = [t for t in study.trials if RETRY_OF_ATTR in t.user_attrs]
    assert sorted(t.user_attrs[RETRY_OF_ATTR] for t in again) == sorted(running)
    assert all(t.params == running[t.user_attrs[RETRY_OF_ATTR]] and t.state == TrialState.COMPLETE for t in again)
    con = sqlite3.connect(ledger)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        lost = con.execute("SELECT COUNT(*) FROM attempts WHERE failure_class = 'orchestrator-died'").fetchone()[0]
        completed = con.execute("SELECT COUNT(*) FROM attempts WHERE status = 'completed'").fetchone()[0]
    finally:
        con.close()
    assert lost == 2 and completed == 6


def test_trials_never_enter_the_benchmark_even_in_a_shared_results_folder(tmp_path):
    spec = write_search_bench(tmp_path, budget=3)
    bench = run_cli("run", str(spec), "-j", "2", "-r", "shared", cwd=tmp_path, timeout=300)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    found = run_cli("search", str(spec), "-j", "2", "-r", "shared", cwd=tmp_path, timeout=300)
    assert found.returncode == 0, found.stdout + found.stderr
    again = run_cli("report", "shared", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    table = load(tmp_path / "shared")
    assert set(table["config"]) == {"base", "other"} and set(table["seed"]) == {0, 1}
    for name in ("BENCHMARKS.md", "BENCHMARK_REPORT.md", "results.csv"):
        text = next((tmp_path / "shared").rglob(name)).read_text()
        assert "trial=" not in text and "base[" not in text, name
    compared = run_cli("compare", "shared", "--baseline", "other", "--candidate", "base", "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "trial" not in compared.stdout
    trials = load(tmp_path / "shared", search=True)
    assert trials["trial"].nunique() == 3 and set(trials["seed"]) == {7}
    assert trials["config"].str.startswith("base[trial=").all()
    with pytest.raises(ResultsNotFound, match="trials of a search"):
        load(tmp_path / "shared" / "search" / "search")


def test_promotion_writes_a_new_spec_that_validates_and_runs_on_the_benchmark_seeds(tmp_path):
    spec = write_search_bench(tmp_path, budget=3)
    assert run_cli("search", str(spec), "-j", "2", cwd=tmp_path, timeout=300).returncode == 0
    original = spec.read_text()
    proc = run_cli("search", str(spec), "--promote", "tuned", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    promoted = tmp_path / "bench.tuned.yaml"
    assert spec.read_text() == original  # the original is never touched
    text = promoted.read_text()
    best = _study(tmp_path / "results" / "tune").best_trial
    assert f"trial {best.number} of study tune:search" in text.splitlines()[1]
    new = load_spec(promoted)
    tuned = new.config("tuned")
    assert tuned.params["x"] == pytest.approx(best.params["x"]) and tuned.params["steps"] == 5
    assert tuned.origin is not None and (tuned.origin.trial, tuned.origin.metric) == (best.number, "val")
    assert tuned.origin.value == pytest.approx(best.value)
    assert run_cli("validate", str(promoted), cwd=tmp_path).returncode == 0
    ran = run_cli("run", str(promoted), "-j", "2", cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    table = load(tmp_path / "results" / "tune")
    finals = table[(table["config"] == "tuned") & (table["metric"] == "val") & table["step"].isna()]
    assert sorted(finals["seed"]) == [0, 1]  # the benchmark's seeds, not the search's
    assert finals["value"].to_numpy() == pytest.approx([objective(best.params["x"])] * 2)
    report = (tmp_path / "results" / "tune" / "BENCHMARK_REPORT.md").read_text()
    assert f"promoted from search tune:search, trial {best.number}" in report
    twice = run_cli("search", str(spec), "--promote", "tuned", cwd=tmp_path)
    assert twice.returncode == 2 and "never overwrites" in twice.stderr
    taken = run_cli("search", str(spec), "--promote", "other", cwd=tmp_path)
    assert taken.returncode == 2 and "already has a config 'other'" in taken.stderr


@pytest.mark.parametrize(("sampler", "pruner", "space"), [
    ("random", "asha", "x: {uniform: [-1, 1]}"),
    ("grid", "median", "x: {choice: [0.3, -0.5]}"),
    ("cmaes", "none", "x: {uniform: [-1, 1]}"),
])
def test_each_sampler_and_pruner_runs_its_trials(tmp_path, sampler, pruner, space):
    text = (write_search_bench(tmp_path, budget=2, pruner=pruner).read_text()
            .replace("x: {uniform: [-1, 1]}", space)
            .replace(f"pruner: {pruner}", f"pruner: {pruner}\n  sampler: {sampler}"))
    (tmp_path / "bench.yaml").write_text(text)
    spec = load_spec(tmp_path / "bench.yaml")
    result = SearchRun(spec, tmp_path / "results" / "tune", jobs=2).run()
    assert result.failed == 0 and result.counted == 2
    study = open_study(spec, tmp_path / "results" / "tune" / "search" / "search", "final")
    wanted = {"random": optuna.samplers.RandomSampler, "grid": optuna.samplers.GridSampler,
              "cmaes": optuna.samplers.CmaEsSampler}[sampler]
    assert isinstance(study.sampler, wanted)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert all(t.value == pytest.approx(objective(t.params["x"]), abs=1e-9) for t in done)
    if sampler == "grid":
        assert sorted(t.params["x"] for t in study.trials) == [-0.5, 0.3]  # each grid point once


def test_a_resumed_search_does_not_ask_again_for_the_points_it_began_with(tmp_path):
    # A seeded sampler started again from its seed would draw its first points again: TPE's
    # first trials are random ones, so the continuation would repeat trials 0, 1, 2.
    spec = load_spec(write_search_bench(tmp_path, budget=6))
    SearchRun(spec, tmp_path / "results", budget=3, jobs=1).run()
    first = [t.params["x"] for t in _study(tmp_path / "results").trials]
    SearchRun(spec, tmp_path / "results", budget=6, jobs=1).run()
    study = _study(tmp_path / "results")
    assert [t.params["x"] for t in study.trials[:3]] == first
    later = [t.params["x"] for t in study.trials[3:]]
    assert len(later) == 3 and not set(later) & set(first), (first, later)
    # and the continuation is itself repeatable: the same steps in another folder give the same points
    again = tmp_path / "again"
    SearchRun(spec, again, budget=3, jobs=1).run()
    SearchRun(spec, again, budget=6, jobs=1).run()
    assert [t.params["x"] for t in _study(again).trials] == first + later
