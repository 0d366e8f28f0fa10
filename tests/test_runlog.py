"""`benchlab.log` / `benchlab.summary`: the files a run writes, readable by the collector."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from benchlab.collect.files import read_metrics_jsonl
from benchlab.runlog import Logger


def test_log_appends_one_json_object_per_step(tmp_path):
    logger = Logger(tmp_path)
    for step in range(5):
        logger.log(step=step * 10, loss=1.0 / (step + 1), acc=step)
    logger.close()
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(ln) for ln in lines] == [
        {"step": s * 10, "loss": 1.0 / (s + 1), "acc": s} for s in range(5)]


def test_log_without_step_counts_calls(tmp_path):
    logger = Logger(tmp_path)
    logger.log(x=1.0)
    logger.log(x=2.0)
    logger.close()
    steps, vals = read_metrics_jsonl(tmp_path / "metrics.jsonl")["x"]
    assert steps.tolist() == [0.0, 1.0] and vals.tolist() == [1.0, 2.0]


def test_non_finite_values_round_trip(tmp_path):
    logger = Logger(tmp_path)
    logger.log(step=1, a=float("nan"), b=float("inf"), c=-float("inf"))
    logger.close()
    series = read_metrics_jsonl(tmp_path / "metrics.jsonl")
    assert math.isnan(series["a"][1][0]) and series["b"][1][0] == math.inf and series["c"][1][0] == -math.inf


def test_summary_merges_final_scalars(tmp_path):
    logger = Logger(tmp_path)
    logger.summary(acc=0.9)
    logger.summary(fit_time=1.5)
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"acc": 0.9, "fit_time": 1.5}


def test_module_helpers_write_into_benchlab_run_dir_and_flush_at_exit(tmp_path):
    code = ("from benchlab import log, summary\n"
            "for i in range(3): log(step=i, reward=i * 2.0)\n"
            "summary(reward=4.0)\n")
    env = {**os.environ, "BENCHLAB_RUN_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    steps, vals = read_metrics_jsonl(tmp_path / "metrics.jsonl")["reward"]
    assert steps.tolist() == [0, 1, 2] and vals.tolist() == [0.0, 2.0, 4.0]
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"reward": 4.0}


def test_importing_log_pulls_in_no_heavy_dependency():
    code = ("import sys; from benchlab import log; "
            "print(sorted(m for m in ('numpy', 'pandas', 'pydantic', 'yaml', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_summary_creates_the_run_directory(tmp_path):
    Logger(tmp_path / "new" / "run").summary(acc=1.0)
    assert json.loads((tmp_path / "new" / "run" / "metrics.json").read_text()) == {"acc": 1.0}


# --- the block formatter and the one-metric reader must agree with the json module ---------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from benchlab.collect import files as collect_files  # noqa: E402

numbers = st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
plain_keys = st.sampled_from(["loss", "acc", "lr", "info", "nan", "ünï", 'q"uote'])
records = st.lists(
    st.tuples(st.integers(0, 10**6) | st.floats(0, 1e6),
              st.dictionaries(plain_keys, numbers | st.booleans() | st.none() | st.text(max_size=5),
                              min_size=1, max_size=3)),
    min_size=1, max_size=30)


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@given(records)
@settings(max_examples=200, deadline=None)
def test_every_logged_record_reads_back_as_json_equal_to_what_was_logged(tmp_path_factory, recs):
    folder = tmp_path_factory.mktemp("log")
    logger = Logger(folder)
    for step, values in recs:
        logger.log(step=step, **values)
    logger.close()
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(recs)
    for line, (step, values) in zip(lines, recs, strict=True):
        back = json.loads(line)
        assert list(back) == ["step", *values]
        assert all(_same(back[k], v) and type(back[k]) is type(v) for k, v in {"step": step, **values}.items())


@given(records)
@settings(max_examples=200, deadline=None)
def test_one_metric_reader_gives_what_the_general_reader_gives(tmp_path_factory, recs):
    folder = tmp_path_factory.mktemp("read")
    logger = Logger(folder)
    for step, values in recs:
        logger.log(step=step, **values)
    logger.close()
    path = folder / "metrics.jsonl"
    fast = read_metrics_jsonl(path)
    general = _general_read(path)
    assert fast.keys() == general.keys()
    for key in fast:
        for got, want in zip(fast[key], general[key], strict=True):
            assert got.tolist() == want.tolist() or all(_same(a, b) for a, b in zip(got, want, strict=True))


def _general_read(path):
    saved = collect_files._one_metric
    collect_files._one_metric = lambda text: None
    try:
        return read_metrics_jsonl(path)
    finally:
        collect_files._one_metric = saved


def test_one_metric_reader_takes_the_common_file_and_declines_other_shapes(tmp_path):
    common = "".join(f'{{"step": {s}, "loss": {1 / (s + 1)!r}}}\n' for s in range(50))
    got = collect_files._one_metric(common.strip())
    assert got is not None and got["loss"][0].tolist() == list(range(50))
    assert got["loss"][1].tolist() == [1 / (s + 1) for s in range(50)]
    for other in ['{"step": 0, "loss": 1}\n{"step": 1, "acc": 2}',          # another field
                  '{"step": 0, "loss": 1}\n{"step": 1, "loss": "2"}',       # a string
                  '{"step": 0, "loss": 1}\n{"step": 1, "loss": {"a": 1}}',  # a mapping
                  '{"step": 0, "loss": 1}\n{"step": 1, "loss": 2',          # a torn line
                  '{"loss": 1, "step": 0}',                                 # step not first
                  '{"step": 0, "loss": 1, "acc": 2}']:                      # two fields
        assert collect_files._one_metric(other) is None, other
