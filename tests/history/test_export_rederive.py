"""What is published can be re-derived: `collect --rebuild` of an exported copy (no ledger there)
gives the report the original folder gives (the pre-registered plan, the retried and failing runs,
the `--until-decided` design, the -s overrides), or, where the ledger's records were not
published, says which of them it could not recover."""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import pytest

from benchlab_testing import run_cli

SCRIPT = '''
import json, os, random, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
seed = int(os.environ["BENCHLAB_SEED"])
if args["cfg"] == "broken":
    sys.exit("cannot load the checkpoint")
marker = os.path.join(args["marks"], f"{args['cfg']}-{seed}")
if args["cfg"] == "flaky" and not os.path.exists(marker):
    open(marker, "w").close()  # fails once per seed, then succeeds on its retry
    sys.exit("transient failure")
rng = random.Random(f"{args['cfg']}-{seed}")
score = float(args["effect"]) * float(args["scale"]) + rng.gauss(0, 0.5)
json.dump({"score": score}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
'''

SPEC = """
name: rederive
variables: {scale: 1.0}
tasks: [{name: t1, target: 5}]
configs:
  - {name: base, params: {effect: 0}}
  - {name: far, params: {effect: 10}}
  - {name: same, params: {effect: 0}}
  - {name: flaky, params: {effect: 2}}
  - {name: broken, params: {effect: 0}}
seeds: 4
retries: 1
command: python run.py cfg={config} effect={effect} scale={scale} marks=MARKS
metrics: {primary: {name: score, goal: max}}
baseline: base
analysis:
  metric: score
  comparisons: [[base, far], [base, same], [base, flaky]]
  min_effect: 0.5
"""


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rederive")
    (root / "marks").mkdir()
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip().replace("MARKS", str(root / "marks")))
    proc = run_cli("run", "bench.yaml", "-s", "scale=1.5", "--until-decided", "--max-seeds", "8", "--batch", "4",
                   "-j", "2", "--no-report", cwd=root, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # `broken` fails, as written
    folder = root / "results" / "rederive"
    run_cli("report", str(folder), "--no-plots", check=True)
    return folder


PAGES = ("BENCHMARK_REPORT.md", "BENCHMARKS.md", "results.csv")


def _page(folder: Path, name: str) -> str:
    """A report page with the folder's own path (the reproduce commands name it) made neutral."""
    return re.sub(re.escape(str(folder)) + r"(-again)?", r"FOLDER\1", (folder / name).read_text())


def _publish_and_rebuild(original: Path, tmp_path: Path, drop: tuple[str, ...] = ()) -> tuple[Path, str]:
    published = tmp_path / "published"
    run_cli("export", str(original), str(published), check=True)
    for name in drop:
        (published / name).unlink(missing_ok=True)
    copy = tmp_path / "copy"  # what someone downloads: no ledger
    shutil.copytree(published, copy)
    assert not (copy / "benchlab.db").exists()
    rebuilt = run_cli("collect", str(copy), "--rebuild", check=True)
    run_cli("report", str(copy), "--no-plots", check=True)
    return copy, rebuilt.stdout + rebuilt.stderr


def test_the_original_report_holds_what_only_the_ledger_knew(original):
    report = (original / "BENCHMARK_REPORT.md").read_text()
    assert "Analysis plan" in report and "pre-registered" in report
    assert "--until-decided" in report or "sequential" in report.lower()
    assert "2 attempts" in report or "attempts: 2" in report or "| 2 |" in report  # broken's retry


def test_a_rebuilt_published_copy_gives_the_same_report(original, tmp_path):
    copy, said = _publish_and_rebuild(original, tmp_path)
    for name in PAGES:
        assert _page(copy, name) == _page(original, name), name
    assert "from ledger-records.json" in said and "not recovered" not in said
    assert (copy / "preregistration.json").is_file()


def test_without_the_ledgers_records_the_rebuild_says_what_it_could_not_recover(original, tmp_path):
    copy, said = _publish_and_rebuild(original, tmp_path, drop=("ledger-records.json",))
    said = " ".join(said.split())
    assert "warning: not recovered" in said
    for lost in ("earlier attempts of retried runs", "run --until-decided's design and state"):
        assert lost in said
    # preregistration.json still went: the plan is kept even so.
    assert "Analysis plan" in (copy / "BENCHMARK_REPORT.md").read_text()
