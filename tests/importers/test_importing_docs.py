"""docs/importing.md as a reader follows it: its scripts saved, its commands run in order, its
checks against each source's own client run; the public-API example, which needs W&B's servers,
only compiled and its names looked up in the installed wandb."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchlab_testing import run_cli

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "importing.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SAVE_AS = re.compile(r"Save as `([^`]+)`:?\s*$")
NEEDS_NETWORK = "wandb.Api()"


def _blocks() -> list[tuple[str, str, str | None]]:
    text = DOC.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[max(0, m.start() - 300): m.start()].rstrip().rsplit("\n\n", 1)[-1]
        saved = SAVE_AS.search(before)
        out.append((m.group(1), m.group(2), saved.group(1) if saved else None))
    return out


@pytest.mark.slow
def test_the_guide_runs_as_written(tmp_path: Path):
    for module in ("mlflow", "wandb", "hydra"):
        pytest.importorskip(module)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran = {"commands": 0, "checks": 0, "saved": 0}
    for lang, body, saved in _blocks():
        if saved:
            (tmp_path / saved).write_text(body)
            ran["saved"] += 1
        elif lang == "bash":
            for line in body.splitlines():
                # A plain `benchlab` command (no pipe, redirect or variable for a shell to expand):
                # the real command, forked where it can be (run_cli); anything else through bash.
                if line.startswith("benchlab ") and not set(line) & set("|;&<>$`"):
                    proc = run_cli(*shlex.split(line)[1:], cwd=tmp_path, env={"PATH": env["PATH"]}, timeout=600)
                else:
                    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True,
                                          text=True, timeout=600)
                assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
                ran["commands"] += 1
        elif lang == "python" and NEEDS_NETWORK in body:
            compile(body, str(DOC), "exec")
            _names_exist_in_wandb(body)
        elif lang == "python":
            tree = ast.parse(body)
            assert any(isinstance(n, ast.Assert) for n in ast.walk(tree)), "a check states its claims as asserts"
            proc = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            ran["checks"] += 1
    assert ran == {"commands": 9, "checks": 1, "saved": 3}
    assert (tmp_path / "imported-hydra" / "BENCHMARK_REPORT.md").exists()


def _names_exist_in_wandb(body: str) -> None:
    import wandb
    from wandb.apis.public import Run

    assert callable(wandb.Api) and callable(wandb.Api.runs)
    for name in ("config", "summary", "scan_history"):
        assert hasattr(Run, name), name
    assert "scan_history" in body and "Api().runs" in body
