"""`benchlab diff` on two real versions of the quick-start benchmark (`benchlab init`), one with a
planted regression; statistics checked against scipy and statsmodels."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from benchlab_testing import run_cli

pytestmark = pytest.mark.slow

# Only the hard task (noise 0.2) gets worse, by a different amount per seed, so the paired
# differences have a spread and the paired t-test is defined.
PLANT = ("summary(score=1 - loss, loss=loss)",
         "if args.noise > 0.1:\n    loss += 0.02 * (1 + rng.random())\nsummary(score=1 - loss, loss=loss)")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=root,
                          check=True, capture_output=True, text=True).stdout


def _scores(results: Path, task: str, config: str, metric: str = "score") -> dict[int, float]:
    """Each seed's final value, read from the run folders (not from benchlab's tables)."""
    out = {}
    for run in (results / "runs").iterdir():
        cfg = (run / "config.yaml").read_text()
        if f"task: {task}\n" in cfg and f"config: {config}\n" in cfg:
            seed = int(next(line.split(":")[1] for line in cfg.splitlines() if line.startswith("seed:")))
            out[seed] = json.loads((run / "metrics.json").read_text())[metric]
    return out


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("quickstart")
    run_cli("init", str(root), check=True)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "v1")
    run_cli("run", "benchlab.yaml", "-r", "v1", "--no-report", cwd=root, check=True)
    train = root / "train.py"
    assert PLANT[0] in train.read_text()
    train.write_text(train.read_text().replace(*PLANT))
    _git(root, "commit", "-qam", "v2: a planted regression on the hard task")
    run_cli("run", "benchlab.yaml", "-r", "v2", "--no-report", cwd=root, check=True)
    return root


def test_planted_regression_is_caught_and_fails_the_gate(versions):
    root = versions
    gate = run_cli("diff", "v1", "v2", "--fail-on-regression", "--md", "diff.md", "--csv", "diff.csv", cwd=root)
    assert gate.returncode == 1, gate.stderr
    plain = run_cli("diff", "v1", "v2", "--json", cwd=root, check=True)
    data = json.loads(plain.stdout)
    verdicts = {(c["task"], c["config"], c["metric"]): c["verdict"] for c in data["changes"]}
    assert {k for k, v in verdicts.items() if v == "regression"} == {
        ("hard", c, m) for c in ("slow", "fast") for m in ("score", "loss")}
    assert {v for k, v in verdicts.items() if k[0] == "easy"} == {"no detectable change"}
    # The change of hard/fast/score: a paired t interval of the per-seed differences.
    before, after = _scores(root / "v1", "hard", "fast"), _scores(root / "v2", "hard", "fast")
    d = np.array([after[s] - before[s] for s in sorted(before)])
    lo, hi = sps.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=sps.sem(d))
    (change,) = [c for c in data["changes"] if (c["task"], c["config"], c["metric"]) == ("hard", "fast", "score")]
    assert change["paired"] is True
    assert change["diff"] == pytest.approx(d.mean()) and change["diff"] < 0
    assert (change["ci_low"], change["ci_high"]) == pytest.approx((lo, hi))
    assert change["p_value"] == pytest.approx(sps.ttest_rel(list(after.values()), list(before.values())).pvalue
                                              if list(after) == list(before) else
                                              sps.ttest_1samp(d, 0).pvalue)
    # Holm per metric (one family per metric, as analyze), as statsmodels computes it over the
    # defined p-values of each metric.
    for metric in ("score", "loss"):
        defined = [(i, c["p_value"]) for i, c in enumerate(data["changes"])
                   if c["p_value"] is not None and c["metric"] == metric]
        expected = multipletests([p for _, p in defined], method="holm")[1]
        for (i, _), p in zip(defined, expected, strict=True):
            assert data["changes"][i]["p_holm"] == pytest.approx(p)
    # What changed: the commit range with git's own --stat, nothing else.
    commits = _git(root, "log", "--format=%H").split()
    assert data["code"][0] == f"commits: {commits[1][:10]}..{commits[0][:10]}"
    assert any("train.py | 2 ++" in line for line in data["code"])
    assert data["spec"] == [] and data["datasets"] == [] and data["packages"] == []
    md = (root / "diff.md").read_text()
    assert "**4 regression(s)**" in md and "## Regressions (4)" in md
    assert "| + |" in md and "hard/fast/score (paired, n=5, goal max)" in md
    rows = list(csv.DictReader((root / "diff.csv").read_text().splitlines()))
    assert len(rows) == 8 and sum(r["verdict"] == "regression" for r in rows) == 4


def test_same_version_twice_has_no_regression_and_passes_the_gate(versions):
    same = run_cli("diff", "v1", "v1", "--fail-on-regression", cwd=versions)
    assert same.returncode == 0, same.stderr
    assert "**0 regression(s)**" in same.stdout


def test_changed_seeds_are_compared_unpaired_with_welch(versions, tmp_path):
    root = versions
    spec = (root / "benchlab.yaml").read_text()
    other = root / "other-seeds.yaml"
    other.write_text(spec.replace("seeds: 5 ", "seeds: [10, 11, 12, 13, 14] "))
    run_cli("run", "other-seeds.yaml", "-r", "v3", "--no-report", cwd=root, check=True)
    data = json.loads(run_cli("diff", "v1", "v3", "--json", "-m", "score", cwd=root, check=True).stdout)
    assert "seeds: 5 -> [10, 11, 12, 13, 14]" in data["spec"]
    (change,) = [c for c in data["changes"] if (c["task"], c["config"]) == ("easy", "slow")]
    before, after = _scores(root / "v1", "easy", "slow"), _scores(root / "v3", "easy", "slow")
    assert change["paired"] is False
    welch = sps.ttest_ind(list(after.values()), list(before.values()), equal_var=False)
    assert change["p_value"] == pytest.approx(welch.pvalue)
    # The note analyze gives the same comparison: no seed is shared, so the runs are not paired.
    assert "easy/slow/score: fewer than 2 shared seeds; compared unpaired" in change["warnings"]


def test_two_versions_in_one_folder_are_told_apart_by_version_id(versions):
    root = versions
    one = root / "one"
    run_cli("run", "benchlab.yaml", "-r", "one", "--no-report", cwd=root, check=True)
    # The next version changes the code and a config's params (so its runs are new runs).
    spec = root / "benchlab.yaml"
    spec.write_text(spec.read_text().replace("params: {lr: 0.1}", "params: {lr: 0.12}"))
    (root / "train.py").write_text((root / "train.py").read_text() + "# v3\n")
    run_cli("run", "benchlab.yaml", "-r", "one", "--no-report", "--allow-changed", cwd=root, check=True)
    with sqlite3.connect(one / "benchlab.db") as db:
        (value,) = db.execute("SELECT value FROM meta WHERE key = 'versions'").fetchone()
    first, second = (v["id"] for v in json.loads(value))  # oldest first
    data = json.loads(run_cli("diff", f"one@{first[:6]}", f"one@{second[:6]}", "--json", cwd=root,
                              check=True).stdout)
    assert any(line.startswith("uncommitted diff: none -> ") for line in data["code"])
    # slow's runs are the same runs in both versions: only fast (new params) is compared, and
    # its runs of the first version are read from the ledger's kept runs.
    assert {c["config"] for c in data["changes"]} == {"fast"}
    assert "configs.fast.params.lr: 0.1 -> 0.12" in data["spec"]
    bad = run_cli("diff", "one@zzzz", "one", cwd=root)
    assert bad.returncode == 2 and "'zzzz' matches no benchmark version of" in bad.stderr


def _masked(line: str) -> str:
    return re.sub(r"[0-9a-f]{10}", "<commit>", line)


def test_history_doc_shows_this_diff(versions):
    """docs/history.md's example is this very diff (commit hashes aside)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "history.md").read_text()
    block = next(b for b in re.findall(r"```markdown\n(.*?)```", text, re.S) if b.startswith("# benchlab diff"))
    real = {_masked(line) for line in run_cli("diff", "v1", "v2", cwd=versions).stdout.splitlines()}
    for line in block.splitlines():
        assert _masked(line) in real, line


def test_a_constant_shift_on_five_seeds_is_undetermined_never_no_change(versions):
    """Every seed's loss grows by the same 0.25: the paired differences have no spread, so the
    t-test is undefined; the Wilcoxon signed-rank test is not, but with 5 seeds its smallest p is
    2/2⁵ = 0.0625, above alpha. The diff must not call that "no detectable change"."""
    root = versions
    train, spec = root / "train.py", root / "benchlab.yaml"
    kept = train.read_text(), spec.read_text()  # other tests of the module change both
    v1 = _git(root, "log", "--format=%H").split()[-1]
    try:
        spec.write_text(_git(root, "show", f"{v1}:benchlab.yaml"))
        train.write_text(_git(root, "show", f"{v1}:train.py").replace(
            PLANT[0], "loss += 0.25\n" + PLANT[0]))
        run_cli("run", "benchlab.yaml", "-r", "shifted", "--no-report", "--allow-changed", cwd=root, check=True)
    finally:
        train.write_text(kept[0])
        spec.write_text(kept[1])
    gate = run_cli("diff", "v1", "shifted", "--fail-on-regression", "--json", "-m", "score", cwd=root)
    data = json.loads(gate.stdout)
    assert gate.returncode == 0 and f"warning: {len(data['changes'])} change(s) undetermined" in gate.stderr
    for c in data["changes"]:
        before, after = _scores(root / "v1", c["task"], c["config"]), _scores(root / "shifted", c["task"], c["config"])
        d = np.array([after[s] - before[s] for s in sorted(before)])
        assert d == pytest.approx(np.full(len(d), -0.25))  # the same shift on every seed
        assert c["verdict"] == "undetermined", c
        assert c["p_value"] == pytest.approx(sps.binomtest(5, 5).pvalue), c  # 5 of 5 one way
        assert any("all 5 paired differences equal" in w for w in c["warnings"]), c["warnings"]
        assert any("too few seeds to decide" in w for w in c["warnings"]), c["warnings"]
    assert data["counts"] == {"regression": 0, "improvement": 0, "no detectable change": 0,
                              "undetermined": len(data["changes"])}
    md = run_cli("diff", "v1", "shifted", "-m", "score", cwd=root, check=True).stdout
    flat = " ".join(md.split())
    assert f"0 without a detectable change, **{len(data['changes'])} undetermined**" in flat
    assert "## Undetermined (" in md and "| ? |" in md
