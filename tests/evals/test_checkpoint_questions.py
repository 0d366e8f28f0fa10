"""A checkpoint sweep run by benchlab with the real lm-evaluation-harness, one seed per checkpoint:
the seed-level comparison has no spread to test, the per-question records decide it."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from evals_kit import LM_EVAL_LOCAL, NEEDS_EVALS, write_task
from statsmodels.stats.contingency_tables import mcnemar

pytestmark = pytest.mark.slow
pytest.importorskip("lm_eval", reason=NEEDS_EVALS)

SPEC = """
name: ckpt-questions
tasks: [{{name: arith_a}}]
configs:
  - {{name: step20, params: {{sampling_seed: 1}}}}
  - {{name: step40, params: {{sampling_seed: 2}}}}
baseline: step20
seeds: [42]
retries: 0
command: >-
  {python} {lm_eval_local} --model dummy --tasks {{task}} --include_path {tasks}
  --output_path {{run_dir}} --log_samples --seed {{sampling_seed}}
metrics:
  primary: {{name: "acc,none", goal: max, from: {{lm_eval: ., task: "{{task}}", key: "acc,none"}}}}
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory):
    from benchlab_testing import run_cli

    root = tmp_path_factory.mktemp("sweep")
    write_task(root / "tasks", "arith_a", 60)
    (root / "bench.yaml").write_text(SPEC.format(python=sys.executable, lm_eval_local=LM_EVAL_LOCAL,
                                                 tasks=root / "tasks"))
    # The report is the next command's (test_report_has_a_question_level_section_and_benchmarks_marks).
    proc = run_cli("run", "bench.yaml", "-r", "out", "-j", "2", "--no-report", cwd=root, timeout=600,
                   env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


def _accs(root, config: str) -> np.ndarray:
    from benchlab.results import load

    table = load(root / "out", samples=True)
    part = table[table["config"] == config].sort_values("question", key=lambda q: q.astype(int))
    return part["value"].to_numpy()


def test_load_samples_from_a_results_folder_names_runs_by_spec(sweep):
    from benchlab.results import load

    table = load(sweep / "out", samples=True)
    assert set(table["config"]) == {"step20", "step40"}
    assert set(table["seed"]) == {42}
    assert set(table["task"]) == {"arith_a"}
    assert len(table) == 2 * 60


def test_one_seed_per_checkpoint_is_decided_over_questions_not_undetermined(sweep):
    from benchlab_testing import run_cli

    proc = run_cli("compare", "out", "--candidate", "step40", "--json", cwd=sweep)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["level"] == "questions"
    comp = data["comparisons"][0]
    assert comp["verdict"] != "undetermined"
    a, b = _accs(sweep, "step20"), _accs(sweep, "step40")
    better, worse = int(np.sum((b == 1) & (a == 0))), int(np.sum((b == 0) & (a == 1)))
    table = [[int(np.sum((a == 1) & (b == 1))), worse], [better, int(np.sum((a == 0) & (b == 0)))]]
    assert comp["pvalue"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    # Asked for by seed, the same comparison has no spread to test.
    proc = run_cli("compare", "out", "--candidate", "step40", "--level", "seeds", "--json", cwd=sweep)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["comparisons"][0]["significant"] is None


def test_report_has_a_question_level_section_and_benchmarks_marks(sweep):
    from benchlab_testing import run_cli

    proc = run_cli("report", "out", "--no-plots", cwd=sweep, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (sweep / "out" / "BENCHMARK_REPORT.md").read_text()
    assert "## Question-level comparisons" in report
    section = report.split("## Question-level comparisons", 1)[1]
    row = next(line for line in section.splitlines() if line.startswith("| arith_a"))
    a, b = _accs(sweep, "step20"), _accs(sweep, "step40")
    assert f"| 60 | {a.mean():.4g} | {b.mean():.4g} |" in row
    assert "exact McNemar" in row
    board = (sweep / "out" / "BENCHMARKS.md").read_text()
    assert "Question-level verdicts against step20" in board
    html = (sweep / "out" / "report.html").read_text()
    assert "Question-level comparisons" in html


def test_diff_of_two_evaluation_versions_pairs_questions_and_leaves_out_reworded_ones(sweep, tmp_path):
    from benchlab_testing import run_cli

    # The next version: a reworded question in the dataset, another sampling seed for step40.
    write_task(tmp_path / "tasks", "arith_a", 60, changed=7)
    spec = SPEC.format(python=sys.executable, lm_eval_local=LM_EVAL_LOCAL, tasks=tmp_path / "tasks").replace(
        "sampling_seed: 2", "sampling_seed: 5")
    (tmp_path / "bench.yaml").write_text(spec)
    proc = run_cli("run", "bench.yaml", "-r", "out", "-j", "2", "--no-report", cwd=tmp_path, timeout=600,
                   env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli("diff", str(sweep / "out"), str(tmp_path / "out"), "--json", "--reps", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    rows = {r["candidate"]: r for r in data["questions"]}
    assert set(rows) == {"step20", "step40"}
    before, after = _accs(sweep, "step40"), _accs(tmp_path, "step40")
    keep = np.arange(60) != 7
    assert rows["step40"]["n_questions"] == 59
    assert rows["step40"]["mean_diff"] == pytest.approx(float(np.mean(after[keep] - before[keep])))
    b, w = int(np.sum((after == 1) & (before == 0) & keep)), int(np.sum((after == 0) & (before == 1) & keep))
    assert (rows["step40"]["better"], rows["step40"]["worse"]) == (b, w)
    # step20 ran with the same seed on the same questions: nothing moved.
    assert rows["step20"]["mean_diff"] == 0 and rows["step20"]["better"] == rows["step20"]["worse"] == 0
    proc = run_cli("diff", str(sweep / "out"), str(tmp_path / "out"), "--reps", "0", cwd=tmp_path)
    assert "## Question-level changes" in proc.stdout
    assert "arith_a: 1 question(s) asked differently by the two versions" in proc.stdout


def test_dashboard_shows_the_reports_question_level_rows(sweep):
    import re

    from starlette.testclient import TestClient

    from benchlab.ui.app import create_app
    from benchlab.ui.library import Library

    with TestClient(create_app(Library([sweep / "out"]), warm_up=False)) as client:
        index = client.get("/").text
        key = re.search(r'href="/b/([^"/]+)"', index).group(1)
        body = client.get(f"/b/{key}/numbers").text
    assert 'id="questions"' in body and "Question by question, against step20" in body
    section = body.split('id="questions"', 1)[1].split("</section>", 1)[0]
    report = (sweep / "out" / "BENCHMARK_REPORT.md")
    if not report.exists():
        from benchlab_testing import run_cli

        assert run_cli("report", "out", "--no-plots", cwd=sweep, timeout=300).returncode == 0
    row = next(line for line in report.read_text().splitlines() if line.startswith("| arith_a | acc,none | step40"))
    for cell in [c.strip() for c in row.strip("|").split(" | ")][3:6]:  # questions, the two means
        assert f">{cell}<" in section
