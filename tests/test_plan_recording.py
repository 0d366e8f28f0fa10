"""A sweep's plan at scale: run ids built in bulk, and the plan recorded while the first runs go.

The ids must stay what they always were (each run's definition, hashed), and recording the
plan a step at a time must keep the ledger's promise: stopped at any step, nothing is lost
and nothing runs twice.
"""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest

from benchlab.execute.events import EventKind
from benchlab.execute.sweep import Sweep
from benchlab.ledger import Store
from benchlab.ledger import store as store_module
from benchlab.plan import expand, run_id
from benchlab.spec import load_spec
from benchlab_testing import SCRIPT, run_cli

TRICKY = """
name: tricky
variables: {frames: 1e-3, tag: "a b"}
env: {MY_SEED: "{seed}", PLAIN: "x", RID: "{run_id}-{task}"}
tasks:
  - {name: t0, params: {lr: 1e-3, nested: {b: [1, 2.50, "ü"], a: null}}}
  - {name: t1, params: {lr: 0.001}, command: "echo {seed:03d} {lr} ${frames} {run_id} {run_dir}"}
configs:
  - {name: c0, params: {flag: true}}
  - {name: c1, params: {x: "it's"}, command: "echo {x} {seed} {run_id}"}
seeds: [3, 1, 7]
command: "python -c 'print({seed})' {lr} ${tag}"
metrics:
  primary: {name: score}
"""

TWELVE = """
name: twelve
tasks: [{name: t1, params: {base: 0.5}}, {name: t2, params: {base: 0.7}}]
configs: [{name: a}, {name: b}, {name: c}]
seeds: 2
command: python run.py base={base}
metrics:
  primary: {name: score, goal: max}
retries: 0
"""


def _write(root: Path, text: str) -> Path:
    (root / "run.py").write_text(SCRIPT)
    spec = root / "bench.yaml"
    spec.write_text(textwrap.dedent(text).lstrip())
    return spec


def test_each_run_id_is_the_hash_of_its_own_definition(tmp_path):
    spec = load_spec(_write(tmp_path, TRICKY), [])
    runs = expand(spec)
    tasks = {t.name: t for t in spec.tasks}
    configs = {c.name: c for c in spec.configs}
    assert len(runs) == 2 * 2 * 3
    assert [r.seed for r in runs[:4]] == [3, 3, 3, 3]  # seed-major
    for r in runs:
        # One run at a time, from what defines it: the command as it reads with '{run_id}' in it.
        params = {**tasks[r.task].params, **configs[r.config].params}
        assert r.run_id == run_id(spec.name, r.task, r.config, params, r.seed,
                                  r.command.replace(r.run_id, "{run_id}"))
        assert r.env["MY_SEED"] == str(r.seed) and r.env["RID"] == f"{r.run_id}-{r.task}"
    t1 = next(r for r in runs if r.task == "t1" and r.config == "c0" and r.seed == 7)
    assert t1.command.startswith("echo 007 0.001 1e-3 " + t1.run_id)
    assert len({r.run_id for r in runs}) == len(runs)


class _Crash(Exception):
    pass


def _ledger(results: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{results / 'benchlab.db'}?mode=ro", uri=True)


def test_a_sweep_stopped_while_recording_its_plan_loses_and_repeats_nothing(tmp_path, monkeypatch):
    spec_path = _write(tmp_path, TWELVE)
    results = tmp_path / "out"
    spec = load_spec(spec_path, [])
    monkeypatch.setattr(store_module, "PLAN_STEP_RUNS", 2)

    def crash_at_first_launch(event):
        if event.kind is EventKind.START:
            raise _Crash  # the sweep dies right after its first launch: no step of the plan done yet

    with pytest.raises(_Crash):
        Sweep(spec, results, jobs=2, on_event=crash_at_first_launch).run()

    with _ledger(results) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []  # no attempt without its run
        attempts = db.execute("SELECT run_id, status FROM attempts").fetchall()
        registered = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert [status for _, status in attempts] == ["interrupted"]
    assert registered < 12
    shown = run_cli("status", str(results), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"plan partly recorded: {registered - 1} of 12 runs" in " ".join(shown.stdout.split())

    again = run_cli("run", str(spec_path), "-r", str(results), "--no-report", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    with _ledger(results) as db:
        per_run = db.execute("SELECT run_id, SUM(status = 'completed') FROM attempts GROUP BY run_id").fetchall()
        planned = [rid for (rid,) in db.execute("SELECT run_id FROM spec_runs ORDER BY position")]
        keys = [k for (k,) in db.execute("SELECT key FROM meta")]
    assert planned == [r.run_id for r in expand(spec)]
    assert sorted(per_run) == sorted((rid, 1) for rid in planned)  # every run completed exactly once
    assert "plan_recording" not in keys
    shown = run_cli("status", str(results), cwd=tmp_path)
    assert "12 runs — 12 completed" in shown.stdout
    assert "partly recorded" not in shown.stdout


def test_the_same_plan_again_is_not_written_and_a_changed_one_replaces_it(tmp_path):
    spec_path = _write(tmp_path, TWELVE)
    runs = expand(load_spec(spec_path, []))
    with Store.create(tmp_path / "out") as store:
        store.record_plan(runs, step=5).finish()
        before = store.conn.total_changes
        again = store.record_plan(runs, step=5)
        again.finish()
        assert store.conn.total_changes == before
        # Base 0.5 -> 0.6 on t1 renames t1's runs: their coordinates now belong to new runs.
        changed = expand(load_spec(_write(tmp_path, TWELVE.replace("base: 0.5", "base: 0.6")), []))
        store.record_plan(changed, step=5).finish()
        assert store.plan_recording() is None
        current = {rid for (rid,) in store.conn.execute("SELECT run_id FROM runs WHERE current = 1")}
        planned = [rid for (rid,) in store.conn.execute("SELECT run_id FROM spec_runs ORDER BY position")]
    assert planned == [r.run_id for r in changed]
    old_t1 = {r.run_id for r in runs if r.task == "t1"}
    assert len(old_t1) == 6 and not old_t1 & current
    assert current == {r.run_id for r in changed}


ESCAPED = """
name: escaped
tasks: [{name: t0, params: {label: "\\u00fc \\"x\\""}}]
configs: [{name: c0}, {name: c1, command: "printf '%s\\\\t\\"%s\\"' {seed} \\u00e9-{run_id}"}]
seeds: [0, -2, 10]
command: "echo \\"quoted\\" back\\\\slash tab\\t {seed} {seed}"
metrics:
  primary: {name: score}
"""


def test_ids_of_commands_that_json_escapes_are_the_hash_of_their_definition(tmp_path):
    # The ids of a bare {seed} are made by replacing the seed's mark inside the command's JSON:
    # quotes, backslashes, tabs and non-ASCII text around it must come out as json.dumps writes them.
    spec = load_spec(_write(tmp_path, ESCAPED), [])
    runs = expand(spec)
    assert [(r.config, r.seed) for r in runs] == [("c0", 0), ("c1", 0), ("c0", -2), ("c1", -2), ("c0", 10),
                                                  ("c1", 10)]
    assert runs[2].command == 'echo "quoted" back\\slash tab\t -2 -2'
    for r in runs:
        assert r.run_id == run_id(spec.name, r.task, r.config, {"label": "ü \"x\""}, r.seed,
                                  r.command.replace(r.run_id, "{run_id}"))
    assert runs[1].command.endswith(f"é-{runs[1].run_id}")


def test_a_sweep_keeps_its_plan_from_the_cycle_collector_and_gives_it_back_at_its_end(tmp_path):
    import gc

    spec = load_spec(_write(tmp_path, TWELVE), [])
    during: list[int] = []

    def note(event):
        if event.kind is EventKind.START:
            during.append(gc.get_freeze_count())

    assert gc.get_freeze_count() == 0
    Sweep(spec, tmp_path / "out", jobs=2, on_event=note).run()
    assert during and min(during) > 12  # at least the twelve runs were in the permanent generation
    assert gc.get_freeze_count() == 0
    # Where something else froze objects before, the sweep leaves the collector alone: what was
    # frozen stays in the permanent generation, out of the collector's generations.
    kept = [object()]
    gc.freeze()
    try:
        Sweep(spec, tmp_path / "again", jobs=2).run()
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


def test_statuses_of_named_runs_read_only_those_and_agree_with_the_whole_table(tmp_path):
    spec = load_spec(_write(tmp_path, TRICKY))
    runs = expand(spec)
    with Store.create(tmp_path / "results") as store:
        store.add_runs(runs)
        store.set_status(runs[1].run_id, "completed")
        store.set_status(runs[2].run_id, "pruned")
        whole = store.statuses()
        asked = [runs[0].run_id, runs[1].run_id, runs[2].run_id, "not-a-run"]
        assert store.statuses(ids=asked) == {rid: whole[rid] for rid in asked[:3]}
        assert store.statuses(ids=asked, pending=False) == {runs[1].run_id: "completed", runs[2].run_id: "pruned"}
        # more names than one statement may carry (SQLite's limit on parameters)
        many = [r.run_id for r in runs] + [f"x{i}" for i in range(40_000)]
        assert store.statuses(ids=many) == whole
