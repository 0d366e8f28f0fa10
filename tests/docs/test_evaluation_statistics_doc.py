"""docs/evaluation-statistics.md: its worked example runs the real lm-evaluation-harness and holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlab_testing import run_python_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation-statistics.md"


@pytest.mark.slow
def test_the_worked_example_runs_and_its_claims_hold():
    pytest.importorskip("lm_eval", reason="the evals extra: pip install 'benchlab[evals]'")
    assert run_python_blocks(DOC) >= 5


def test_the_page_names_every_column_of_the_samples_table():
    from benchlab.names.long_format import SAMPLE_COLUMNS

    text = DOC.read_text()
    for column in SAMPLE_COLUMNS:
        assert f"| `{column}` |" in text, column
