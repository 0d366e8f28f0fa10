"""Grids: a config with `grid:` stands for one config per combination, named by its coordinates."""

from __future__ import annotations

import json

import pytest

from benchlab.errors import SpecError
from benchlab.plan import expand
from benchlab.spec import parse_spec

GRID = """\
name: grids
tasks:
  - {name: t1, params: {base: 0.5}}
configs:
  - {name: ref, params: {lr: 0.1, batch: 8}}
  - name: mlp
    params: {hidden: 64}
    grid: {lr: [1.0e-3, 1.0e-4], batch: [32, 64]}
seeds: 3
command: python run.py base={base} lr={lr} batch={batch}
metrics: {primary: score}
baseline: ref
"""

EXPANDED = ["mlp[lr=0.001,batch=32]", "mlp[lr=0.001,batch=64]",
            "mlp[lr=0.0001,batch=32]", "mlp[lr=0.0001,batch=64]"]


def test_grid_expands_to_one_named_config_per_combination():
    spec = parse_spec(GRID)
    assert [c.name for c in spec.configs] == ["ref", *EXPANDED]
    assert spec.config("mlp[lr=0.0001,batch=32]").params == {"hidden": 64, "lr": 1e-4, "batch": 32}
    assert spec.grids == {"mlp": EXPANDED}
    commands = {r.config: r.command for r in expand(spec) if r.seed == 0}
    assert commands["mlp[lr=0.0001,batch=64]"] == "python run.py base=0.5 lr=0.0001 batch=64"


def test_grid_configs_share_the_seeds_and_keep_their_ids():
    runs = expand(parse_spec(GRID))
    seeds = {}
    for r in runs:
        seeds.setdefault(r.config, []).append(r.seed)
    assert all(s == [0, 1, 2] for s in seeds.values()) and len(seeds) == 5
    again = expand(parse_spec(GRID))
    assert [r.run_id for r in runs] == [r.run_id for r in again]
    assert len({r.run_id for r in runs}) == len(runs) == 15
    # adding a value to the grid leaves the ids of the existing combinations alone
    wider = {r.name: r.run_id for r in expand(parse_spec(GRID.replace("[32, 64]", "[32, 64, 128]")))}
    assert all(wider[r.name] == r.run_id for r in runs)
    assert "t1/mlp[lr=0.001,batch=128]/s0" in wider


def test_baseline_may_name_one_grid_config_but_not_the_grid():
    spec = parse_spec(GRID.replace("baseline: ref", "baseline: mlp[lr=0.001,batch=64]"))
    assert spec.baseline == "mlp[lr=0.001,batch=64]"
    with pytest.raises(SpecError) as err:
        parse_spec(GRID.replace("baseline: ref", "baseline: mlp"), file="s.yaml")
    assert ("s.yaml:12 baseline: 'mlp' is a grid of 4 configs; name one of them: mlp[lr=0.001,batch=32]"
            in str(err.value))


@pytest.mark.parametrize("grid,message", [
    ("{lr: []}", "grid param 'lr' lists no values"),
    ("{lr: [0.1, 0.10]}", "grid param 'lr' lists 0.1 twice"),
    ("{opt: [adam, org/sgd]}", "'org/sgd' cannot name a config"),
    ("{opt: [[a, b]]}", "expected single values"),
    ("{hidden: [1, 2]}", "'hidden' set both in params and in grid"),
])
def test_bad_grid_is_located(grid, message):
    text = GRID.replace("grid: {lr: [1.0e-3, 1.0e-4], batch: [32, 64]}", f"grid: {grid}")
    text = text.replace("lr={lr} batch={batch}", "")
    with pytest.raises(SpecError) as err:
        parse_spec(text, file="s.yaml")
    assert "s.yaml:8 configs[1].grid" in str(err.value) and message in str(err.value)


def test_grid_param_counts_as_a_placeholder():
    # without the grid, {lr} would be unknown for mlp
    with pytest.raises(SpecError, match=r"placeholder \{lr\} has no value for t1/mlp"):
        parse_spec(GRID.replace("grid: {lr: [1.0e-3, 1.0e-4], batch: [32, 64]}", "grid: {batch: [32, 64]}"))


def test_validate_prints_the_expansion(make_bench):
    bench = make_bench(GRID)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "1 tasks × 5 configs × 3 seeds = 15 runs" in proc.stdout
    assert "grid mlp = 4 configs: " + ", ".join(EXPANDED) in proc.stdout
    assert "t1/mlp[lr=0.0001,batch=64]/s0" in proc.stdout
    shown = json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)
    assert shown["grids"] == {"mlp": EXPANDED}
    assert {r["config"] for r in shown["runs"]} == {"ref", *EXPANDED}


def test_grid_configs_run_and_compare_paired(make_bench):
    bench = make_bench(GRID.replace("seeds: 3", "seeds: 2"))
    proc = bench.cli("run", "bench.yaml", "-r", "out", "-j", "2", "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cmp = bench.cli("compare", "out", "--baseline", "ref", "--candidate", "mlp[lr=0.001,batch=32]", "--json")
    assert cmp.returncode == 0, cmp.stderr
    rows = json.loads(cmp.stdout)["comparisons"]
    assert rows and all(r["paired"] and r["n"] == 2 for r in rows)
    table = bench.cli("compare", "out", "--baseline", "ref", "--candidate", "mlp[lr=0.001,batch=32]")
    assert "mlp[lr=0.001,batch=32]" in table.stdout


def test_spec_built_in_code_expands_its_grids_too():
    from benchlab.spec import Config, Metrics, Spec, Task

    spec = Spec(name="code", tasks=[Task(name="t")], command="run {lr}", metrics=Metrics(primary="score"), seeds=1,
                configs=[Config(name="m", grid={"lr": [0.1, 0.2]})])
    assert [c.name for c in spec.configs] == ["m[lr=0.1]", "m[lr=0.2]"]
    assert [r.command for r in expand(spec)] == ["run 0.1", "run 0.2"]


SLM_STYLE = """\
name: slm
variables: {max_frame: 1e3, note: x}
tasks: [{name: cartpole}]
configs:
  - name: ppo
    grid: {max_frame: [1e4, 2e4]}
  - {name: a2c, params: {max_frame: 5e3}}
  - {name: dqn}
seeds: 1
command: python train.py --max-frame ${max_frame} --note ${note}
env: {FRAMES: "${max_frame}"}
metrics: {primary: score}
"""


def test_grid_over_a_variable_reaches_the_command_where_it_is_written_as_a_variable():
    runs = {r.config: r for r in expand(parse_spec(SLM_STYLE))}
    frames = {name: (run.command.split("--max-frame ")[1].split()[0], run.env["FRAMES"])
              for name, run in runs.items()}
    # Each grid value, the param, and the variable's default each reach both the command and env.
    assert frames == {"ppo[max_frame=10000.0]": ("1e4", "1e4"), "ppo[max_frame=20000.0]": ("2e4", "2e4"),
                      "a2c": ("5e3", "5e3"), "dqn": ("1e3", "1e3")}
    assert len({r.run_id for r in runs.values()}) == 4


def test_variable_a_grid_sets_is_refused_where_it_would_be_filled_in_once():
    text = SLM_STYLE.replace("tasks: [{name: cartpole}]",
                             "tasks: [{name: cartpole, params: {frames: '${max_frame}'}}]")
    with pytest.raises(SpecError) as caught:
        parse_spec(text, file="slm.yaml")
    message = str(caught.value)
    assert "tasks[0].params.frames" in message
    assert "configs[0].grid.max_frame sets max_frame per run" in message
