"""Run directories: config.yaml reads back as the resolved config, retries keep earlier files."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchlab.execute import rundir
from benchlab.execute.rundir import Preparer, config_yaml, write_run_dir
from benchlab.plan import expand
from benchlab.spec import load_spec
from benchlab_testing import BASIC_SPEC

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text(max_size=12))
keys = st.text(max_size=10)
configs = st.recursive(
    st.dictionaries(keys, scalars | st.lists(scalars, max_size=4), max_size=5),
    lambda inner: st.dictionaries(keys, inner | scalars | st.lists(scalars, max_size=3), max_size=4),
    max_leaves=20,
)


@given(configs)
@settings(max_examples=300, deadline=None)
def test_config_yaml_reads_back_equal_under_pyyaml(config):
    assert yaml.safe_load(config_yaml(config)) == config


@pytest.mark.parametrize("value", ["true", "No", "null", "~", "1e5", "007", "0x1F", "1:30", "a: b", "x #y",
                                   "- a", "[1]", "{a}", "", " pad", "tab\there", "'q'", '"dq"', "ünï", "a\nb"])
def test_strings_that_look_like_other_yaml_stay_strings(value):
    assert yaml.safe_load(config_yaml({"k": value, value or "e": 1})) == {"k": value, value or "e": 1}


@pytest.mark.parametrize("value", [1e-05, 1e16, -2.5e-300, 0.1, -0.0, 5e-324])
def test_floats_read_back_as_the_same_float(value):
    back = yaml.safe_load(config_yaml({"x": value}))["x"]
    assert type(back) is float and back == value and math.copysign(1, back) == math.copysign(1, value)


def test_nan_and_infinities_read_back():
    back = yaml.safe_load(config_yaml({"a": float("nan"), "b": float("inf"), "c": float("-inf")}))
    assert math.isnan(back["a"]) and back["b"] == math.inf and back["c"] == -math.inf


def test_a_resolved_config_is_written_without_pyyaml(tmp_path, monkeypatch):
    (tmp_path / "bench.yaml").write_text(BASIC_SPEC)
    run = expand(load_spec(tmp_path / "bench.yaml"))[0]

    def refuse(*args, **kwargs):
        raise AssertionError("PyYAML was used")

    monkeypatch.setattr(rundir.yaml, "dump", refuse)
    write_run_dir(tmp_path / "r", run, 1)
    assert yaml.safe_load((tmp_path / "r" / "config.yaml").read_text()) == run.resolved_config()
    assert (tmp_path / "r" / "train.log").read_bytes() == b""


def test_a_list_of_mappings_goes_through_pyyaml():
    config = {"stages": [{"lr": 0.1}, {"lr": 0.01}], "name": "x"}
    assert yaml.safe_load(config_yaml(config)) == config


def test_a_retry_moves_the_earlier_attempts_files_aside(tmp_path):
    (tmp_path / "bench.yaml").write_text(BASIC_SPEC)
    run = expand(load_spec(tmp_path / "bench.yaml"))[0]
    write_run_dir(tmp_path / "r", run, 1)
    (tmp_path / "r" / "metrics.json").write_text('{"score": 1}')
    write_run_dir(tmp_path / "r", run, 2)
    assert not (tmp_path / "r" / "metrics.json").exists()
    assert (tmp_path / "r" / "attempts" / "1" / "metrics.json").read_text() == '{"score": 1}'
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["attempts", "config.yaml", "train.log"]


def test_preparer_writes_ahead_and_hands_each_directory_over_once(tmp_path):
    (tmp_path / "bench.yaml").write_text(BASIC_SPEC)
    runs = expand(load_spec(tmp_path / "bench.yaml"))[:3]
    prep = Preparer(tmp_path / "res")
    prep.ahead(runs)
    prep.step()
    assert prep.pending()
    assert prep.claim(runs[0].run_id) is True
    assert prep.claim(runs[0].run_id) is False  # handed over already
    assert prep.claim(runs[1].run_id) is False  # not written yet: the caller writes it
    prep.step()  # runs[1] left the queue when claimed; this writes runs[2]
    assert not prep.pending()
    assert prep.claim(runs[2].run_id) is True
    assert not (tmp_path / "res" / "runs" / runs[1].run_id).exists()


def test_attempt_folders_never_collide_when_attempt_numbers_start_over(tmp_path):
    # A ledger replaced or emptied numbers attempts from 1 again: each launch then asks to keep the
    # files before it as attempt 1, several times within one second.
    run_dir = tmp_path / "runs" / "abc"
    for i in range(5):
        rundir.prepare_run_dir(run_dir, 1)
        (run_dir / "train.log").write_text(f"attempt {i}\n")
    kept = sorted((p / "train.log").read_text() for p in (run_dir / "attempts").iterdir())
    assert kept == [f"attempt {i}\n" for i in range(4)]  # the last one is still in place
    assert (run_dir / "train.log").read_text() == "attempt 4\n"
