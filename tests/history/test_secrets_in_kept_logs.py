"""A run that prints the secrets it was given leaves them in its own log only: the failure tail
the ledger keeps (and the report and `status` show), the ledger rebuilt from the run folders, and
the dashboard's log view all hold the mask, never the value."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from benchlab.secrets import MASK
from benchlab_testing import run_cli

GIVEN = "given-with-dash-s-0123456789abcdef"  # -s api_key=..., a secret spec variable
SHELL = "from-the-shell-fedcba9876543210"  # $SERVICE_PASSWORD, named in the command

SPEC = """
name: chatty
variables: {api_key: null}
secrets: [api_key]
tasks: [{name: t1}]
configs: [{name: a}]
seeds: 1
retries: 0
command: python run.py key=${api_key} password=$SERVICE_PASSWORD
metrics: {primary: score}
"""

# A run that fails and, as debugging code does, prints what it was called with.
SCRIPT = """
import sys
print("called with", " ".join(sys.argv[1:]), flush=True)
print("connecting with password=" + sys.argv[2].split("=", 1)[1], flush=True)
raise SystemExit("authentication failed for " + sys.argv[1])
"""


@pytest.fixture(scope="module")
def chatty(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chatty")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    proc = run_cli("run", "bench.yaml", "-s", f"api_key={GIVEN}", cwd=root, env={"SERVICE_PASSWORD": SHELL})
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the run failed, as written
    folder = root / "results" / "chatty"
    run_cli("report", str(folder), cwd=root, check=True)
    return folder


def _holding(folder: Path) -> list[str]:
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += [f"{path.relative_to(folder)}: {name}" for name, value in (("given", GIVEN), ("shell", SHELL))
                if value.encode() in data]
    return out


def test_a_printed_secret_stays_in_the_runs_own_log_and_nowhere_benchlab_keeps(chatty):
    log = next((chatty / "runs").glob("*/train.log"))
    # The run did print both values: its own log holds them, as it would without benchlab.
    assert GIVEN in log.read_text() and SHELL in log.read_text()
    # Nothing else does: not the ledger (its failure tail and error), nor the report.
    assert [h.split(": ")[0] for h in _holding(chatty)] == [f"runs/{log.parent.name}/train.log"] * 2
    report = (chatty / "BENCHMARK_REPORT.md").read_text()
    assert f"password={MASK}" in report and f"key={MASK}" in report  # the tail is shown, masked
    status = run_cli("status", str(chatty))
    assert "authentication failed" in status.stdout  # the failure is shown, its tail masked
    assert GIVEN not in status.stdout and SHELL not in status.stdout


def test_the_ledger_rebuilt_from_the_run_folders_masks_them_too(chatty, tmp_path):
    import shutil

    folder = tmp_path / "chatty"
    shutil.copytree(chatty, folder)
    for db in folder.glob("benchlab.db*"):
        db.unlink()
    run_cli("collect", str(folder), "--rebuild", check=True, env={"SERVICE_PASSWORD": SHELL})
    assert [h.split(": ")[0] for h in _holding(folder)] == [
        f"runs/{next((folder / 'runs').glob('*/train.log')).parent.name}/train.log"] * 2


def test_the_dashboards_log_view_masks_them(chatty):
    from benchlab.ui.library import tail

    shown = tail(next((chatty / "runs").glob("*/train.log")))
    assert "connecting with password=" + MASK in shown
    assert f"key={MASK}" in shown
    assert GIVEN not in shown and SHELL not in shown
