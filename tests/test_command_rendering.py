"""How values become words of a run's command: quoting, optional flags, spellings, task commands."""

from __future__ import annotations

import shlex

import pytest

from benchlab.plan import expand
from benchlab.spec import parse_spec
from benchlab_testing import run_cli

SPEC = """\
name: words
variables: {steps: 50, extra: null}
tasks:
  - {name: t1, params: {flags: [--fast, --name, 'a b'], empty: [], none: null, text: 'x y', blank: ''}}
configs:
  - {name: c1}
seeds: 1
command: run {flags} | {empty} | {none} | {text} | {blank} | {steps} | {extra}
metrics: {primary: score}
"""


def test_lists_split_into_quoted_words_and_empty_values_vanish():
    run = expand(parse_spec(SPEC))[0]
    assert run.command == "run --fast --name 'a b' |  |  | 'x y' | '' | 50 | "
    # the shell sees exactly the words meant
    assert shlex.split(run.command.split("|")[0]) == ["run", "--fast", "--name", "a b"]


def test_optional_flag_is_set_by_one_task_and_absent_elsewhere():
    spec = parse_spec("""\
name: flags
variables: {unsafe: []}
tasks:
  - {name: humaneval, params: {unsafe: [--confirm_run_unsafe_code]}}
  - {name: gsm8k}
configs: [{name: m}]
seeds: 1
command: lm_eval --tasks {task} {unsafe}
metrics: {primary: acc}
""")
    commands = {r.task: r.command for r in expand(spec)}
    assert commands == {"humaneval": "lm_eval --tasks humaneval --confirm_run_unsafe_code",
                        "gsm8k": "lm_eval --tasks gsm8k "}


def test_override_renders_as_typed_and_compares_as_a_number():
    spec = parse_spec(SPEC, overrides=["steps=1e2"])
    assert spec.variables["steps"] == 100
    assert spec.variables["steps"] > 99
    run = expand(spec)[0]
    assert "| 1e2 |" in run.command
    assert "100.0" not in run.command
    # a value written the way Python writes it renders as before, so finished runs are still found
    before = expand(parse_spec(SPEC.replace("steps: 50", "steps: 200")))[0]
    after = expand(parse_spec(SPEC, overrides=["steps=200"]))[0]
    assert after.command == before.command and after.run_id == before.run_id


def test_params_of_a_run_are_plain_numbers():
    spec = parse_spec(SPEC.replace("text: 'x y'", "text: '${steps}'"), overrides=["steps=1e2"])
    run = expand(spec)[0]
    assert type(run.params["text"]) is float and run.params["text"] == 100.0
    assert "| 1e2 |" in run.command


def test_variable_in_a_command_is_quoted_like_a_param():
    spec = parse_spec(SPEC.replace("command: run", "command: echo ${extra} run"),
                      overrides=["extra=a; touch PWNED"])
    assert expand(spec)[0].command.startswith("echo 'a; touch PWNED' run")


def test_variable_holding_braces_is_not_read_as_a_placeholder():
    spec = parse_spec(SPEC.replace("command: run", "command: echo ${extra} run"), overrides=["extra=x{run_id}"])
    assert expand(spec)[0].command.startswith("echo 'x{run_id}' run")


def test_variable_list_in_a_command_gives_several_words():
    spec = parse_spec(SPEC.replace("command: run", "command: ${extra} run"), overrides=["extra=[python, -u]"])
    assert expand(spec)[0].command.startswith("python -u run")


TASK_COMMANDS = """\
name: cmds
tasks:
  - {name: code, command: 'code-eval {seed}'}
  - {name: math}
configs:
  - {name: a}
  - {name: b, command: 'b-only {task}'}
seeds: 1
command: 'default {task} {config}'
metrics: {primary: acc}
"""


def test_command_precedence_is_config_over_task_over_spec():
    got = {(r.task, r.config): r.command for r in expand(parse_spec(TASK_COMMANDS))}
    assert got == {("code", "a"): "code-eval 0", ("code", "b"): "b-only code",
                   ("math", "a"): "default math a", ("math", "b"): "b-only math"}


def test_task_commands_may_stand_in_for_the_spec_command():
    spec = parse_spec(TASK_COMMANDS.replace("command: 'default {task} {config}'\n", "")
                      .replace("{name: math}", "{name: math, command: 'm {config}'}"))
    assert {r.command for r in expand(spec)} == {"code-eval 0", "m a", "b-only code", "b-only math"}


def test_pair_without_any_command_is_an_error():
    from benchlab.errors import SpecError

    with pytest.raises(SpecError) as err:
        parse_spec(TASK_COMMANDS.replace("command: 'default {task} {config}'\n", ""), file="s.yaml")
    assert "no command for math/a" in str(err.value)


def test_placeholder_missing_for_some_tasks_is_reported_once_with_the_fix(make_bench):
    bench = make_bench("""\
        name: p
        tasks: [{name: t1, params: {x: 1}}, {name: t2}, {name: t3}]
        configs: [{name: a}, {name: b}]
        seeds: 1
        command: python run.py {x} {nope}
        metrics: {primary: score}
        """)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2
    assert proc.stderr.count("{nope}") == 1, proc.stderr
    assert proc.stderr.count("{x}") == 1, proc.stderr
    assert "placeholder {x} has no value for t2/a, t2/b, t3/a and 1 more" in proc.stderr
    assert "give it a default in 'variables'" in proc.stderr


def test_injected_variable_does_not_run_as_a_command(make_bench):
    bench = make_bench("""\
        name: inj
        variables: {x: hello}
        tasks: [{name: t1}]
        configs: [{name: a}]
        seeds: 1
        command: python run.py label=${x}
        metrics: {primary: score}
        """)
    proc = bench.cli("run", "bench.yaml", "-r", "out", "-s", "x=a; touch PWNED", "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (bench.root / "PWNED").exists()
    logs = list((bench.root / "out" / "runs").glob("*/train.log"))
    assert "'label': 'a; touch PWNED'" in logs[0].read_text()


def test_init_example_runs_with_steps_written_as_1e2(tmp_path):
    run_cli("init", "demo", cwd=tmp_path, check=True)
    spec = (tmp_path / "demo" / "benchlab.yaml").read_text()
    # two seeds keep the test short; the override is the point
    (tmp_path / "demo" / "benchlab.yaml").write_text(spec.replace("seeds: 5 ", "seeds: 2 "))
    proc = run_cli("run", "benchlab.yaml", "-s", "steps=1e2", "-j", "2", "--no-report", "-r", "out",
                   cwd=tmp_path / "demo", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 completed" in proc.stdout
    config = next((tmp_path / "demo" / "out" / "runs").glob("*/config.yaml")).read_text()
    assert "--steps 1e2" in config
