import json
from pathlib import Path

import pytest

from benchlab_testing import run_cli

CSV = """task,config,seed,value
cartpole,ppo,0,480
cartpole,ppo,1,495
cartpole,ppo,2,470
cartpole,ppo,3,490
cartpole,dqn,0,410
cartpole,dqn,1,430
cartpole,dqn,2,445
cartpole,dqn,3,400
pong,ppo,0,18.5
pong,ppo,1,19.0
pong,ppo,2,17.5
pong,ppo,3,18.0
pong,dqn,0,19.5
pong,dqn,1,20.0
pong,dqn,2,19.0
pong,dqn,3,20.5
"""


@pytest.fixture
def scores(tmp_path: Path) -> Path:
    path = tmp_path / "scores.csv"
    path.write_text(CSV)
    return path


def test_analyze_json_has_exactly_the_documented_sections(scores, tmp_path):
    res = run_cli("analyze", str(scores), "--baseline", "dqn", "--reps", "1000", "--json",
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert list(out) == ["summary", "comparisons", "aggregate", "warnings", "methods",
                         "normalization"]
    assert {(c["task"], c["candidate"]) for c in out["comparisons"]} == {
        ("cartpole", "ppo"), ("pong", "ppo")}
    cartpole = next(c for c in out["comparisons"] if c["task"] == "cartpole")
    assert cartpole["mean_diff"] == pytest.approx((1935 - 1685) / 4)


def test_analyze_prints_tables_without_json(scores, tmp_path):
    res = run_cli("analyze", str(scores), "--baseline", "dqn", "--reps", "500",
                       cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Per task and config" in res.stdout
    assert "Candidate vs baseline dqn" in res.stdout
    assert "Across tasks" in res.stdout
    assert "warning: aggregate: raw scores (no reference scores); task scales differ by" in res.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("task,config,value\na,b,1\n", "missing column(s) seed"),
        ("task,config,seed,value\na,b,0,high\n",
         "column 'value' must hold numbers; row 1 has 'high'"),
        ("", "the file is empty"),
    ],
)
def test_bad_csv_is_one_message_naming_file_and_column_with_exit_2(
    tmp_path, content, expected
):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    res = run_cli("analyze", str(bad), cwd=tmp_path)
    assert res.returncode == 2
    assert str(bad) in res.stderr and expected in res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


def test_unknown_baseline_and_missing_file_exit_2(scores, tmp_path):
    res = run_cli("analyze", str(scores), "--baseline", "sac", cwd=tmp_path)
    assert res.returncode == 2
    assert "no baseline 'sac'; configs are ppo, dqn" in res.stderr
    res = run_cli("analyze", str(tmp_path / "nope.csv"), cwd=tmp_path)
    assert res.returncode == 2 and "nope.csv: no such file" in res.stderr


def test_a_results_folder_given_to_analyze_is_named_a_folder_with_its_table(tmp_path):
    # A folder is not "no such file": the message says what it is, and points at the run table
    # a results folder holds.
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "results.csv").write_text("task,config,seed,value\nt,a,0,1.0\n")
    res = run_cli("analyze", str(folder), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{folder}: is a folder; expected a long-format CSV; its table of runs is {folder / 'results.csv'}" in (
        " ".join(res.stderr.split()))
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("analyze", str(empty), cwd=tmp_path)
    assert res.returncode == 2 and f"{empty}: is a folder; expected a long-format CSV" in " ".join(res.stderr.split())


def test_compare_on_a_csv_compares_one_candidate(scores, tmp_path):
    res = run_cli("compare", str(scores), "--baseline", "dqn", "--candidate", "ppo",
                       "--reps", "500", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert len(out["comparisons"]) == 2 and out["comparisons"][0]["paired"] is True


def test_variance_reports_cv_against_seeds_and_smallest_n(scores, tmp_path):
    res = run_cli("variance", str(scores), "--config", "ppo", "--threshold", "0.016",
                       "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    cartpole = out["tasks"][0]
    assert cartpole["final"]["n"] == [1, 2, 3, 4]
    # ppo on cartpole: sd (ddof=1) 11.087, mean 483.75 -> CV(N) = 0.022919 / sqrt(N):
    # 0.0162 at N=2 (above 0.016), 0.0132 at N=3. With ddof=0 it would have been N=2.
    assert cartpole["final"]["cv"][1] == pytest.approx(11.0868 / 483.75 / 2**0.5, rel=1e-4)
    assert cartpole["final"]["smallest_n"] == 3
    assert cartpole["auc"] is None
    assert any("no learning curves" in w for w in out["warnings"])


def test_power_with_a_given_effect(tmp_path):
    res = run_cli("power", "--effect", "1.0", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    # d_z = 1, alpha 0.05, power 0.8: 10 pairs (power 0.803; 9 pairs give 0.748).
    assert json.loads(res.stdout)["rows"][0]["seeds"] == 10


def test_power_from_pilot_runs(scores, tmp_path):
    res = run_cli("power", str(scores), "--baseline", "dqn", "--candidate", "ppo",
                       "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = {r["task"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["cartpole"]["pilot_pairs"] == 4 and rows["cartpole"]["seeds"] >= 2


@pytest.mark.parametrize(("seed", "shown"), [("1.5", "1.5"), ("best", "'best'")])
def test_a_seed_that_is_not_an_integer_is_refused_naming_the_row(tmp_path, seed, shown):
    bad = tmp_path / "scores.csv"
    bad.write_text(CSV.replace("pong,dqn,2,19.0", f"pong,dqn,{seed},19.0"))
    res = run_cli("analyze", str(bad), cwd=tmp_path)
    assert res.returncode == 2
    assert f"column 'seed' must hold integers; row 15 has {shown}" in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_seeds_written_as_3_and_3_point_0_are_the_same_seed(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text(CSV.replace("cartpole,dqn,3,400", "cartpole,dqn,3.0,400"))
    res = run_cli("analyze", str(path), "--baseline", "dqn", "--reps", "200", "--json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["comparisons"][0]["n"] == 4


def test_power_says_when_a_pilot_pair_with_a_nan_was_dropped(tmp_path):
    rows = ["task,config,seed,value"]
    base = [10.0, 11.0, 9.5, 10.5, 10.2, 9.8]
    cand = [11.0, 11.9, 10.1, float("nan"), 11.4, 10.3]
    rows += [f"t,a,{s},{v}" for s, v in enumerate(base)]
    rows += [f"t,b,{s},{'' if v != v else v}" for s, v in enumerate(cand)]
    (tmp_path / "pilot.csv").write_text("\n".join(rows) + "\n")
    res = run_cli("power", "pilot.csv", "--baseline", "a", "--candidate", "b", "--json",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    row = out["rows"][0]
    assert row["pilot_pairs"] == 5
    keep = [0, 1, 2, 4, 5]
    d = [cand[i] - base[i] for i in keep]
    mean = sum(d) / 5
    sd = (sum((x - mean) ** 2 for x in d) / 4) ** 0.5  # ddof = 1, by hand
    assert row["effect"] == pytest.approx(mean / sd)
    assert any("1 pilot pair(s) with a NaN dropped (seed(s) 3); the effect is estimated from 5"
               in w for w in out["warnings"])


def test_analyze_json_names_every_interval_method(scores, tmp_path):
    res = run_cli("analyze", str(scores), "--baseline", "dqn", "--reps", "300", "--json",
                  cwd=tmp_path)
    methods = json.loads(res.stdout)["methods"]
    assert methods["ci"] == "student-t"
    assert methods["boot_ci"] == methods["diff_boot_ci"] == "bootstrap-t (studentized)"
    assert methods["diff_ci"].startswith("student-t")
    assert methods["aggregate_ci"].startswith("stratified bootstrap")
    assert "exact" in methods["wilcoxon"] and "exact" in methods["mannwhitney"]


def test_the_printed_table_names_the_bootstrap_interval(scores, tmp_path):
    res = run_cli("analyze", str(scores), "--reps", "300", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "bootstrap-t" in res.stdout
    res = run_cli("analyze", str(scores), "--reps", "300", "--method", "percentile", cwd=tmp_path)
    assert "CI (percentile)" in res.stdout
