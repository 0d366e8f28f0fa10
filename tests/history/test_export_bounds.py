"""`benchlab export` publishes the results folder and nothing beyond it, leaves the uncommitted
code unpublished unless asked, and keeps its log whole through a full disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchlab_testing import SCRIPT, run_cli

SPEC = """
name: bounds
tasks: [{name: t1}]
configs: [{name: a, params: {base: 0.5}}]
seeds: 2
command: python run.py base={base}
metrics: {primary: score}
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bounds")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    # A git repository with an uncommitted change: the version keeps its diff in code.diff.
    commit = ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"]
    for args in (["init", "-q"], ["add", "run.py"], commit):
        subprocess.run(["git", *args], cwd=root, check=True)
    (root / "run.py").write_text(SCRIPT + "\n# INTERNAL-ONLY change\n")
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    folder = root / "results" / "bounds"
    run_cli("report", str(folder), "--no-plots", "--no-html", cwd=root, check=True)
    return folder


def _copy(results: Path, tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(results, out, symlinks=True)
    return out


def test_symlinks_leading_out_of_the_results_folder_are_not_followed(results, tmp_path):
    folder = _copy(results, tmp_path)
    outside = tmp_path / "home"
    (outside / ".aws").mkdir(parents=True)
    (outside / ".aws" / "credentials").write_text("[default]\npassword = not-a-known-format\n")
    run = next((folder / "runs").iterdir())
    (run / "credentials").symlink_to(outside / ".aws" / "credentials")
    (run / "aws").symlink_to(outside / ".aws")
    (folder / "plots").mkdir(exist_ok=True)
    (folder / "plots" / "up.png").symlink_to(outside / ".aws" / "credentials")
    (run / "same.json").symlink_to(run / "metrics.json")  # a link inside the folder is published
    target = tmp_path / "public"
    done = run_cli("export", str(folder), str(target))
    assert done.returncode == 0, done.stderr
    published = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    assert not any("credentials" in p or p.startswith(f"runs/{run.name}/aws") or p == "plots/up.png"
                   for p in published), published
    assert f"runs/{run.name}/same.json" in published
    for name in (f"runs/{run.name}/credentials", f"runs/{run.name}/aws", "plots/up.png"):
        assert f"warning: not published: {name} is a symbolic link leading out of" in done.stderr
    assert "not-a-known-format" not in "".join(p.read_text(errors="replace") for p in target.rglob("*") if p.is_file())


def test_uncommitted_code_is_published_only_when_asked(results, tmp_path):
    folder = _copy(results, tmp_path)
    diff = next((folder / "versions").glob("*/code.diff"))
    assert "INTERNAL-ONLY" in diff.read_text()
    run_cli("export", str(folder), str(tmp_path / "plain"), check=True)
    assert not list((tmp_path / "plain").glob("versions/*/code.diff"))
    assert list((tmp_path / "plain").glob("versions/*/version.json"))
    run_cli("export", str(folder), str(tmp_path / "full"), "--with-diff", check=True)
    assert "INTERNAL-ONLY" in next((tmp_path / "full").glob("versions/*/code.diff")).read_text()


_FULL_DISK = """
import resource, signal, sys
from benchlab.history.export import export
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
export(sys.argv[1], "memory://full/disk", what="report")
"""


def test_a_full_disk_while_logging_leaves_the_export_log_whole(results, tmp_path):
    folder = _copy(results, tmp_path)
    run_cli("export", str(folder), "memory://first", "--what", "report", check=True)
    before = (folder / "exports.json").read_text()
    # Every file may grow to the log's size plus a little: the next log (one entry more) cannot be written.
    proc = subprocess.run([sys.executable, "-c", _FULL_DISK, str(folder), str(len(before) + 40)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "File too large" in proc.stderr
    assert (folder / "exports.json").read_text() == before
    again = run_cli("export", str(folder), str(tmp_path / "public"), "--what", "report")
    assert again.returncode == 0, again.stderr
    assert len(json.loads((folder / "exports.json").read_text())) == 2


def test_a_damaged_export_log_stops_the_next_export_with_a_way_on(results, tmp_path):
    folder = _copy(results, tmp_path)
    (folder / "exports.json").write_text('[{"when": "2026-01-01T00:00:00+00:00", "what": "al')
    target = tmp_path / "public"
    refused = run_cli("export", str(folder), str(target))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert f"{folder / 'exports.json'}: the export log is damaged (line 1:" in message
    assert "Nothing was uploaded" in message and f"mv {folder / 'exports.json'}" in message
    assert not target.exists()
    (folder / "exports.json").rename(folder / "exports.json.damaged")
    run_cli("export", str(folder), str(target), check=True)
    assert len(json.loads((folder / "exports.json").read_text())) == 1


# Two entries as earlier versions wrote them: one from before the log kept unpublished runs and
# outside links, one with both.
_OLD_LOG = """[
 {
  "when": "2026-11-23T15:00:00+00:00",
  "what": "all",
  "target": "s3://bucket/bench",
  "public_url": "https://bucket.s3.amazonaws.com/bench/",
  "dry_run": false,
  "files": 12,
  "uploaded": 12,
  "uploaded_bytes": 40960,
  "skipped": 0,
  "uploaded_files": [
   "BENCHMARKS.md",
   "runs/abc/metrics.json"
  ]
 },
 {
  "when": "2026-11-26T11:00:00+00:00",
  "what": "report",
  "target": "/srv/public",
  "public_url": null,
  "dry_run": false,
  "files": 4,
  "uploaded": 1,
  "uploaded_bytes": 1000,
  "skipped": 3,
  "uploaded_files": [
   "report.html"
  ],
  "unpublished_runs": [
   "abc"
  ],
  "outside_links": []
 }
]"""


def test_an_export_log_of_earlier_versions_reads_and_is_kept_as_written(results, tmp_path):
    from benchlab.history.export import ExportLogEntry, export, read_log

    folder = _copy(results, tmp_path)
    (folder / "exports.json").write_text(_OLD_LOG)
    first, second = read_log(folder)
    assert first == ExportLogEntry("2026-11-23T15:00:00+00:00", "all", "s3://bucket/bench",
                                   "https://bucket.s3.amazonaws.com/bench/", False, 12, 12, 40960, 0,
                                   ["BENCHMARKS.md", "runs/abc/metrics.json"])
    assert first.unpublished_runs is None and first.outside_links is None
    assert (second.public_url, second.skipped, second.unpublished_runs, second.outside_links) == \
        (None, 3, ["abc"], [])
    export(folder, str(tmp_path / "public"), what="report")
    text = (folder / "exports.json").read_text()
    # The earlier entries are written back byte for byte; the new one follows them.
    assert text.startswith(_OLD_LOG.removesuffix("\n]") + ",\n {\n")
    new = json.loads(text)[2]
    assert list(new) == ["when", "what", "target", "public_url", "dry_run", "files", "uploaded",
                         "uploaded_bytes", "skipped", "uploaded_files", "unpublished_runs", "outside_links"]
    assert read_log(folder)[2].uploaded == new["uploaded"] == len(new["uploaded_files"]) > 0


def test_an_export_log_entry_that_is_no_export_stops_the_next_export(results, tmp_path):
    folder = _copy(results, tmp_path)
    (folder / "exports.json").write_text('[{"when": "2026-01-01T00:00:00+00:00", "what": "all"}]')
    target = tmp_path / "public"
    refused = run_cli("export", str(folder), str(target))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert f"{folder / 'exports.json'}: entry 0 is not an export (no 'target')" in message
    assert not target.exists()
