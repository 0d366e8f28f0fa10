"""What must never be written is masked where it enters benchlab, not only at export: a run that
prints a credential nobody declared (a token in a known format, a password inside a URL, the value
of a credential-named variable of the shell its command never names) leaves it in its own log
only. The ledger's failure tail, the report, `status`, the ledger rebuilt from the run folders and
the dashboard's log view hold the mask."""

from __future__ import annotations

import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from benchlab.ledger import DB_NAME
from benchlab.secrets import MASK, redact
from benchlab_testing import run_cli

HF = "hf_" + "UndeclaredTokenFromAConfigFile0123"
PASSWORD = "s3cr:et@pa55-word"
URL = f"postgresql://bench:{PASSWORD}@db.internal:5432/results"
SHELL = "shell-only-service-token-7e6d5c4b3a"  # $SERVICE_API_TOKEN: in the shell, named by no command
VALUES = {"hf token": HF, "url password": PASSWORD, "shell variable": SHELL}

SPEC = """
name: talkative
tasks: [{name: t1}]
configs: [{name: a}]
seeds: 1
retries: 0
command: python run.py
metrics: {primary: score}
"""

SCRIPT = """
import os
print("loading config: hub token HF", flush=True)
print("database: URL", flush=True)
print("service token:", os.environ["SERVICE_API_TOKEN"], flush=True)
raise SystemExit("could not connect to URL")
"""


@pytest.fixture(scope="module")
def talkative(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("talkative")
    (root / "run.py").write_text(SCRIPT.replace("HF", HF).replace("URL", URL))
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    proc = run_cli("run", "bench.yaml", cwd=root, env={"SERVICE_API_TOKEN": SHELL})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    folder = root / "results" / "talkative"
    run_cli("report", str(folder), cwd=root, check=True)
    return folder


def _holding(folder: Path) -> list[str]:
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += [f"{path.relative_to(folder)}: {name}" for name, value in VALUES.items() if value.encode() in data]
    return out


def test_redact_masks_known_formats_without_any_fingerprint():
    text = f"a {HF} b\nc {URL} d\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n"
    out = redact(text)
    assert HF not in out and PASSWORD not in out and "MIIEow" not in out
    assert f"postgresql://bench:{MASK}@db.internal:5432/results" in out


def test_the_ledger_report_and_status_hold_the_mask_not_the_values(talkative):
    log = next((talkative / "runs").glob("*/train.log"))
    assert all(v in log.read_text() for v in VALUES.values())  # the run's own log holds them
    assert [h.split(": ")[0] for h in _holding(talkative)] == [f"runs/{log.parent.name}/train.log"] * 3
    conn = sqlite3.connect(talkative / DB_NAME)
    tail, error = conn.execute("SELECT log_tail, error FROM attempts").fetchone()
    conn.close()
    assert MASK in tail and "database: postgresql://bench:" + MASK in tail
    assert not any(v in tail + (error or "") for v in VALUES.values())
    status = run_cli("status", str(talkative))
    assert "could not connect" in status.stdout
    assert not any(v in status.stdout for v in VALUES.values())


def test_the_rebuilt_ledger_and_the_dashboard_mask_them_too(talkative, tmp_path):
    from benchlab.ui.library import masked_file, tail

    folder = tmp_path / "talkative"
    shutil.copytree(talkative, folder)
    for db in folder.glob(f"{DB_NAME}*"):
        db.unlink()
    run_cli("collect", str(folder), "--rebuild", check=True, env={"SERVICE_API_TOKEN": SHELL})
    assert len(_holding(folder)) == 3 and all("/train.log: " in h for h in _holding(folder))
    log = next((folder / "runs").glob("*/train.log"))
    shown = tail(log)
    served = b"".join(masked_file(log) or []).decode()
    for view in (shown, served):
        assert "hub token " + MASK in view
        assert HF not in view and PASSWORD not in view and SHELL not in view
