"""`benchlab compare`, `variance` and `power` on a results folder written by `benchlab run`."""

import json

import pytest
from scipy import stats as sps

SPEC = """
name: paired
tasks:
  - name: easy
    params: {base: 0.5}
    reference: {low: 0.0, high: 1.0}
  - name: hard
    params: {base: 0.2}
    reference: {low: 0.0, high: 0.5}
configs:
  - name: old
    params: {gain: 0.0}
  - name: new
    params: {gain: 0.05}
seeds: 4
command: python run.py base={base} gain={gain}
metrics:
  primary: {name: score, goal: max}
baseline: old
"""

# score = base + gain + noise(seed); one logged curve per run rising to the score.
SCRIPT = '''
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
seed = int(os.environ["BENCHLAB_SEED"])
noise = [0.013, -0.021, 0.008, -0.004][seed % 4] * (2 if float(args["gain"]) else 1)
score = float(args["base"]) + float(args["gain"]) + noise
run_dir = os.environ["BENCHLAB_RUN_DIR"]
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"score": score}, f)
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for step in range(5):
        f.write(json.dumps({"step": step * 100, "score": score * step / 4}) + "\\n")
'''


@pytest.mark.slow
def test_compare_variance_and_power_read_a_results_folder(make_bench):
    bench = make_bench(SPEC, script=SCRIPT)
    bench.cli("run", str(bench.spec), "--results", str(bench.results), "-j", "2", check=True)

    res = bench.cli("compare", str(bench.results), "--candidate", "new", "--reps", "2000",
                    "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    comps = {c["task"]: c for c in out["comparisons"]}
    assert set(comps) == {"easy", "hard"}
    seeds = range(4)
    noise = [0.013, -0.021, 0.008, -0.004]
    old = [0.5 + noise[s % 4] for s in seeds]
    new = [0.55 + 2 * noise[s % 4] for s in seeds]
    easy = comps["easy"]
    assert easy["baseline"] == "old" and easy["paired"] is True and easy["n"] == 4
    assert easy["mean_diff"] == pytest.approx(0.05 + sum(noise) / 4)
    assert easy["t_pvalue"] == pytest.approx(sps.ttest_rel(new, old).pvalue)
    # Holm over the two comparisons of this report: the smaller p doubled, the larger
    # kept but never below the doubled smaller one.
    p_easy, p_hard = easy["t_pvalue"], comps["hard"]["t_pvalue"]
    expected = 2 * p_easy if p_easy <= p_hard else max(p_easy, 2 * p_hard)
    assert easy["p_holm"] == pytest.approx(min(1.0, expected))
    # The spec's references normalise the aggregate: easy as is, hard divided by 0.5.
    agg = {a["config"]: a for a in out["aggregate"]}
    assert agg["old"]["mean"] == pytest.approx((sum(old) / 4 + (sum(old) / 4 - 0.3) / 0.5) / 2)
    assert not any("reference" in w for w in out["warnings"])

    auc = json.loads(bench.cli("compare", str(bench.results), "--candidate", "new",
                               "--summary", "auc", "--reps", "500", "--json").stdout)
    # A straight line from 0 to the score averages half the score.
    assert auc["comparisons"][0]["mean_diff"] == pytest.approx(easy["mean_diff"] / 2)

    res = bench.cli("variance", str(bench.results), "--config", "old", "--json")
    assert res.returncode == 0, res.stderr
    var = json.loads(res.stdout)
    assert var["metric"] == "score" and var["tasks"][0]["auc"]["n"] == [1, 2, 3, 4]

    res = bench.cli("power", str(bench.results), "--candidate", "new", "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["task"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["easy"]["pilot_pairs"] == 4 and rows["easy"]["seeds"] >= 2

    res = bench.cli("compare", str(bench.results), "--candidate", "newer")
    assert res.returncode == 2 and "no config 'newer'; configs are" in res.stderr
