"""The dstack recipe of docs/launchers.md against a real ``dstack server`` on 127.0.0.1.

The server has no fleet it can provision here (an SSH fleet's host agent would be downloaded
from the internet), so dstack ends every run ``failed_to_start_due_to_no_capacity``: the run is
recorded failed with dstack's own words, class ``launch-error``, retried as the spec says, never
running. The ``dstack`` command is looked for in ``BENCHLAB_TEST_DSTACK`` (its path; ``.ci/run``
installs it in a virtualenv of its own, ``pip install 'benchlab[dstack]'`` beside benchlab), then
on the PATH; without it the tests are skipped with the reason, counted at the end of the session.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from benchlab_testing import run_cli
from launcher_recipes import recipe, write_spec
from localdstack import DstackServer

pytestmark = pytest.mark.slow

def test_a_dstack_run_that_cannot_be_provisioned_fails_with_dstacks_reason_and_is_retried_as_configured(
        dstack_server: DstackServer, tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "dstack-recipe", """
        name: no-capacity
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: python train.py
        metrics: {primary: score}
        timeout: 6h
        retry_on: {launch-error: 1}
    """, poll_s=4, max_poll_s=10)  # each poll is a dstack command: about 3 s of CPU
    out = tmp_path / "out"
    proc = run_cli("run", str(spec), "--results", str(out), "--no-report", cwd=tmp_path, timeout=600,
                   env=dstack_server.env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    conn = sqlite3.connect(out / "benchlab.db")
    try:
        rows = conn.execute("SELECT a.number, a.status, a.failure_class, a.error, p.job_id, p.state FROM attempts a"
                            " LEFT JOIN placements p USING (attempt_id) ORDER BY a.attempt_id").fetchall()
    finally:
        conn.close()
    # Retried once (retry_on: {launch-error: 1}), each time failed with dstack's words, never running.
    assert [(n, s, c) for n, s, c, _, _, _ in rows] == [(1, "failed", "launch-error"), (2, "failed", "launch-error")]
    for _, _, _, error, job, state in rows:
        assert error == f"job {job} failed: No matching fleet found. Possible reasons: " \
                        "https://dstack.ai/docs/guides/troubleshooting/#no-fleets"
        assert state == "FAILED"
    # dstack knows one run per attempt, each with the run's name and the spec's timeout as max_duration.
    listed = json.loads(dstack_server.cli("ps", "-a", "--json").stdout)["runs"]
    mine = [r for r in listed if r["run_spec"]["run_name"].startswith("benchlab-no-capacity-")]
    assert sorted(r["run_spec"]["run_name"] for r in mine) == sorted(job for *_, job, _ in rows)
    assert {r["run_spec"]["configuration"]["max_duration"] for r in mine} == {6 * 3600}
    status = run_cli("status", str(out), cwd=tmp_path).stdout
    assert "1 failed" in status and "No matching fleet found" in status


def test_the_dstack_recipes_cancel_and_find_answer_for_a_run_it_submitted(
        dstack_server: DstackServer, tmp_path: Path) -> None:
    from benchlab.execute.launcher import LauncherSection, fill

    section = LauncherSection.model_validate(recipe("dstack-recipe")["launcher"])
    name = "benchlab-recipe-check-1"
    env = {**os.environ, **dstack_server.env, "BENCHLAB_RUN_ID": "r", "BENCHLAB_SEED": "0", "BENCHLAB_RUN_DIR": "/tmp"}
    values = {"name": name, "command": "echo hi", "gpus": "0", "timeout_s": "60"}

    def sh(template: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["/bin/sh", "-c", fill(template, {**values, **more})], capture_output=True, text=True,
                              env=env, cwd=dstack_server.home, timeout=180)

    submitted = sh(section.submit)
    assert submitted.returncode == 0, submitted.stderr
    job = re.search(section.job_id, submitted.stdout).group("id")  # type: ignore[union-attr]
    assert job == name
    assert sh(section.find or "").stdout.split() == [name]
    assert sh(section.find or "", name="benchlab-recipe-check-none").stdout.split() == []
    stopped = sh(section.cancel, job_id=job)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    # The server ends a run in the background: "terminating" first, then its final state.
    deadline = time.monotonic() + 90
    status = sh(section.status, job_id=job).stdout
    while status.startswith("status=terminating ") and time.monotonic() < deadline:
        time.sleep(1)
        status = sh(section.status, job_id=job).stdout
    assert re.match(r"status=(failed|terminated) ", status), status
    assert sh(section.status, job_id="benchlab-no-such-run").stdout.strip() == "no such run"
