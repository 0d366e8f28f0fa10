"""The CLI's own checks raise typed errors; one place turns every error into one line and an exit code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import benchlab.cli
from benchlab.errors import CannotWrite, UsageError, UserError
from benchlab_testing import run_cli

CLI = Path(benchlab.cli.__file__).parent


def test_flags_that_do_not_go_together_exit_2_with_one_line_and_no_traceback(tmp_path):
    (tmp_path / "bench.yaml").write_text(
        "name: tiny\ntasks: [{name: t}]\nconfigs: [{name: c}]\nseeds: [0]\ncommand: 'true'\n"
        "metrics: {primary: {name: score, goal: max}}\n")
    done = run_cli("run", "bench.yaml", "--backend", "local", "--shared-fs", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --ray-address and --shared-fs need the ray backend (--backend ray)"
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "results").exists()  # nothing was run


def test_an_unknown_run_for_logs_is_a_usage_error(tmp_path):
    done = run_cli("logs", "no/such/run", "-r", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("error: ")


@pytest.mark.parametrize(("cls", "code"), [(UsageError, 2), (CannotWrite, 1)])
def test_the_cli_errors_carry_their_exit_codes(cls, code):
    error = cls("x") if cls is UsageError else cls(Path("/r"), "x")
    assert error.exit_code == code
    assert isinstance(error, UserError) == (code == 2)


def test_no_command_prints_an_error_line_itself():
    # Only benchlab.cli.main writes "error: ..."; commands raise.
    spelt = sorted(f"{path.name}:{node.lineno}" for path in CLI.glob("*.py") if path.name != "__init__.py"
                   for node in ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and "error:[/]" in node.value)
    spelt += sorted(f"{path.name}:{node.lineno}" for path in CLI.glob("*.py") if path.name != "__init__.py"
                    for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.JoinedStr) and any(
                        isinstance(v, ast.Constant) and "error:" in str(v.value) for v in node.values))
    assert spelt == []
