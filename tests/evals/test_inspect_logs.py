"""Logs written by the real Inspect AI (``mockllm``, offline), read by benchlab; every number
checked against the metrics Inspect computed itself on the same log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from evals_kit import NEEDS_EVALS, run_inspect

from benchlab_testing import skip_unless_installed

pytestmark = pytest.mark.slow
skip_unless_installed("inspect_ai", NEEDS_EVALS)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return run_inspect(tmp_path_factory.mktemp("inspect"), ["early", "late"])


def _inspect_metrics(path: Path) -> dict[str, object]:
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    out: dict[str, object] = {}
    for m in log.results.scores[0].metrics.values():
        key = m.name + ("[cluster]" if m.params.get("cluster") else "")
        out[key] = m.value
    return out


def test_inspect_log_reads_into_samples_with_epochs_and_clusters(logs):
    from benchlab.collect.samples import read_samples

    table, _ = read_samples(logs["early"])
    assert len(table) == 24 * 2
    assert sorted(set(table["repeat"])) == [1, 2]
    assert table.groupby("question")["cluster"].nunique().max() == 1
    assert set(table["cluster"]) == {f"p{i}" for i in range(8)}
    assert set(table["metric"]) == {"match"}
    assert set(table["config"]) == {"mockllm/model"}


def test_summary_matches_inspects_own_stderr_clustered_stderr_and_ci(logs):
    from benchlab.collect.samples import read_samples
    from benchlab.stats.question_table import analyze_questions

    for name, path in logs.items():
        table, _ = read_samples({name: path})
        row = analyze_questions(table).summary[0]
        ref = _inspect_metrics(path)
        s = row.result
        assert s.mean == pytest.approx(ref["accuracy"])
        assert s.se_questions == pytest.approx(ref["stderr"])
        assert s.se_clustered == pytest.approx(ref["stderr[cluster]"])
        # Inspect's ci(cluster=...) reports its bounds as two metrics, lower and upper.
        assert (s.ci_low, s.ci_high) == pytest.approx((ref["lower[cluster]"], ref["upper[cluster]"]))
        assert s.n_clusters == 8 and s.df == 7
        assert s.split is not None  # two epochs: the variance is split


def test_compare_two_inspect_logs_paired_over_clustered_questions(logs):
    folder = logs["early"].parent.parent
    proc = subprocess.run([sys.executable, "-m", "benchlab", "compare", str(folder), "--baseline", "early",
                           "--candidate", "late", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)["comparisons"][0]
    early, late = _inspect_metrics(logs["early"]), _inspect_metrics(logs["late"])
    assert comp["mean_diff"] == pytest.approx(late["accuracy"] - early["accuracy"])
    assert comp["test"] == "clustered paired t"
    assert comp["n_clusters"] == 8 and comp["df"] == 7
    # The paired SE, by hand from the two logs' epoch-averaged question scores.
    from inspect_ai.log import read_eval_log

    def question_means(path: Path) -> dict[str, float]:
        got: dict[str, list[float]] = {}
        for s in read_eval_log(str(path)).samples:
            got.setdefault(str(s.id), []).append(1.0 if s.scores["match"].value == "C" else 0.0)
        return {q: float(np.mean(v)) for q, v in got.items()}

    a, b = question_means(logs["early"]), question_means(logs["late"])
    qs = sorted(a)
    d = np.array([b[q] - a[q] for q in qs])
    passage = np.array([int(q[1:]) // 3 for q in qs])
    sums = np.array([np.sum((d - d.mean())[passage == p]) for p in range(8)])
    assert comp["se"] == pytest.approx(np.sqrt(np.sum(sums**2) * 8 / 7) / len(d))
    assert (comp["better"], comp["worse"]) == (int(np.sum(d > 0)), int(np.sum(d < 0)))
