"""Chaos: benchlab killed at random moments, and runs that misbehave in every way we know.

Whatever happens, every run completes exactly once, no metric is lost or doubled,
the ledger passes ``PRAGMA integrity_check``, no process of an attempt outlives it
(found by the ``BENCHLAB_ATTEMPT_KEY`` each attempt's processes inherit), and each
failure is on record with its class and error.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

SRC = str(Path(__file__).parents[2] / "src")


def benchlab(root: Path, *args: str, stderr: int = subprocess.PIPE) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "benchlab", "run", "bench.yaml", "-r", "out",
                             "--no-report", *args], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr)


def survivors(db: Path) -> list[psutil.Process]:
    """Processes still carrying an attempt key of this ledger."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            key = proc.environ().get("BENCHLAB_ATTEMPT_KEY", "")
            if key.startswith(f"{db}#") and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def wait_gone(db: Path, within: float = 10.0) -> list[psutil.Process]:
    deadline = time.monotonic() + within
    while (left := survivors(db)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# Durations 0.3-0.9 s, seeded by the run's coordinates so every attempt of a run takes as long:
# about 9 s of work at -j 4, more than twenty cut sweeps get through however fast the machine.
SHORT_SPEC = """
name: chaos
tasks: [{name: t1}, {name: t2}, {name: t3}]
configs: [{name: a}, {name: b}, {name: c}, {name: d}]
seeds: 5
command: >-
  d=$(python3 -c "import random; print(round(random.Random('{task}{config}{seed}').uniform(0.3, 0.9), 3))");
  sleep $d && echo '{{"score": {seed}}}' > "$BENCHLAB_RUN_DIR/metrics.json"
metrics: {primary: {name: score, goal: max}}
retries: 0
"""


def test_killed_at_twenty_random_moments_every_run_completes_exactly_once(tmp_path):
    (tmp_path / "bench.yaml").write_text(SHORT_SPEC)
    db = tmp_path / "out" / "benchlab.db"
    rng = random.Random(20)
    kills = 0
    for i in range(20):
        with open(tmp_path / f"stderr-{i}.txt", "wb") as err:
            proc = benchlab(tmp_path, "-j", "4", stderr=err.fileno())
        time.sleep(rng.uniform(0.2, 0.9))  # from inside start-up to well into the sweep
        if proc.poll() is not None:  # it ended before this kill: only by finishing the sweep
            assert proc.returncode == 0, (i, proc.returncode, (tmp_path / f"stderr-{i}.txt").read_text()[-3000:])
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    assert kills >= 15, kills  # the sweep really was cut many times
    final = benchlab(tmp_path, "-j", "4")
    _, err = final.communicate(timeout=120)
    assert final.returncode == 0, err.decode()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    per_run = dict(con.execute("SELECT run_id, COUNT(*) FROM attempts WHERE status = 'completed' "
                               "GROUP BY run_id"))
    assert len(per_run) == 60 and set(per_run.values()) == {1}
    assert con.execute("SELECT COUNT(*) FROM runs WHERE status = 'completed'").fetchone() == (60,)
    assert con.execute("SELECT COUNT(*) FROM metrics WHERE metric = 'score'").fetchone() == (60,)
    # Every attempt that a kill cut short is on record as such, none is left 'running'.
    states = dict(con.execute("SELECT status, COUNT(*) FROM attempts GROUP BY status"))
    assert "running" not in states
    lost = con.execute("SELECT DISTINCT failure_class FROM attempts WHERE status = 'interrupted'")
    assert {c for (c,) in lost} <= {"orchestrator-died"}
    assert wait_gone(db) == []


ROGUE_SCRIPT = r'''
import os, shutil, signal, subprocess, sys, time
kind = sys.argv[1]
run_dir = os.environ["BENCHLAB_RUN_DIR"]
if kind == "hang":
    time.sleep(600)
elif kind == "deaf":  # ignores SIGTERM: only SIGKILL ends it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)
elif kind == "forker":  # children in its group, one in a session of its own, then exits
    subprocess.Popen(["sleep", "600"])
    subprocess.Popen(["sleep", "600"], start_new_session=True)
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    open(os.path.join(run_dir, "metrics.json"), "w").write('{"score": 1}')
elif kind == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif kind == "chatty":  # 100 MB of log
    block = (b"x" * 1023 + b"\n") * 1024
    for _ in range(100):
        sys.stdout.buffer.write(block)
    sys.stdout.buffer.write(b"RuntimeError: the last words\n")
    sys.exit(4)
elif kind == "vanish":  # deletes its own run directory
    shutil.rmtree(run_dir)
else:
    open(os.path.join(run_dir, "metrics.json"), "w").write('{"score": 1}')
'''


def test_misbehaving_runs_are_contained_and_classified(tmp_path):
    (tmp_path / "rogue.py").write_text(ROGUE_SCRIPT)
    (tmp_path / "bench.yaml").write_text(textwrap.dedent("""
        name: rogues
        tasks: [{name: t}]
        configs:
          - {name: hang}
          - {name: deaf}
          - {name: forker}
          - {name: segv}
          - {name: chatty}
          - {name: vanish}
          - {name: fine}
        seeds: [0]
        command: python rogue.py {config}
        metrics: {primary: {name: score, goal: max}}
        timeout: 2s
        retries: 0
        """))
    db = tmp_path / "out" / "benchlab.db"
    proc = benchlab(tmp_path, "-j", "7")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err.decode()
    assert wait_gone(db, within=5) == []
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = {cfg: (status, cls, error) for cfg, status, cls, error in con.execute(
        "SELECT r.config, a.status, a.failure_class, a.error FROM attempts a JOIN runs r USING (run_id)")}
    assert rows["fine"][0] == "completed" and rows["forker"][0] == "completed"
    assert rows["hang"] == ("failed", "timeout", "timed out after 2s")
    assert rows["deaf"] == ("failed", "timeout", "timed out after 2s")
    assert rows["segv"] == ("failed", "signal", "killed by SIGSEGV")
    assert rows["chatty"] == ("failed", "exit-code", "exited with code 4")
    assert rows["vanish"][:2] == ("failed", "missing-metric")
    assert len(con.execute("SELECT log_tail FROM attempts JOIN runs USING (run_id) "
                           "WHERE config = 'chatty'").fetchone()[0]) < 64 * 1024
