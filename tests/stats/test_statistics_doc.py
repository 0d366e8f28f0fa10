"""The example in docs/statistics.md runs, and prints what the doc says it prints."""

import json
import shlex
from pathlib import Path

import pytest
from scipy import stats as sps

from benchlab_testing import doc_blocks, run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"


def test_statistics_doc_example_runs_and_matches_its_figures(tmp_path):
    scores, refs = doc_blocks(DOC, "csv")[:2]
    (tmp_path / "scores.csv").write_text(scores)
    (tmp_path / "refs.csv").write_text(refs)
    command = next(line for line in doc_blocks(DOC, "console")[0].splitlines()
                   if line.startswith("$ benchlab "))
    args = shlex.split(command)[2:]
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["summary", "comparisons", "aggregate", "warnings", "methods",
                         "normalization"]

    shown = json.loads("{" + doc_blocks(DOC, "json")[0].split("{", 1)[1])
    cartpole = next(c for c in out["comparisons"] if c["task"] == "cartpole")
    for key, value in shown.items():
        if isinstance(value, float):
            assert cartpole[key] == pytest.approx(value, rel=0.005), key
        else:
            assert cartpole[key] == value, key
    # The doc's figures are right, not only consistent: check two against scipy.
    ppo = [487.0, 475.5, 492.0, 468.0, 481.5]
    a2c = [455.0, 470.5, 449.0, 462.0, 458.5]
    assert shown["t_pvalue"] == pytest.approx(sps.ttest_rel(ppo, a2c).pvalue, rel=0.005)
    assert shown["wilcoxon_pvalue"] == pytest.approx(sps.wilcoxon(ppo, a2c).pvalue)

    assert out["warnings"] == json.loads(doc_blocks(DOC, "json")[1])
