"""Bad specs and flags: exit code 2, one message naming file, line and field, no traceback."""

from __future__ import annotations

import pytest

from benchlab.errors import OverrideError, SpecError
from benchlab.spec import parse_duration, parse_spec

GOOD = """\
name: demo
variables: {frames: 100}
tasks:
  - name: t1
configs:
  - name: a
  - name: b
seeds: 3
command: python run.py --frames {frames} --seed {seed}
metrics:
  primary: {name: score, goal: max}
baseline: a
"""

CASES = [
    # (name, replace old -> new in GOOD, expected fragments of the message)
    ("yaml syntax", ("  - name: t1\n", "  - name: t1\n   bad: [\n"), ["bench.yaml:", "YAML syntax error"]),
    ("unknown field", ("seeds: 3", "seedz: 3"), ["bench.yaml:8", "unknown field 'seedz'", "did you mean 'seeds'"]),
    ("wrong type", ("seeds: 3", "seeds: many"),
     ["bench.yaml:8", "seeds: expected a count (5 means seeds 0..4) or a list of seeds, got 'many'"]),
    ("bad seed in a list", ("seeds: 3", "seeds: [1, x]"),
     ["bench.yaml:8", "seeds[1]: expected a whole number, got 'x'"]),
    ("empty tasks", ("tasks:\n  - name: t1\n", "tasks: []\n"), ["bench.yaml:3", "tasks", "must not be empty"]),
    ("empty configs", ("configs:\n  - name: a\n  - name: b\n", "configs: []\n"), ["configs", "must not be empty"]),
    ("empty seeds", ("seeds: 3", "seeds: []"), ["bench.yaml:8", "seeds", "at least one seed"]),
    ("duplicate names", ("  - name: b", "  - name: a"), ["bench.yaml:7", "configs[1].name", "duplicate name 'a'"]),
    ("unknown placeholder", ("--seed {seed}", "--seed {sed}"),
     ["bench.yaml:9", "command", "unknown placeholder {sed}", "did you mean {seed}"]),
    ("baseline names no config", ("baseline: a", "baseline: c"), ["bench.yaml:12", "baseline", "names no config: 'c'"]),
    ("negative retries", ("baseline: a", "baseline: a\nretries: -1"), ["bench.yaml:13", "retries", "at least 0"]),
    ("bad timeout", ("baseline: a", "baseline: a\ntimeout: soon"), ["bench.yaml:13", "timeout", "expected a duration"]),
    ("bad goal", ("goal: max", "goal: up"), ["bench.yaml:11", "metrics.primary.goal", "'max' or 'min'"]),
]


@pytest.mark.parametrize("name,change,fragments", CASES, ids=[c[0] for c in CASES])
def test_bad_spec_exits_2_with_located_message(make_bench, name, change, fragments):
    old, new = change
    assert old in GOOD
    bench = make_bench(GOOD.replace(old, new))
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, f"{fragment!r} not in {proc.stderr!r}"
    # the same message stops `run` before anything runs
    run = bench.cli("run", "bench.yaml", "-r", "out")
    assert run.returncode == 2
    assert not (bench.root / "out").exists()


def test_good_spec_validates(make_bench):
    bench = make_bench(GOOD)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "1 tasks × 2 configs × 3 seeds = 6 runs" in proc.stdout


def test_missing_spec_file_exits_2(tmp_path):
    from benchlab_testing import run_cli

    proc = run_cli("run", "nope.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "nope.yaml: spec file not found" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_override_naming_no_variable_exits_2(make_bench):
    bench = make_bench(GOOD)
    proc = bench.cli("validate", "bench.yaml", "-s", "framez=5")
    assert proc.returncode == 2
    assert "-s framez=5" in proc.stderr and "did you mean 'frames'" in proc.stderr


def test_every_problem_is_reported_at_once():
    text = GOOD.replace("seeds: 3", "seedz: 3").replace("goal: max", "goal: up")
    with pytest.raises(SpecError) as err:
        parse_spec(text, file="s.yaml")
    fields = [p.field for p in err.value.problems]
    assert "spec" in fields and "metrics.primary.goal" in fields


def test_override_replaces_variable_with_its_yaml_type():
    spec = parse_spec(GOOD, overrides=["frames=2.5e3"])
    assert spec.variables["frames"] == 2500.0
    assert spec.overrides == {"frames": 2500.0}
    with pytest.raises(OverrideError):
        parse_spec(GOOD, overrides=["frames"])


def test_variables_interpolate_with_type_in_params():
    spec = parse_spec(GOOD.replace("  - name: t1\n", "  - name: t1\n    params: {n: '${frames}', s: 'f${frames}'}\n"))
    assert spec.tasks[0].params == {"n": 100, "s": "f100"}


def test_unknown_variable_is_located():
    with pytest.raises(SpecError) as err:
        parse_spec(GOOD.replace("  - name: t1\n", "  - name: t1\n    params: {n: '${nope}'}\n"), file="s.yaml")
    assert "s.yaml:5 tasks[0].params.n: unknown variable ${nope}" in str(err.value)


@pytest.mark.parametrize("text,seconds", [
    ("30s", 30.0), ("6h", 21600.0), ("1h30m", 5400.0), ("2.5m", 150.0), ("90", 90.0),
    (45, 45.0), ("500ms", 0.5), ("1d", 86400.0),
])
def test_durations_parse_to_seconds(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["soon", "", "5 hours", "-3s", "0", "1x"])
def test_bad_durations_are_rejected(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_seed_count_means_zero_to_n_minus_one():
    assert parse_spec(GOOD).seed_list == [0, 1, 2]
    assert parse_spec(GOOD.replace("seeds: 3", "seeds: [7, 11]")).seed_list == [7, 11]


def test_schema_command_prints_json_schema(make_bench):
    import json

    bench = make_bench(GOOD)
    proc = bench.cli("schema")
    schema = json.loads(proc.stdout)
    assert set(schema["required"]) >= {"name", "tasks", "configs", "metrics"}
    assert "path" not in schema["properties"]
    # the schema accepts the good spec
    import jsonschema
    import yaml

    jsonschema.validate(yaml.safe_load(GOOD), schema)
