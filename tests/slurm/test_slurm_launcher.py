"""Slurm driven through the launcher backend with the recipe of docs/launchers.md (sbatch, squeue,
sacct, scancel), on the one-node Slurm of this folder: the same journey as the slurm backend's,
with the same outcomes run by run, and benchlab killed mid-run and run again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchlab_testing import CHATTY_RUN, CHATTY_SPEC, SCRIPT, capped_chatty_log, run_cli
from launcher_recipes import write_spec
from localslurm import LocalSlurm

pytestmark = pytest.mark.slow

BODY = """
    name: {name}
    tasks: [{{name: t}}]
    configs:
      - {{name: ok, command: python run.py}}
      - {{name: crash, command: python run.py fail_seed=1}}
      - {{name: hang, command: python run.py sleep=120}}
    seeds: 2
    metrics: {{primary: score}}
    resources: {{gpus: 1}}
    timeout: 6
    retries: 1
"""


def ledger(results: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(results / "benchlab.db", timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def outcomes(results: Path) -> dict[str, tuple[Any, ...]]:
    """Run name -> (status, the failure classes of its attempts, the last error, its score)."""
    rows = ledger(results, "SELECT r.name, r.status, a.failure_class, a.error FROM attempts a JOIN runs r"
                           " USING (run_id) ORDER BY a.attempt_id")
    scores = dict(ledger(results, "SELECT r.name, m.value FROM metrics m JOIN runs r USING (run_id)"
                                  " WHERE m.metric = 'score'"))
    out: dict[str, tuple[Any, ...]] = {}
    for name, status, cls, error in rows:
        classes = (*out[name][1], cls) if name in out else (cls,)
        out[name] = (status, classes, error, scores.get(name))
    return out


def slurm_jobs_named(prefix: str, known: set[str]) -> list[str]:
    """The names of the jobs Slurm's accounting knows that start with ``prefix``, each job once, once it
    knows every job of ``known`` as ended (slurmdbd catches up with slurmctld asynchronously)."""
    deadline = time.monotonic() + 90
    while True:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-S", "now-1hour", "-o", "JobID,JobName,State"],
                             capture_output=True, text=True, check=True).stdout
        rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
        mine = {job: (name, state) for job, name, state in rows if name.startswith(prefix)}
        settled = known <= set(mine) and not any(s in ("PENDING", "RUNNING") for _, s in mine.values())
        if settled or time.monotonic() > deadline:
            return sorted(name for name, _ in mine.values())
        time.sleep(0.5)


def test_the_journey_on_slurm_through_the_launcher_gives_the_slurm_backends_outcomes(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    found: dict[str, dict[str, tuple[Any, ...]]] = {}
    for backend in ("slurm", "launcher"):
        root = tmp_path / backend
        root.mkdir()
        (root / "run.py").write_text(SCRIPT)
        body = BODY.format(name=f"via-{backend}")
        if backend == "launcher":
            spec = write_spec(root, "slurm-recipe", body)
        else:
            import textwrap

            spec = root / "bench.yaml"
            spec.write_text(textwrap.dedent(body))
        proc = run_cli("run", str(spec), "--backend", backend, "-j", "4", "--results", str(root / "out"),
                       "--no-report", cwd=root, timeout=300)
        assert proc.returncode == 1, proc.stdout + proc.stderr  # runs failed
        found[backend] = outcomes(root / "out")
    # What SCRIPT does, worked out by hand: a score of 0.5 + seed/100; seed 1 of `crash` raises
    # (an exception, retried once), the `hang` runs time out at 6 s (not retried).
    expected = {
        "t/ok/s0": ("completed", (None,), None, pytest.approx(0.50)),
        "t/ok/s1": ("completed", (None,), None, pytest.approx(0.51)),
        "t/crash/s0": ("completed", (None,), None, pytest.approx(0.50)),
        "t/crash/s1": ("failed", ("exception", "exception"), "ValueError: seed is cursed", None),
        "t/hang/s0": ("failed", ("timeout",), "timed out after 6s", None),
        "t/hang/s1": ("failed", ("timeout",), "timed out after 6s", None),
    }
    assert found["slurm"] == expected
    assert found["launcher"] == found["slurm"]
    # Each job asked Slurm for the run's GPU: the run saw the device Slurm gave it.
    envs = [p.read_text() for p in (tmp_path / "launcher" / "out").glob("runs/*/env.json")]
    assert envs and all('"CUDA_VISIBLE_DEVICES": "' in e for e in envs)
    status = run_cli("status", str(tmp_path / "launcher" / "out"), cwd=tmp_path).stdout
    assert "3 completed, 3 failed" in status


def test_benchlab_killed_and_run_again_follows_the_slurm_jobs_through_the_launcher(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    (tmp_path / "run.py").write_text(SCRIPT)
    hold = tmp_path / "hold"
    hold.touch()
    spec = write_spec(tmp_path, "slurm-recipe", f"""
        name: relaunch
        tasks: [{{name: t}}]
        configs: [{{name: a}}, {{name: b}}]
        seeds: 2
        command: python run.py wait_file={hold}
        metrics: {{primary: score}}
        resources: {{gpus: 1}}
    """)
    out = tmp_path / "out"
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with open(tmp_path / "driver.log", "a") as log:
        driver = subprocess.Popen([sys.executable, "-m", "benchlab", "run", str(spec), "-j", "2", "--results", str(out),
                                   "--no-report"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if [s for (s,) in ledger(out, "SELECT state FROM placements")].count("RUNNING") == 2:
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("two jobs never ran: " + (tmp_path / "driver.log").read_text())
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    before = dict(ledger(out, "SELECT r.name, p.job_id FROM placements p JOIN attempts a USING (attempt_id)"
                              " JOIN runs r USING (run_id)"))
    hold.unlink()
    proc = run_cli("run", str(spec), "-j", "2", "--results", str(out), "--no-report", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = ledger(out, "SELECT r.name, a.status, p.job_id FROM attempts a JOIN runs r USING (run_id)"
                       " JOIN placements p USING (attempt_id)")
    assert sorted(status for _, status, _ in rows) == ["completed"] * 4
    assert len({name for name, _, _ in rows}) == 4  # one attempt per run
    after = {name: job for name, _, job in rows}
    assert all(after[name] == job for name, job in before.items() if not job.startswith("intent:"))
    # Four jobs in all: the two running at the kill were followed, not submitted again.
    names = slurm_jobs_named("benchlab-relaunch-", set(after.values()))
    assert len(names) == 4 and len(set(names)) == 4


def test_a_chatty_run_through_the_launcher_leaves_the_capped_log_a_local_run_leaves(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    # sbatch writes the job's output into {log} on the shared file system: the sweep keeps it
    # within log_cap_mb and cuts it when the attempt ends, as any backend's log.
    (tmp_path / "chatty.py").write_text(CHATTY_RUN)
    import yaml

    body = {**yaml.safe_load(CHATTY_SPEC.format(name="loud-launcher")), "resources": {"gpus": 1}}
    spec = write_spec(tmp_path, "slurm-recipe", yaml.safe_dump(body))
    proc = run_cli("run", str(spec), "--results", str(tmp_path / "out"), "--no-report", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (log,) = (tmp_path / "out" / "runs").glob("*/train.log")
    assert log.read_bytes() == capped_chatty_log(tmp_path)
    assert ledger(tmp_path / "out", "SELECT value FROM metrics WHERE metric = 'score'") == [(0.75,)]
