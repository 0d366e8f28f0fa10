"""A report whose runs ran at two versions of the code under test (`run --allow-changed`) says
which runs ran at which, and that one command cannot reproduce them all."""

from __future__ import annotations

import subprocess
import textwrap

from benchlab_testing import SCRIPT, run_cli

SPEC = """
name: drift
tasks: [{name: t1}]
configs: [{name: a, params: {base: 0.5}}, {name: b, params: {base: 0.6}}]
seeds: SEEDS
command: python run.py base={base}
metrics: {primary: score}
baseline: a
"""


def _git(root, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=root, check=True,
                          capture_output=True, text=True)
    return done.stdout.strip()


def test_report_names_the_runs_of_each_code_version_and_says_one_command_cannot_reproduce_all(tmp_path):
    root = tmp_path
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC.replace("SEEDS", "2")).lstrip())
    _git(root, "init", "-q")
    _git(root, "add", "run.py", "bench.yaml")
    _git(root, "commit", "-qm", "one")
    first = _git(root, "rev-parse", "HEAD")
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    (root / "run.py").write_text(SCRIPT + "\n# a change of the code under test\n")
    _git(root, "commit", "-qam", "two")
    second = _git(root, "rev-parse", "HEAD")
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC.replace("SEEDS", "3")).lstrip())
    refused = run_cli("run", "bench.yaml", "--no-report", cwd=root)
    assert refused.returncode == 2 and "the code's commit" in refused.stderr
    run_cli("run", "bench.yaml", "--no-report", "--allow-changed", cwd=root, check=True)
    folder = root / "results" / "drift"
    run_cli("report", str(folder), "--no-plots", "--no-html", check=True)
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    text = " ".join(report.split())
    assert (f"Its runs ran at 2 versions of the code under test (4 at commit {first[:10]}" in text
            and f"2 at commit {second[:10]}" in text), text
    block = report.split("## Reproduction", 1)[1]
    assert "one command cannot reproduce them all" in block
    assert f"#   4 runs at commit {first[:10]}" in block and "t1/a seeds 0, 1; t1/b seeds 0, 1" in block
    assert f"#   2 runs at commit {second[:10]}" in block and "t1/a seed 2; t1/b seed 2" in block
    assert f"checkout {second}" in block  # the last code, from which the whole benchmark runs again


def test_report_of_runs_at_one_code_says_nothing_of_versions(tmp_path):
    (tmp_path / "run.py").write_text(SCRIPT)
    (tmp_path / "bench.yaml").write_text(textwrap.dedent(SPEC.replace("SEEDS", "2")).lstrip())
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    run_cli("report", str(tmp_path / "results" / "drift"), "--no-plots", "--no-html", check=True)
    report = (tmp_path / "results" / "drift" / "BENCHMARK_REPORT.md").read_text()
    assert "versions of the code" not in report and "cannot reproduce" not in report
