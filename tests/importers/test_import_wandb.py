"""`benchlab import wandb`: offline runs written by the real wandb (WANDB_MODE=offline).

The expected numbers are those the writing script logged, which it also saves on its own
(truth.json): the import must give them back exactly, through the report and the curves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from import_report_rows import report_row

from benchlab_testing import run_cli, skip_unless_installed

skip_unless_installed("wandb")

WRITE = r'''
import json, os, sys
import numpy as np
import wandb

rng = np.random.default_rng(3)
truth = {}
for opt in ("sgd", "adam"):
    for seed in range(3):
        run = wandb.init(project="cartpole", config={"optimizer": {"name": opt, "lr": 0.01}, "seed": seed},
                         mode="offline", reinit="finish_previous")
        curve = []
        for step in range(5):
            reward = 100 + 20 * step + (15 if opt == "adam" else 0) + float(rng.normal(0, 5))
            run.log({"reward": reward, "train/loss": 1.0 / (step + 1)}, step=step * 1000)
            curve.append([step * 1000, reward])
        run.summary["eval_reward"] = curve[-1][1] + 1.0
        truth[run.id] = {"optimizer": opt, "seed": seed, "curve": curve, "eval_reward": curve[-1][1] + 1.0}
        run.finish()
run = wandb.init(project="cartpole", config={"optimizer": {"name": "sgd"}, "seed": 7}, mode="offline",
                 reinit="finish_previous")
run.log({"reward": 1.0})
run.finish(exit_code=1)
truth["crashed"] = run.id
run = wandb.init(project="cartpole", config={"optimizer": {"name": "sgd"}}, mode="offline", reinit="finish_previous")
run.log({"reward": 2.0})
run.finish()
truth["no_seed"] = run.id
json.dump(truth, open("truth.json", "w"))
'''


@pytest.fixture(scope="module")
def offline(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wandb")
    (tmp / "write.py").write_text(WRITE)
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(tmp)}
    proc = subprocess.run([sys.executable, "write.py"], cwd=tmp, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp


def test_offline_runs_import_with_their_summary_and_curves(offline: Path):
    truth = json.loads((offline / "truth.json").read_text())
    proc = run_cli("import", "wandb", "wandb", "--results", "res", "--metric", "eval_reward", "--config",
                   "optimizer.name", "--baseline", "sgd", cwd=offline, timeout=300)
    assert proc.returncode == 2, proc.stderr  # the run without a seed is the input's fault
    assert f"wandb run {truth['no_seed']}: has no 'seed' to read its seed from" in proc.stderr
    assert re.search(rf"note: wandb run {truth['crashed']}: it exited with code 1; only finished runs", proc.stderr)
    assert "imported 6 runs (0 already there, 2 left out)" in proc.stdout

    import benchlab

    table = benchlab.load(offline / "res")
    runs = {k: v for k, v in truth.items() if isinstance(v, dict)}
    assert set(table.task) == {"cartpole"}
    for opt in ("sgd", "adam"):
        logged = [r["eval_reward"] for r in runs.values() if r["optimizer"] == opt]
        got = table[(table.config == opt) & (table.metric == "eval_reward") & table.step.isna()]
        assert sorted(got.value) == sorted(logged)
    for run in runs.values():
        got = table[(table.config == run["optimizer"]) & (table.seed == run["seed"]) & (table.metric == "reward")]
        curve = got[got.step.notna()]
        assert [[s, v] for s, v in zip(curve.step, curve.value, strict=True)] == run["curve"]
        # A metric logged at each step and never set in the summary ends at its last logged value.
        assert got[got.step.isna()].value.tolist() == [run["curve"][-1][1]]
    assert "train/loss" in set(table.metric)

    proc = run_cli("report", "res", "--no-plots", "--no-html", cwd=offline, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (offline / "res" / "BENCHMARK_REPORT.md").read_text()
    for opt in ("sgd", "adam"):
        logged = [r["eval_reward"] for r in runs.values() if r["optimizer"] == opt]
        (mean, mean_tol), (std, std_tol) = report_row(text, opt, "3/3")
        assert abs(mean - np.mean(logged)) <= mean_tol
        assert abs(std - np.std(logged, ddof=1)) <= std_tol


def test_a_torn_run_file_reads_to_its_last_whole_record(offline: Path, tmp_path: Path):
    from benchlab.collect.importers.from_wandb import read_runs, wandb_files

    truth = json.loads((offline / "truth.json").read_text())
    some = next(k for k, v in truth.items() if isinstance(v, dict))
    source = next(p for p in wandb_files([offline / "wandb"]) if p.stem == f"run-{some}")
    whole = next(read_runs([source]))
    torn = tmp_path / source.name
    data = source.read_bytes()
    torn.write_bytes(data[: int(len(data) * 0.6)])  # as a run killed while writing leaves it
    cut = next(read_runs([torn]))
    assert whole.unfinished is None and whole.params["optimizer.name"] == truth[some]["optimizer"]
    assert cut.unfinished == "it has no exit record (still running, or killed)"
    assert cut.source_id == some and cut.params == whole.params
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0xFF  # one flipped byte: the chunk's checksum no longer holds
    (tmp_path / "flipped.wandb").write_bytes(bytes(corrupt))
    assert next(read_runs([tmp_path / "flipped.wandb"])).unfinished is not None


def test_a_second_import_of_more_runs_adds_only_those(offline: Path, tmp_path: Path):
    folders = sorted((offline / "wandb").glob("offline-run-*"))
    some = tmp_path / "some"
    some.mkdir()
    for folder in folders[:3]:
        shutil.copytree(folder, some / folder.name)
    for args, added, already in (([str(some)], 3, 0), ([str(offline / "wandb")], 3, 3)):
        proc = run_cli("import", "wandb", *args, "--results", "res", "--metric", "reward", "--config",
                       "optimizer.name", "--json", cwd=tmp_path, timeout=300)
        got = json.loads(proc.stdout)
        assert (len(got["added"]), got["already"]) == (added, already), proc.stderr


def test_not_a_wandb_file_is_one_line(tmp_path: Path):
    (tmp_path / "run-x.wandb").write_text("hello")
    proc = run_cli("import", "wandb", "run-x.wandb", "--results", "res", "--metric", "reward", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'run-x.wandb'}: not a W&B run file (it does not start with b':W&B')"]
