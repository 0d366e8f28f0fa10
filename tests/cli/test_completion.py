"""Shell completion is on: the installed `benchlab` completes its commands and each command's flags."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _complete(words: str, cword: int) -> list[str]:
    exe = shutil.which("benchlab")
    if exe is None:
        pytest.skip("the benchlab script is not installed on PATH (pip install -e .)")
    env = {**os.environ, "_BENCHLAB_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    proc = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60)
    return proc.stdout.split()


def test_the_commands_complete():
    assert sorted(_complete("benchlab co", 1)) == ["collect", "compare"]


def test_a_commands_flags_complete():
    assert {"--results", "--rerun-failed", "--rerun-all", "--report"} <= set(_complete("benchlab run x.yaml --re", 3))


def test_the_help_offers_to_install_completion():
    exe = shutil.which("benchlab")
    if exe is None:
        pytest.skip("the benchlab script is not installed on PATH")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "--install-completion" in out and "--show-completion" in out
