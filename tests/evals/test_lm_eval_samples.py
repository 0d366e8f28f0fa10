"""Two checkpoints evaluated by the real lm-evaluation-harness (``--model dummy``, offline),
compared question by question; each number checked against the harness's own results or
against scipy/statsmodels on the samples as the test reads them itself."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from evals_kit import NEEDS_EVALS, lm_eval_command, offline_env, run_all, write_task
from statsmodels.stats.contingency_tables import mcnemar

from proportion_reference import newcombe_by_hand

pytestmark = pytest.mark.slow
pytest.importorskip("lm_eval", reason=NEEDS_EVALS)

TASKS = {"arith_a": 30, "arith_b": 40}


@pytest.fixture(scope="module")
def evals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm_eval")
    for name, n in TASKS.items():
        write_task(root / "tasks", name, n)
        write_task(root / "tasks_changed", name, n, changed=3)
    env = offline_env(root / "hf")
    run_all([lm_eval_command(root / "tasks", list(TASKS), root / "out" / "step20", seed=1),
             lm_eval_command(root / "tasks", list(TASKS), root / "out" / "step40", seed=2),
             lm_eval_command(root / "tasks_changed", list(TASKS), root / "changed" / "step60", seed=3)],
            env, root)
    return root


def _harness(folder: Path, task: str) -> tuple[dict[int, float], dict]:
    """The harness's own files, read here without benchlab: per-document acc, and the results."""
    samples = next(folder.rglob(f"samples_{task}_*.jsonl"))
    acc = {json.loads(line)["doc_id"]: json.loads(line)["acc"] for line in samples.read_text().splitlines()}
    results = json.loads(next(folder.rglob("results_*.json")).read_text())["results"][task]
    return acc, results


def _benchlab(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchlab", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_samples_table_from_lm_eval_matches_the_harness_results(evals):
    from benchlab.collect.samples import read_samples

    table, notes = read_samples(evals / "out")
    assert notes == []
    assert set(table["config"]) == {"step20", "step40"}
    assert set(table["task"]) == set(TASKS)
    assert set(table["metric"]) == {"acc,none"}
    from benchlab.stats.question_table import analyze_questions

    result = analyze_questions(table, baseline="step20")
    for row in result.summary:
        _, results = _harness(evals / "out" / row.config, row.task)
        assert row.result.n_questions == TASKS[row.task]
        assert row.result.mean == pytest.approx(results["acc,none"])
        assert row.result.se_questions == pytest.approx(results["acc_stderr,none"])


def test_compare_two_lm_eval_checkpoints_paired_over_questions(evals):
    proc = _benchlab("compare", str(evals / "out"), "--baseline", "step20", "--candidate", "step40", "--json",
                     cwd=evals)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["level"] == "questions"
    pvalues = []
    for comp in data["comparisons"]:
        a, _ = _harness(evals / "out" / "step20", comp["task"])
        b, _ = _harness(evals / "out" / "step40", comp["task"])
        docs = sorted(a)
        x = np.array([a[d] for d in docs])
        y = np.array([b[d] for d in docs])
        assert not np.array_equal(x, y)  # the two seeds answered differently
        better, worse = int(np.sum((y == 1) & (x == 0))), int(np.sum((y == 0) & (x == 1)))
        assert (comp["better"], comp["worse"]) == (better, worse)
        assert comp["test"] == "exact McNemar"
        table = [[int(np.sum((x == 1) & (y == 1))), worse], [better, int(np.sum((x == 0) & (y == 0)))]]
        assert comp["pvalue"] == pytest.approx(mcnemar(table, exact=True).pvalue)
        # Binary scores: Newcombe's paired interval, inside [-1, 1], beside the exact test.
        assert comp["ci_method"] == "Newcombe"
        assert (comp["ci_low"], comp["ci_high"]) == pytest.approx(newcombe_by_hand(table))
        assert comp["mean_diff"] == pytest.approx(float(np.mean(y - x)))
        pvalues.append(comp["pvalue"])
        assert comp["verdict"] in ("better", "worse", "no difference found")
    holm = sorted(pvalues)
    assert min(c["p_holm"] for c in data["comparisons"]) == pytest.approx(min(1.0, 2 * holm[0]))


def test_compare_prints_a_question_level_table(evals):
    proc = _benchlab("compare", str(evals / "out"), "--baseline", "step20", "--candidate", "step40", cwd=evals)
    assert proc.returncode == 0, proc.stderr
    assert "paired over questions" in proc.stdout
    assert "McNemar" in proc.stdout
    assert "step40" in proc.stdout and "arith_a" in proc.stdout and "arith_b" in proc.stdout


def test_a_reworded_question_is_refused_not_paired(evals, tmp_path):
    both = tmp_path / "both"
    shutil.copytree(evals / "out" / "step20", both / "step20")
    shutil.copytree(evals / "changed" / "step60", both / "step60")
    proc = _benchlab("compare", str(both), "--baseline", "step20", "--candidate", "step60", cwd=tmp_path)
    assert proc.returncode == 2
    assert "question '3'" in proc.stderr and "asked differently" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = _benchlab("compare", str(both), "--baseline", "step20", "--candidate", "step60", "--drop-changed",
                     "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {c["task"]: c["n_questions"] for c in data["comparisons"]} == {"arith_a": 29, "arith_b": 39}
    assert any("asked differently" in w for w in data["warnings"])
