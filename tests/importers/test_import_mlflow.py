"""`benchlab import mlflow`: runs logged by the real mlflow, read back with its own client.

The numbers the imported folder gives (report, compare, curves) are checked against what
MlflowClient says of the same runs, computed here with numpy, never against benchlab's output.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from import_report_rows import report_row

from benchlab_testing import run_cli, skip_unless_installed

skip_unless_installed("mlflow")

# Two optimizers over three seeds, accuracy logged at four steps, loss once; then the runs that
# must be left out, each for its own reason.
LOG = r'''
import sys
import mlflow
import numpy as np

mlflow.set_tracking_uri(sys.argv[1])
mlflow.set_experiment("digits")
rng = np.random.default_rng(7)
for opt in ("sgd", "adam"):
    for seed in range(3):
        with mlflow.start_run(run_name=f"{opt}-{seed}"):
            mlflow.log_params({"optimizer": opt, "seed": seed, "lr": 0.01})
            mlflow.set_tag("dataset", "digits")
            for step in range(4):
                acc = 0.6 + 0.08 * step + (0.05 if opt == "adam" else 0.0) + rng.normal(0, 0.02)
                mlflow.log_metric("accuracy", acc, step=step * 100)
            mlflow.log_metric("loss", float(rng.uniform(0.1, 0.5)))
if len(sys.argv) > 2 and sys.argv[2] == "bad":
    with mlflow.start_run(run_name="no-seed"):
        mlflow.log_params({"optimizer": "sgd", "lr": 0.01})
        mlflow.log_metric("accuracy", 0.5)
    with mlflow.start_run(run_name="twin-a"):
        mlflow.log_params({"optimizer": "rmsprop", "seed": 0})
        mlflow.log_metric("accuracy", 0.7)
    with mlflow.start_run(run_name="twin-b"):
        mlflow.log_params({"optimizer": "rmsprop", "seed": 0})
        mlflow.log_metric("accuracy", 0.71)
    with mlflow.start_run(run_name="no-metric"):
        mlflow.log_params({"optimizer": "sgd", "seed": 9})
        mlflow.log_metric("loss", 0.3)
    run = mlflow.start_run(run_name="crashed")
    mlflow.log_params({"optimizer": "sgd", "seed": 8})
    mlflow.log_metric("accuracy", 0.2)
    mlflow.end_run(status="FAILED")
'''

ENV = {"MLFLOW_ALLOW_FILE_STORE": "true"}  # the writer opts in to the file store, as MLflow 3 asks


def _log(tmp: Path, uri: str, *extra: str) -> None:
    (tmp / "log_runs.py").write_text(LOG)
    proc = subprocess.run([sys.executable, "log_runs.py", uri, *extra], cwd=tmp, capture_output=True, text=True,
                          timeout=300, env={**os.environ, **ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]


def _client_values(uri: str) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """Per optimizer, the final accuracies; per run name, the accuracy history: as MlflowClient has them."""
    from unittest import mock

    from mlflow import MlflowClient

    with mock.patch.dict(os.environ, ENV):
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("digits")
        runs = client.search_runs([experiment.experiment_id])
    finals: dict[str, list[float]] = {}
    curves: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        if run.info.status != "FINISHED" or "seed" not in run.data.params or "accuracy" not in run.data.metrics:
            continue
        finals.setdefault(run.data.params["optimizer"], []).append(run.data.metrics["accuracy"])
        with mock.patch.dict(os.environ, ENV):
            history = client.get_metric_history(run.info.run_id, "accuracy")
        curves[run.info.run_id] = sorted((m.step, m.value) for m in history)
    return finals, curves


@pytest.fixture(scope="module")
def mlruns(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("mlflow")
    _log(tmp, "file:./mlruns")
    return tmp


def test_mlruns_folder_imports_and_report_means_match_mlflow_client(mlruns: Path):
    res = mlruns / "res"
    proc = run_cli("import", "mlflow", "mlruns", "--experiment", "digits", "--results", "res", "--metric", "accuracy",
                   "--config", "optimizer", "--task", "tags.dataset", "--baseline", "sgd", cwd=mlruns, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "imported 6 runs (0 already there, 0 left out)" in proc.stdout

    finals, curves = _client_values((mlruns / "mlruns").as_uri())
    proc = run_cli("report", "res", "--no-plots", "--no-html", cwd=mlruns, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (res / "BENCHMARK_REPORT.md").read_text()
    for opt, values in finals.items():
        # The report's row: | rank | config | seeds | mean ± std | CI | min | max |
        (mean, mean_tol), (std, std_tol) = report_row(text, opt, "3/3")
        assert abs(mean - np.mean(values)) <= mean_tol
        assert abs(std - np.std(values, ddof=1)) <= std_tol

    proc = run_cli("compare", "res", "--candidate", "adam", "--json", cwd=mlruns, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = {row["config"]: row for row in json.loads(proc.stdout)["summary"]}
    for opt, values in finals.items():
        assert summary[opt]["mean"] == pytest.approx(np.mean(values), rel=1e-12)
        assert summary[opt]["task"] == "digits"

    import benchlab

    table = benchlab.load(res)
    for prov in (res / "runs").glob("*/provenance.json"):
        origin = json.loads(prov.read_text())["imported_from"]
        assert origin["source"] == "mlflow" and origin["experiment"] == "digits"
        run_id = prov.parent.name
        mine = table[(table.metric == "accuracy") & table.step.notna()]
        config = yaml.safe_load((prov.parent / "config.yaml").read_text())
        got = mine[(mine.config == config["config"]) & (mine.seed == config["seed"])]
        assert sorted(zip(got.step, got.value, strict=True)) == curves[origin["id"]], run_id
        assert (prov.parent / "metrics.json").exists() and (prov.parent / "metrics.jsonl").exists()


def test_importing_again_adds_only_the_new_runs(mlruns: Path, tmp_path: Path):
    from benchlab.collect.importers import Naming, import_runs
    from benchlab.collect.importers.from_mlflow import read_runs

    naming = Naming(config=("optimizer",))
    first = import_runs(read_runs(str(mlruns / "mlruns")), tmp_path / "res", naming=naming, primary="accuracy")
    again = import_runs(read_runs(str(mlruns / "mlruns")), tmp_path / "res", naming=naming, primary="accuracy")
    assert (len(first.added), first.already) == (6, 0)
    assert (len(again.added), again.already, again.skipped) == (0, 6, [])
    import benchlab

    finals = benchlab.load(tmp_path / "res", series=False)
    assert len(finals[finals.metric == "accuracy"]) == 6
    assert len(list((tmp_path / "res" / "runs").iterdir())) == 6


def test_a_search_filter_keeps_only_the_runs_it_names(mlruns: Path):
    from benchlab.collect.importers.from_mlflow import read_runs

    kept = read_runs(str(mlruns / "mlruns"), ["digits"], "params.optimizer = 'adam'")
    assert sorted(int(r.params["seed"]) for r in kept) == [0, 1, 2]
    assert {r.params["optimizer"] for r in kept} == {"adam"}


def test_bad_runs_are_one_line_each_and_the_good_ones_are_imported(tmp_path: Path):
    _log(tmp_path, "sqlite:///runs.db", "bad")
    proc = run_cli("import", "mlflow", "runs.db", "--results", "res", "--metric", "accuracy", "--config",
                   "optimizer", cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    by_name = {re.search(r"\((\S+)\)", line).group(1): line for line in lines}
    assert set(by_name) == {"no-seed", "twin-a", "twin-b", "no-metric", "crashed"}, lines
    assert "has no 'seed' to read its seed from (its params: lr, optimizer)" in by_name["no-seed"]
    assert "claims digits/rmsprop/s0, as does" in by_name["twin-a"] and "none of them imported" in by_name["twin-b"]
    assert "logged no 'accuracy' (it logged: loss)" in by_name["no-metric"]
    assert by_name["crashed"].startswith("note:") and "its status is FAILED" in by_name["crashed"]
    assert "imported 6 runs (0 already there, 5 left out)" in proc.stdout
    import benchlab

    assert sorted(set(benchlab.load(tmp_path / "res").config)) == ["adam", "sgd"]


def test_an_unknown_experiment_is_one_line_naming_those_there(mlruns: Path):
    proc = run_cli("import", "mlflow", "mlruns", "-e", "digitz", "--results", "res2", "--metric", "accuracy",
                   cwd=mlruns, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: no experiment 'digitz' in the tracking store (its experiments: Default, digits)"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_tracking_server_on_loopback_imports_as_its_store_does(tmp_path: Path):
    _log(tmp_path, "sqlite:///server.db")
    port = _free_port()
    # The job queue of a full mlflow install is not needed to serve the tracking API.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                               f"sqlite:///{tmp_path / 'server.db'}", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        import urllib.request

        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "mlflow server did not start"
            time.sleep(1)
        url = f"http://127.0.0.1:{port}"
        proc = run_cli("import", "mlflow", url, "-e", "digits", "--results", "res", "--metric", "accuracy",
                       "--config", "optimizer", "--json", cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert len(json.loads(proc.stdout)["added"]) == 6
        finals, _ = _client_values(url)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    import benchlab

    table = benchlab.load(tmp_path / "res", series=False)
    acc = table[table.metric == "accuracy"]
    for opt, values in finals.items():
        assert acc[acc.config == opt].value.mean() == pytest.approx(np.mean(values), rel=1e-12)
    origin = json.loads(next((tmp_path / "res" / "runs").glob("*/provenance.json")).read_text())["imported_from"]
    assert origin["tracking_uri"] == url
