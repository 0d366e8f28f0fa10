"""The code base passes ruff and mypy (run here so that CI checks them with the tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_ruff_finds_nothing():
    if shutil.which("ruff") is None:
        pytest.skip("ruff is not installed (it is in the test extra)")
    proc = subprocess.run(["ruff", "check", "src", "tests", "bench", "examples"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "mypy", "src/benchlab"], cwd=ROOT, capture_output=True, text=True)
    if "No module named mypy" in proc.stderr:
        pytest.skip("mypy is not installed (it is in the test extra)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
