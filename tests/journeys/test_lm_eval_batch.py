"""The lm-eval batch workflow (seeds/004) end to end with the real lm-evaluation-harness:
checkpoints × tasks evaluated by `lm_eval --model dummy` on two local tasks (YAML + JSONL, nothing
downloaded) with `--limit`, a checkpoint that appears while `benchlab watch` runs, the partial
evaluations said as such, and the scores in results.csv and BENCHMARKS.md, each the number the
harness wrote in its own results file."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest
import yaml

from journeys.journey_kit import benchlab, start, status, wait_for

#: ``python -m lm_eval`` indexing only the local tasks (tests/lm_eval_local.py; the same files written,
#: 17 s less CPU a run).
LM_EVAL_LOCAL = Path(__file__).resolve().parents[1] / "lm_eval_local.py"

pytestmark = pytest.mark.slow

TASK = """
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

SPEC = """
name: ckpts
tasks: [{name: arith}, {name: arith_sub}]
configs: [{name: template, params: {checkpoint: none}}]
seeds: [0]
retries: 0
command: >-
  python LM_EVAL_LOCAL --model dummy --model_args pretrained={checkpoint} --tasks {task}
  --include_path tasks --limit 8 --output_path {run_dir} --seed {seed}
env: {HF_DATASETS_OFFLINE: "1", HF_HUB_OFFLINE: "1", TOKENIZERS_PARALLELISM: "false"}
metrics:
  primary: {name: "acc,none", goal: max, from: {lm_eval: .}}
"""


def _completed(db) -> set[str]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return {c for (c,) in con.execute("SELECT config FROM runs WHERE status = 'completed'")}
    except sqlite3.Error:
        return set()


def _harness_score(run_dir, task: str) -> float:
    (path,) = run_dir.glob("*/results_*.json")
    return json.loads(path.read_text())["results"][task]["acc,none"]


def test_lm_eval_batch_journey(tmp_path):
    root = tmp_path
    tasks = root / "tasks"
    tasks.mkdir()
    for name, op in (("arith", "+"), ("arith_sub", "-")):
        data = tasks / f"{name}.jsonl"
        with data.open("w") as f:
            for i in range(12):
                right = i + (i + 1) if op == "+" else i - (i + 1)
                f.write(json.dumps({"question": f"What is {i} {op} {i + 1}?",
                                    "choices": [str(right), str(right + 1), str(right - 2)], "answer": 0}) + "\n")
        (tasks / f"{name}.yaml").write_text(textwrap.dedent(TASK.format(name=name, data=data)).lstrip())
    (root / "bench.yaml").write_text(SPEC.lstrip().replace("LM_EVAL_LOCAL", str(LM_EVAL_LOCAL)))
    ckpts = root / "ckpts"
    (ckpts / "step-100").mkdir(parents=True)
    (ckpts / "step-100" / "DONE").touch()

    watch = start(root, "watch", "ckpts", "--spec", "bench.yaml", "-r", "results/ckpts", "--marker", "DONE",
                  "--interval", "0.2", "--max-checkpoints", "2")
    db = root / "results" / "ckpts" / "benchlab.db"
    try:
        wait_for(lambda: "step-100" in _completed(db), within=300)
        # Training writes the next checkpoint while the watch runs.
        (ckpts / "step-200").mkdir()
        (ckpts / "step-200" / "DONE").touch()
        out, err = watch.communicate(timeout=300)
    finally:
        watch.kill()
    assert watch.returncode == 0, out + err

    now = status(root, "results/ckpts")
    assert now["counts"] == {"completed": 4}
    # --limit 8 of 12 questions: every run is a partial evaluation, and says so.
    partial = {p["run"]: p["note"] for p in now["partial"]}
    assert sorted(partial) == sorted(f"{t}/{c}/s0" for t in ("arith", "arith_sub") for c in ("step-100", "step-200"))
    assert all("8 of 12 samples" in note for note in partial.values()), partial

    benchlab(root, "report", "results/ckpts", "--no-plots")
    rows = list(csv.DictReader(io.StringIO((root / "results/ckpts/results.csv").read_text())))
    runs = {(r["task"], r["config"]): r for r in rows if r["metric"] == "acc,none"}
    assert sorted(runs) == sorted((t, c) for t in ("arith", "arith_sub") for c in ("step-100", "step-200"))
    board = (root / "results/ckpts/BENCHMARKS.md").read_text()
    for run_dir in (root / "results/ckpts/runs").iterdir():
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        task, config = cfg["task"], cfg["config"]
        assert cfg["params"]["checkpoint"] == str(ckpts / config)
        score = _harness_score(run_dir, task)  # what lm-evaluation-harness itself wrote
        assert float(runs[(task, config)]["value"]) == pytest.approx(score, abs=1e-12)
        line = next(ln for ln in board.splitlines() if ln.startswith(f"| {task} |"))
        assert f"[{score:.3g}](runs/{run_dir.name}/)" in line
