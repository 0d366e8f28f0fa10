"""Chaos at launch: working and run directories that vanish, and how such failures are counted."""

from __future__ import annotations

import sqlite3
import time

import pytest
from chaos_kit import finish, start, wait_for

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


def test_runs_that_fail_at_launch_count_in_progress_summary_and_exit_code(tmp_path):
    (tmp_path / "wd").mkdir()
    # The first run removes the working directory: the three after it cannot start.
    (tmp_path / "bench.yaml").write_text("""
name: launch
workdir: wd
tasks: [{name: t}]
configs: [{name: a}]
seeds: 4
command: >-
  if [ {seed} = 0 ]; then cd .. && rmdir wd; fi;
  echo '{{"score": {seed}}}' > "$BENCHLAB_RUN_DIR/metrics.json"
metrics: {primary: {name: score, goal: max}}
retries: 0
""")
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "1", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "[4/4]" in out and "[0/0]" not in out, out
    assert "4 runs: 1 completed, 3 failed" in out, out
    assert out.count("could not start") == 3 and "wd" in out
    con = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    assert dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")) == {"completed": 1, "failed": 3}


def test_a_missing_workdir_is_one_message_and_exit_2_before_anything_runs(tmp_path):
    (tmp_path / "bench.yaml").write_text("""
name: launch
workdir: nowhere
tasks: [{name: t}]
configs: [{name: a}]
seeds: 3
command: touch ran-{seed}
metrics: {primary: {name: score, goal: max}}
""")
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "working directory" in proc.stderr and "nowhere" in proc.stderr and "does not exist" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    assert not list(tmp_path.rglob("ran-*"))
    assert not list((tmp_path / "out").glob("runs/*/provenance.json"))


def test_a_run_directory_removed_before_its_launch_is_written_again(tmp_path):
    (tmp_path / "bench.yaml").write_text("""
name: launch
tasks: [{name: t}]
configs: [{name: a}, {name: b}]
seeds: 4
command: >-
  sleep 0.6 && echo '{{"score": {seed}}}' > "$BENCHLAB_RUN_DIR/metrics.json"
metrics: {primary: {name: score, goal: max}}
retries: 0
""")
    runs = tmp_path / "out" / "runs"
    db = tmp_path / "out" / "benchlab.db"
    sweep = start(tmp_path, "run", "bench.yaml", "-r", "out", "--no-report", "-j", "1")
    # Directories are written ahead of their launch; remove those not started yet.
    wait_for(lambda: runs.is_dir() and len(list(runs.iterdir())) >= 4, proc=sweep)
    time.sleep(0.1)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    begun = {r for (r,) in con.execute("SELECT run_id FROM attempts")}
    con.close()
    removed = [d for d in runs.iterdir() if d.name not in begun]
    assert removed
    for d in removed:
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    code, out, err = finish(sweep)
    assert code == 0, out + err
    con = sqlite3.connect(db)
    assert dict(con.execute("SELECT status, COUNT(*) FROM runs GROUP BY status")) == {"completed": 8}
    assert all((runs / d.name / "config.yaml").exists() for d in removed)

