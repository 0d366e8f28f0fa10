"""A metric the spec named wrong costs no retraining, and a run folder holds its own metrics."""

from __future__ import annotations

import json
import sqlite3

import pytest

from benchlab.collect import Collected

# Writes score and fit_time, and counts its own launches in launches.txt next to the spec.
SCRIPT = '''
import json, os, sys
with open("launches.txt", "a") as f:
    f.write(os.environ["BENCHLAB_RUN_ID"] + "\\n")
seed = int(os.environ["BENCHLAB_SEED"])
if "crash" in sys.argv and seed == 2:
    sys.exit(1)
with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
    json.dump({"score": 0.5 + seed / 100, "fit_time": 1.0 + seed}, f)
'''

SPEC = """
name: again
tasks: [{name: t}]
configs: [{name: a}, {name: b, params: {extra: crash}}]
seeds: 3
command: python run.py {extra}
variables: {extra: ""}
metrics:
  primary: {name: accuracy, goal: max}
  secondary: [{name: fit_time, goal: min}]
baseline: a
retries: 2
"""


def _attempts(results) -> list[tuple[str, int, str, str | None, str | None]]:
    with sqlite3.connect(results / "benchlab.db") as db:
        return db.execute("SELECT r.name, a.number, a.status, a.failure_class, a.error FROM attempts a "
                          "JOIN runs r USING (run_id) ORDER BY r.name, a.number").fetchall()


def test_a_missing_metric_names_what_the_run_reported_and_is_not_retried(make_bench):
    bench = make_bench(SPEC.replace("params: {extra: crash}", "params: {}"), script=SCRIPT)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    assert proc.returncode == 1
    assert "completes the runs without training again" in proc.stdout  # the way out, said at the end
    attempts = _attempts(bench.results)
    assert len(attempts) == 6  # one attempt each: training again would miss the metric again
    assert {a[4] for a in attempts} == {
        "metric 'accuracy' was not reported; the run reported: score, fit_time (did you mean 'score'?)"}


def test_collect_failed_completes_the_runs_once_the_spec_names_the_metric_right(make_bench):
    bench = make_bench(SPEC, script=SCRIPT)
    assert bench.cli("run", "bench.yaml", "-r", "out", "--no-report").returncode == 1
    launches = (bench.root / "launches.txt").read_text().splitlines()
    assert len(launches) == 8  # 6 runs; the crashing one retried twice
    bench.spec.write_text(bench.spec.read_text().replace("name: accuracy", "name: score"))

    proc = bench.cli("collect", "out", "--failed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"read 5 failed runs again with {bench.spec}: 5 now completed, 0 still failing" in proc.stdout
    assert "not read: 1 that did not exit 0" in proc.stdout
    assert (bench.root / "launches.txt").read_text().splitlines() == launches  # nothing trained again

    state = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    assert state["counts"] == {"completed": 5, "failed": 1}
    rows = {a[0]: a for a in _attempts(bench.results)}
    assert rows["t/a/s1"][2:4] == ("completed", "missing-metric")  # how it ended at the time stays
    assert rows["t/a/s1"][4].startswith("completed by `benchlab collect --failed` at ")
    assert rows["t/a/s1"][4].endswith("(at its end: metric 'accuracy' was not reported; the run reported: "
                                      "score, fit_time (did you mean 'score'?))")
    assert rows["t/b/s2"][2:4] == ("failed", "exit-code")

    # The ledger now ranks by the fixed metric, with the values the runs wrote.
    table = bench.cli("compare", "out", "--candidate", "b", "--json", check=True)
    summary = {(r["config"], r["metric"]): r for r in json.loads(table.stdout)["summary"]}
    assert summary[("a", "score")]["mean"] == pytest.approx((0.50 + 0.51 + 0.52) / 3)
    assert summary[("b", "score")]["n"] == 2


def test_collect_failed_says_each_reason_still_failing_once_and_exits_1(make_bench):
    bench = make_bench(SPEC.replace("params: {extra: crash}", "params: {}"), script=SCRIPT)
    bench.cli("run", "bench.yaml", "-r", "out", "--no-report")
    bench.spec.write_text(bench.spec.read_text().replace("name: accuracy", "name: scores"))
    proc = bench.cli("collect", "out", "--failed")
    assert proc.returncode == 1
    assert "0 now completed, 6 still failing" in proc.stdout
    reason = "metric 'scores' was not reported; the run reported: score, fit_time (did you mean 'score'?)"
    assert proc.stdout.count(reason) == 1
    assert "6 failing (t/a/s0, t/b/s0, t/a/s1 and 3 more)" in proc.stdout


def test_an_invalid_metrics_json_is_reported_with_its_line(make_bench):
    script = ('import os\nopen(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w")'
              '.write(\'{"score": 0.5,\\n\\n  "loss": }\')\n')
    bench = make_bench(SPEC.replace("name: accuracy", "name: score").replace("params: {extra: crash}", "params: {}")
                       .replace("seeds: 3", "seeds: 1"), script=script)
    assert bench.cli("run", "bench.yaml", "-r", "out", "--no-report").returncode == 1
    errors = {a[4] for a in _attempts(bench.results)}
    assert errors == {"metric 'score' was not reported: metrics.json is not valid JSON at line 3, column 11: "
                      "Expecting value"}


@pytest.mark.parametrize(("metric", "reported", "wanted", "guess"), [
    ("acuracy", ["accuracy", "loss"], [], "accuracy"),            # a close spelling
    ("accuracy", ["eval/accuracy", "eval/loss"], [], "eval/accuracy"),  # the same last part
    ("accuracy", ["score", "fit_time"], ["fit_time"], "score"),  # the only one no metric claims
    ("accuracy", ["score", "time"], [], None),                   # nothing to go by
])
def test_did_you_mean_picks_the_reported_name_meant(metric, reported, wanted, guess):
    got = Collected(finals=dict.fromkeys(reported, 1.0), wanted=[metric, *wanted])
    message = got.missing(metric)
    assert message.startswith(f"metric {metric!r} was not reported; the run reported: {', '.join(reported)}")
    assert message.endswith(f" (did you mean {guess!r}?)" if guess else reported[-1])


LOG_SCRIPT = '''
import json, os
seed = int(os.environ["BENCHLAB_SEED"])
print(f"eval: top1={0.7 + seed / 10:.2f} loss=0.25", flush=True)
if seed == 1:  # this run writes its own metrics.json as well
    with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
        f.write('{"own": 3}')
'''

LOG_SPEC = """
name: extracted
tasks: [{name: t}]
configs: [{name: c}]
seeds: 2
command: python run.py
metrics:
  primary: {name: top1, from: {regex: 'top1=(\\S+)'}}
  secondary: [{name: loss, goal: min, from: {regex: 'loss=(\\S+)'}}]
"""


def test_extracted_metrics_go_into_the_run_folder_and_a_rebuild_needs_no_spec(make_bench):
    bench = make_bench(LOG_SPEC, script=LOG_SCRIPT)
    assert bench.cli("run", "bench.yaml", "-r", "out", "--no-report").returncode == 0
    runs = {json.loads((d / "provenance.json").read_text())["run"]: d for d in (bench.results / "runs").iterdir()}
    written = json.loads((runs["t/c/s0"] / "metrics.json").read_text())
    assert written == {"top1": 0.7, "loss": 0.25}
    assert json.loads((runs["t/c/s0"] / "provenance.json").read_text())["metrics"] == {
        "primary": "top1", "goals": {"top1": "max", "loss": "min"}}
    assert (runs["t/c/s1"] / "metrics.json").read_text() == '{"own": 3}'  # the run's own file is left alone

    # Without the spec (nor benchmark.json), the folder alone rebuilds the ledger.
    (bench.results / "benchmark.json").unlink()
    bench.spec.unlink()
    proc = bench.cli("collect", "out", "--rebuild")
    assert proc.returncode == 0, proc.stderr
    assert "1 completed, 1 failed" in proc.stdout  # s1's own file holds no top1: nothing else to go by
    state = json.loads(bench.cli("status", "out", "--json", check=True).stdout)
    [group] = state["failure_groups"]
    assert group["runs"] == ["t/c/s1"]
    with sqlite3.connect(bench.results / "benchlab.db") as db:
        values = dict(db.execute("SELECT metric, value FROM metrics JOIN runs USING (run_id) WHERE name = 't/c/s0'"))
    assert values == {"top1": 0.7, "loss": 0.25}
