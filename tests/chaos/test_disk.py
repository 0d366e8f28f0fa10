"""Chaos for the disk: full, read-only, or not a folder at all.

A full disk and a read-only folder are made real: a small tmpfs mounted for the test
(as root), or, for read-only, a folder without write permission (as any other user).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_kit import check_ledger, completed, finish, start, survivors, wait_for

from benchlab.results import load
from benchlab_testing import run_cli

pytestmark = pytest.mark.slow

SPEC = """
name: disk
tasks: [{name: t1}, {name: t2}]
configs: [{name: a}, {name: b}, {name: c}]
seeds: 4
command: >-
  sleep 0.3 && echo '{{"score": {seed}}}' > "$BENCHLAB_RUN_DIR/metrics.json"
metrics: {primary: {name: score, goal: max}}
retries: 0
"""


def mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "8m")
    yield disk
    unmount(disk)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with one file; returns it (remove it to free the space)."""
    ballast = disk / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (65536, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return ballast


def test_a_full_disk_is_one_message_loses_nothing_and_resumes(tmp_path, small_disk):
    (tmp_path / "bench.yaml").write_text(SPEC)
    out = small_disk / "out"
    db = out / "benchlab.db"
    sweep = start(tmp_path, "run", "bench.yaml", "-r", str(out), "--no-report", "-j", "2")
    wait_for(lambda: completed(db) >= 3, proc=sweep)
    before = {p.parent.name: p.read_bytes() for p in out.glob("runs/*/provenance.json")}
    ballast = fill(small_disk)
    code, _, err = finish(sweep)
    assert code == 1, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    text = " ".join(err.split())
    assert "no space left" in text and str(out) in text and "MiB free" in text
    assert survivors(f"{db}#") == []
    ballast.unlink()
    proc = run_cli("run", "bench.yaml", "-r", str(out), "--no-report", "-j", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert check_ledger(db) == {"completed": 24}
    # Runs finished before the disk filled were not run again.
    for run_id, prov in before.items():
        assert (out / "runs" / run_id / "provenance.json").read_bytes() == prov


def test_results_naming_a_file_is_one_message(tmp_path):
    (tmp_path / "bench.yaml").write_text(SPEC)
    (tmp_path / "taken").write_text("not a folder")
    proc = run_cli("run", "bench.yaml", "--results", "taken", "--no-report", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "taken is a file, not a results folder" in " ".join(proc.stderr.split())
    assert (tmp_path / "taken").read_text() == "not a folder"


@pytest.fixture
def archived(tmp_path: Path) -> Iterator[Path]:
    """A finished results folder that nobody may write: a read-only mount as root, else permissions."""
    (tmp_path / "bench.yaml").write_text(SPEC.replace("sleep 0.3", "true"))
    if os.geteuid() == 0:
        disk = tmp_path / "archive"
        mount_tmpfs(disk, "16m")
        out = disk / "out"
        assert run_cli("run", "bench.yaml", "-r", str(out), "--no-report", cwd=tmp_path).returncode == 0
        done = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
        if done.returncode != 0:
            unmount(disk)
            pytest.skip(f"cannot remount read-only: {done.stderr.strip()}")
        yield out
        unmount(disk)
        return
    out = tmp_path / "out"
    assert run_cli("run", "bench.yaml", "-r", str(out), "--no-report", cwd=tmp_path).returncode == 0
    for path in [out, *out.rglob("*")]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    yield out
    for path in [out, *out.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_an_archived_read_only_folder_can_be_read_but_not_run_into(tmp_path, archived):
    out = archived
    assert not (out / "benchlab.db-wal").exists()
    status = run_cli("status", str(out), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "24 runs — 24 completed" in status.stdout
    table = load(out)
    assert len(table[table["step"].isna() & (table["metric"] == "score")]) == 24
    elsewhere = tmp_path / "report"
    report = run_cli("report", str(out), "--out", str(elsewhere), "--no-plots", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "| t1 |" in (elsewhere / "BENCHMARKS.md").read_text()
    # Writing into it is one message each, never a traceback.
    in_place = run_cli("report", str(out), "--no-plots", cwd=tmp_path)
    assert in_place.returncode == 1 and "Traceback" not in in_place.stderr
    assert "--out" in in_place.stderr
    proc = run_cli("run", "bench.yaml", "-r", str(out), "--no-report", "--rerun-failed", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "read-only" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2
    con = sqlite3.connect(f"file:{out / 'benchlab.db'}?immutable=1", uri=True)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    assert shutil.disk_usage(out).total > 0


CHATTY_SPEC = """
name: chatty
tasks: [{name: t1}]
configs: [{name: quiet}, {name: loud}]
seeds: 3
LOG_CAP
command: python loud.py {config} {seed}
metrics: {primary: {name: score, goal: max}}
retries: 0
"""

# Seed 0 of config loud prints 400 MB between its first and last lines.
LOUD = r"""
import json, os, sys
config, seed = sys.argv[1], int(sys.argv[2])
os.write(1, b"first line of the log\n")
for _ in range(400 if config == "loud" and seed == 0 else 0):
    os.write(1, b"y" * 1048575 + b"\n")
os.write(1, b"last line of the log\n")
json.dump({"score": seed}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""


def _mount_or_skip(tmp_path: Path, size: str) -> Path:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, size)
    return disk


def test_a_run_printing_400_mb_cannot_fill_a_160_mib_results_disk(tmp_path):
    # The default cap (64 MiB) holds it: every run completes, and the loud run's log keeps its
    # first and last lines with the count of the bytes dropped between them.
    disk = _mount_or_skip(tmp_path, "160m")
    try:
        (tmp_path / "loud.py").write_text(LOUD)
        (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.replace("LOG_CAP", ""))
        out = disk / "out"
        proc = run_cli("run", "bench.yaml", "-r", str(out), "--no-report", "-j", "2", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert check_ledger(out / "benchlab.db") == {"completed": 6}
        logs = sorted(out.glob("runs/*/train.log"), key=lambda p: p.stat().st_size)
        loud = logs[-1].read_bytes()
        assert loud.startswith(b"first line of the log\n") and loud.endswith(b"last line of the log\n")
        (count,) = re.findall(rb"\[benchlab: (\d+) bytes of this log were dropped here", loud)
        assert len(loud) <= (64 << 20) + 300
        assert int(count) == 22 + 400 * (1 << 20) + 21 - (len(loud) - len(re.search(rb"\n\[benchlab: [^\n]*\]\n",
                                                                                       loud)[0]))
    finally:
        unmount(disk)


def test_a_full_disk_leaves_every_run_not_started_pending_and_a_smaller_cap_resumes(tmp_path):
    # Without a cap, the loud run fills a 160 MiB disk: the sweep stops with one message; the runs
    # finished before stay completed and those never started stay pending (not failed), so that a
    # run with a cap after freeing the space does only what is left.
    disk = _mount_or_skip(tmp_path, "160m")
    try:
        (tmp_path / "loud.py").write_text(LOUD)
        (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.replace("LOG_CAP", "log_cap_mb: 0")
                                             .replace("seeds: 3", "seeds: 4"))
        out = disk / "out"
        proc = run_cli("run", "bench.yaml", "-r", str(out), "--no-report", "-j", "1", cwd=tmp_path)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "no space left" in " ".join(proc.stderr.split())
        states = check_ledger(out / "benchlab.db")
        assert states.get("completed", 0) >= 1 and sum(states.values()) == 8
        con = sqlite3.connect(out / "benchlab.db")
        # Only the loud run may have failed; a run the sweep never started has no attempt.
        failed = con.execute("SELECT config, seed FROM runs WHERE status = 'failed'").fetchall()
        assert set(failed) <= {("loud", 0)}, failed
        unstarted = con.execute("SELECT COUNT(*) FROM runs WHERE status = 'pending' AND run_id NOT IN "
                                "(SELECT run_id FROM attempts)").fetchone()[0]
        con.close()
        assert unstarted >= 1 and states.get("pending", 0) == unstarted
        before = {p.parent.name: p.read_bytes() for p in out.glob("runs/*/metrics.json")}
        for log in out.rglob("train.log"):
            if log.stat().st_size > (1 << 20):
                log.unlink()  # the space freed, as its owner would
        (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.replace("LOG_CAP", "log_cap_mb: 8")
                                             .replace("seeds: 3", "seeds: 4"))
        again = run_cli("run", "bench.yaml", "-r", str(out), "--no-report", "-j", "1", "--rerun-failed",
                        cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert check_ledger(out / "benchlab.db") == {"completed": 8}
        for run_id, metrics in before.items():
            assert (out / "runs" / run_id / "metrics.json").read_bytes() == metrics
    finally:
        unmount(disk)
