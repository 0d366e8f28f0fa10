"""A search on the slurm backend prunes a trial by cancelling its job (real local Slurm, real Optuna)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from benchlab_testing import run_cli
from localslurm import LocalSlurm

pytestmark = pytest.mark.slow

# Trial 0 reaches its final value at once and ends; every other trial stays far below it and would
# run for 10 minutes, so the median pruner (one start-up trial: a budget of 3) must stop it.
SCRIPT = '''
import os, sys, time
from benchlab import log, summary
run_dir = os.environ["BENCHLAB_RUN_DIR"]
with open(os.path.join(run_dir, "pid"), "w") as f:
    f.write(str(os.getpid()))
good = os.environ["BENCHLAB_CONFIG"].endswith("[trial=0]")
steps = 3 if good else 600
for s in range(steps):
    log(step=s, val=0.0 if good else -1.0)
    time.sleep(0.05 if good else 1.0)
summary(val=0.0 if good else -1.0)
'''

SPEC = """
name: slurmsearch
tasks: [{name: t}]
configs: [{name: base, params: {x: 0.0}}]
seeds: 1
command: python run.py {x}
metrics: {primary: {name: test, goal: max}, secondary: [val]}
search:
  metric: val
  space: {x: {uniform: [0, 1]}}
  seeds: [5]
  budget: 3
  pruner: median
"""


def _sacct_states(job_ids: list[str], timeout: float = 60) -> dict[str, str]:
    """Each job's state in Slurm's accounting, once it records them ended (it catches up asynchronously)."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State"],
                             capture_output=True, text=True, check=True).stdout
        states = {j: s.split()[0] for j, s in (line.split("|") for line in out.splitlines() if line.strip())}
        if set(job_ids) <= set(states) and not {"PENDING", "RUNNING"} & set(states.values()):
            return states
        time.sleep(0.5)
    raise AssertionError(f"sacct did not record jobs {job_ids} as ended: {states}")


def test_a_pruned_trial_on_slurm_has_its_job_cancelled_and_its_process_gone(
        slurm_cluster: LocalSlurm, tmp_path: Path) -> None:
    (tmp_path / "run.py").write_text(SCRIPT)
    spec = tmp_path / "bench.yaml"
    spec.write_text(textwrap.dedent(SPEC).lstrip())
    began = time.monotonic()
    done = run_cli("search", str(spec), "--backend", "slurm", "-j", "1", "--results", str(tmp_path / "out"),
                   "--slurm", "comment=tuned-by-search", cwd=tmp_path, timeout=300)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stdout + done.stderr
    assert took < 240  # the pruned trials' ten minutes were not waited out

    folder = tmp_path / "out" / "search" / "search"
    # --slurm reached sbatch: every job's submission script carries it
    scripts = sorted((tmp_path / "out").rglob("*_submission.sh"))
    assert scripts and all("#SBATCH --comment=tuned-by-search" in p.read_text().splitlines() for p in scripts)
    con = sqlite3.connect(folder / "benchlab.db")
    try:
        rows = con.execute("SELECT r.config, a.status, a.run_id, p.job_id FROM attempts a JOIN runs r "
                           "USING (run_id) LEFT JOIN placements p USING (attempt_id) "
                           "GROUP BY a.attempt_id ORDER BY r.config").fetchall()
    finally:
        con.close()
    status = {config: s for config, s, _, _ in rows}
    assert status == {"base[trial=0]": "completed", "base[trial=1]": "pruned", "base[trial=2]": "pruned"}
    pruned_jobs = [job for config, s, _, job in rows if s == "pruned"]
    assert all(pruned_jobs), rows
    states = _sacct_states(pruned_jobs)
    assert all(states[j] == "CANCELLED" for j in pruned_jobs), states
    for config, s, run_id, _ in rows:
        if s == "pruned":
            pid = int((folder / "runs" / run_id / "pid").read_text())
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, config
            # It stopped early: a handful of its 600 one-second steps at most.
            lines = (folder / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
            assert 1 <= len(lines) < 60, (config, len(lines))
            assert json.loads(lines[0])["val"] == -1.0
