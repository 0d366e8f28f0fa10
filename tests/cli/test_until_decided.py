"""`benchlab run --until-decided`: seeds added only to open comparisons, resumable after kill -9."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from benchlab_testing import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "chaos"))
from chaos_kit import check_ledger, completed, finish, start, wait_for  # noqa: E402

# Each (config, task, seed) draws its noise from its own named stream: reruns give the same score.
NOISY = '''
import json, os, random, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
seed = int(os.environ["BENCHLAB_SEED"])
if seed >= int(args.get("slow_from", 10**9)):
    time.sleep(float(args["slow"]))
rng = random.Random(f"{args['cfg']}-{args['task']}-{seed}")
score = float(args["effect"]) + rng.gauss(0, float(args["noise"]))
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"score": score}, f)
'''

SPEC = """
name: seq
tasks:
  - name: t1
configs:
  - name: base
    params: {effect: 0}
  - name: far
    params: {effect: 10}
  - name: same
    params: {effect: 0}
seeds: 4
command: python run.py cfg={config} task={task} effect={effect} noise=0.5 SLOW
metrics:
  primary: {name: score, goal: max}
baseline: base
"""


def _score(cfg: str, effect: float, seed: int) -> float:
    return effect + random.Random(f"{cfg}-t1-{seed}").gauss(0, 0.5)


def _seeds_run(db: Path) -> dict[str, list[int]]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT config, seed FROM runs WHERE status = 'completed' ORDER BY seed").fetchall()
    finally:
        con.close()
    out: dict[str, list[int]] = {}
    for cfg, seed in rows:
        out.setdefault(cfg, []).append(seed)
    return out


def _bench(make_bench, slow: str = "") -> object:
    return make_bench(SPEC.replace("SLOW", slow), script=NOISY)


def test_until_decided_adds_seeds_only_where_the_comparison_is_open(make_bench) -> None:
    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "12",
                     "--batch", "4", "--json", "--no-report", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    pairs = {p["config"]: p for p in out["pairs"]}
    assert out["design"]["looks"] == [4, 8, 12]
    # An effect of 10 noise sds is decided at the first look; it gets no seed beyond the spec's.
    assert pairs["far"]["status"] == "better" and pairs["far"]["seeds"] == 4
    assert "better than the baseline" in pairs["far"]["reason"]
    # The same distribution as the baseline, recomputed here look by look with the published boundaries.
    bounds = out["design"]["bounds"]
    expected_status, expected_seeds = "max-seeds", 12
    for size, bound in zip([4, 8, 12], bounds, strict=True):
        diffs = np.array([_score("same", 0, s) - _score("base", 0, s) for s in range(size)])
        half = stats.t.ppf(stats.norm.cdf(bound), size - 1) * diffs.std(ddof=1) / np.sqrt(size)
        if diffs.mean() - half > 0 or diffs.mean() + half < 0:
            expected_status, expected_seeds = "decided", size
            break
    assert (pairs["same"]["status"], pairs["same"]["seeds"]) == (expected_status, expected_seeds)
    assert abs(pairs["same"]["mean_diff"] - diffs.mean()) < 1e-9
    # The ledger: the baseline got every seed the open candidate needed, the decided one none more.
    seeds = _seeds_run(bench.results / "benchlab.db")
    assert seeds["far"] == [0, 1, 2, 3]
    assert seeds["same"] == list(range(12)) and seeds["base"] == list(range(12))
    # The closing lines name every pair, its seeds and why it stopped (on stderr next to --json).
    assert "undecided at --max-seeds" in proc.stderr and "decided: better than the baseline" in proc.stderr
    # `benchlab status` says the same, as text and as JSON.
    shown = bench.cli("status", str(bench.results))
    assert shown.returncode == 0, shown.stderr
    assert "t1/far: 4 seeds — decided: better than the baseline" in shown.stdout
    assert f"t1/same: {pairs['same']['seeds']} seeds — {pairs['same']['reason']}" in shown.stdout
    status = json.loads(bench.cli("status", str(bench.results), "--json").stdout)
    assert {p["config"]: p["seeds"] for p in status["sequential"]["pairs"]} == {"far": 4, "same": 12}
    # Nothing is left to run for this design; a fresh folder would start with the spec's 12 runs.
    args = ["run", str(bench.spec), "--until-decided", "--max-seeds", "12", "--batch", "4", "--dry-run"]
    assert "0 runs would run" in bench.cli(*args, "-r", str(bench.results)).stdout
    assert "12 runs would run" in bench.cli(*args, "-r", str(bench.root / "fresh")).stdout
    # The report counts each config's seeds against what its pair was given, not the spec's 4.
    assert bench.cli("report", str(bench.results)).returncode == 0
    header = (bench.results / "BENCHMARK_REPORT.md").read_text()
    assert "**Seeds per config:** base 12/12, far 4/4, same 12/12 (seeds 0–11; seeds added until decided)" in header
    # The comparisons' fixed-sample p-values say that they ignore the adaptive stopping.
    assert "these p-values and intervals are fixed-sample ones, which ignore that adaptive stopping" in header


def test_an_equivalence_margin_stops_a_pair_that_is_clearly_within_it(make_bench) -> None:
    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "12",
                     "--batch", "4", "--margin", "10", "--json", "--no-report", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    pairs = {p["config"]: p for p in json.loads(proc.stdout)["pairs"]}
    # Differences of sd ≈ 0.7 against a margin of ±10: the repeated interval (at 4 seeds and
    # α / 2, the two pairs sharing α, about ±7.7 around the mean) is inside it at once.
    assert pairs["same"]["status"] == "equivalent" and pairs["same"]["seeds"] == 4
    lo, hi = pairs["same"]["rci"]
    assert -10 < lo < hi < 10


def test_sequential_options_without_until_decided_are_a_usage_error(make_bench) -> None:
    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--max-seeds", "12")
    assert proc.returncode == 2
    assert "--max-seeds only apply with --until-decided" in proc.stderr
    assert "Traceback" not in proc.stderr and not bench.results.exists()


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_an_unknown_spending_is_refused_before_anything_is_written(make_bench, dry_run) -> None:
    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided",
                     "--spending", "haybittle", *dry_run)
    assert proc.returncode == 2
    assert "--spending haybittle: expected one of obrien-fleming, pocock" in proc.stderr
    assert "Traceback" not in proc.stderr and not bench.results.exists()


def test_until_decided_without_a_baseline_says_what_to_add(make_bench) -> None:
    bench = make_bench(SPEC.replace("SLOW", "").replace("baseline: base\n", ""), script=NOISY)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided")
    assert proc.returncode == 2
    assert "baseline: <config>" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_kill_9_during_a_later_look_resumes_to_the_same_decisions(make_bench, tmp_path: Path) -> None:
    # Seeds from 4 on are slow, so the kill lands while the second look's runs are in flight.
    bench = _bench(make_bench, slow="slow_from=4 slow=0.6")
    args = ["run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "12",
            "--batch", "4", "--no-report", "-j", "2"]
    db = bench.results / "benchlab.db"
    proc = start(bench.root, *args)
    # The spec's 12 runs, then at least one run of the second look: the design is mid-way.
    wait_for(lambda: completed(db) >= 14, within=90, proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    done_before = completed(db)
    assert 14 <= done_before < 28  # killed before the design was through
    again = start(bench.root, *args, "--json")
    code, out, err = finish(again, timeout=180)
    assert code == 0, err
    pairs = {p["config"]: (p["status"], p["seeds"]) for p in json.loads(out)["pairs"]}
    # The same design run without interruption, in a folder of its own.
    fresh = run_cli(*[a if a != str(bench.results) else str(tmp_path / "fresh") for a in args], "--json",
                    cwd=bench.root, timeout=180)
    assert fresh.returncode == 0, fresh.stderr
    assert pairs == {p["config"]: (p["status"], p["seeds"]) for p in json.loads(fresh.stdout)["pairs"]}
    # Nothing lost, nothing run twice: each run completed once, the same runs as the fresh folder.
    statuses = check_ledger(db)
    assert statuses == check_ledger(tmp_path / "fresh" / "benchlab.db")
    assert _seeds_run(db) == _seeds_run(tmp_path / "fresh" / "benchlab.db")


def test_a_plain_run_after_until_decided_keeps_the_added_seeds_in_every_claim(make_bench) -> None:
    from benchlab import results as results_table

    bench = _bench(make_bench)
    seq = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "8",
                    "--batch", "4", "--json", "--no-report", "-j", "2")
    assert seq.returncode == 0, seq.stderr
    pairs = {p["config"]: p for p in json.loads(seq.stdout)["pairs"]}
    assert (pairs["far"]["seeds"], pairs["same"]["seeds"]) == (4, 8)  # "same" took the second look
    # The spec still names 4 seeds; the plain run must not take the other 4 of base and same away.
    plain = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--no-report", "-j", "2")
    assert plain.returncode == 0, plain.stderr
    assert "keeping the 8 finished runs that `run --until-decided` added" in plain.stdout
    table = results_table.load(bench.results)
    seeds = {c: sorted(set(g["seed"])) for c, g in table.groupby("config")}
    assert seeds == {"base": list(range(8)), "far": list(range(4)), "same": list(range(8))}
    # Every claim counts them: the comparison pairs 8 seeds, and its mean difference is theirs.
    comp = bench.cli("compare", str(bench.results), "--candidate", "same", "--reps", "200", "--json")
    assert comp.returncode == 0, comp.stderr
    (row,) = json.loads(comp.stdout)["comparisons"]
    assert row["n"] == 8 and (row["baseline_seeds"], row["candidate_seeds"]) == ("8/8", "8/8")
    diffs = [_score("same", 0, s) - _score("base", 0, s) for s in range(8)]
    assert row["mean_diff"] == pytest.approx(np.mean(diffs), abs=1e-9)
    # The report still says how many seeds each pair got and why it stopped.
    assert bench.cli("report", str(bench.results), "--no-plots", "--no-html").returncode == 0
    header = (bench.results / "BENCHMARK_REPORT.md").read_text().split("## Summary")[0]
    assert "**Seeds per config:** base 8/8, far 4/4, same 8/8" in header
    assert (f"t1/far 4 seeds ({pairs['far']['reason']}); t1/same 8 seeds ({pairs['same']['reason']})"
            in header)
    assert "**Seeds until decided:** α = 0.05 over 2 pairs (Bonferroni)" in header


def test_the_library_sweep_plans_as_the_cli_after_until_decided(make_bench) -> None:
    from benchlab import results as results_table
    from benchlab.execute.sweep import Sweep, sweep_plan
    from benchlab.spec import load_spec

    bench = _bench(make_bench)
    seq = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "8",
                    "--batch", "4", "--json", "--no-report", "-j", "2")
    assert seq.returncode == 0, seq.stderr
    spec = load_spec(bench.spec)
    dry = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--dry-run")
    assert dry.returncode == 0 and "0 runs would run" in dry.stdout
    plan = sweep_plan(spec, bench.results)
    assert plan.kept == 8 and len(plan.runs) == 3 * 4 + 8
    result = Sweep(spec, bench.results, jobs=2).run()  # a Python user's plain sweep of the same spec
    assert result.exit_code == 0
    table = results_table.load(bench.results)
    seeds = {c: sorted(set(g["seed"])) for c, g in table.groupby("config")}
    assert seeds == {"base": list(range(8)), "far": list(range(4)), "same": list(range(8))}


def test_a_python_caller_runs_until_decided_as_the_cli_does(make_bench) -> None:
    from benchlab.execute.sequential import make_design
    from benchlab.execute.sweep import sweep_plan
    from benchlab.execute.until_decided import run_until_decided
    from benchlab.spec import load_spec

    bench = _bench(make_bench)
    spec = load_spec(bench.spec)
    design = make_design(spec, max_seeds=8, batch=4)  # what --max-seeds 8 --batch 4 asks
    looks: list[int] = []

    def run_look(sweep, state):  # the hook runs every look's sweep
        result = sweep.run()
        looks.append(result.total)
        return result

    outcome = run_until_decided(spec, bench.results, design, run_look=run_look, jobs=2)
    assert outcome.exit_code == 0 and not outcome.stopped
    # Two looks: the spec's 3 × 4 runs, then 4 more seeds of the open pair and of its baseline.
    assert looks == [12, 20]
    pairs = {p["config"]: p for p in outcome.to_json()["pairs"]}
    assert (pairs["far"]["status"], pairs["far"]["seeds"]) == ("better", 4)
    assert pairs["same"]["seeds"] == 8
    diffs = [_score("same", 0, s) - _score("base", 0, s) for s in range(8)]
    assert pairs["same"]["mean_diff"] == pytest.approx(np.mean(diffs), abs=1e-9)
    assert _seeds_run(bench.results / "benchlab.db") == {"base": list(range(8)), "far": list(range(4)),
                                                          "same": list(range(8))}
    # The ledger records the decisions as the command line's loop did: `status` shows them, and a
    # later plain sweep keeps the added seeds.
    status = json.loads(bench.cli("status", str(bench.results), "--json").stdout)
    assert status["sequential"]["pairs"] == outcome.to_json()["pairs"]
    assert sweep_plan(spec, bench.results).kept == 8
    # The command line, asked the same design afterwards, finds every pair decided: nothing to run.
    dry = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "8",
                    "--batch", "4", "--dry-run")
    assert dry.returncode == 0 and "0 runs would run" in dry.stdout


def test_a_rebuilt_ledger_keeps_the_design_the_versions_and_the_hosts(make_bench) -> None:
    from benchlab.ledger import Store

    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "8",
                     "--batch", "4", "--no-report", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    db = bench.results / "benchlab.db"
    with Store(db) as store:
        before = (store.versions(), store.hardware(), store.sequential())
    assert before[0] and before[1] and before[2]
    # Rebuilt from the run folders while the old ledger can still be read: nothing of it is lost.
    assert bench.cli("collect", str(bench.results), "--rebuild").returncode == 0
    with Store(db) as store:
        assert (store.versions(), store.hardware(), store.sequential()) == before
    assert "t1/far: 4 seeds — decided: better than the baseline" in bench.cli("status", str(bench.results)).stdout
    # The seeds the design added are still the plan's: a plain run has nothing to do.
    assert "0 runs would run" in bench.cli("run", str(bench.spec), "-r", str(bench.results), "--dry-run").stdout
    # With the ledger lost, the versions come back from versions/ (what changed between them
    # was in the ledger only); the design and the hosts were in the ledger only, and are gone.
    for path in bench.results.glob("benchlab.db*"):
        path.unlink()
    assert bench.cli("collect", str(bench.results), "--rebuild").returncode == 0
    with Store(db) as store:
        assert [v.id for v in store.versions()] == [v.id for v in before[0]]
        assert store.sequential() is None and store.hardware() == {}


def test_a_damaged_ledger_record_gets_one_line_and_a_rebuild_keeps_the_records_it_can_read(make_bench) -> None:
    from benchlab.ledger import Store

    bench = _bench(make_bench)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--until-decided", "--max-seeds", "8",
                     "--batch", "4", "--no-report", "-j", "2")
    assert proc.returncode == 0, proc.stderr
    db = bench.results / "benchlab.db"
    with Store(db) as store:
        hosts, design, versions = store.hardware(), store.sequential(), store.versions()
    # A hand edit leaves a versions record no release wrote.
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = ? WHERE key = 'versions'", ('[{"nope": 1}]',))
    con.commit()
    con.close()
    proc = bench.cli("report", str(bench.results))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in said
    assert f"{db}: the ledger's 'versions' record cannot be read (KeyError: 'id')" in said
    assert f"benchlab collect --rebuild {bench.results}" in said
    # The way out it names works, and keeps what could still be read: the hosts and the design;
    # the versions come back from versions/.
    assert bench.cli("collect", str(bench.results), "--rebuild").returncode == 0
    with Store(db) as store:
        assert (store.hardware(), store.sequential()) == (hosts, design)
        assert [v.id for v in store.versions()] == [v.id for v in versions]
    assert bench.cli("report", str(bench.results)).returncode == 0
