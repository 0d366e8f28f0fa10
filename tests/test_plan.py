"""Run ids are stable and change for exactly the runs a change touches; names are coordinates."""

from __future__ import annotations

import hashlib
import json

from benchlab.plan import expand, run_id
from benchlab.spec import parse_spec

SPEC = """\
name: ids
tasks:
  - {name: digits, params: {n: 10}}
  - {name: wine, params: {n: 20}}
configs:
  - {name: logreg, params: {lr: 0.1}}
  - {name: mlp, params: {lr: 0.01, hidden: 64}}
seeds: 3
command: python train.py --task {task} --lr {lr} --n {n} --seed {seed} --out {run_dir}
metrics: {primary: accuracy}
"""


def test_same_spec_gives_same_ids():
    a = [r.run_id for r in expand(parse_spec(SPEC))]
    b = [r.run_id for r in expand(parse_spec(SPEC))]
    assert a == b and len(set(a)) == 12


def test_changed_param_renames_exactly_the_affected_runs():
    before = {r.name: r.run_id for r in expand(parse_spec(SPEC))}
    after = {r.name: r.run_id for r in expand(parse_spec(SPEC.replace("lr: 0.01", "lr: 0.02")))}
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {f"{t}/mlp/s{s}" for t in ("digits", "wine") for s in range(3)}


def test_adding_a_seed_keeps_existing_ids():
    before = {r.name: r.run_id for r in expand(parse_spec(SPEC))}
    after = {r.name: r.run_id for r in expand(parse_spec(SPEC.replace("seeds: 3", "seeds: 4")))}
    assert all(after[name] == rid for name, rid in before.items())
    assert set(after) - set(before) == {"digits/logreg/s3", "digits/mlp/s3", "wine/logreg/s3", "wine/mlp/s3"}


def test_run_id_is_a_short_sha256_of_the_definition():
    payload = {"benchmark": "b", "task": "t", "config": "c", "params": {"x": 1}, "seed": 2, "command": "go"}
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]
    assert run_id("b", "t", "c", {"x": 1}, 2, "go") == expected


def test_runs_are_named_by_coordinates_and_ordered_seed_major():
    runs = expand(parse_spec(SPEC))
    assert [r.name for r in runs[:4]] == ["digits/logreg/s0", "digits/mlp/s0", "wine/logreg/s0", "wine/mlp/s0"]
    assert runs[-1].name == "wine/mlp/s2"


def test_command_fills_params_and_quotes_values():
    spec = parse_spec(SPEC.replace("{name: digits, params: {n: 10}}", "{name: digits, params: {n: 'a b'}}"))
    run = expand(spec)[0]
    assert run.command_for("/r/x y") == "python train.py --task digits --lr 0.1 --n 'a b' --seed 0 --out '/r/x y'"
    assert run.params == {"n": "a b", "lr": 0.1}


def test_config_params_override_task_params():
    spec = parse_spec(SPEC.replace("{name: logreg, params: {lr: 0.1}}", "{name: logreg, params: {lr: 0.1, n: 5}}"))
    assert expand(spec)[0].params["n"] == 5


def test_per_config_command_is_used():
    spec = parse_spec(SPEC.replace("{name: logreg, params: {lr: 0.1}}",
                                   "{name: logreg, params: {lr: 0.1}, command: 'echo {task} {seed}'}"))
    logreg = [r for r in expand(spec) if r.config == "logreg"][0]
    assert logreg.command == "echo digits 0"


def test_exponent_params_keep_the_ids_they_had_as_strings():
    # YAML 1.1 read `lr: 3e-4` as the string '3e-4', and ids hashed it so; it is a number now,
    # written as typed, and hashed as written, so results of earlier sweeps are still found.
    spec = parse_spec(SPEC.replace("lr: 0.1", "lr: 3e-4"))
    run = expand(spec)[0]
    assert run.params["lr"] == 0.0003
    command = "python train.py --task digits --lr 3e-4 --n 10 --seed 0 --out {run_dir}"
    assert run.command == command
    payload = {"benchmark": "ids", "task": "digits", "config": "logreg", "params": {"n": 10, "lr": "3e-4"},
               "seed": 0, "command": command}
    expected = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]
    assert run.run_id == expected
