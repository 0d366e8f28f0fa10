"""The SageMaker recipe of docs/launchers.md in the SDK's local mode: a real ``LocalSession`` runs
each job's training image with Docker Compose on the test's own dockerd, no AWS account.

The image is the busybox root file system with the recipe's ``train`` entry point in it. A sweep
of two configs over two seeds, one of them crashing, goes from ``benchlab run`` to ``benchlab
status`` and the report; a job past its timeout is stopped through the recipe's ``cancel``. The
SDK's Python is ``BENCHLAB_TEST_SAGEMAKER_PYTHON`` (``.ci/run`` installs it in a virtualenv of its
own); without it, or without Docker Compose, the tests are skipped with the reason, counted at the
end of the session.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from benchlab_testing import run_cli
from launcher_recipes import write_spec
from localdocker import LocalDocker

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "launchers"
JOB = """\
echo "start $1 seed=$BENCHLAB_SEED"
case "$1" in
  crash) echo "Traceback (most recent call last):"; echo "ValueError: cursed"; exit 3;;
  hang) sleep 600;;
esac
echo "{\\"score\\": 0.5$BENCHLAB_SEED}" > "$BENCHLAB_RUN_DIR/metrics.json"
echo done
"""


@pytest.fixture(scope="module")
def train_image(docker_daemon: LocalDocker) -> str:
    return docker_daemon.import_image("benchlab-test/sagemaker-train:latest",
                                      {"bin/train": (EXAMPLES / "train").read_bytes()})


def bench(root: Path, python: str, image: str, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.sh").write_text(JOB)
    shutil.copy(EXAMPLES / "sagemaker_job.py", root / "sagemaker_job.py")
    return write_spec(root, "sagemaker-recipe", body, variables={"python": python, "image": image})


def attempts(results: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(results / "benchlab.db")
    try:
        rows = conn.execute("SELECT r.name, r.run_id, a.status, a.failure_class, a.error, a.exit_code, p.job_id,"
                            " p.state, p.reason FROM attempts a JOIN runs r USING (run_id)"
                            " LEFT JOIN placements p USING (attempt_id) ORDER BY a.attempt_id").fetchall()
    finally:
        conn.close()
    keys = ("run", "run_id", "status", "failure_class", "error", "exit_code", "job_id", "state", "reason")
    return [dict(zip(keys, r, strict=True)) for r in rows]


def described(results: Path, attempt: dict[str, Any]) -> dict[str, Any]:
    """What the recipe's script recorded of a local-mode job as describe-training-job's answer."""
    path = results / "runs" / attempt["run_id"] / ".sagemaker" / attempt["job_id"] / "describe.json"
    return json.loads(path.read_text())


def test_a_sweep_in_sagemaker_local_mode_records_completions_and_a_crash_and_reports_them(
        sagemaker_python: str, docker_daemon: LocalDocker, train_image: str, tmp_path: Path) -> None:
    spec = bench(tmp_path, sagemaker_python, train_image, """
        name: sm
        tasks: [{name: t}]
        configs:
          - {name: ok, command: sh job.sh ok}
          - {name: crash, command: sh job.sh crash}
        seeds: 2
        metrics: {primary: score}
        timeout: 300
        retries: 0
    """)
    out = tmp_path / "out"
    proc = run_cli("run", str(spec), "-j", "4", "--results", str(out), cwd=tmp_path, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # runs failed: exit code 1
    assert "4 runs: 2 completed, 2 failed" in proc.stdout, proc.stdout
    rows = {r["run"]: r for r in attempts(out)}
    assert len(rows) == 4  # one job per run: retries 0
    for seed in (0, 1):
        ok, crash = rows[f"t/ok/s{seed}"], rows[f"t/crash/s{seed}"]
        assert (ok["status"], ok["state"]) == ("completed", "COMPLETED")
        assert described(out, ok)["TrainingJobStatus"] == "Completed"
        # The container's exit code, from /opt/ml/output/failure through FailureReason; the
        # exception from the job's log, as for a local run.
        assert (crash["status"], crash["failure_class"], crash["exit_code"]) == ("failed", "exception", 3)
        assert crash["error"] == "ValueError: cursed"
        assert (crash["state"], crash["reason"]) == ("FAILED", "exit code: 3")
        assert described(out, crash)["TrainingJobStatus"] == "Failed"
    # The metrics came back in the job's model.tar.gz, unpacked into the run's folder by `copy`.
    conn = sqlite3.connect(out / "benchlab.db")
    try:
        scores = dict(conn.execute("SELECT r.name, m.value FROM metrics m JOIN runs r USING (run_id)"
                                   " WHERE m.metric = 'score'").fetchall())
    finally:
        conn.close()
    assert scores == {"t/ok/s0": pytest.approx(0.50), "t/ok/s1": pytest.approx(0.51)}
    # The SDK names its containers <random>-algo-1-<random>; the recipe's script removed each one.
    assert [c for c in docker_daemon.containers("") if "-algo-" in c] == []
    logs = run_cli("logs", "t/crash/s1", "--results", str(out), cwd=tmp_path).stdout
    assert logs.splitlines()[:3] == ["start crash seed=1", "Traceback (most recent call last):", "ValueError: cursed"]
    status = run_cli("status", str(out), cwd=tmp_path).stdout
    assert "4 runs — 2 completed, 2 failed" in status and "ValueError: cursed" in status
    # Mean and sample standard deviation of 0.50 and 0.51: 0.505 and 0.01/sqrt(2) = 0.00707.
    report = (out / "BENCHMARK_REPORT.md").read_text()
    assert "| ok ⚠ | 2/2 | 0.505 ± 0.007 |" in report and "| crash ✗ failed | 0/2 (2 failed) |" in report


def test_a_local_mode_job_past_its_timeout_is_stopped_through_the_recipes_cancel(
        sagemaker_python: str, docker_daemon: LocalDocker, train_image: str, tmp_path: Path) -> None:
    spec = bench(tmp_path, sagemaker_python, train_image, """
        name: sm-hang
        tasks: [{name: t}]
        configs: [{name: hang, command: sh job.sh hang}]
        seeds: 1
        metrics: {primary: score}
        timeout: 5
    """)
    out = tmp_path / "out"
    proc = run_cli("run", str(spec), "--results", str(out), "--no-report", cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (only,) = attempts(out)
    assert (only["status"], only["failure_class"], only["error"]) == ("failed", "timeout", "timed out after 5s")
    # The job was stopped, not left to sleep: the SDK's process recorded it Stopped and its container is gone.
    assert described(out, only)["TrainingJobStatus"] == "Stopped"
    assert [c for c in docker_daemon.containers("") if "-algo-" in c] == []
