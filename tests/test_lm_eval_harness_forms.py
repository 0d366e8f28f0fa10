"""lm-eval results read whole in every documented form, on files the real harness wrote.

lm-evaluation-harness runs offline here with ``--model dummy`` (no torch) on a tiny local task:
once whole and once with ``--limit``. Each documented way a spec names an lm-eval value (the
shipped example's ``task: "{task}", key: "{key}"``, a literal ``task``/``key``, a bare
``metric,filter`` and a full ``task/metric,filter``) must keep the partial flag (status, report,
BENCHMARKS.md) and the standard error.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TASK = "tiny_arith"
TASK_YAML = """
task: tiny_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""
LM_EVAL_LOCAL = Path(__file__).resolve().parent / "lm_eval_local.py"
COPY = """
import shutil, sys
shutil.copytree(sys.argv[1], sys.argv[2], dirs_exist_ok=True)
"""


@pytest.fixture(scope="module")
def harness_outputs(tmp_path_factory) -> dict[str, Path]:
    """``{"whole": folder, "limited": folder}``: what ``lm_eval --output_path folder`` wrote."""
    lm_eval = shutil.which("lm_eval") or str(Path(sys.executable).with_name("lm_eval"))
    if not os.path.exists(lm_eval):
        pytest.skip("lm-evaluation-harness is not installed (pip install lm-eval)")
    root = tmp_path_factory.mktemp("lm-eval")
    tasks = root / "tasks"
    tasks.mkdir()
    with open(tasks / "tiny.jsonl", "w") as f:
        for i in range(20):
            f.write(json.dumps({"question": f"What is {i} + 1?", "choices": [str(i + 1), str(i + 2), str(i)],
                                "label": 0}) + "\n")
    (tasks / "tiny.yaml").write_text(TASK_YAML.format(data=tasks / "tiny.jsonl"))
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_HOME": str(root / "hf"), "TOKENIZERS_PARALLELISM": "false"}
    outputs = {}
    for name, extra in (("whole", []), ("limited", ["--limit", "5"])):
        out = root / name
        # The harness indexing only this task (tests/lm_eval_local.py): it writes what lm_eval does.
        proc = subprocess.run([sys.executable, str(LM_EVAL_LOCAL), "--model", "dummy", "--tasks", TASK,
                               "--include_path", str(tasks), "--output_path", str(out), "--log_samples",
                               "--seed", "1234", *extra],
                              capture_output=True, text=True, env=env, cwd=root, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert list(out.rglob("results_*.json")) and list(out.rglob("samples_*.jsonl"))
        outputs[name] = out
    return outputs


def _harness_file(folder: Path) -> dict:
    return json.loads(next(folder.rglob("results_*.json")).read_text())


FORMS = {
    "example: task {task}, key {key}": ('{name: score, goal: max, from: {lm_eval: ., task: "{task}", key: "{key}"}}',
                                       "score", "score_stderr"),
    "literal task and key": ('{name: score, goal: max, from: {lm_eval: ., task: tiny_arith, key: "acc,none"}}',
                             "score", "score_stderr"),
    "bare metric,filter": ('{name: "acc,none", goal: max, from: {lm_eval: .}}',
                           "acc,none", "tiny_arith/acc_stderr,none"),
    "full task/metric,filter": ('{name: "tiny_arith/acc,none", goal: max, from: {lm_eval: .}}',
                                "tiny_arith/acc,none", "tiny_arith/acc_stderr,none"),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_keeps_the_partial_flag_and_the_standard_error(form, harness_outputs, make_bench):
    primary, name, stderr_name = FORMS[form]
    spec = f"""
name: lm-forms
tasks: [{{name: {TASK}, params: {{key: "acc,none"}}, target: 0.9}}]
configs:
  - {{name: whole, params: {{src: "{harness_outputs['whole']}"}}}}
  - {{name: limited, params: {{src: "{harness_outputs['limited']}"}}}}
seeds: [0]
command: python run.py {{src}} {{run_dir}}
metrics:
  primary: {primary}
"""
    bench = make_bench(spec, script=COPY)
    assert bench.cli("run", "bench.yaml", "-r", "out").returncode == 0

    # The partial flag: the limited run only, in status (text and JSON) ...
    status = json.loads(bench.cli("status", "out", "--json").stdout)
    assert [p["run"] for p in status["partial"]] == [f"{TASK}/limited/s0"]
    assert "5 of 20 samples" in status["partial"][0]["note"]
    # ... in the report's summary and in BENCHMARKS.md, where the limited cell is marked.
    assert bench.cli("report", "out").returncode == 0
    # The values and standard errors the harness wrote, read straight from its files, in the
    # results table.
    with open(bench.results / "results.csv") as f:
        table = [r for r in csv.DictReader(f) if not r["step"]]
    for config in ("whole", "limited"):
        truth = _harness_file(harness_outputs[config])["results"][TASK]
        rows = {r["metric"]: float(r["value"]) for r in table if r["config"] == config}
        assert rows[name] == pytest.approx(truth["acc,none"])
        assert rows[stderr_name] == pytest.approx(truth["acc_stderr,none"])
    report = (bench.results / "BENCHMARK_REPORT.md").read_text()
    assert "1 run is a partial evaluation" in report
    board = (bench.results / "BENCHMARKS.md").read_text()
    row = next(line for line in board.splitlines() if line.startswith(f"| {TASK} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    whole_cell, limited_cell = cells[2], cells[3]
    assert "partial" in limited_cell and "partial" not in whole_cell
    assert f"{TASK} / limited: {TASK} 5 of 20 samples" in board
    # ... and in the dashboard's leaderboard, made by the same function.
    from benchlab.ui.tables import report_numbers

    numbers = report_numbers(bench.results)
    assert numbers is not None
    header, *board_rows = numbers.leaderboard
    dash = dict(zip(header, next(r for r in board_rows if r[0] == TASK), strict=True))
    assert "partial" in dash["limited"] and "partial" not in dash["whole"]


def test_a_metric_name_with_a_placeholder_is_refused_by_validate(make_bench):
    bench = make_bench(f"""
name: lm-forms
tasks: [{{name: {TASK}, params: {{key: "acc,none"}}}}]
configs: [{{name: a}}]
seeds: [0]
command: echo
metrics:
  primary: {{name: "{{key}}", from: {{lm_eval: ., task: "{{task}}", key: "{{key}}"}}}}
""")
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2
    assert "bench.yaml:7 metrics.primary.name: a metric's name cannot hold a placeholder ({key})" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_harness_run_records_its_settings_and_the_report_shows_them(harness_outputs, make_bench):
    import importlib.metadata

    lm_eval = shutil.which("lm_eval") or str(Path(sys.executable).with_name("lm_eval"))
    include = next(harness_outputs["whole"].parent.glob("tasks"))
    bench = make_bench(f"""
name: lm-settings
tasks: [{{name: {TASK}}}]
configs: [{{name: dummy}}]
seeds: [1234]
env: {{HF_DATASETS_OFFLINE: "1", HF_HUB_OFFLINE: "1", HF_HOME: "{include.parent / 'hf'}"}}
command: >-
  {lm_eval} --model dummy --tasks {{task}} --include_path {include} --seed {{seed}}
  --batch_size 1 --gen_kwargs temperature=0 --output_path {{run_dir}}
metrics:
  primary: {{name: "acc,none", goal: max, from: {{lm_eval: .}}}}
""")
    proc = bench.cli("run", "bench.yaml", "-r", "out", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    provenance = json.loads(next((bench.results / "runs").glob("*/provenance.json")).read_text())
    ran = _harness_file(bench.results / "runs")["config"]
    version = importlib.metadata.version("lm_eval")
    assert provenance["evaluation"] == {
        "tool": "lm_eval", "model": None, "seed": str(ran["random_seed"]), "temperature": "0",
        "tensor_parallel_size": None, "batch_size": str(ran["batch_size"]), "version": version}
    assert bench.cli("report", "out").returncode == 0
    board = (bench.results / "BENCHMARKS.md").read_text()
    assert (f"lm_eval: seed 1234, temperature 0, tensor_parallel_size 1, batch_size 1, lm_eval {version}"
            in board)
