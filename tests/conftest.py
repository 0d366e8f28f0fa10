"""Shared fixtures: a throwaway benchmark built from strings."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from benchlab_testing import SCRIPT, Bench


@pytest.fixture
def make_bench(tmp_path: Path) -> Callable[..., Bench]:
    """Write a spec (YAML text) and the run script into a fresh folder."""

    def make(spec_text: str, script: str = SCRIPT, name: str = "bench.yaml") -> Bench:
        (tmp_path / "run.py").write_text(script)
        spec = tmp_path / name
        spec.write_text(textwrap.dedent(spec_text).lstrip())
        return Bench(root=tmp_path, spec=spec, results=tmp_path / "out")

    return make

