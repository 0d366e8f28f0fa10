"""A sweep killed with kill -9 leaves "running" in its ledger: `benchlab status` and the dashboard
both tell that its process is gone (the results folder's lock is free) and call those runs interrupted."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from benchlab_testing import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "chaos"))
from chaos_kit import finish, start, wait_for  # noqa: E402

pytestmark = pytest.mark.slow

# Each run holds until the file `go` appears, so the runs are in flight when the sweep is killed.
HOLD = """
import json, os, time
deadline = time.monotonic() + 120
while not os.path.exists("go") and time.monotonic() < deadline:
    time.sleep(0.02)
json.dump({"score": 1.0}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

SPEC = """
name: dead
tasks: [{name: t}]
configs: [{name: a}, {name: b}, {name: c}]
seeds: 2
command: python hold.py
metrics: {primary: score}
"""


def _running(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            return con.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_killed_sweep_is_shown_interrupted_by_status_and_dashboard(tmp_path):
    from benchlab.ui.library import Benchmark
    from benchlab.ui.views import benchmark_view, overview

    (tmp_path / "hold.py").write_text(HOLD)
    (tmp_path / "bench.yaml").write_text(SPEC)
    results = tmp_path / "out"
    sweep = start(tmp_path, "run", "bench.yaml", "-r", str(results), "-j", "2", "--no-report")
    db = results / "benchlab.db"
    try:
        wait_for(lambda: _running(db) == 2, within=120, proc=sweep)
        alive = run_cli("status", str(results), "--json", cwd=tmp_path)
        assert json.loads(alive.stdout)["counts"].get("running") == 2  # while it lives, it is running
        assert overview(Benchmark("k", results)).state == "running"
        os.kill(sweep.pid, signal.SIGKILL)
        finish(sweep)
    finally:
        (tmp_path / "go").write_text("")  # the orphaned runs end on their own
    assert _running(db) == 2  # the ledger still says so: nothing recorded how they ended

    shown = run_cli("status", str(results), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "running" not in shown.stdout.splitlines()[0]
    assert "6 runs — 4 pending, 2 interrupted" in shown.stdout
    assert "no sweep is running" in shown.stdout and "2 runs it left running count as interrupted" in shown.stdout
    data = json.loads(run_cli("status", str(results), "--json", cwd=tmp_path).stdout)
    assert data["counts"] == {"pending": 4, "interrupted": 2} and data["running"] == []
    assert data["sweep"]["state"] == "gone"
    view = benchmark_view(Benchmark("k", results))
    assert view.overview.state == "stopped" and view.overview.counts == {"pending": 4, "interrupted": 2}
    states = [st for cell in view.grid.values() for _, st, _ in cell.seeds]
    assert sorted(states) == ["interrupted"] * 2 + ["pending"] * 4
    resumed = run_cli("run", "bench.yaml", "-r", str(results), "-j", "2", "--no-report", cwd=tmp_path, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(run_cli("status", str(results), "--json", cwd=tmp_path).stdout)["counts"] == {"completed": 6}
