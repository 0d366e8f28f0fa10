"""The Metta workflow (seeds/003) end to end: the git commit recorded with every run, 15 paired
seeds, `variance`, a paired comparison of learning curves with `--summary auc` (checked against
scipy and a trapezoid by hand), a pre-registered plan whose verdict a config added later does not
move, a change of the code refused on resume and named file by file, and `benchlab diff` of the
two versions naming it."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy import stats

from journeys.journey_kit import benchlab, git

pytestmark = pytest.mark.slow

TRAIN = '''
import json, os, random, sys
arch = sys.argv[1]
seed = int(os.environ["BENCHLAB_SEED"])
gain = {"vit_reset": 1.0, "trxl": 1.1, "lstm": 0.9}[arch]
shared = random.Random(f"{seed}").gauss(0, 0.05)  # the seed's own luck, the same for every arch
own = random.Random(f"{arch}-{seed}")
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.jsonl"), "w") as f:
    for step in range(1, 6):
        f.write(json.dumps({"step": step * 100, "reward": gain * step / 5 + shared + own.gauss(0, 0.03)}) + "\\n")
'''

SPEC = """
name: metta
tasks: [{name: terrain_2}]
configs:
  - {name: vit_reset, params: {arch: vit_reset}}
  - {name: trxl, params: {arch: trxl}}
seeds: 15
command: python train.py {arch}
metrics:
  primary: {name: reward, goal: max}
baseline: vit_reset
analysis:
  summary: auc
"""


def curve(arch: str, seed: int, gain: float) -> tuple[np.ndarray, np.ndarray]:
    """train.py's curve, computed here."""
    shared = random.Random(f"{seed}").gauss(0, 0.05)
    own = random.Random(f"{arch}-{seed}")
    steps = np.arange(1, 6) * 100.0
    return steps, np.array([gain * s / 5 + shared + own.gauss(0, 0.03) for s in range(1, 6)])


def auc(arch: str, seed: int, gain: float) -> float:
    steps, values = curve(arch, seed, gain)
    return float(np.trapezoid(values, steps) / (steps[-1] - steps[0]))


def _registered_rows(report: str) -> tuple[list[str], list[str]]:
    plan = report.split("## Analysis plan")[1].split("\n## ")[0]
    registered, _, exploratory = plan.partition("Exploratory")
    return ([ln for ln in registered.splitlines() if ln.startswith("| terrain_2 |")],
            [ln for ln in exploratory.splitlines() if ln.startswith("| terrain_2 |")])


def test_metta_journey(tmp_path):
    root = tmp_path
    (root / "train.py").write_text(TRAIN)
    (root / "bench.yaml").write_text(SPEC.lstrip())
    (root / ".gitignore").write_text("results/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "baseline protocol")
    head = git(root, "rev-parse", "HEAD").strip()

    ran = benchlab(root, "run", "bench.yaml", "-r", "results/v1", "-j", "2").stdout
    assert "30 runs: 30 completed" in ran
    provenance = [json.loads(p.read_text()) for p in (root / "results/v1/runs").glob("*/provenance.json")]
    assert len(provenance) == 30 and {p["git"]["commit"] for p in provenance} == {head}

    # Are 15 seeds enough? The CV of the mean falls under 5% at the N it names.
    variance = json.loads(benchlab(root, "variance", "results/v1", "--config", "vit_reset", "--threshold",
                                   "0.05", "--json").stdout)
    (row,) = variance["tasks"]
    assert row["n_seeds"] == 15 and row["auc"]["n"] == list(range(1, 16))
    under = [n for n, cv in zip(row["auc"]["n"], row["auc"]["cv"], strict=True) if cv <= 0.05]
    assert under and row["auc"]["smallest_n"] == under[0] <= 15

    # The paired comparison of the curves' AUC, against scipy on AUCs computed by hand.
    compared = json.loads(benchlab(root, "compare", "results/v1", "--baseline", "vit_reset", "--candidate",
                                   "trxl", "--summary", "auc", "--json").stdout)
    (cmp,) = compared["comparisons"]
    base = np.array([auc("vit_reset", s, 1.0) for s in range(15)])
    cand = np.array([auc("trxl", s, 1.1) for s in range(15)])
    assert cmp["paired"] and cmp["n"] == 15
    assert cmp["mean_diff"] == pytest.approx(float(np.mean(cand - base)), rel=1e-9)
    assert cmp["t_pvalue"] == pytest.approx(stats.ttest_rel(cand, base).pvalue, rel=1e-6)

    # The pre-registered plan (AUC, every config against the baseline) is judged in the report.
    report = (root / "results/v1/BENCHMARK_REPORT.md").read_text()
    assert "Analysis as pre-registered" in report
    registered, exploratory = _registered_rows(report)
    assert [r.split("|")[2].strip() for r in registered] == ["trxl vs vit_reset"] and exploratory == []
    assert f"{np.mean(cand - base):+.3g} [" in registered[0] and "| yes |" in registered[0]

    # A config added later: its comparison is exploratory, the registered verdict stays as it was.
    spec = root / "bench.yaml"
    spec.write_text(spec.read_text().replace("  - {name: trxl, params: {arch: trxl}}\n",
                                             "  - {name: trxl, params: {arch: trxl}}\n"
                                             "  - {name: lstm, params: {arch: lstm}}\n"))
    git(root, "commit", "-qam", "add lstm")  # a spec edit, committed: not a change of the code
    head = git(root, "rev-parse", "HEAD").strip()
    more = benchlab(root, "run", "bench.yaml", "-r", "results/v1", "-j", "2").stdout
    assert "45 runs: 15 completed, 30 already done" in more
    report = (root / "results/v1/BENCHMARK_REPORT.md").read_text()
    assert "config(s) added after results existed: lstm" in report
    assert _registered_rows(report) == (registered, _registered_rows(report)[1])
    assert [r.split("|")[2].strip() for r in _registered_rows(report)[1]] == ["lstm vs vit_reset"]

    # The code changes: a resume into v1 is refused, naming the file; v2 is a new version.
    (root / "train.py").write_text(TRAIN.replace('"trxl": 1.1', '"trxl": 1.3'))
    refused = benchlab(root, "run", "bench.yaml", "-r", "results/v1", "--dry-run", code=2)
    assert "the code's uncommitted diff" in refused.stderr and "in train.py" in refused.stderr
    git(root, "commit", "-qam", "trxl: gated memory")
    benchlab(root, "run", "bench.yaml", "-r", "results/v2", "-j", "2")
    diff = benchlab(root, "diff", "results/v1", "results/v2").stdout
    changed = diff.split("## What changed")[1].split("## ")[0]
    assert f"commits: {head[:10]}.." in changed and "train.py | 2 +-" in changed
    assert "- Spec: no change" in changed
    # trxl's final reward moved by its change of gain (0.2 at the last step); by hand:
    before = np.mean([curve("trxl", s, 1.1)[1][-1] for s in range(15)])
    after = np.mean([curve("trxl", s, 1.3)[1][-1] for s in range(15)])
    row = next(ln for ln in diff.splitlines() if ln.endswith("terrain_2/trxl/reward (paired, n=15, goal max) |"))
    assert f"| {before:.4g} ± " in row and f"| {after:.4g} ± " in row
