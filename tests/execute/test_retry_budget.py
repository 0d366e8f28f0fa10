"""Retry budgets counted from the ledger: a resume after `kill -9` continues the budget.

``retries: 2`` means at most 3 attempts that fail in the same class over the run's
whole life. The run below always raises; its third attempt hangs until the sweep is
killed with SIGKILL, which cuts it short: that attempt is not charged.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from benchlab_testing import run_cli

SCRIPT = r'''
import os, sys, time
n = int(os.environ["BENCHLAB_ATTEMPT"])
with open(os.path.join(os.environ["TRACE"], f"attempt.{n}"), "w") as f:
    f.write(str(os.getpid()))
if n == 3:
    time.sleep(120)  # the sweep is killed while this one runs
raise ValueError(f"always broken (attempt {n})")
'''


def _spec(root: Path) -> Path:
    (root / "run.py").write_text(SCRIPT)
    (root / "trace").mkdir()
    spec = root / "bench.yaml"
    spec.write_text("name: budget\ntasks: [{name: t}]\nconfigs: [{name: a}]\nseeds: 1\nretries: 2\n"
                    "metrics: {primary: {name: score, goal: max}}\n"
                    f"env: {{TRACE: {root / 'trace'}}}\ncommand: python run.py\n")
    return spec


def _attempts(db: Path) -> list[tuple[int, str, str | None]]:
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT number, status, failure_class FROM attempts ORDER BY number").fetchall()
    except sqlite3.OperationalError:  # the sweep has not written its tables yet
        return []
    finally:
        con.close()


def _wait_for(pred, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_resume_after_kill_9_continues_the_retry_budget(tmp_path):
    spec = _spec(tmp_path)
    db = tmp_path / "out" / "benchlab.db"
    sweep = subprocess.Popen([sys.executable, "-m", "benchlab", "run", str(spec), "-r", "out", "--no-report"],
                             cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: (3, "running", None) in _attempts(db) and (tmp_path / "trace" / "attempt.3").exists())
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=10)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert [a[:2] for a in _attempts(db)] == [(1, "failed"), (2, "failed"), (3, "running")]

    done = run_cli("run", str(spec), "-r", "out", "--no-report", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # Two failures were charged before the crash; the attempt the crash cut short was not:
    # exactly one more attempt, and the run is failed with 3 charged failures in all.
    assert _attempts(db) == [(1, "failed", "exception"), (2, "failed", "exception"),
                             (3, "interrupted", "orchestrator-died"), (4, "failed", "exception")]
    assert sorted(p.name for p in (tmp_path / "trace").iterdir()) == [f"attempt.{n}" for n in (1, 2, 3, 4)]
    hung = int((tmp_path / "trace" / "attempt.3").read_text())
    assert not _alive(hung)  # the resume ended what the dead sweep left running

    # Nothing left to do: a second resume launches nothing.
    again = run_cli("run", str(spec), "-r", "out", "--no-report", cwd=tmp_path)
    assert again.returncode == 1 and len(_attempts(db)) == 4

    # --rerun-failed is the explicit request for a new budget: 3 more failing attempts.
    rerun = run_cli("run", str(spec), "-r", "out", "--no-report", "--rerun-failed", cwd=tmp_path)
    assert rerun.returncode == 1
    assert [a[0] for a in _attempts(db) if a[1] == "failed"] == [1, 2, 4, 5, 6, 7]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, name TEXT NOT NULL, task TEXT NOT NULL, config TEXT NOT NULL,
    seed INTEGER NOT NULL, params TEXT NOT NULL, command TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    current INTEGER NOT NULL DEFAULT 1, created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE attempts (attempt_id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, number INTEGER NOT NULL,
    status TEXT NOT NULL, exit_code INTEGER, signal INTEGER, started REAL NOT NULL, ended REAL, host TEXT,
    node TEXT, pid INTEGER, pgid INTEGER, proc_start REAL, gpus TEXT, failure_class TEXT, error TEXT, log_tail TEXT);
INSERT INTO runs VALUES ('r1', 't/a/s0', 't', 'a', 0, '{}', 'true', 'failed', 1, 0, 0);
INSERT INTO attempts (run_id, number, status, started, failure_class) VALUES ('r1', 1, 'failed', 0, 'exception');
"""


def test_a_ledger_written_before_budgets_and_gpu_use_is_read_and_upgraded(tmp_path):
    from benchlab.ledger import Store

    db = tmp_path / "benchlab.db"
    con = sqlite3.connect(db)
    con.executescript(OLD_SCHEMA)
    con.close()
    with Store.open(tmp_path) as reader:  # a reader never writes: the old columns only
        [a] = reader.attempts()
        assert a.failure_class == "exception" and a.gpu_use is None
    with Store.create(tmp_path) as store:  # a sweep opening it adds the columns
        assert store.charged_failures() == {"r1": {"exception": 1}}
        store.new_budget(["r1"])
        assert store.charged_failures() == {}
        cols = {row[1] for row in store.conn.execute("PRAGMA table_info(attempts)")}
        assert {"gpu_util_mean", "gpu_util_max", "gpu_mem_peak_mib"} <= cols


DIE_AFTER_FIRST_FAILURE = r'''
import os, signal, sys
from benchlab.cli import main
from benchlab.ledger import Store

record = Store.finish_attempt

def finish_then_die(self, *args, **kw):
    record(self, *args, **kw)
    if kw.get("status") == "failed":  # killed right after the failed attempt is committed
        os.kill(os.getpid(), signal.SIGKILL)

Store.finish_attempt = finish_then_die
sys.argv = ["benchlab", *sys.argv[1:]]
main()
'''


def test_a_crash_right_after_a_failure_is_recorded_leaves_the_budget_to_the_resume(tmp_path):
    spec = _spec(tmp_path)
    (tmp_path / "die.py").write_text(DIE_AFTER_FIRST_FAILURE)
    (tmp_path / "run.py").write_text(SCRIPT.replace("if n == 3:", "if False:"))
    killed = subprocess.run([sys.executable, "die.py", "run", str(spec), "-r", "out", "--no-report"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert killed.returncode == -signal.SIGKILL
    db = tmp_path / "out" / "benchlab.db"
    assert _attempts(db) == [(1, "failed", "exception")]
    done = run_cli("run", str(spec), "-r", "out", "--no-report", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # The run still had two retries: the resume uses them, no more.
    assert [a[:2] for a in _attempts(db)] == [(1, "failed"), (2, "failed"), (3, "failed")]
