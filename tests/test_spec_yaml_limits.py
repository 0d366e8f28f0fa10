"""Hostile or huge YAML gets one message and exit code 2, quickly; the spec is parsed once, in C."""

from __future__ import annotations

import time

import pytest
import yaml

from benchlab.errors import SpecError
from benchlab.spec import parse_spec
from benchlab.spec.yaml_reader import MAX_BYTES, MAX_DEPTH, read_yaml

HEAD = """\
name: hostile
tasks: [{name: t1}]
configs: [{name: a}]
command: python run.py
metrics: {primary: score}
"""

LAUGHS = "".join(
    f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10 if i else ["lol"] * 10) + "]\n" for i in range(9))


def test_alias_bomb_is_refused_before_it_expands(make_bench):
    bench = make_bench(HEAD + "variables:\n" + "".join("  " + line + "\n" for line in LAUGHS.splitlines()))
    start = time.monotonic()
    proc = bench.cli("validate", "bench.yaml", timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "bench.yaml:" in proc.stderr and "aliases expand the document past 100,000 more values" in proc.stderr


def test_modest_aliases_and_merge_keys_still_work():
    spec = parse_spec(HEAD.replace("configs: [{name: a}]", """\
configs:
  - {name: a, params: &common {lr: 0.1, depth: 3}}
  - name: b
    params:
      <<: *common
      lr: 0.2
"""))
    assert spec.config("b").params == {"lr": 0.2, "depth": 3}
    assert spec.config("a").params == {"lr": 0.1, "depth": 3}


def test_deep_nesting_is_refused_with_a_message(make_bench):
    bench = make_bench(HEAD + "variables: {x: " + "[" * 100_000 + "]" * 100_000 + "}\n")
    start = time.monotonic()
    proc = bench.cli("validate", "bench.yaml", timeout=60)
    assert time.monotonic() - start < 30
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"bench.yaml:6: nested deeper than {MAX_DEPTH} levels" in proc.stderr


def test_nesting_just_past_the_limit_gets_the_same_message_as_the_parsers_own_limit(make_bench):
    # 70 levels: past benchlab's limit, far below libyaml's own (1,000), so benchlab's check refuses it;
    # the 100,000 levels above are refused by libyaml itself from PyYAML 6.0.4 on. One message for both.
    depth = MAX_DEPTH + 6
    bench = make_bench(HEAD + "variables: {x: " + "[" * depth + "]" * depth + "}\n")
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"bench.yaml:6: nested deeper than {MAX_DEPTH} levels" in proc.stderr
    ok = make_bench(HEAD + "variables: {x: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "}\n")
    assert "nested deeper" not in ok.cli("validate", "bench.yaml").stderr


def test_oversized_spec_is_refused_with_the_limit(make_bench):
    bench = make_bench(HEAD + "description: '" + "x" * (MAX_BYTES + 10) + "'\n")
    proc = bench.cli("validate", "bench.yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"a spec may be at most {MAX_BYTES // 2**20} MB" in proc.stderr


def test_python_tags_are_refused():
    with pytest.raises(SpecError, match=r"s.yaml:6: unsupported YAML tag"):
        parse_spec(HEAD + "description: !!python/object/apply:os.system ['touch x']\n", file="s.yaml")


def test_spec_is_parsed_once_with_the_c_parser(monkeypatch):
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML here has no libyaml")
    calls = []
    real_parse = yaml.parse

    def counting_parse(stream, Loader):  # noqa: N803 - PyYAML's own argument name
        calls.append(Loader)
        return real_parse(stream, Loader=Loader)

    monkeypatch.setattr(yaml, "parse", counting_parse)
    for name in ("load", "compose", "safe_load", "compose_all", "load_all"):
        monkeypatch.setattr(yaml, name, lambda *a, **k: pytest.fail("the spec was read a second time"))
    spec = parse_spec(HEAD, file="s.yaml")
    assert spec.name == "hostile"
    assert calls == [yaml.CSafeLoader]


def test_lines_survive_the_one_pass_reader():
    doc = read_yaml("a:\n  b: [1, 2]\n  c:\n    - {d: 3}\n")
    assert doc.lines.line_for(("a", "b")) == 2
    assert doc.lines.line_for(("a", "c", 0, "d")) == 4
    assert doc.lines.line_for(("a", "nope")) == 1
