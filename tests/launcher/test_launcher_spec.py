"""The launcher section of a spec: refused at `validate` with file, line and field where a template
cannot be filled or a rule cannot be read; placeholders filled as single shell words."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from benchlab.errors import SpecError
from benchlab.execute.launcher import LauncherSection, fill
from benchlab.spec import parse_spec
from benchlab_testing import run_cli

GOOD = """\
name: l
tasks: [{name: t}]
configs: [{name: a}]
command: python run.py
metrics: {primary: score}
backend: launcher
launcher:
  submit: my-launcher submit --name {name} -- {command}
  status: my-launcher state {job_id}
  states:
    - {match: '^RUNNING', state: running}
    - {match: '^DONE exit=(?P<exit>\\d+)', state: completed}
  cancel: my-launcher stop {job_id}
"""


def test_a_good_section_is_read_into_the_backends_model() -> None:
    spec = parse_spec(GOOD, file="bench.yaml")
    section = spec.backend_section("launcher")
    assert isinstance(section, LauncherSection)
    assert [r.state for r in section.states] == ["running", "completed"]
    assert section.poll_s == 1.0 and section.copy_back is None


@pytest.mark.parametrize("old, new, expected", [
    ("--name {name}", "--name {nmae}",
     "bench.yaml:8 launcher.submit: unknown placeholder {nmae}; did you mean {name}?"),
    ("--name {name}", "--name {job_id}", "bench.yaml:8 launcher.submit: {job_id} is not known here: the job has no "
                                         "id before it is submitted"),
    ("state {job_id}", "state {jobid}", "bench.yaml:9 launcher.status: unknown placeholder {jobid}; did you mean "
                                        "{job_id}?"),
    ("'^RUNNING'", "'^(RUNNING'", "bench.yaml:11 launcher.states[0].match: not a regular expression: missing ), "
                                  "unterminated subpattern at position 1"),
    ("state: running}", "state: runing}", "bench.yaml:11 launcher.states[0].state: expected one of 'pending', "
                                          "'running', 'completed', 'failed', 'cancelled', 'timeout' or 'lost', got "
                                          "'runing'"),
    ("  cancel: my-launcher stop {job_id}\n", "", "bench.yaml:7 launcher.cancel: required field is missing"),
    ("  cancel:", "  poll: 3\n  cancel:", "bench.yaml:13 launcher: unknown field 'poll'; did you mean 'poll_s'?"),
])
def test_a_bad_template_or_rule_is_refused_with_its_file_line_and_field(old: str, new: str, expected: str) -> None:
    assert old in GOOD
    with pytest.raises(SpecError) as info:
        parse_spec(GOOD.replace(old, new), file="bench.yaml")
    assert expected in str(info.value), str(info.value)


def test_validate_exits_2_with_one_line_naming_the_place(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text(GOOD.replace("{command}", "{comand}"))
    proc = run_cli("validate", "bench.yaml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: bench.yaml:8 launcher.submit: unknown placeholder {comand}; did you mean "
                                  "{command}?")


def test_a_launcher_section_under_another_backends_spec_is_still_checked() -> None:
    # `--backend launcher` on the command line reads it: a typo must not wait for that day.
    with pytest.raises(SpecError, match="launcher.submit: unknown placeholder"):
        parse_spec(GOOD.replace("backend: launcher", "backend: local").replace("{name}", "{nam}"), file="b.yaml")


def test_an_unknown_top_level_key_is_still_refused() -> None:
    with pytest.raises(SpecError, match="unknown field 'launchr'"):
        parse_spec(GOOD.replace("launcher:", "launchr:"), file="bench.yaml")


def test_each_value_is_one_shell_word_and_go_templates_pass_through() -> None:
    tricky = "it's a \"run\"; rm -rf / $(touch x) `y` {seed}"
    line = fill("printf '%s|' {command} {name} && echo '{{.State.Status}}' {unknown}", {"command": tricky, "name": "n"})
    out = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, check=True).stdout
    assert out == f"{tricky}|n|{{{{.State.Status}}}} {{unknown}}\n"
    assert shlex.split(line)[2] == tricky
