"""The first hour's rough edges: --version, missing extras, help texts, narrow terminals, the examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from scipy import stats

from benchlab.names.extras import EXTRAS, PACKAGES
from benchlab_testing import run_cli

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_version_prints_the_packages_version_and_exits_0():
    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"benchlab {PYPROJECT['project']['version']}"


def _without(modules: list[str], *argv: str, module: str = "benchlab", cwd: Path | None = None):
    """Run ``python -m module argv`` as on a machine where ``modules`` are not installed."""
    code = (f"import sys, runpy; sys.modules.update(dict.fromkeys({modules!r})); "
            f"sys.argv = [{module!r}, *{list(argv)!r}]; runpy.run_module({module!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})


@pytest.mark.parametrize(("blocked", "argv", "module", "line"), [
    (["fastapi"], ["serve", "--no-auth"], "benchlab",
     "error: benchlab serve needs fastapi, which is not installed: pip install 'benchlab[serve]'"),
    (["uvicorn"], ["serve", "--no-auth"], "benchlab",
     "error: benchlab serve needs uvicorn, which is not installed: pip install 'benchlab[serve]'"),
    (["httpx"], ["eval", "--model-url", "http://127.0.0.1:9", "-b", "arith"], "benchlab",
     "error: benchlab eval needs httpx, which is not installed: pip install 'benchlab[serve]'"),
    (["fastapi"], ["--port", "9"], "benchlab.evaluate.stub",
     "error: the stub model server needs fastapi, which is not installed: pip install 'benchlab[serve]'"),
])
def test_a_missing_extra_is_one_line_naming_the_install_command(blocked, argv, module, line, tmp_path):
    proc = _without(blocked, *argv, module=module, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == line
    assert "Traceback" not in proc.stdout + proc.stderr


def test_every_extra_is_known_to_the_helper_with_the_packages_it_installs():
    extras = PYPROJECT["project"]["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        wanted = {re.split(r"[<>=\[ ]", req)[0].lower() for req in extras[extra]}
        assert {PACKAGES.get(m, m).lower() for m in modules if m != "starlette"} <= wanted, extra
    for_users = set(extras) - {"test", "bench"}
    assert for_users == set(EXTRAS)


TB_SPEC = """
name: tb
tasks: [{name: t}]
configs: [{name: c}]
seeds: 1
retries: 0
command: python run.py
metrics:
  primary: {name: reward, from: {tensorboard: tb, tag: reward}}
"""


def test_a_run_that_needs_a_missing_extra_says_which(make_bench):
    script = "raise ModuleNotFoundError(\"No module named 'sklearn'\")\n"
    bench = make_bench(TB_SPEC.replace("from: {tensorboard: tb, tag: reward}", "goal: max"), script=script)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert proc.returncode == 1
    assert ("failed: ModuleNotFoundError: No module named 'sklearn' (pip install 'benchlab[examples]')"
            in proc.stdout)


def test_the_tensorboard_source_without_its_extra_says_which(make_bench):
    bench = make_bench(TB_SPEC, script="print('trained')\n")
    proc = _without(["tensorboard"], "run", "bench.yaml", "-r", "out", "--no-report", cwd=bench.root)
    assert proc.returncode == 1
    assert ("reading TensorBoard event files needs tensorboard, which is not installed: "
            "pip install 'benchlab[tensorboard]'") in proc.stdout


def _commands() -> list[str]:
    text = run_cli("-h", check=True).stdout
    commands = re.findall(r"^│ (\w+)\s{2,}", text, flags=re.M)
    assert {"run", "status", "collect", "compare", "analyze", "serve"} <= set(commands)
    return commands


def test_help_texts_show_their_defaults_and_no_bool_labels():
    for command in _commands():
        text = run_cli(command, "-h", check=True).stdout
        assert "<bool>" not in text, command
        # What rich markup swallowed looked like `Runs at once .`: a word, a space, a period.
        assert not re.search(r"\w \.(\s|$)", text), command
    run_help = run_cli("run", "-h", check=True).stdout
    assert "Runs at once. [default: CPU cores / cpus per run]" in run_help
    assert "--dry-run       " in run_help
    assert "[default: the spec's, or local]" in run_help
    top = run_cli("-h", check=True).stdout
    assert "<bool>" not in top and "--version" in top


# Paired seeds whose difference is large against its spread: the t-test's p is tiny.
def _scores() -> tuple[list[float], list[float]]:
    base = [0.5 + 0.001 * ((7 * i) % 11) for i in range(30)]
    cand = [b + 0.3 + 0.0001 * ((3 * i) % 5) for i, b in enumerate(base)]
    return base, cand


def _columns_read_down(out: str) -> list[str]:
    """Each body column of each table in ``out``, its cells' pieces joined top to bottom."""
    columns: dict[int, str] = {}
    for line in out.splitlines():
        if line.startswith("│"):
            for k, cell in enumerate(line.strip("│").split("│")):
                columns[k] = columns.get(k, "") + cell.strip()
    return list(columns.values())


def test_numbers_are_never_cut_in_an_80_column_terminal(tmp_path):
    base, cand = _scores()
    rows = ["task,config,seed,value"]
    for name, values in (("baseline-with-a-long-name", base), ("candidate-with-a-longer-name", cand)):
        rows += [f"lunar-lander-continuous,{name},{seed},{v!r}" for seed, v in enumerate(values)]
    (tmp_path / "scores.csv").write_text("\n".join(rows) + "\n")
    p = stats.ttest_rel(cand, base).pvalue
    assert p < 1e-40
    for argv in (["analyze", "scores.csv", "--baseline", "baseline-with-a-long-name"],
                 ["compare", "scores.csv", "--baseline", "baseline-with-a-long-name",
                  "--candidate", "candidate-with-a-longer-name"]):
        proc = run_cli(*argv, "--reps", "200", cwd=tmp_path, env={"COLUMNS": "80"})
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert "…" not in out
        # Every line of every table fits (titles are text the terminal wraps).
        assert max(len(ln) for ln in out.splitlines() if ln[:1] in "┏┃┡│└") <= 80
        assert f"{p:.3g}" in out  # the paired t-test's p, whole
        assert f"{sum(cand) / 30:.4g}" in out  # the candidate's mean
        # Names fold onto more lines instead of being cut: read down each column, the pieces
        # of a cell join up into the whole name.
        assert any("candidate-with-a-longer-name" in column for column in _columns_read_down(out))


def test_the_checkpoint_eval_example_names_the_extra_it_needs():
    readme = (ROOT / "examples" / "checkpoint-eval" / "README.md").read_text()
    assert "pip install 'benchlab[serve]'" in readme
    # What its commands import (the stub model and benchlab eval) is what that extra installs.
    serve = {re.split(r"[<>=\[ ]", r)[0] for r in PYPROJECT["project"]["optional-dependencies"]["serve"]}
    assert {"fastapi", "uvicorn", "httpx"} <= serve
