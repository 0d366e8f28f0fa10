"""The report's data is one immutable value: its statistics are computed once and every writer
reads the same ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from report_world import build_store_world

import benchlab.report
import benchlab.report.markdown
from benchlab.report import account_seeds, analyze, gather, write_report
from benchlab.report.tables import describe
from benchlab.results import read

VALUES = {("walk", "a"): [0.1, 0.2, 0.4], ("walk", "b"): [0.3, 0.5, 0.6]}


def test_the_report_data_cannot_be_changed_and_each_step_returns_a_new_one(tmp_path: Path):
    data = gather(read(build_store_world(tmp_path / "res", VALUES)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.failed_as = "worst"  # type: ignore[misc]
    accounted = account_seeds(data, "worst")
    analyzed = analyze(accounted, reps=200)
    # The steps leave what they were given as it was.
    assert (data.failed_as, data.used, data.desc, data.analysis) == ("exclude", None, None, None)
    assert accounted.analysis is None and accounted.failed_as == "worst"
    assert analyzed.desc is accounted.desc and analyzed.analysis is not None
    # The table the writers read is the description of the seeds as accounted.
    primary = analyzed.desc[analyzed.desc["is_primary"]].set_index("config")["mean"]
    assert primary.to_dict() == pytest.approx({"a": (0.1 + 0.2 + 0.4) / 3, "b": (0.3 + 0.5 + 0.6) / 3})


def test_writing_a_report_describes_the_seeds_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # BENCHMARKS.md, BENCHMARK_REPORT.md and the figures show one table of the seeds, made once.
    calls = []

    def counted(*args, **kwargs):
        calls.append(args[0])
        return describe(*args, **kwargs)

    monkeypatch.setattr(benchlab.report, "describe", counted)
    monkeypatch.setattr(benchlab.report.markdown, "describe", counted)
    folder = build_store_world(tmp_path / "res", VALUES)
    write_report(folder, tmp_path / "rep", plots=False, html=False)
    assert len(calls) == 1
    assert "| 1 |" in (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
