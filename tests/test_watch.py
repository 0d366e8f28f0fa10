"""`benchlab watch`: new complete checkpoint folders become configs and are evaluated once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from benchlab.watch import CheckpointWatcher, config_name

SPEC = """
name: ckpts
tasks: [{name: easy, params: {base: 0.5}}, {name: hard, params: {base: 0.2}}]
configs:
  - name: template
    params: {checkpoint: ""}
seeds: 1
command: python run.py base={base} ckpt={checkpoint}
metrics: {primary: score}
"""


def evaluated(results) -> list[tuple[str, str]]:
    con = sqlite3.connect(results / "benchlab.db")
    rows = con.execute("SELECT config, task FROM runs WHERE status = 'completed' ORDER BY config, task").fetchall()
    con.close()
    return rows


def test_marker_decides_completeness_and_each_checkpoint_runs_once(make_bench):
    bench = make_bench(SPEC)
    ckpts = bench.root / "ckpts"
    (ckpts / "step-10").mkdir(parents=True)
    (ckpts / "step-10" / "DONE").touch()
    (ckpts / "step-20").mkdir()
    (ckpts / "step-20" / "weights.bin").write_bytes(b"x" * 10)  # still being written: no marker
    first = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "-r", "out", "--marker", "DONE", "--once")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "new checkpoint: step-10" in first.stdout
    assert evaluated(bench.results) == [("step-10", "easy"), ("step-10", "hard")]
    (ckpts / "step-20" / "DONE").touch()
    second = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "-r", "out", "--marker", "DONE", "--once")
    assert second.returncode == 0
    assert "2 of 4 runs already done" in second.stdout
    assert evaluated(bench.results) == [("step-10", "easy"), ("step-10", "hard"),
                                        ("step-20", "easy"), ("step-20", "hard")]
    log = (bench.results / "runs").glob("*/train.log")
    assert any(str(ckpts / "step-20") in p.read_text() for p in log)


@pytest.mark.slow
def test_watch_picks_up_checkpoints_written_while_it_runs(make_bench):
    bench = make_bench(SPEC)
    ckpts = bench.root / "ckpts"
    ckpts.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "benchlab", "watch", "ckpts", "--spec", "bench.yaml", "-r", "out",
                             "--marker", "DONE", "--interval", "0.2", "--max-checkpoints", "2"],
                            cwd=bench.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for name in ("step-1", "step-2"):
            (ckpts / name).mkdir()
            (ckpts / name / "DONE").touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert sorted({c for c, _ in evaluated(bench.results)}) == ["step-1", "step-2"]


def test_without_marker_a_checkpoint_counts_once_its_files_settle(tmp_path):
    now = [0.0]
    watcher = CheckpointWatcher(tmp_path, settle=30, clock=lambda: now[0])
    ckpt = tmp_path / "step-5"
    ckpt.mkdir()
    (ckpt / "a.bin").write_bytes(b"1")
    assert watcher.complete() == []          # first sight: not yet settled
    now[0] = 20.0
    (ckpt / "a.bin").write_bytes(b"12")      # still growing: the clock starts again
    assert watcher.complete() == []
    now[0] = 45.0
    assert watcher.complete() == []          # 25 s unchanged
    now[0] = 51.0
    assert watcher.complete() == [ckpt]      # 31 s unchanged


def test_checkpoints_are_ordered_by_step_number(tmp_path):
    for name in ("step-100", "step-20", "step-3"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "DONE").touch()
    watcher = CheckpointWatcher(tmp_path, marker="DONE")
    assert [p.name for p in watcher.complete()] == ["step-3", "step-20", "step-100"]


def test_config_names_are_safe():
    from pathlib import Path

    assert config_name(Path("/x/global step 10")) == "global-step-10"


def test_template_without_checkpoint_param_is_refused(make_bench):
    bench = make_bench(SPEC.replace('params: {checkpoint: ""}', "params: {x: 1}").replace(" ckpt={checkpoint}", ""))
    (bench.root / "ckpts").mkdir()
    proc = bench.cli("watch", "ckpts", "--spec", "bench.yaml", "--once")
    assert proc.returncode == 2 and "needs a 'checkpoint' param" in proc.stderr
