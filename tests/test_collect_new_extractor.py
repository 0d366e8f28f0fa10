"""An extractor is one module: once registered (here at run time, as a package's entry point or a
module of ``collect/extractors/`` would be), a spec names it in ``from:``, its own model checks its
options with file, line and field, ``{task}`` is filled in its options, and collecting reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlab.collect import collect_run
from benchlab.collect.extractors import Extractor, Series, run_file
from benchlab.errors import SpecError
from benchlab.spec import SourceOptions, parse_spec


class LinesOptions(SourceOptions):
    """``from: {lines: FILE, contains: TEXT}``: how many lines of FILE hold TEXT."""

    lines: str
    contains: str = ""
    described = "a count of a file's lines"


def count_lines(run_dir: Path, source: LinesOptions) -> tuple[float, Series | None]:
    text = run_file(run_dir, source.lines).read_text()
    return float(sum(source.contains in line for line in text.splitlines())), None


LINES = Extractor("lines", LinesOptions, count_lines)

SPEC = """\
name: counted
tasks: [{name: a}, {name: b}]
configs: [{name: c}]
seeds: 1
command: python run.py
metrics:
  primary: {name: passed, from: {lines: "{task}.log", contains: PASS}}
"""


@pytest.fixture
def lines_extractor(monkeypatch):
    from benchlab.collect import extractors

    monkeypatch.setitem(extractors._REGISTRY, "lines", LINES)  # what register(LINES) does


def test_a_registered_extractor_is_named_by_a_spec_and_reads_each_runs_own_file(lines_extractor, tmp_path):
    metric = parse_spec(SPEC).metrics.primary
    assert metric.source is not None and metric.source.kind == "lines"
    (tmp_path / "a.log").write_text("PASS 1\nFAIL 2\nPASS 3\n")
    (tmp_path / "b.log").write_text("PASS\n")
    assert collect_run(tmp_path, [metric], {"task": "a", "config": "c"}).finals["passed"] == 2.0
    assert collect_run(tmp_path, [metric], {"task": "b", "config": "c"}).finals["passed"] == 1.0
    missing = collect_run(tmp_path, [metric], {"task": "z", "config": "c"})
    assert "passed" not in missing.finals and "could not find z.log" in missing.problems["passed"]


def test_its_source_is_written_back_as_the_spec_wrote_it_and_described_in_its_own_words(lines_extractor):
    spec = parse_spec(SPEC)
    dumped = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert dumped["metrics"]["primary"]["from"] == {"lines": "{task}.log", "contains": "PASS", "series": False}
    assert spec.metrics.primary.source is not None
    assert spec.metrics.primary.source.described == "a count of a file's lines"


def test_its_options_are_checked_by_its_model_with_file_line_and_field(lines_extractor):
    with pytest.raises(SpecError) as bad:
        parse_spec(SPEC.replace("contains: PASS", "contans: PASS"), file="bench.yaml")
    assert str(bad.value).splitlines()[-1].strip().startswith(
        "bench.yaml:7 metrics.primary.from: unknown field 'contans'; did you mean 'contains'?")


def test_an_unregistered_extractor_is_an_unknown_field_of_the_source():
    with pytest.raises(SpecError) as bad:
        parse_spec(SPEC, file="bench.yaml")
    message = str(bad.value)
    assert "bench.yaml:7 metrics.primary.from: unknown field 'lines'" in message
    assert "(valid fields: csv, json, jsonl, lm_eval, regex, tensorboard, file," in message
