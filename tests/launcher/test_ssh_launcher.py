"""The plain-SSH recipe of docs/launchers.md, with an sshd of the test's own on 127.0.0.1 as the
second node (it shares this machine's file system, as seed 004's node shares its cluster's):
a completed run, a crash, a hang past its timeout, and a path with a space in it."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlab_testing import SCRIPT, run_cli
from launcher_recipes import write_spec
from localsshd import LocalSshd, why_not

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sshd() -> Iterator[LocalSshd]:
    reason = why_not()
    if reason is not None:
        pytest.skip(f"NO SSH TESTS RAN: {reason}")
    server = LocalSshd(Path(tempfile.mkdtemp(prefix="benchlab-sshd-")))
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        pytest.skip(f"NO SSH TESTS RAN: {exc}")
    try:
        yield server
    finally:
        server.stop()


def test_runs_on_another_node_over_ssh_complete_crash_and_time_out(sshd: LocalSshd, tmp_path: Path) -> None:
    root = tmp_path / "a bench"  # a space in every path the commands pass on
    root.mkdir()
    (root / "run.py").write_text(SCRIPT)
    spec = write_spec(root, "ssh-recipe", """
        name: over-ssh
        tasks: [{name: t}]
        configs:
          - {name: ok, command: python run.py}
          - {name: crash, command: python run.py fail_seed=0}
          - {name: hang, command: python run.py sleep=120}
        seeds: 1
        metrics: {primary: score}
        timeout: 4
    """, variables={"ssh": sshd.ssh_command})
    out = root / "out"
    proc = run_cli("run", str(spec), "-j", "3", "--results", str(out), "--no-report", cwd=root, timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    conn = sqlite3.connect(out / "benchlab.db")
    try:
        rows = dict((name, (status, cls, error)) for name, status, cls, error in conn.execute(
            "SELECT r.name, a.status, a.failure_class, a.error FROM attempts a JOIN runs r USING (run_id)"))
        score = conn.execute("SELECT value FROM metrics WHERE metric = 'score'").fetchall()
    finally:
        conn.close()
    assert rows == {"t/ok/s0": ("completed", None, None),
                    "t/crash/s0": ("failed", "exception", "ValueError: seed is cursed"),
                    "t/hang/s0": ("failed", "timeout", "timed out after 4s")}
    assert score == [(pytest.approx(0.5),)]
    # The hang's process group was stopped on the node, not left sleeping.
    import psutil

    assert not [p for p in psutil.process_iter(["cmdline"]) if "sleep=120" in " ".join(p.info["cmdline"] or [])]
