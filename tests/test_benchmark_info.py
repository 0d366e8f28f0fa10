"""The benchmark record: written from a spec by the store, read back whole by the store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from benchlab.ledger import Store
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.results import info, write_benchmark_meta
from benchlab.spec import load_spec

SPEC = """\
name: rec
description: two configs on two tasks
metrics:
  primary: {name: acc, goal: max}
  secondary:
    - {name: loss, goal: min}
tasks:
  - {name: a, target: 0.9, reference: {low: 0.1, high: 1.0}}
  - {name: b}
configs:
  - {name: base}
  - {name: new}
baseline: base
seeds: [0, 1, 2]
command: echo {seed}
"""


def test_record_written_from_a_spec_reads_back_equal(tmp_path: Path) -> None:
    spec_file = tmp_path / "benchlab.yaml"
    spec_file.write_text(SPEC)
    spec = load_spec(spec_file)
    with Store.create(tmp_path / "res") as store:
        write_benchmark_meta(store, spec, tmp_path / "res")
    got = info(tmp_path / "res")
    assert got == BenchmarkInfo.from_spec(spec)
    assert got.primary == "acc"
    assert got.goal == {"acc": "max", "loss": "min"}
    assert got.metrics == ["acc", "loss"]
    assert got.baseline == "base"
    assert got.tasks == ["a", "b"] and got.configs == ["base", "new"]
    assert got.targets == {"a": 0.9, "b": None}
    assert got.references == {"a": (0.1, 1.0)}
    assert got.seeds == [0, 1, 2]
    assert got.spec_path == str(spec_file.resolve())
    saved = json.loads((tmp_path / "res" / "benchmark.json").read_text())
    assert saved["spec"]["name"] == "rec" and saved["spec_path"] == str(spec_file.resolve())


def test_a_ledger_without_the_later_fields_reads_with_their_defaults(tmp_path: Path) -> None:
    with Store.create(tmp_path) as store:
        pass
    # A ledger written before `metrics`, `overrides` and the rest were recorded.
    with sqlite3.connect(tmp_path / "benchlab.db") as conn:
        conn.executemany("INSERT INTO meta VALUES (?, ?)",
                         [("name", '"old"'), ("primary", '"score"'), ("goals", '{"score": "min"}')])
    with Store.open(tmp_path) as store:
        got = store.benchmark()
    assert got == BenchmarkInfo(name="old", primary="score", goal={"score": "min"}, baseline=None,
                                configs=[], tasks=[])


def test_a_ledger_with_no_benchmark_has_no_record(tmp_path: Path) -> None:
    with Store.create(tmp_path) as store:
        assert store.benchmark() is None


def test_the_primary_goal_is_the_records_and_max_where_it_names_none() -> None:
    def record(goal: dict[str, str]) -> BenchmarkInfo:
        return BenchmarkInfo(name="b", primary="loss", goal=goal, baseline=None, configs=[], tasks=[])

    assert record({"loss": "min", "acc": "max"}).primary_goal == "min"
    assert record({"acc": "min"}).primary_goal == "max"  # a record naming no goal for its primary
    assert record({}).primary_goal == "max"  # a ledger written before goals were kept
    assert record({"loss": "min", "acc": "min"}).metric_goal("acc") == "min"
    assert record({"loss": "min"}).metric_goal("unlisted") == "max"


def test_a_goal_other_than_max_or_min_is_refused_naming_the_metric() -> None:
    from benchlab.errors import BadArgument
    from benchlab.names.benchmark_info import goal_of

    assert goal_of("min", "any") == "min" and goal_of({"loss": "min"}, "loss") == "min"
    with pytest.raises(BadArgument, match="goal of metric 'loss' must be one of max, min; got 'lower'"):
        _ = BenchmarkInfo(name="b", primary="loss", goal={"loss": "lower"}, baseline=None, configs=[],
                          tasks=[]).primary_goal
