"""The spec's `search` section: validated like the rest, refused where it would tune on the benchmark."""

from __future__ import annotations

import pytest
from searchkit import SEARCH_SPEC, write_search_bench

from benchlab.errors import SpecError
from benchlab.spec import json_schema, parse_spec
from benchlab_testing import run_cli


def _spec(budget: int = 6, pruner: str = "none") -> str:
    return SEARCH_SPEC % {"budget": budget, "pruner": pruner}


def test_a_search_metric_equal_to_the_primary_is_refused_with_file_line_and_field(tmp_path):
    spec = write_search_bench(tmp_path, spec=_spec().replace("metric: val", "metric: test"))
    proc = run_cli("validate", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if "metric: test" in text)
    assert f"bench.yaml:{line} search.metric.name: 'test' is the benchmark's primary metric" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_primary_metric_is_allowed_with_a_reason_and_only_with_one():
    allowed = _spec().replace("  metric: val\n",
                              "  metric: {name: test, allow_primary: true, reason: no validation split exists}\n")
    spec = parse_spec(allowed)
    assert spec.search is not None and spec.search.metric.reason == "no validation split exists"
    without = _spec().replace("  metric: val\n", "  metric: {name: test, allow_primary: true}\n")
    with pytest.raises(SpecError) as err:
        parse_spec(without)
    assert "allow_primary: true needs 'reason'" in str(err.value)


def test_search_seeds_that_overlap_the_benchmarks_are_refused_naming_both(tmp_path):
    spec = write_search_bench(tmp_path, spec=_spec().replace("seeds: [7]", "seeds: [1, 7]"))
    proc = run_cli("search", str(spec), cwd=tmp_path)
    assert proc.returncode == 2
    assert "search.seeds [1, 7] and the benchmark's seeds 2 (0..1) share 1" in proc.stderr
    # and nothing ran
    assert not (tmp_path / "results").exists()


def test_every_problem_of_the_section_is_reported_at_once():
    text = _spec().replace("    x: {uniform: [-1, 1]}",
                           "    x: {uniform: [1, -1]}\n    y: {int: [0, 3], choice: [1]}\n    z: {normal: [0, 1]}")
    text = text.replace("pruner: none", "pruner: hyperband").replace("base_config: base", "base_config: nope")
    with pytest.raises(SpecError) as err:
        parse_spec(text, file="s.yaml")
    fields = {p.field for p in err.value.problems}
    assert {"search.space.x", "search.space.y", "search.space.z", "search.pruner", "search.base_config"} <= fields
    by_field = {p.field: p.message for p in err.value.problems}
    assert "low < high" in by_field["search.space.x"]
    assert "exactly one of" in by_field["search.space.y"]
    assert "names no config: 'nope'" in by_field["search.base_config"]


def test_the_grid_sampler_refuses_a_continuous_range():
    with pytest.raises(SpecError) as err:
        parse_spec(_spec().replace("pruner: none", "pruner: none\n  sampler: grid"))
    assert "grid sampler needs 'int' or 'choice'" in str(err.value)


def test_the_default_budget_is_four_trials_per_dimension_and_is_printed(tmp_path):
    text = _spec().replace("  budget: 6\n", "").replace(
        "    x: {uniform: [-1, 1]}",
        "    x: {uniform: [-1, 1]}\n    steps: {int: [2, 4]}\n    nap: {log_uniform: [0.0001, 0.001]}")
    spec = parse_spec(text)
    assert spec.search is not None and spec.search.budget is None and spec.search.trial_budget == 4 * 3
    path = write_search_bench(tmp_path, spec=text)
    shown = run_cli("validate", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert ("search search: budget 12 trials (4 × 3 dimensions) tuning x, steps, nap of config base on val"
            in shown.stdout)
    proc = run_cli("search", str(path), "--budget", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "budget: 1 trials (--budget)" in proc.stdout
    dry = run_cli("search", str(path), "--budget", "0", cwd=tmp_path)
    assert dry.returncode == 2  # a budget below 1 is a usage error


def test_the_json_schema_describes_the_search_section():
    schema = json_schema()
    assert "search" in schema["properties"]
    defs = schema["$defs"]
    assert set(defs["Search"]["properties"]) >= {"metric", "space", "tasks", "base_config", "seeds", "budget",
                                                 "sampler", "pruner"}
    assert set(defs["ParamSpace"]["properties"]) == {"uniform", "log_uniform", "int", "choice"}
