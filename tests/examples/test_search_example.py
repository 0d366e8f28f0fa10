"""examples/search: the README's commands, run as written, tune, promote and benchmark."""

from __future__ import annotations

import os
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from benchlab.results import load
from benchlab.search.study import read_study
from benchlab.spec import load_spec
from benchlab_testing import doc_blocks, run_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "search"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    find_spec("sklearn") is None, reason="needs the examples extra: pip install 'benchlab[examples]'")]


def test_the_readme_commands_tune_on_validation_promote_and_benchmark_on_test(tmp_path):
    for name in ("benchlab.yaml", "train.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    commands = [line.split() for block in doc_blocks(EXAMPLE / "README.md", "bash")
                for line in block.splitlines() if line.startswith("benchlab ")]
    assert [c[1] for c in commands] == ["search", "search", "run"]
    # The spec says `python`: the one of this interpreter, which has the examples extra.
    path = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    outputs = []
    for command in commands:
        proc = run_cli(*command[1:], cwd=tmp_path, timeout=600, env=path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs.append(proc.stdout)
    assert "8 of 8 trials done" in outputs[0]
    study = read_study(tmp_path / "results" / "digits-sgd" / "search" / "search")
    best = study.best_trial
    tuned = load_spec(tmp_path / "benchlab.tuned.yaml").config("tuned")
    assert tuned.origin is not None and tuned.origin.trial == best.number
    assert tuned.params["alpha"] == pytest.approx(best.params["alpha"])
    table = load(tmp_path / "results" / "digits-sgd")
    assert set(table["config"]) == {"sgd", "tuned"} and set(table["seed"]) == {0, 1, 2}
    assert (tmp_path / "results" / "digits-sgd" / "search" / "search" / "report" / "SEARCH_REPORT.md").exists()
