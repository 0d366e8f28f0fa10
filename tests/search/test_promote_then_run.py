"""Search, promote, then run the promoted spec in the same results folder, in a git repository:
a spec edit is not a change of the code under test, and a real code change is named file by file."""

from __future__ import annotations

import subprocess

import pytest

from benchlab_testing import run_cli
from search.searchkit import write_search_bench

pytestmark = pytest.mark.slow


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"})


def test_promoted_spec_runs_in_the_benchmark_folder_and_a_code_change_names_its_files(tmp_path):
    spec = write_search_bench(tmp_path, budget=2)
    (tmp_path / ".gitignore").write_text("results/\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "bench")
    assert run_cli("run", str(spec), "-j", "2", "--no-report", cwd=tmp_path, timeout=300).returncode == 0
    assert run_cli("search", str(spec), "-j", "2", cwd=tmp_path, timeout=300).returncode == 0
    promoted = run_cli("search", str(spec), "--promote", "tuned", cwd=tmp_path)
    assert promoted.returncode == 0, promoted.stderr
    tuned = tmp_path / "bench.tuned.yaml"
    # The user commits the promoted spec (and tidies the original): only spec files changed.
    spec.write_text(spec.read_text() + "# tuned in bench.tuned.yaml\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "promote tuned")

    dry = run_cli("run", str(tuned), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "2 runs would run" in dry.stdout  # the tuned config on the benchmark's two seeds
    ran = run_cli("run", str(tuned), "-j", "2", "--no-report", cwd=tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr

    # A real change of the code under test: the dry run refuses as the run does, naming the file.
    (tmp_path / "run.py").write_text((tmp_path / "run.py").read_text() + "\n# tweak\n")
    dry = run_cli("run", str(tuned), "--dry-run", cwd=tmp_path)
    real = run_cli("run", str(tuned), cwd=tmp_path)
    for proc in (dry, real):
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "the code's uncommitted diff" in proc.stderr and "in run.py" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert "would run" not in dry.stdout
    _git(tmp_path, "commit", "-qam", "tweak")
    committed = run_cli("run", str(tuned), "--dry-run", cwd=tmp_path)
    assert committed.returncode == 2 and "the code's commit" in committed.stderr
    changes = committed.stderr.split("changed since its runs began:")[1]
    assert "in run.py" in changes and ".yaml" not in changes
