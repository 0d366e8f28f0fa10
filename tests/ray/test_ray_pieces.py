"""Parts of the ray backend that need no cluster: the size cap, task options, a missing Ray."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchlab.execute.logcap import cut
from benchlab.runlog import CACHE_NAME
from benchlab.spec import Resources
from benchlab_testing import run_cli

ray_backend = pytest.importorskip("benchlab.execute.ray")


def write(folder: Path, name: str, size: int, fill: bytes = b"x") -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(fill * size)


def write_one_run_spec(folder: Path) -> None:
    """``folder/bench.yaml``: one run of a command that does nothing; these tests stop before it runs."""
    (folder / "bench.yaml").write_text(textwrap.dedent("""
        name: one
        tasks: [{name: t}]
        configs: [{name: a}]
        seeds: 1
        command: "true"
        metrics: {primary: score}
    """))


def test_files_under_the_cap_come_home_whole(tmp_path):
    write(tmp_path, "metrics.json", 20)
    write(tmp_path, "sub/extra.txt", 30)
    write(tmp_path, "train.log", 40)
    write(tmp_path, "config.yaml", 10)  # the driver wrote it: never shipped back
    files, notes = ray_backend._pack_files(str(tmp_path), cap=1000, log_cap=1000)
    assert dict(files) == {"metrics.json": b"x" * 20, "sub/extra.txt": b"x" * 30,
                           "train.log": b"x" * 40}
    assert notes == {"files_cap_bytes": "1000"}


def test_a_log_over_its_cap_travels_as_the_cut_every_backend_makes(tmp_path):
    lines = b"".join(b"line %04d\n" % i for i in range(100))  # 10 bytes a line, 1000 bytes
    (tmp_path / "train.log").write_bytes(lines)
    (tmp_path / "same.log").write_bytes(lines)
    write(tmp_path, "metrics.json", 50)
    files, notes = ray_backend._pack_files(str(tmp_path), cap=10_000, log_cap=300)
    got = dict(files)
    assert got["metrics.json"] == b"x" * 50
    # The log's own cap, not the files' one: head 150, the line, tail 150, as logcap.cut writes it.
    assert cut(tmp_path / "same.log", 300) == 700
    assert got["train.log"] == (tmp_path / "same.log").read_bytes()
    assert got["train.log"].startswith(lines[:150]) and got["train.log"].endswith(lines[-150:])
    mark = b"\n[benchlab: 700 bytes of this log were dropped here: it grew past its cap of 300 bytes"
    assert mark in got["train.log"]
    assert "log_truncated" not in notes


def test_a_log_without_a_cap_travels_whole(tmp_path):
    lines = b"".join(b"line %04d\n" % i for i in range(100))
    (tmp_path / "train.log").write_bytes(lines)
    files, _ = ray_backend._pack_files(str(tmp_path), cap=10, log_cap=None)
    assert dict(files)["train.log"] == lines


def test_files_that_do_not_fit_are_skipped_smallest_kept_and_listed(tmp_path):
    write(tmp_path, "metrics.json", 40)
    write(tmp_path, "big.bin", 500)
    write(tmp_path, "train.log", 100)
    files, notes = ray_backend._pack_files(str(tmp_path), cap=200, log_cap=1000)
    # 40 fits in the 200 bytes of other files, 500 does not; the log has its own cap.
    assert [name for name, _ in files] == ["metrics.json", "train.log"]
    assert notes["skipped_files"] == "big.bin"


def test_the_metrics_cache_comes_last_and_never_crowds_out_the_metrics_it_describes(tmp_path):
    write(tmp_path, "metrics.jsonl", 150)
    write(tmp_path, CACHE_NAME, 60)  # smaller than the text, yet worth nothing without it
    write(tmp_path, "train.log", 20)
    files, notes = ray_backend._pack_files(str(tmp_path), cap=180, log_cap=1000)
    # 180 bytes of other files: the text (150) fits, the cache (60) then does not.
    assert [name for name, _ in files] == ["metrics.jsonl", "train.log"]
    assert notes["skipped_files"] == CACHE_NAME


def test_task_options_carry_cpus_gpu_fractions_memory_in_bytes_and_custom_resources():
    opts = ray_backend.task_options(Resources(cpus=2, gpus=0.5, memory=1.5, custom={"tpu": 1}))
    assert opts == {"num_cpus": 2.0, "num_gpus": 0.5, "memory": 1.5 * 2**30,
                    "resources": {"tpu": 1.0}}
    assert ray_backend.task_options(Resources()) == {"num_cpus": 1.0, "num_gpus": 0.0}


def test_write_home_never_writes_outside_the_run_directory(tmp_path):
    run_dir = tmp_path / "runs" / "abc"
    run_dir.mkdir(parents=True)
    ray_backend._write_home(run_dir, [("metrics.json", b"{}"), ("../evil.txt", b"no"),
                                      ("train.log", b"tail\n")])
    assert (run_dir / "metrics.json").read_bytes() == b"{}"
    assert (run_dir / "train.log").read_bytes() == b"tail\n"
    assert not (tmp_path / "runs" / "evil.txt").exists()


def test_backend_ray_without_ray_installed_exits_2_with_the_install_command(tmp_path):
    write_one_run_spec(tmp_path)
    # Ray made unimportable, as on a machine without the extra.
    code = ("import sys, runpy; sys.modules['ray'] = None; "
            "sys.argv = ['benchlab', 'run', 'bench.yaml', '--backend', 'ray']; "
            "runpy.run_module('benchlab', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "pip install 'benchlab[ray]'" in out and "Traceback" not in out


def test_ray_options_without_the_ray_backend_are_refused(tmp_path):
    write_one_run_spec(tmp_path)
    proc = run_cli("run", "bench.yaml", "--ray-address", "auto", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--ray-address and --shared-fs need the ray backend" in proc.stdout + proc.stderr


def test_an_address_nobody_answers_at_exits_2_at_once(tmp_path):
    pytest.importorskip("ray")
    write_one_run_spec(tmp_path)
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = run_cli("run", "bench.yaml", "--backend", "ray", "--ray-address", f"127.0.0.1:{port}",
                   cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert f"nothing answers at 127.0.0.1:{port}" in proc.stdout + proc.stderr
