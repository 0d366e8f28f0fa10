"""`benchlab status` and the dashboard read one status model: for the same results folder they give
the same state and the same ETA, whether the folder's sweep is alive or gone."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlab_testing import BASIC_SPEC

pytestmark = pytest.mark.slow

# Every completed attempt of config a lasted 10 s, of config b 30 s; two runs wait, two run (started
# 1,000 s ago, so past their expected duration: nothing left of them). The runs left are then one
# pending run of b (30 s) and one of a (10 s), shared by the two runs running side by side:
# (30 + 10) / 2 = 20 s.
HAND_ETA_S = (30 + 10) / 2


def _shape_ledger(db: Path) -> None:
    with sqlite3.connect(db) as con:
        for config, seconds in (("a", 10.0), ("b", 30.0)):
            # (moved an hour back, so that a running run's latest attempt is the one added below)
            con.execute("UPDATE attempts SET started = started - 3600, ended = started - 3600 + ? WHERE run_id IN "
                        "(SELECT run_id FROM runs WHERE config = ?)", (seconds, config))
        for task, config in (("t1", "b"), ("t2", "a")):
            con.execute("UPDATE runs SET status = 'pending' WHERE task = ? AND config = ? AND seed = 1",
                        (task, config))
        for task, config in (("t1", "a"), ("t2", "b")):
            (rid,) = con.execute("SELECT run_id FROM runs WHERE task = ? AND config = ? AND seed = 0",
                                 (task, config)).fetchone()
            con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (rid,))
            con.execute("INSERT INTO attempts (run_id, number, status, started, host, pid)"
                        " VALUES (?, 2, 'running', ?, ?, 1)", (rid, time.time() - 1000, socket.gethostname()))


def _cli_status(bench) -> dict:
    shown = bench.cli("status", str(bench.results), "--json", check=True)
    return json.loads(shown.stdout)


def test_status_and_dashboard_give_one_state_and_one_eta_for_a_live_and_a_dead_sweep(make_bench):
    from benchlab.ui.library import Benchmark
    from benchlab.ui.views import overview

    bench = make_bench(BASIC_SPEC)
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report", check=True)
    _shape_ledger(bench.results / "benchlab.db")
    # The sweep's lock names a live process of this host: to a reader, the sweep is alive.
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        (bench.results / ".benchlab.lock").write_text(
            f"benchlab run, pid {holder.pid} on {socket.gethostname()} since 12:00:00\n")
        live = _cli_status(bench)
        page = overview(Benchmark("k", bench.results))
        assert live["counts"] == {"completed": 4, "pending": 2, "running": 2} == page.counts
        assert live["state"] == page.state == "running"
        assert live["eta_s"] == pytest.approx(HAND_ETA_S) and page.eta_s == pytest.approx(HAND_ETA_S)
        text = bench.cli("status", str(bench.results), check=True).stdout.splitlines()[0]
        assert text.endswith("8 runs — 4 completed, 2 running, 2 pending — ETA 20s")
    finally:
        holder.kill()
        holder.wait(timeout=60)
    # Its process gone, the two runs it left "running" are interrupted, and nothing is left to wait for.
    dead = _cli_status(bench)
    page = overview(Benchmark("k", bench.results))
    assert dead["counts"] == {"completed": 4, "pending": 2, "interrupted": 2} == page.counts
    assert dead["state"] == page.state == "stopped"
    assert dead["eta_s"] is None and page.eta_s is None
    assert dead["sweep"]["state"] == "gone"
