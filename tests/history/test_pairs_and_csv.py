"""`analyze --pairs` (explicit control/candidate pairs of runs, by id or name) and `--csv FILE` on
compare and analyze; statistics checked against scipy."""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import pytest
from scipy import stats as sps

from benchlab_testing import run_cli

# The score depends on the config's extra differently per seed, so differences have a spread.
SCRIPT = """
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
seed = int(os.environ["BENCHLAB_SEED"])
score = float(args["base"]) + seed / 100 + [0.013, -0.02, 0.007, 0.031][seed] * float(args["extra"])
json.dump({"score": score, "time": 1.0 + seed * float(args["extra"])},
          open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

SPEC = """
name: pairs
tasks: [{name: t1, params: {base: 0.5}}]
configs: [{name: a, params: {extra: 1}}, {name: b, params: {extra: 2, base: 0.6}}]
seeds: 4
command: python run.py base={base} extra={extra}
metrics: {primary: score}
baseline: a
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pairs")
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    return root / "results" / "pairs"


def _runs(results: Path) -> dict[str, tuple[str, float]]:
    """name -> (run id, score), read from the run folders."""
    out = {}
    for run in (results / "runs").iterdir():
        cfg = dict(line.split(": ", 1) for line in (run / "config.yaml").read_text().splitlines()
                   if line.startswith(("task:", "config:", "seed:")))
        name = f"{cfg['task']}/{cfg['config']}/s{cfg['seed']}"
        out[name] = (run.name, json.loads((run / "metrics.json").read_text())["score"])
    return out


def test_explicit_pairs_by_name_and_by_id_are_compared_row_by_row(results, tmp_path):
    runs = _runs(results)
    # Crossed pairs (a's seed i against b's seed 3 - i): not what seed pairing would do.
    pairs = [(f"t1/a/s{i}", f"t1/b/s{3 - i}") for i in range(4)]
    by_name = tmp_path / "pairs.csv"
    by_name.write_text("control,candidate\n" + "".join(f"{a},{b}\n" for a, b in pairs))
    by_id = tmp_path / "ids.csv"
    by_id.write_text("baseline,candidate\n" + "".join(f"{runs[a][0]},{runs[b][0]}\n" for a, b in pairs))
    control = [runs[a][1] for a, _ in pairs]
    cand = [runs[b][1] for _, b in pairs]
    d = [y - x for x, y in zip(control, cand, strict=True)]
    lo, hi = sps.t.interval(0.95, 3, loc=sum(d) / 4, scale=sps.sem(d))
    for path in (by_name, by_id):
        out = json.loads(run_cli("analyze", str(results), "--pairs", str(path), "--metric", "score", "--json",
                                 check=True).stdout)
        (row,) = out["pairs"]
        assert row["n"] == 4 and row["mean_diff"] == pytest.approx(sum(d) / 4)
        assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((lo, hi))
        assert row["t_pvalue"] == pytest.approx(sps.ttest_rel(cand, control).pvalue)
    written = tmp_path / "out.csv"
    run_cli("analyze", str(results), "--pairs", str(by_name), "--csv", str(written), check=True)
    rows = {r["metric"]: r for r in csv.DictReader(written.read_text().splitlines())}
    assert set(rows) == {"score", "time"}
    assert float(rows["score"]["mean_diff"]) == pytest.approx(sum(d) / 4)


def test_a_pair_naming_no_run_is_refused(results, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("control,candidate\nt1/a/s0,t1/zz/s0\n")
    proc = run_cli("analyze", str(results), "--pairs", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--pairs: no completed run named t1/zz/s0" in proc.stderr
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("left,right\nx,y\n")
    proc = run_cli("analyze", str(results), "--pairs", str(wrong))
    assert proc.returncode == 2 and "expected columns control (or baseline) and candidate" in proc.stderr


def test_compare_and_analyze_write_their_comparisons_table_as_csv(results, tmp_path):
    out = tmp_path / "cmp.csv"
    shown = json.loads(run_cli("compare", str(results), "--candidate", "b", "--json", "--csv", str(out),
                               check=True).stdout)
    rows = list(csv.DictReader(out.read_text().splitlines()))
    (expected,) = shown["comparisons"]
    assert len(rows) == 1
    for key in ("task", "metric", "baseline", "candidate"):
        assert rows[0][key] == str(expected[key])
    for key in ("mean_diff", "diff_ci_low", "diff_ci_high", "t_pvalue", "p_holm"):
        assert float(rows[0][key]) == pytest.approx(expected[key])
    # analyze on a long-format CSV, the same way.
    table = tmp_path / "long.csv"
    runs = _runs(results)
    table.write_text("task,config,seed,value\n" + "".join(
        f"{n.split('/')[0]},{n.split('/')[1]},{n.split('/')[2][1:]},{v}\n" for n, (_, v) in sorted(runs.items())))
    out2 = tmp_path / "an.csv"
    run_cli("analyze", str(table), "--baseline", "a", "--csv", str(out2), check=True)
    (row,) = list(csv.DictReader(out2.read_text().splitlines()))
    a = [runs[f"t1/a/s{i}"][1] for i in range(4)]
    b = [runs[f"t1/b/s{i}"][1] for i in range(4)]
    assert float(row["t_pvalue"]) == pytest.approx(sps.ttest_rel(b, a).pvalue)
