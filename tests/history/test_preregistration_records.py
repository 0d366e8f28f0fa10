"""The registered plan as typed records: a registration row in the layout the ledger has always
stored reads into them and is written back byte for byte, the plan's hash is the SHA-256 of its
canonical JSON (worked out here by hand), and deviations come back as records."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import textwrap
from pathlib import Path

import pytest

from benchlab.history.preregistration import (
    REGISTRATION_FILE,
    Deviation,
    DeviationKind,
    deviations,
    plan_hash,
    plan_of,
    register,
    restore,
    statement,
)
from benchlab.ledger import DB_NAME, AnalysisPlan, Registration, Store
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.spec import load_spec
from benchlab_testing import run_cli

# A registration as the ledger's meta row holds it (json.dumps with its default separators and
# the keys in the order benchlab has always written them), typed out by hand.
ROW = ('{"hash": "ab12", "registered_at": "2026-11-23T14:04:53+00:00", "plan": {"metric": "score", '
       '"summary": "auc", "alpha": 0.05, "test": "wilcoxon", "comparisons": [["base", "far"], ["base", "near"]], '
       '"min_effect": 0.01}, "configs": ["base", "far", "near"], "tasks": ["t", "u"], "completed_before": 3}')
# The first registrations (before the tasks were recorded) had no "tasks": every task is registered.
ROW_WITHOUT_TASKS = ('{"hash": "cd34", "registered_at": "2026-11-20T09:00:00+00:00", "plan": {"metric": "score", '
                     '"summary": "final", "alpha": 0.1, "test": "t", "comparisons": [["base", "*"]], '
                     '"min_effect": null}, "configs": ["base", "far"], "completed_before": 0}')

SPEC = """
name: plan
tasks: [{name: t}]
configs: [{name: base}, {name: far}, {name: same}]
seeds: 2
command: python run.py {config}
metrics: {primary: score}
baseline: base
"""


def _spec(tmp_path: Path, analysis: str, configs: str = "[{name: base}, {name: far}, {name: same}]"):
    text = textwrap.dedent(SPEC).lstrip().replace("[{name: base}, {name: far}, {name: same}]", configs)
    path = tmp_path / "bench.yaml"
    path.write_text(text + textwrap.dedent(analysis).lstrip())
    return load_spec(path)


def _row(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        (value,) = conn.execute("SELECT value FROM meta WHERE key = 'preregistration'").fetchone()
    return value


def _put_row(db: Path, text: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('preregistration', ?)", (text,))


def test_a_registration_row_in_the_ledgers_layout_reads_into_the_record_and_writes_back_unchanged(tmp_path):
    db = tmp_path / DB_NAME
    Store(db, create=True).close()
    _put_row(db, ROW)
    with Store(db) as store:
        found = store.registration()
    assert found == Registration(
        hash="ab12", registered_at="2026-11-23T14:04:53+00:00",
        plan=AnalysisPlan(metric="score", summary="auc", alpha=0.05, test="wilcoxon",
                          comparisons=(("base", "far"), ("base", "near")), min_effect=0.01),
        configs=("base", "far", "near"), tasks=("t", "u"), completed_before=3)
    _put_row(db, "{}")
    with Store(db) as store:
        store.set_registration(found)
    assert _row(db) == ROW  # same keys, same order, same text


def test_a_registration_from_before_tasks_were_recorded_reads_with_every_task_registered(tmp_path):
    db = tmp_path / DB_NAME
    Store(db, create=True).close()
    _put_row(db, ROW_WITHOUT_TASKS)
    with Store(db) as store:
        found = store.registration()
        assert found is not None
        assert found.tasks is None and found.completed_before == 0 and found.configs == ("base", "far")
        assert found.plan == AnalysisPlan("score", "final", 0.1, "t", (("base", "*"),), None)
        store.set_registration(found)
    assert _row(db) == ROW_WITHOUT_TASKS  # no "tasks" key added to a record that had none


def test_the_plan_hash_is_the_sha256_of_the_plans_sorted_json(tmp_path):
    spec = _spec(tmp_path, """
        analysis:
          alpha: 0.05
          comparisons: [[base, far], [base, same]]
          min_effect: 0.01
        """)
    plan = plan_of(spec)
    # The canonical form by hand: the plan's keys sorted, json.dumps's default separators.
    canonical = ('{"alpha": 0.05, "comparisons": [["base", "far"], ["base", "same"]], "metric": "score", '
                 '"min_effect": 0.01, "summary": "final", "test": "t"}')
    assert plan is not None and plan_hash(plan) == hashlib.sha256(canonical.encode()).hexdigest()


def test_a_plan_of_defaults_compares_every_config_with_the_baseline_and_hashes_as_before(tmp_path):
    spec = _spec(tmp_path, """
        analysis:
          summary: auc
        """)
    plan = plan_of(spec)
    assert plan == AnalysisPlan(metric="score", summary="auc", alpha=0.05, test="t",
                                comparisons=(("base", "*"),), min_effect=None)
    canonical = ('{"alpha": 0.05, "comparisons": [["base", "*"]], "metric": "score", "min_effect": null, '
                 '"summary": "auc", "test": "t"}')
    assert plan_hash(plan) == hashlib.sha256(canonical.encode()).hexdigest()
    # The benchmark record the report reads (the spec as the ledger keeps it) gives the same plan.
    assert plan_of(BenchmarkInfo.from_spec(spec)) == plan


def test_register_writes_the_ledger_row_and_the_file_in_the_registered_layout(tmp_path):
    from datetime import UTC, datetime

    spec = _spec(tmp_path, """
        analysis:
          comparisons: [[base, far]]
        """)
    with Store.create(tmp_path / "res") as store:
        made = register(store, spec, 0, now=datetime(2026, 11, 23, 14, 4, 53, tzinfo=UTC))
    plan_text = ('{"metric": "score", "summary": "final", "alpha": 0.05, "test": "t", '
                 '"comparisons": [["base", "far"]], "min_effect": null}')
    digest = hashlib.sha256(json.dumps(json.loads(plan_text), sort_keys=True).encode()).hexdigest()
    assert made is not None and made.hash == digest
    assert _row(tmp_path / "res" / DB_NAME) == (
        f'{{"hash": "{digest}", "registered_at": "2026-11-23T14:04:53+00:00", "plan": {plan_text}, '
        '"configs": ["base", "far", "same"], "tasks": ["t"], "completed_before": 0}')
    on_disk = json.loads((tmp_path / "res" / REGISTRATION_FILE).read_text())
    assert on_disk == json.loads(_row(tmp_path / "res" / DB_NAME))


def test_a_rebuilt_ledger_takes_an_old_registration_file_back_unchanged(tmp_path):
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / REGISTRATION_FILE).write_text(ROW_WITHOUT_TASKS)
    with Store.create(folder) as store:
        back = restore(store, folder)
    assert back is not None and back.hash == "cd34" and back.tasks is None
    assert json.loads(_row(folder / DB_NAME)) == json.loads(ROW_WITHOUT_TASKS)


@pytest.mark.parametrize("text", ["[1, 2]", '{"hash": "x"}', "not json"])
def test_a_registration_file_that_is_no_registration_is_left_out_of_a_rebuilt_ledger(tmp_path, text):
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / REGISTRATION_FILE).write_text(text)
    with Store.create(folder) as store:
        assert restore(store, folder) is None
        assert store.registration() is None


def test_deviations_are_records_that_read_as_the_reports_phrases(tmp_path):
    registered = Registration.from_json(json.loads(ROW))
    spec = _spec(tmp_path, """
        analysis:
          summary: auc
          alpha: 0.1
          test: wilcoxon
          comparisons: [[base, far], [base, late]]
          min_effect: 0.01
        """, configs="[{name: base}, {name: far}, {name: near}, {name: late}]")
    found = deviations(registered, spec)
    assert found == [
        Deviation(DeviationKind.SETTING_CHANGED, "alpha", 0.05, 0.1),
        Deviation(DeviationKind.COMPARISON_ADDED, comparison=("base", "late")),
        Deviation(DeviationKind.COMPARISON_DROPPED, comparison=("base", "near")),
        Deviation(DeviationKind.CONFIGS_ADDED, configs=("late",)),
    ]
    assert [str(d) for d in found] == [
        "alpha changed: 0.05 registered, 0.1 now", "comparison added: late vs base",
        "comparison dropped: near vs base",
        "config(s) added after results existed: late (their comparisons are exploratory, apart from the "
        "registered ones)"]
    # The same from the benchmark record the report reads, and the report's section lists them.
    assert deviations(registered, BenchmarkInfo.from_spec(spec)) == found
    section = statement(registered, BenchmarkInfo.from_spec(spec), [])
    assert "- registered after 3 run(s) had completed: not a pre-registration" in section
    assert "- comparison dropped: near vs base" in section


def test_a_spec_without_its_analysis_section_is_one_deviation(tmp_path):
    registered = Registration.from_json(json.loads(ROW_WITHOUT_TASKS))
    spec = _spec(tmp_path, "")
    assert [str(d) for d in deviations(registered, spec)] == [
        "the spec no longer has an analysis section (the registered plan is used)"]
    assert deviations(registered, spec)[0].kind is DeviationKind.PLAN_REMOVED



def test_a_rebuild_over_an_unreadable_registration_row_takes_the_file_and_keeps_the_hosts(tmp_path):
    (tmp_path / "run.py").write_text(
        "import json, os\njson.dump({'score': 1.0}, open(os.path.join(os.environ['BENCHLAB_RUN_DIR'], "
        "'metrics.json'), 'w'))\n")
    (tmp_path / "bench.yaml").write_text(textwrap.dedent(SPEC).lstrip() + "analysis: {alpha: 0.1}\n")
    run_cli("run", "bench.yaml", "--no-report", cwd=tmp_path, check=True)
    folder = tmp_path / "results" / "plan"
    with Store.open(folder) as store:
        hosts = store.hardware()
    assert hosts  # the sweep recorded its host, which only the old ledger knows
    _put_row(folder / DB_NAME, '{"hash": "x"}')  # a registration cut short
    (folder / REGISTRATION_FILE).write_text(ROW)
    run_cli("collect", str(folder), "--rebuild", cwd=tmp_path, check=True)
    with Store.open(folder) as store:
        assert store.registration() == Registration.from_json(json.loads(ROW))
        assert store.hardware() == hosts
    assert _row(folder / DB_NAME) == ROW
