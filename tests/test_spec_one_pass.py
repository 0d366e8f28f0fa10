"""A spec's problems come in one message, each once; params are typed by the variables they override."""

from __future__ import annotations

import pytest

from benchlab.errors import OverrideError, SpecError
from benchlab.plan import expand
from benchlab.spec import parse_spec

SPEC = """\
name: typed
variables: {lr: 0.01, steps: 100, verbose: false, opt: adam}
tasks:
  - {name: t1}
  - {name: t2}
configs:
  - {name: a, params: {lr: 0.1}}
  - {name: b, params: {lr: 1e-3, opt: 3}}
seeds: 2
command: python run.py --lr {lr} --steps {steps} --opt {opt} --seed {seed}
metrics: {primary: score}
baseline: a
"""


def test_schema_and_semantic_problems_come_in_one_message(make_bench):
    bad = (SPEC.replace("seeds: 2", "seeds: many")               # schema
               .replace("{name: t2}", "{name: t1}")              # duplicate name
               .replace("--seed {seed}", "--seed {sed}")         # unknown placeholder
               .replace("baseline: a", "baseline: c"))           # unknown baseline
    bench = make_bench(bad)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [line.removeprefix("error: ") for line in proc.stderr.strip().splitlines()]
    assert [line.split(" ", 1)[0] for line in lines] == [
        "bench.yaml:5", "bench.yaml:9", "bench.yaml:10", "bench.yaml:12"]
    assert "tasks[1].name: duplicate name 't1'" in lines[0]
    assert "seeds: expected a count" in lines[1]
    assert "unknown placeholder {sed}" in lines[2]
    assert "baseline: names no config: 'c'" in lines[3]


def test_unknown_placeholder_is_reported_once_for_many_tasks_and_configs():
    many = SPEC.replace("  - {name: t2}\n", "".join(f"  - {{name: t{i}}}\n" for i in range(2, 9)))
    with pytest.raises(SpecError) as err:
        parse_spec(many.replace("{seed}", "{sed}"))
    assert len(err.value.problems) == 1
    assert str(err.value).count("{sed}") == 1


def test_unknown_variable_and_schema_problems_come_together():
    bad = SPEC.replace("{name: t1}", "{name: t1, target: '${nope}'}").replace("seeds: 2", "seeds: -1")
    with pytest.raises(SpecError) as err:
        parse_spec(bad, file="s.yaml")
    text = str(err.value)
    assert "s.yaml:4 tasks[0].target: unknown variable ${nope}" in text
    assert "s.yaml:9 seeds: expected a positive count" in text
    assert "expected a number" not in text  # the unknown variable is not reported twice


def test_duplicate_key_is_reported_where_it_repeats():
    with pytest.raises(SpecError) as err:
        parse_spec(SPEC + "seeds: 5\n", file="s.yaml")
    assert str(err.value) == "s.yaml:13 seeds: duplicate key 'seeds' (also line 9); the second would silently win"


def test_param_is_typed_by_the_variable_it_overrides():
    with pytest.raises(SpecError) as err:
        parse_spec(SPEC.replace("{lr: 0.1}", "{lr: fast}"), file="spec.yaml")
    assert str(err.value) == "spec.yaml:7 configs[0].params.lr: expected a number, got 'fast' (variables.lr is 0.01)"
    # a string variable takes any value, 1e-3 is a number, null (no flag) stands in for anything
    spec = parse_spec(SPEC.replace("{lr: 0.1}", "{lr: null, verbose: null}"))
    assert spec.config("b").params == {"lr": 0.001, "opt": 3}


def test_grid_values_are_typed_by_the_variable_too():
    text = (SPEC.replace("{name: a, params: {lr: 0.1}}", "{name: a, grid: {lr: [0.1, high], verbose: [true, 1]}}")
                .replace("baseline: a", "baseline: b"))
    with pytest.raises(SpecError) as err:
        parse_spec(text, file="s.yaml")
    assert [str(p) for p in err.value.problems] == [
        "s.yaml:7 configs[0].grid.lr[1]: expected a number, got 'high' (variables.lr is 0.01)",
        "s.yaml:7 configs[0].grid.verbose[1]: expected true or false, got 1 (variables.verbose is False)",
    ]


def test_exponent_without_a_dot_is_a_number_in_params_and_keeps_its_spelling():
    spec = parse_spec(SPEC)
    assert spec.config("b").params["lr"] == 0.001
    commands = [r.command for r in expand(spec) if r.config == "b"]
    assert commands[0].startswith("python run.py --lr 1e-3 ")
    # quoted, it stays a string; elsewhere (a name) it stays text
    quoted = parse_spec(SPEC.replace("lr: 1e-3", "lr: '1e-3'").replace("lr: 0.01", "lr: x"))
    assert quoted.config("b").params["lr"] == "1e-3"
    assert parse_spec(SPEC.replace("{name: t2}", "{name: 2e5}")).tasks[1].name == "2e5"


def test_override_is_typed_by_its_variable(make_bench):
    bench = make_bench(SPEC)
    proc = bench.cli("validate", "bench.yaml", "-s", "steps=many")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "-s steps=many: expected a number, got 'many' (variables.steps is 100 in bench.yaml)" in proc.stderr
    with pytest.raises(OverrideError):
        parse_spec(SPEC, overrides=["verbose=3"])
    assert parse_spec(SPEC, overrides=["opt=7"]).variables["opt"] == 7


def test_hydra_style_sweep_override_points_to_grids(make_bench):
    bench = make_bench(SPEC)
    proc = bench.cli("validate", "bench.yaml", "-s", "lr=1e-3,1e-4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "to run several values, give a config a grid: grid: {lr: [1e-3,1e-4]}" in proc.stderr


def test_each_check_names_where_and_what_as_fields():
    import yaml

    from benchlab.spec.checks import semantic_problems
    from benchlab.spec.search import search_problems

    # The raw document as written, before it is a Spec: the checks run on it beside the schema.
    # (PyYAML reads 1e-3 as a string; benchlab's own reader does not, so it is written out here.)
    text = SPEC.replace("baseline: a", "baseline: c").replace("1e-3", "0.001")
    data = yaml.safe_load(text + "search: {base_config: z, tasks: []}\n")
    found = semantic_problems(data, data["variables"])
    assert [(f.loc, f.message.split(":")[0]) for f in found] == [(("baseline",), "names no config")]
    found = search_problems(data)
    assert [f.loc for f in found] == [("search", "base_config"), ("search", "tasks")]
    assert found[1].message == "must not be empty (leave it out to search on every task)"
