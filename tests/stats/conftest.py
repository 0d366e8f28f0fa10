import inspect
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import benchlab

SRC = str(Path(benchlab.__file__).resolve().parents[1])


@pytest.fixture
def benchlab_cli():
    """Run the real command line in a subprocess, importing this checkout's package."""

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
        return subprocess.run(
            [sys.executable, "-c", "from benchlab.cli import main; main()", *args],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
        )

    return run


@pytest.fixture
def rliable(monkeypatch):
    """rliable's ``library`` and ``metrics`` modules, working with arch 7 and arch >= 8."""
    pytest.importorskip("rliable")
    with warnings.catch_warnings():
        # rliable's imports (arch, seaborn) raise third-party deprecations.
        warnings.simplefilter("ignore")
        from arch.bootstrap import IIDBootstrap
        from rliable import library, metrics
    original = IIDBootstrap.__init__
    if "seed" in inspect.signature(original).parameters:
        # arch 8 renamed `random_state` to `seed`; rliable 1.2 still passes `random_state`.
        def init(self, *args, random_state=None, seed=None, **kwargs):
            original(self, *args, seed=seed if seed is not None else random_state, **kwargs)

        monkeypatch.setattr(IIDBootstrap, "__init__", init)
    return library, metrics
