"""A run's log takes at most its cap on disk while the run writes it, whatever it prints, and ends
as its head, one line saying how many bytes were dropped, and its tail (execute/logcap.py)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchlab.execute.logcap import LogCap, cap_bytes, cut, data_at
from benchlab_testing import CHATTY_RUN, CHATTY_SPEC, capped_chatty_log, run_cli

# Writes HEAD, then `total` bytes of filler in 1 MiB lines, then TAIL; appending, as a run's log is opened.
CHATTY = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
total = int(sys.argv[2])
os.write(fd, b"HEAD-OF-THE-LOG\n")
line = b"x" * ((1 << 20) - 1) + b"\n"
for _ in range(total >> 20):
    os.write(fd, line)
os.write(fd, b"TAIL-OF-THE-LOG\n")
"""


def _on_disk(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_a_chatty_writer_never_takes_more_than_the_cap_and_the_log_keeps_head_tail_and_the_count(tmp_path):
    log = tmp_path / "train.log"
    cap = 4 << 20
    keeper = LogCap(cap, look_s=0.005)
    keeper.track(log)
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                peak[0] = max(peak[0], _on_disk(log))
            except OSError:
                pass
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    total = 256 << 20
    subprocess.run([sys.executable, "-c", CHATTY, str(log), str(total)], check=True)
    done.set()
    watcher.join()
    if keeper.warnings:
        pytest.skip(keeper.warnings[0])  # a file system without hole punching: cut at the end only
    written = os.stat(log).st_size
    assert written == total + 32
    dropped = keeper.finish(log)
    keeper.close()
    # On disk: the cap plus what the writer wrote between two of the keeper's looks: a few MiB on an
    # idle machine, 37-39 MiB measured with the suite's other workers busy on both cores; a quarter
    # of what was written bounds it with room, and without the keeper the file holds all 256 MiB.
    assert peak[0] <= total // 4, peak[0]
    text = log.read_bytes()
    assert text.startswith(b"HEAD-OF-THE-LOG\n") and text.endswith(b"TAIL-OF-THE-LOG\n")
    (line,) = re.findall(rb"\n\[benchlab: (\d+) bytes of this log were dropped here[^\n]*\]\n", text)
    assert int(line) == dropped == written - (len(text) - len(re.search(rb"\n\[benchlab: [^\n]*\]\n", text)[0]))
    assert len(text) <= cap + 200


def test_a_log_within_its_cap_is_left_as_it_is(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"a\n" * 1000)
    assert cut(log, 4096) == 0 and log.read_bytes() == b"a\n" * 1000


def test_the_cap_is_64_mib_unless_the_spec_says_otherwise_and_0_is_none():
    assert cap_bytes(None) == 64 << 20 and cap_bytes(8) == 8 << 20 and cap_bytes(0) is None


def test_a_cut_log_is_left_as_it_is_by_a_second_cut(tmp_path):
    # A Ray worker cuts its log before it travels, and the sweep cuts every log again when the
    # attempt is recorded: the second cut must find nothing to do.
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(b"line %06d\n" % i for i in range(10_000)))  # 120,000 bytes
    assert cut(log, 4096) == 120_000 - 4096
    once = log.read_bytes()
    assert cut(log, 4096) == 0 and log.read_bytes() == once
    assert once.startswith(b"line 000000\n") and once.endswith(b"line 009999\n")


@pytest.mark.parametrize("backend", ["local", "debug"])
def test_a_chatty_run_leaves_the_one_capped_log_and_its_score_is_read_from_the_tail(tmp_path, backend):
    (tmp_path / "chatty.py").write_text(CHATTY_RUN)
    (tmp_path / "bench.yaml").write_text(CHATTY_SPEC.format(name=f"loud-{backend}"))
    proc = run_cli("run", "bench.yaml", "-r", "out", "--backend", backend, "--no-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (log,) = (tmp_path / "out" / "runs").glob("*/train.log")
    # Byte for byte what logcap.cut makes of the whole output: every backend's log is cut alike.
    assert log.read_bytes() == capped_chatty_log(tmp_path)
    assert b"[benchlab: 5242914 bytes of this log were dropped here" in log.read_bytes()
    con = sqlite3.connect(tmp_path / "out" / "benchlab.db")
    assert con.execute("SELECT value FROM metrics WHERE metric = 'score'").fetchall() == [(0.75,)]
    con.close()
    shown = run_cli("logs", "t/loud/s0", "-r", "out", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.encode() == log.read_bytes()


def test_a_reader_of_a_running_log_skips_the_freed_middle(tmp_path):
    # `benchlab logs -f` reads a log whose middle the cap freed: the head, then the bytes after the
    # hole, never the zeros the hole reads as.
    log = tmp_path / "train.log"
    cap = 1 << 20
    keeper = LogCap(cap, look_s=0.005)
    keeper.track(log)
    subprocess.run([sys.executable, "-c", CHATTY, str(log), str(16 << 20)], check=True)
    deadline = time.monotonic() + 10
    while _on_disk(log) > 4 * cap and time.monotonic() < deadline:
        time.sleep(0.01)
    keeper.untrack(log)
    keeper.close()
    if keeper.warnings or _on_disk(log) > 4 * cap:
        pytest.skip("a file system without hole punching")
    read = bytearray()
    with open(log, "rb") as fh:
        pos = 0
        while True:
            start, size = data_at(fh.fileno(), pos, 65536)
            chunk = os.pread(fh.fileno(), size, start) if size else b""
            if not chunk:
                break
            read += chunk
            pos = start + len(chunk)
    assert read.startswith(b"HEAD-OF-THE-LOG\n") and read.endswith(b"TAIL-OF-THE-LOG\n")
    assert b"\0" not in read and len(read) < 4 * cap
