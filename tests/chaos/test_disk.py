"""Chaos for the disk: full, read-only, or not a folder at all.

A full disk and a read-only folder are made real: a small tmpfs mounted for the test
(as root), or, for read-only, a folder without write permission (as any other user).
"""

from __future__ import annotations

import os
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
