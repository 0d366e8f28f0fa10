"""The report's data is one immutable value: its statistics are computed once and every writer
reads the same ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from report_world import build_store_world

import benchlab.report
from benchlab.report import analyze, gather, write_report
from benchlab.results import read
from benchlab.stats import results_analysis

VALUES = {("walk", "a"): [0.1, 0.2, 0.4], ("walk", "b"): [0.3, 0.5, 0.6]}


def test_the_report_data_cannot_be_changed_and_each_step_returns_a_new_one(tmp_path: Path):
    data = gather(read(build_store_world(tmp_path / "res", VALUES)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.failed_as = "worst"  # type: ignore[misc]
    analyzed = analyze(data, failed_as="worst", reps=200)
    # The step leaves what it was given as it was.
    assert (data.failed_as, data.analysis) == ("exclude", None)
    assert analyzed.failed_as == "worst" and analyzed.analysis is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        analyzed.analysis.summary = ()  # type: ignore[misc]
    # The rows the writers read describe the seeds as accounted.
    means = {r.config: r.mean for r in analyzed.analysis.rows_of()}
    assert means == pytest.approx({"a": (0.1 + 0.2 + 0.4) / 3, "b": (0.3 + 0.5 + 0.6) / 3})


def test_writing_a_report_computes_its_statistics_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # BENCHMARKS.md, BENCHMARK_REPORT.md and the figures render one analysis, made once, and the
    # seeds are accounted for once inside it.
    from benchlab.stats import accounting

    calls, counted = [], []
    analyze_table, account = results_analysis.analyze_table, accounting.account

    def once(*args, **kwargs):
        calls.append(args[0])
        return analyze_table(*args, **kwargs)

    def count(*args, **kwargs):
        counted.append(args[0])
        return account(*args, **kwargs)

    monkeypatch.setattr(benchlab.report.writer, "analyze_table", once)
    monkeypatch.setattr(results_analysis, "account", count)
    monkeypatch.setattr(accounting, "account", count)
    folder = build_store_world(tmp_path / "res", VALUES)
    write_report(folder, tmp_path / "rep", plots=False, html=False)
    assert len(calls) == 1 and len(counted) == 1
    assert "| 1 |" in (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
