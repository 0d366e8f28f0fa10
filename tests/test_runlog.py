"""`benchlab.log` / `benchlab.summary`: the files a run writes, readable by the collector."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from benchlab.collect.files import read_metrics_jsonl
from benchlab.runlog import Logger


def test_log_appends_one_json_object_per_step(tmp_path):
    logger = Logger(tmp_path)
    for step in range(5):
        logger.log(step=step * 10, loss=1.0 / (step + 1), acc=step)
    logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(ln) for ln in lines] == [
        {"step": s * 10, "loss": 1.0 / (s + 1), "acc": s} for s in range(5)]


def test_log_without_step_counts_calls(tmp_path):
    logger = Logger(tmp_path)
    logger.log(x=1.0)
    logger.log(x=2.0)
    logger.close()
    steps, vals = read_metrics_jsonl(tmp_path / "metrics.jsonl")["x"]
    assert steps.tolist() == [0.0, 1.0] and vals.tolist() == [1.0, 2.0]


def test_non_finite_values_round_trip(tmp_path):
    logger = Logger(tmp_path)
    logger.log(step=1, a=float("nan"), b=float("inf"), c=-float("inf"))
    logger.close()
    series = read_metrics_jsonl(tmp_path / "metrics.jsonl")
    assert math.isnan(series["a"][1][0]) and series["b"][1][0] == math.inf and series["c"][1][0] == -math.inf


def test_summary_merges_final_scalars(tmp_path):
    logger = Logger(tmp_path)
    logger.summary(acc=0.9)
    logger.summary(fit_time=1.5)
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"acc": 0.9, "fit_time": 1.5}


def test_module_helpers_write_into_benchlab_run_dir_and_flush_at_exit(tmp_path):
    code = ("from benchlab import log, summary\n"
            "for i in range(3): log(step=i, reward=i * 2.0)\n"
            "summary(reward=4.0)\n")
    env = {**os.environ, "BENCHLAB_RUN_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    steps, vals = read_metrics_jsonl(tmp_path / "metrics.jsonl")["reward"]
    assert steps.tolist() == [0, 1, 2] and vals.tolist() == [0.0, 2.0, 4.0]
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"reward": 4.0}


def test_importing_log_pulls_in_no_heavy_dependency():
    code = ("import sys; from benchlab import log; "
            "print(sorted(m for m in ('numpy', 'pandas', 'pydantic', 'yaml', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_summary_creates_the_run_directory(tmp_path):
    Logger(tmp_path / "new" / "run").summary(acc=1.0)
    assert json.loads((tmp_path / "new" / "run" / "metrics.json").read_text()) == {"acc": 1.0}
