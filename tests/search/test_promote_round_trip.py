"""A value `search --promote` writes reads back identically through the spec reader, whatever
YAML 1.1 and 1.2 make of its text (`yes`, `on`, `0o17`, `1:30`, `1e-3`, `~`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlab.search.promote import _kind, _with_config
from benchlab.spec import parse_spec

SPEC = """\
name: tune
tasks: [{name: t}]
configs:
  - name: base   # the tuned one
    params: {x: 0.0, mode: fast, extra: 1}
seeds: 2
command: python run.py x={x} mode={mode} extra={extra}
metrics:
  primary: {name: test, goal: max}
"""

# Texts YAML 1.1 reads as something else than the string (booleans, octal, sexagesimal, null,
# numbers), and texts that are strings in both.
TRICKY = ["yes", "no", "on", "off", "y", "n", "Yes", "ON", "0o17", "017", "0x1F", "1:30", "190:20:30", "~", "null",
          "1e-3", "1e3", "1_000", ".inf", "-.inf", ".nan", "true", "False", "", " ", "2026-11-28", "0b101", "+1",
          "- x", "a: b", "#c", "'q'", '"dq"', "[1]", "{a: 1}", "*alias", "&anchor", "!tag", "%", "@x", "`x`"]

values = st.one_of(
    st.sampled_from(TRICKY),
    st.text(min_size=0, max_size=12),
    st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


def _read_back(value: object) -> object:
    origin = {"spec": "tune.yaml", "study": "tune:search", "trial": 3, "metric": "val", "value": 0.5}
    text = _with_config(SPEC, "base", "tuned", {"extra": value}, origin, "promoted")
    spec = parse_spec(text, file="promoted.yaml")
    return next(c for c in spec.configs if c.name == "tuned").params["extra"]


@pytest.mark.parametrize("value", TRICKY)
def test_each_text_yaml_versions_disagree_on_reads_back_as_that_text(value):
    got = _read_back(value)
    assert _kind(got) is str and got == value


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_value_a_trial_can_draw_reads_back_identically(value):
    got = _read_back(value)
    assert _kind(got) is _kind(value)
    if isinstance(value, float):
        assert got == value or (math.isnan(got) and math.isnan(value))
    else:
        assert got == value
