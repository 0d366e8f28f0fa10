"""The dashboard shows a run's files with the secrets its runs were given masked: the log view and
the file view of a run that printed its `-s` secret and an environment variable its command named."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from ui_testkit import get, ui_server

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow

GIVEN = "dashboard-secret-0123456789abcdef"  # -s api_key=..., a secret spec variable
SHELL = "shell-password-fedcba9876543210"  # $SERVICE_PASSWORD, named in the command

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

SCRIPT = """
import json, os, sys
print("called with", " ".join(sys.argv[1:]), flush=True)
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "debug.txt"), "w") as f:
    f.write("password=" + sys.argv[2].split("=", 1)[1] + "\\n")
json.dump({"score": 1.0}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""


def test_the_log_and_file_views_mask_what_a_run_printed_of_its_secrets(tmp_path: Path):
    (tmp_path / "run.py").write_text(SCRIPT)
    (tmp_path / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    run_cli("run", "bench.yaml", "-s", f"api_key={GIVEN}", "--no-report", cwd=tmp_path,
            env={"SERVICE_PASSWORD": SHELL}, check=True)
    folder = tmp_path / "results" / "chatty"
    run_dir = next((folder / "runs").iterdir())
    assert GIVEN in (run_dir / "train.log").read_text() and SHELL in (run_dir / "debug.txt").read_text()
    with ui_server(folder) as (port, _):
        page = get(port, "/b/chatty")[2].decode()
        run = re.search(r'href="(/b/[^"]+/runs/[0-9a-f]+)"', page)
        assert run is not None
        for path in ("/log", "/files/train.log", "/files/debug.txt"):
            status, _, body = get(port, run.group(1) + path)
            text = body.decode()
            assert status == 200 and "<secret>" in text, (path, text)
            assert GIVEN not in text and SHELL not in text, path
        # A file without secrets is served as written.
        status, _, body = get(port, run.group(1) + "/files/metrics.json")
        assert status == 200 and body == (run_dir / "metrics.json").read_bytes()
