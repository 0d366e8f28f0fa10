"""Chaos for the ledger itself: rebuilt, deleted, replaced or damaged under a sweep.

Whatever happens to ``benchlab.db``, no finished run is run again without a word,
no ledger is silently replaced, and every way out is one message, never a traceback.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest
import yaml
from chaos_kit import check_ledger, completed, digest, finish, start, survivors, wait_for

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow


# Shell runs (no Python start-up per run): each sleeps a little and reports its seed.
SPEC = """
name: ledger
tasks: [{name: t1}, {name: t2}]
configs: [{name: a}, {name: b}]
seeds: 5
command: >-
  sleep {pause} && echo '{{"score": {seed}}}' > "$BENCHLAB_RUN_DIR/metrics.json"
variables: {pause: 0.2}
metrics: {primary: {name: score, goal: max}}
retries: 0
"""


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    (tmp_path / "bench.yaml").write_text(SPEC)
    return tmp_path


# ---------------------------------------------------------------- collect --rebuild


def test_rebuild_refuses_to_run_beside_a_sweep(bench):
    db = bench / "out" / "benchlab.db"
    # Runs of 1.5 s, two at a time: the sweep lasts ~15 s, so the rebuild below starts beside it even
    # on a loaded machine (with 0.5 s runs it sometimes started after the sweep had ended).
    sweep = start(bench, "run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", "-s", "pause=1.5")
    wait_for(lambda: completed(db) >= 1, proc=sweep)
    proc = run_cli("collect", "out", "--rebuild", cwd=bench)
    assert proc.returncode == 2, proc.stderr
    assert "in use by another benchlab run" in proc.stderr and "benchlab run, pid" in proc.stderr
    assert not list((bench / "out").glob("benchlab.db.bak-*"))
    code, _, err = finish(sweep)
    assert code == 0, err
    assert check_ledger(db) == {"completed": 20}


def fabricate_runs(results: Path, n: int) -> None:
    """``n`` more finished run directories, copies of a real one under new ids and seeds."""
    template = next((results / "runs").iterdir())
    cfg = yaml.safe_load((template / "config.yaml").read_text())
    for i in range(n):
        run_id = f"f{i:011x}"
        target = results / "runs" / run_id
        shutil.copytree(template, target)
        (target / "config.yaml").write_text(yaml.safe_dump({
            **cfg, "run_id": run_id, "seed": 1000 + i, "name": f"{cfg['task']}/{cfg['config']}/s{1000 + i}"}))


def test_a_killed_rebuild_leaves_the_old_ledger_as_it_was(bench):
    assert run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench).returncode == 0
    out = bench / "out"
    fabricate_runs(out, 1500)
    db = out / "benchlab.db"
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").close()
    before = digest(db)
    rng = random.Random(12)
    for _ in range(3):
        proc = start(bench, "collect", "out", "--rebuild")
        # Killed while it reads the 1,520 directories into its new ledger, at a seeded moment.
        wait_for(lambda: (out / "benchlab.db.rebuilding").exists(), proc=proc)
        time.sleep(rng.uniform(0.0, 0.3))
        assert proc.poll() is None, "the rebuild ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert digest(db) == before
        assert not list(out.glob("benchlab.db.bak-*"))
    assert check_ledger(db) == {"completed": 20}
    status = run_cli("status", "out", cwd=bench)
    assert "20 runs — 20 completed" in status.stdout, status.stdout
    # The next rebuild clears what the killed ones left, and its result holds every directory.
    done = run_cli("collect", "out", "--rebuild", cwd=bench, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "from 1520 run directories: 1520 completed" in done.stdout
    assert [p.name for p in out.iterdir() if "rebuild" in p.name] == []
    (backup,) = out.glob("benchlab.db.bak-*")
    assert digest(backup) == before


def test_what_a_killed_rebuild_left_is_listed_by_status_and_removed_by_the_next_run(bench):
    assert run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench).returncode == 0
    out = bench / "out"
    fabricate_runs(out, 1500)
    proc = start(bench, "collect", "out", "--rebuild")
    wait_for(lambda: (out / "benchlab.db.rebuilding").exists(), proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    left = sorted(p.name for p in out.glob("benchlab.db.rebuilding*"))
    assert "benchlab.db.rebuilding" in left

    status = run_cli("status", "out", cwd=bench)
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stdout.split())
    assert "20 runs — 20 completed" in said
    assert "left by a killed `benchlab collect --rebuild`: benchlab.db.rebuilding (" in said
    assert "The next `benchlab run` or rebuild removes them." in said
    as_json = json.loads(run_cli("status", "out", "--json", cwd=bench).stdout)
    assert as_json["rebuild"]["running"] is None
    assert sorted(Path(f).name for f in as_json["rebuild"]["files"]) == left

    again = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench)
    assert again.returncode == 0, again.stderr
    assert list(out.glob("benchlab.db.rebuilding*")) == []
    assert "rebuild" not in run_cli("status", "out", cwd=bench).stdout
    assert check_ledger(out / "benchlab.db") == {"completed": 20}


def test_backups_of_rebuilds_in_the_same_second_are_all_kept_and_listed(bench):
    assert run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench).returncode == 0
    out = bench / "out"
    # Each ledger told apart by a mark of its own, to see which file each backup holds.
    for mark in ("first", "second", "third"):
        con = sqlite3.connect(out / "benchlab.db")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('mark', ?)", (f'"{mark}"',))
        con.commit()
        con.close()
        proc = run_cli("collect", "out", "--rebuild", cwd=bench)
        assert proc.returncode == 0, proc.stderr
        assert "the previous ledger is kept as" in proc.stdout
    backups = sorted(out.glob("benchlab.db.bak-*"))
    assert len(backups) == 3
    marks = set()
    for b in backups:
        (value,) = sqlite3.connect(b).execute("SELECT value FROM meta WHERE key = 'mark'").fetchone()
        marks.add(value)
    assert marks == {'"first"', '"second"', '"third"'}
    status = run_cli("status", "out", cwd=bench)
    assert "ledger backups (3" in status.stdout
    for b in backups:
        assert b.name in status.stdout
    as_json = run_cli("status", "out", "--json", cwd=bench)
    import json

    assert sorted(Path(b["path"]).name for b in json.loads(as_json.stdout)["backups"]) == [b.name for b in backups]


def test_interrupted_runs_stay_interrupted_through_a_rebuild(bench):
    db = bench / "out" / "benchlab.db"
    sweep = start(bench, "run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", "-s", "pause=3")
    wait_for(lambda: (bench / "out" / "runs").is_dir() and len(list((bench / "out" / "runs").glob("*/train.log"))) >= 2)
    time.sleep(0.5)
    sweep.send_signal(signal.SIGINT)
    code, _, err = finish(sweep)
    assert code == 130, err
    interrupted = {r for (r,) in sqlite3.connect(db).execute(
        "SELECT run_id FROM runs WHERE status = 'interrupted'")}
    assert len(interrupted) == 2
    assert run_cli("collect", "out", "--rebuild", cwd=bench).returncode == 0
    again = {r for (r,) in sqlite3.connect(db).execute("SELECT run_id FROM runs WHERE status = 'interrupted'")}
    assert again == interrupted
    assert not sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs WHERE status = 'failed'").fetchone()[0]
    # A plain re-run finishes them.
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "4", "-s", "pause=3", cwd=bench)
    assert proc.returncode == 0, proc.stderr
    assert check_ledger(db) == {"completed": 20}


# ---------------------------------------------------------------- a ledger lost under a sweep


def lose(how: str, out: Path) -> None:
    db = out / "benchlab.db"
    if how == "deleted":
        for name in ("benchlab.db", "benchlab.db-wal", "benchlab.db-shm"):
            (out / name).unlink(missing_ok=True)
    elif how == "renamed":  # what the old rebuild did to a ledger under a sweep
        for side in ("", "-wal", "-shm"):
            if (out / f"benchlab.db{side}").exists():
                (out / f"benchlab.db{side}").rename(out / f"benchlab.db.bak-old{side}")
    elif how == "overwritten":  # another ledger copied over it, in place
        other = out.parent / "other.db"
        sqlite3.connect(other).executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('ledger_id', '\"x\"');"
            "CREATE TABLE runs (run_id TEXT); CREATE TABLE attempts (run_id TEXT);").close()
        with open(db, "r+b") as fh:
            fh.write(other.read_bytes())
            fh.truncate()
    elif how == "truncated":
        with open(db, "r+b") as fh:
            fh.truncate(os.path.getsize(db) // 2 or 512)


@pytest.mark.parametrize("how", ["deleted", "renamed", "overwritten", "truncated"])
def test_a_sweep_whose_ledger_is_lost_stops_and_says_so(bench, how):
    out = bench / "out"
    db = out / "benchlab.db"
    sweep = start(bench, "run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", "-s", "pause=0.4")
    wait_for(lambda: completed(db) >= 4, proc=sweep)
    if how == "truncated":
        # Fold the log into the file first, as a checkpoint would, so the cut reaches the data.
        sqlite3.connect(db).execute("PRAGMA wal_checkpoint(FULL)").close()
    lose(how, out)
    code, _, err = finish(sweep)
    assert code == 1, err
    assert "Traceback" not in err
    assert "stopped launching" in err and "collect --rebuild" in err
    expected = {"deleted": "was deleted", "renamed": "was deleted", "overwritten": "overwritten",
                "truncated": "truncated"}[how]
    assert expected in " ".join(err.split()), err
    finished = {p.parent.name: p.read_bytes() for p in (out / "runs").glob("*/provenance.json")}
    assert len(finished) < 20  # it did stop launching
    assert survivors(f"{db}#") == []
    if how == "renamed":
        # Nothing was written into the file after it became someone else's.
        assert check_ledger(out / "benchlab.db.bak-old")["completed"] < 20
    # The way out it names works: rebuilt, then run again, every run completes exactly once and
    # no finished run is run again.
    assert run_cli("collect", "out", "--rebuild", cwd=bench).returncode == 0
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-j", "2", "-s", "pause=0.4", cwd=bench)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert check_ledger(db) == {"completed": 20}
    interrupted = {r for (r,) in sqlite3.connect(db).execute(
        "SELECT DISTINCT run_id FROM attempts WHERE status = 'interrupted'")}
    for run_id, prov in finished.items():
        if run_id not in interrupted:
            assert (out / "runs" / run_id / "provenance.json").read_bytes() == prov


def test_run_on_finished_run_directories_without_a_ledger_refuses_and_points_to_rebuild(bench):
    out = bench / "out"
    assert run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench).returncode == 0
    started = {p.parent.name: p.read_text() for p in (out / "runs").glob("*/provenance.json")}
    for name in ("benchlab.db", "benchlab.db-wal", "benchlab.db-shm"):
        (out / name).unlink(missing_ok=True)
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "is missing" in proc.stderr and "collect --rebuild" in proc.stderr
    assert {p.parent.name: p.read_text() for p in (out / "runs").glob("*/provenance.json")} == started
    # An empty ledger in its place is refused the same way.
    sqlite3.connect(out / "benchlab.db").executescript("CREATE TABLE attempts (run_id TEXT);").close()
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench)
    assert proc.returncode == 1 and "holds no attempt" in proc.stderr
    (out / "benchlab.db").unlink()
    assert run_cli("collect", "out", "--rebuild", cwd=bench).returncode == 0
    proc = run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench)
    assert proc.returncode == 0, proc.stderr
    assert {p.parent.name: p.read_text() for p in (out / "runs").glob("*/provenance.json")} == started
    assert check_ledger(out / "benchlab.db") == {"completed": 20}


@pytest.mark.parametrize("command", [("run", "bench.yaml", "-r", "out", "--no-report"), ("status", "out"),
                                     ("report", "out")])
def test_a_truncated_ledger_is_one_message(bench, command):
    out = bench / "out"
    assert run_cli("run", "bench.yaml", "-r", "out", "--no-report", "-s", "pause=0", cwd=bench).returncode == 0
    lose("truncated", out)
    proc = run_cli(*command, cwd=bench)
    assert proc.returncode in (1, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "collect --rebuild" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr

