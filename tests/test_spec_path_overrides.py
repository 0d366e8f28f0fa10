"""Hydra-style overrides on benchlab's command line: `-s configs.mlp.params.lr=1e-3` sets a field of
the spec, and a comma list sweeps a config's param as a grid, as `-m lr=1e-3,1e-4` does in Hydra."""

from __future__ import annotations

import json

import pytest

from benchlab.errors import OverrideError
from benchlab.plan import expand
from benchlab.spec import parse_spec

SPEC = """
name: sweep
tasks: [{name: t1, params: {base: 0.5}}]
configs:
  - {name: a, params: {extra: 1}}
  - {name: b, params: {extra: 2}}
  - {name: c, params: {extra: 3}, grid: {depth: [1, 2]}}
seeds: 2
command: python run.py base={base} extra={extra}
metrics: {primary: {name: score, goal: max}}
baseline: a
retries: 0
"""


def test_a_comma_list_on_a_configs_param_sweeps_it_as_a_grid():
    spec = parse_spec(SPEC, overrides=["configs.b.params.extra=1e-3,7"])
    assert [c.name for c in spec.configs][:3] == ["a", "b[extra=0.001]", "b[extra=7]"]
    commands = sorted({r.command for r in expand(spec) if r.config.startswith("b[")})
    assert commands == ["python run.py base=0.5 extra=1e-3", "python run.py base=0.5 extra=7"]


def test_a_single_value_sets_the_param_and_ends_its_sweep():
    spec = parse_spec(SPEC, overrides=["configs.c.params.depth=3", "+configs.c.params.width=8", "seeds=3",
                                       "tasks.t1.params.base=0.9"])
    assert [c.name for c in spec.configs] == ["a", "b", "c"]
    assert spec.config("c").params == {"extra": 3, "depth": 3, "width": 8}
    assert spec.seed_list == [0, 1, 2]
    assert {r.command for r in expand(spec)} == {f"python run.py base=0.9 extra={n}" for n in (1, 2, 3)}


def test_the_overrides_recorded_give_the_same_spec_again():
    spec = parse_spec(SPEC, overrides=["configs.b.params.extra=1e-3,7", "seeds=[4, 5]"])
    again = parse_spec(SPEC, overrides=json.loads(json.dumps(spec.overrides)))
    assert [c.name for c in again.configs] == [c.name for c in spec.configs]
    assert again.seed_list == spec.seed_list == [4, 5]
    assert [r.run_id for r in expand(again)] == [r.run_id for r in expand(spec)]


@pytest.mark.parametrize(("override", "message"), [
    ("configs.d.params.lr=1", "-s configs.d.params.lr=1: names no config of <spec>; configs: a, b, c"),
    ("configs.a=1", "-s configs.a=1: name a field of one of the configs: configs.NAME.params.KEY=VALUE"),
    ("tasks.t1.params.base.x=1", "-s tasks.t1.params.base.x=1: params.base is 0.5, not a mapping"),
    ("lr=1e-3,1e-4", "-s lr=1e-3,1e-4: names no variable of <spec>; variables: none defined; to sweep a "
                     "config's param: -s configs.NAME.params.lr=1e-3,1e-4"),
])
def test_a_path_that_names_nothing_is_one_message(override, message):
    with pytest.raises(OverrideError) as caught:
        parse_spec(SPEC, overrides=[override])
    assert str(caught.value) == message


def test_a_wrong_value_is_refused_by_the_schema_as_if_written_in_the_file():
    from benchlab.errors import SpecError

    with pytest.raises(SpecError, match="seeds"):
        parse_spec(SPEC, overrides=["seeds=many"])


def test_the_command_line_runs_a_hydra_style_sweep(make_bench):
    bench = make_bench(SPEC)
    proc = bench.cli("run", "bench.yaml", "--no-report", "-s", "configs.b.params.extra=0,5",
                     "-s", "configs.c.params.depth=1", "-j", "2", "--results", "out", timeout=300)
    assert proc.returncode == 0, proc.stderr
    import benchlab

    table = benchlab.load(bench.results, series=False)
    scores = table[table.metric == "score"].groupby("config").value.mean().to_dict()
    # run.py scores base + seed/100 whatever the config: the sweep's configs each ran both seeds.
    assert scores == pytest.approx({"a": 0.505, "b[extra=0]": 0.505, "b[extra=5]": 0.505, "c": 0.505})
    recorded = json.loads((bench.results / "benchmark.json").read_text())["spec"]
    assert [c["name"] for c in recorded["configs"]] == ["a", "b[extra=0]", "b[extra=5]", "c"]
    assert recorded["configs"][3]["params"] == {"extra": 3, "depth": 1}


def test_overrides_after_the_spec_are_read_as_minus_s_as_hydra_users_write_them(make_bench):
    bench = make_bench(SPEC)
    plain = bench.cli("validate", "bench.yaml", "configs.b.params.extra=0,5", "seeds=3", "--json")
    with_s = bench.cli("validate", "bench.yaml", "-s", "configs.b.params.extra=0,5", "-s", "seeds=3", "--json")
    assert plain.returncode == 0, plain.stderr
    runs = [r["name"] for r in json.loads(plain.stdout)["runs"]]
    assert runs == [r["name"] for r in json.loads(with_s.stdout)["runs"]]
    assert "t1/b[extra=5]/s2" in runs and len(runs) == 5 * 3  # a, b[extra=0], b[extra=5], c[depth=1], c[depth=2]
    dry = bench.cli("run", "bench.yaml", "configs.b.params.extra=7", "--dry-run")
    assert dry.returncode == 0 and "extra=7" in dry.stdout


def test_a_word_after_the_spec_that_is_no_override_is_one_line_and_exit_2(make_bench):
    bench = make_bench(SPEC)
    proc = bench.cli("run", "bench.yaml", "fast")
    assert proc.returncode == 2 and "unexpected argument 'fast' after the spec" in proc.stderr
    assert "Traceback" not in proc.stderr and not bench.results.exists()
