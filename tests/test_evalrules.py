"""The field's evaluation rules as checks: tensor parallelism, the seed and the temperature (at
`validate`, at `run` and in `benchlab.run`'s result, in the same words), checkpoints before launch."""

from __future__ import annotations

import json

import pytest

from benchlab.evalrules import parse_call

SPEC = """
name: rules
tasks: [{{name: gsm8k}}]
configs:
  - {{name: step-20, params: {{ckpt: "{ckpt}"}}}}
seeds: [1234]
command: >-
  lm_eval --model vllm --model_args pretrained={{ckpt}},tensor_parallel_size={tp}
  --tasks {{task}} --seed {{seed}} --batch_size auto --output_path {{run_dir}}
metrics:
  primary: {{name: score, from: {{lm_eval: ., task: gsm8k, key: "exact_match,strict-match"}}}}
{extra}
"""


def test_validate_warns_about_tensor_parallelism_unless_the_spec_says_why(make_bench):
    bench = make_bench(SPEC.format(ckpt="org/model-1b", tp=2, extra=""))
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "warning: config(s) step-20 run with tensor_parallel_size=2" in " ".join(proc.stdout.split())
    as_json = json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)
    assert len(as_json["warnings"]) == 1 and "tensor_parallel_size=2" in as_json["warnings"][0]

    bench = make_bench(SPEC.format(ckpt="org/model-1b", tp=4,
                                   extra='reasons: {tensor_parallel: "the 70B model needs four GPUs"}'))
    proc = bench.cli("validate", "bench.yaml", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["warnings"] == []
    bench = make_bench(SPEC.format(ckpt="org/model-1b", tp=1, extra=""))
    assert json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)["warnings"] == []


@pytest.mark.parametrize("command, tool, tp, seed, model", [
    ("lm_eval --model hf --model_args pretrained=/c/s,tensor_parallel_size=2 --seed 7", "lm_eval", 2, "7", "/c/s"),
    ("python -m lm_eval --model vllm --model_args=pretrained=org/m --batch_size 8", "lm_eval", None, None, "org/m"),
    ("vllm serve /c/step-1 --tensor-parallel-size 4 --seed 3", "vllm", 4, "3", "/c/step-1"),
    ("vllm serve org/m -tp 2", "vllm", 2, None, "org/m"),
])
def test_what_an_evaluation_command_asks_is_read(command, tool, tp, seed, model):
    call = parse_call(command)
    assert call is not None
    assert (call.tool, call.tensor_parallel_size, call.seed, call.model) == (tool, tp, seed, model)


def test_other_commands_are_not_evaluation_calls():
    assert parse_call("python train.py --lr 3e-4 --seed 1") is None


def _split_parse(command: str):
    """parse_call as it reads every command: split first, whatever the command holds."""
    import benchlab.evalrules as rules

    saved = rules._may_call_a_tool
    rules._may_call_a_tool = lambda command: True  # none is passed over
    try:
        return parse_call(command)
    finally:
        rules._may_call_a_tool = saved


@pytest.mark.parametrize("command", [
    'lm_e"val" --model hf --seed 2', "'vl'lm serve org/m --seed 3", "lm\\-eval --seed 4",
    'python -m "vllm.entrypoints.openai.api_server" --model m', "l'm_eval' --seed 5 --model_args pretrained=x",
    "echo 'unclosed lm_eval --seed 6", "vllm",
])
def test_a_tool_named_through_quotes_or_escapes_is_still_read(command):
    call = parse_call(command)
    assert call is not None and call == _split_parse(command)


def test_passing_over_commands_that_name_no_tool_gives_what_splitting_them_gives():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    # Words spelt letter by letter, each letter bare, quoted either way or behind a backslash, now
    # and then followed by a stray quote (the command then splits on blanks alone).
    spelling = st.sampled_from(["{}", "{}", "{}", "'{}'", '"{}"', "\\{}", "{}'"])
    words = st.sampled_from(["lm_eval", "lm-eval", "vllm", "vllm.entrypoints", "/opt/lm_eval", "python", "serve",
                             "--seed", "7", "--model", "pretrained=m"])
    word = words.flatmap(lambda w: st.lists(spelling, min_size=len(w), max_size=len(w)).map(
        lambda how: "".join(h.format(letter) for letter, h in zip(w, how, strict=True))))

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(st.lists(word, max_size=5).map(" ".join))
    def check(command):
        assert parse_call(command) == _split_parse(command)

    check()


def _write_safetensors(path, n: int, cut: int = 0) -> int:
    """A safetensors file of one n-byte tensor, ``cut`` bytes short; its whole length (8 + header + n)."""
    header = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    data = len(header).to_bytes(8, "little") + header + b"\0" * n
    path.write_bytes(data[: len(data) - cut])
    return 8 + len(header) + n


def test_a_checkpoint_that_is_not_whole_is_refused_before_launch(make_bench, tmp_path):
    missing = tmp_path / "ckpts" / "step-20"
    bench = make_bench(SPEC.format(ckpt=missing, tp=1, extra=""))
    for command in (["validate", "bench.yaml"], ["run", "bench.yaml", "-r", "out"]):
        proc = bench.cli(*command)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"the checkpoint {missing} that lm_eval would load: no such folder" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (bench.root / "out" / "runs").exists()  # nothing was launched

    missing.mkdir(parents=True)
    (missing / "config.json").write_text("{}")
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2 and "no weights yet" in proc.stderr

    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (missing / "model.safetensors.index.json").write_text(json.dumps(index))
    _write_safetensors(missing / "model-00001-of-00002.safetensors", 64)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2 and "not there yet: model-00002-of-00002.safetensors" in proc.stderr

    whole = _write_safetensors(missing / "model-00002-of-00002.safetensors", 64, cut=10)
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2
    assert f"model-00002-of-00002.safetensors: {whole - 10} of the {whole} bytes its header names" in proc.stderr

    _write_safetensors(missing / "model-00002-of-00002.safetensors", 64)
    assert bench.cli("validate", "bench.yaml").returncode == 0


def test_a_python_sweep_refuses_a_missing_checkpoint_as_the_command_does(make_bench, tmp_path):
    from benchlab.errors import SpecError
    from benchlab.execute.sweep import Sweep
    from benchlab.spec import load_spec

    missing = tmp_path / "ckpts" / "step-20"
    bench = make_bench(SPEC.format(ckpt=missing, tp=1, extra=""))
    with pytest.raises(SpecError) as refused:
        Sweep(load_spec(bench.spec), bench.results, jobs=1).run()
    (problem,) = refused.value.problems
    assert problem.file == str(bench.spec)
    assert problem.message == f"the checkpoint {missing} that lm_eval would load: no such folder"
    assert not (bench.results / "runs").exists()  # nothing was launched
    # The command names the same problem in the same words, exit 2.
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results))
    assert proc.returncode == 2 and str(problem) in proc.stderr and "Traceback" not in proc.stderr


def test_a_dry_run_refuses_a_missing_checkpoint_as_the_run_would(make_bench, tmp_path):
    from benchlab.errors import SpecError
    from benchlab.execute.sweep import would_run
    from benchlab.spec import load_spec

    missing = tmp_path / "ckpts" / "step-20"
    bench = make_bench(SPEC.format(ckpt=missing, tp=1, extra=""))
    message = f"the checkpoint {missing} that lm_eval would load: no such folder"
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--dry-run")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "would run" not in proc.stdout
    with pytest.raises(SpecError, match="no such folder"):
        would_run(load_spec(bench.spec), bench.results)
    # Once the checkpoint is whole, the dry run lists the run and the library plans the same one.
    missing.mkdir(parents=True)
    _write_safetensors(missing / "model.safetensors", 64)
    proc = bench.cli("run", str(bench.spec), "-r", str(bench.results), "--dry-run")
    assert proc.returncode == 0 and "1 runs would run" in proc.stdout
    (run,) = would_run(load_spec(bench.spec), bench.results)
    assert run.run_id in proc.stdout
    assert not (bench.results / "runs").exists()


def test_the_recorded_evaluation_settings_take_what_the_harness_says_ran_over_the_command():
    from typing import get_type_hints

    from benchlab.evalrules import EvaluationSettings, settings_of

    command = "lm_eval --model vllm --model_args pretrained=/c/s,tensor_parallel_size=2 --seed 7"
    ran = {"lm_eval_version": "0.4.13",
           "run_config": {"random_seed": 1234, "batch_size": 16, "gen_kwargs": "temperature=0.0"},
           "model_args": {"pretrained": "/c/s", "tensor_parallel_size": 4}}
    settings = settings_of(command, ran)
    assert settings == {"tool": "lm_eval", "model": "/c/s", "seed": "1234", "temperature": "0.0",
                        "tensor_parallel_size": 4, "batch_size": "16", "version": "0.4.13"}
    assert list(settings) == list(get_type_hints(EvaluationSettings))  # every key its record names
    assert settings_of("python train.py --seed 1") is None


FAKE_LM_EVAL = """
import json, os, sys
args = sys.argv[1:]
model_args = dict(p.split("=", 1) for p in args[args.index("--model_args") + 1].split(","))
tp = int(model_args["tensor_parallel_size"])
seed = int(os.environ["BENCHLAB_SEED"])
json.dump({"score": 0.5 + seed / 100 + (0.2 if tp > 1 else 0.0)},
          open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

TWO_TP = """
name: rules
tasks: [{name: gsm8k}]
configs:
  - {name: small, params: {tp: 1}}
  - {name: big, params: {tp: 8}}
seeds: 2
command: >-
  python lm.py lm_eval --model vllm --model_args pretrained=org/model-1b,tensor_parallel_size={tp}
  --tasks {task} --seed {seed} --batch_size auto
metrics: {primary: score}
"""


def test_run_warns_of_the_evaluation_rules_as_validate_does_and_the_settings_line_is_true_per_column(make_bench):
    bench = make_bench(TWO_TP)
    (bench.root / "lm.py").write_text(FAKE_LM_EVAL)
    proc = bench.cli("run", "bench.yaml", "--results", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "warning: config(s) big run with tensor_parallel_size=8" in said
    board = (bench.root / "out" / "BENCHMARKS.md").read_text()
    row = next(line for line in board.splitlines() if line.startswith("| gsm8k |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # The task's line says tensor_parallel_size 1 (its first config's); big's cell says what it ran at.
    assert "(tensor_parallel_size 8‡)" in cells[3] and "‡" not in cells[2], cells
    settings = next(line for line in board.splitlines() if line.startswith("- **gsm8k**"))
    assert "tensor_parallel_size 1" in settings and "(‡ except: big ran with tensor_parallel_size 8)" in settings


# A stand-in for lm_eval: takes its arguments, writes a score.
FAKE_HARNESS = """
import json, os
json.dump({"score": 0.5}, open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w"))
"""

RULE_SPEC = """
name: rules
tasks: [{{name: gsm8k}}]
configs:
{configs}
seeds: {seeds}
command: >-
  python lm.py lm_eval --model hf --model_args pretrained=org/model-1b --tasks {{task}}
  --batch_size 8 {args}
metrics: {{primary: score}}
{extra}
"""

# Each rule: the spec's configs, seeds and lm_eval arguments that break it, the key of `reasons:`
# that silences it, and the warning's text (whitespace aside).
BROKEN = {
    "no seed": ("  - {name: a}", 2, "", "seed",
                "config(s) a run lm_eval with no --seed: the tool's default seed then decides what is random "
                "in it (few-shot order, sampling), and neither the spec nor BENCHMARKS.md says which seed that "
                "is; pass --seed {seed} (benchlab's seed), or say why in the spec: reasons: {seed: \"...\"}"),
    "one seed repeated while sampling": (
        "  - {name: a}", 3, "--gen_kwargs temperature=0.7 --seed 1234", "seed",
        "config a samples at temperature 0.7 with --seed 1234 in each of its 3 seeds: they repeat one sample, "
        "so their spread says nothing of the sampling's; pass --seed {seed} (benchlab's seed), or say why in "
        "the spec: reasons: {seed: \"...\"}"),
    "temperatures differ": (
        "  - {name: a, params: {t: 0}}\n  - {name: b, params: {t: 0.7}}", 2,
        "--gen_kwargs temperature={t} --seed {seed}", "temperature",
        "task gsm8k compares configs run at different temperatures (a: 0, b: 0.7): their scores differ by "
        "more than the config; run them at one temperature, or say why in the spec: reasons: {temperature: \"...\"}"),
    "seeds differ": (
        "  - {name: a, params: {s: 1234}}\n  - {name: b, params: {s: 7}}", "[1234]", "--seed {s}", "seed",
        "task gsm8k compares configs run at different seeds (a: 1234, b: 7): their scores differ by more "
        "than the config; run them at one seed, or say why in the spec: reasons: {seed: \"...\"}"),
}


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("rule", list(BROKEN))
def test_each_rule_is_warned_of_at_validate_and_at_run_in_the_same_words(make_bench, rule):
    configs, seeds, args, _key, expected = BROKEN[rule]
    bench = make_bench(RULE_SPEC.format(configs=configs, seeds=seeds, args=args, extra=""), script=FAKE_HARNESS)
    (bench.root / "lm.py").write_text(FAKE_HARNESS)
    as_json = json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)
    assert as_json["warnings"] == [expected]
    validated = bench.cli("validate", "bench.yaml")
    assert f"warning: {expected}" in _words(validated.stdout)
    ran = bench.cli("run", "bench.yaml", "--results", "out", "--no-report")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert _words(ran.stdout + ran.stderr).count(f"warning: {expected}") == 1

    import benchlab

    result = benchlab.run(bench.root / "bench.yaml", results=bench.root / "api-out", report=False)
    assert result.exit_code == 0 and list(result.warnings) == [expected]


@pytest.mark.parametrize("rule", list(BROKEN))
def test_a_reason_in_the_spec_silences_its_rule_at_validate_and_at_run(make_bench, rule):
    configs, seeds, args, key, _expected = BROKEN[rule]
    bench = make_bench(RULE_SPEC.format(configs=configs, seeds=seeds, args=args,
                                        extra=f'reasons: {{{key}: "a reason"}}'), script=FAKE_HARNESS)
    (bench.root / "lm.py").write_text(FAKE_HARNESS)
    assert json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)["warnings"] == []
    ran = bench.cli("run", "bench.yaml", "--results", "out", "--no-report")
    assert ran.returncode == 0 and "warning" not in ran.stdout + ran.stderr, ran.stdout + ran.stderr


@pytest.mark.parametrize("configs, seeds, args", [
    # benchlab's seed given to the harness, greedy or sampling, one temperature for every config.
    ("  - {name: a}\n  - {name: b}", 3, "--seed {seed}"),
    ("  - {name: a}\n  - {name: b}", 3, "--gen_kwargs temperature=0.7 --seed {seed}"),
    # One seed, fixed, with sampling: nothing is repeated.
    ("  - {name: a}", "[1234]", "--gen_kwargs temperature=0.7 --seed 1234"),
    # A fixed seed the same in every config, greedy: nothing random to repeat.
    ("  - {name: a}\n  - {name: b}", 2, "--seed 1234"),
])
def test_a_spec_that_keeps_the_rules_gets_no_warning(make_bench, configs, seeds, args):
    bench = make_bench(RULE_SPEC.format(configs=configs, seeds=seeds, args=args, extra=""), script=FAKE_HARNESS)
    assert json.loads(bench.cli("validate", "bench.yaml", "--json").stdout)["warnings"] == []


def test_no_bundled_example_breaks_an_evaluation_rule():
    from pathlib import Path

    from benchlab.evalrules import rule_warnings
    from benchlab.plan import expand
    from benchlab.spec import load_spec

    specs = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*/*.yaml"))
    assert any("lm_eval" in p.read_text() for p in specs)  # the rules have something to check
    for path in specs:
        spec = load_spec(path)
        assert rule_warnings(spec, expand(spec)) == [], path
