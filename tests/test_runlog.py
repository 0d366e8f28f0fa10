"""`benchlab.log` / `benchlab.summary`: the files a run writes, readable by the collector."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from benchlab.collect.files import read_metrics_jsonl
from benchlab.runlog import CACHE_NAME, Logger


@pytest.fixture(autouse=True)
def _cache_for_every_size(monkeypatch):
    """The files here are small, which the reader parses from their text; the tests of the cache
    have it read at every size."""
    monkeypatch.setattr(collect_files, "CACHE_WORTH_BYTES", 0)


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

from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from benchlab.collect import files as collect_files  # noqa: E402

# 10**400: an integer JSON holds and float64 does not (readers take it as infinite, as json.loads takes 1e400)
numbers = (st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([10**400, -10**400]))
plain_keys = st.sampled_from(["loss", "acc", "lr", "info", "nan", "ünï", 'q"uote'])
records = st.lists(
    st.tuples(st.integers(0, 10**6) | st.floats(0, 1e6),
              st.dictionaries(plain_keys, numbers | st.booleans() | st.none() | st.text(max_size=5),
                              min_size=1, max_size=3)),
    min_size=1, max_size=30)


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@given(records)
# The same fields in another order than the record before: written in the order logged.
@example(recs=[(0, {"loss": 0, "acc": 0, "lr": 0}), (0, {"loss": 0, "lr": 0, "acc": 0})])
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


plain_records = st.lists(
    st.tuples(st.integers(0, 10**6) | st.floats(0, 1e6),
              st.dictionaries(plain_keys, numbers, max_size=3)),
    min_size=1, max_size=40)
# After which records the logger flushes, or closes and goes on (reopening its files).
cuts = st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["flush", "close"])), max_size=4)


def _as_float(value):
    if type(value) is float or abs(value) < 10**400:
        return float(value)
    return math.inf if value > 0 else -math.inf


def _expected_series(recs):
    """What any reader must give, worked out from the calls alone: per metric, the
    (step, value) of every record where it was a plain number (not a bool)."""
    out = {}
    for step, values in recs:
        for key, value in values.items():
            if type(value) in (int, float):
                steps, vals = out.setdefault(key, ([], []))
                steps.append(float(step))
                vals.append(_as_float(value))
    return out


def _assert_series(got, want, context):
    assert got.keys() == want.keys(), context
    for key in want:
        for array, expected in zip(got[key], want[key], strict=True):
            assert array.dtype == float and len(array) == len(expected), context
            assert all(_same(float(a), b) for a, b in zip(array, expected, strict=True)), (key, got, context)


@given(plain_records | records, cuts)
@settings(max_examples=300, deadline=None)
def test_every_reader_gives_the_numbers_that_were_logged(tmp_path_factory, recs, cut_at):
    folder = tmp_path_factory.mktemp("read")
    logger = Logger(folder)
    for i, (step, values) in enumerate(recs):
        logger.log(step=step, **values)
        for where, how in cut_at:
            if where == i:
                getattr(logger, how)()
    logger.close()
    path = folder / "metrics.jsonl"
    want = _expected_series(recs)
    text = path.read_text()
    _assert_series(read_metrics_jsonl(path), want, ("cache", recs))  # through the cache when there is one
    _assert_series(collect_files.parse_metrics_jsonl(text), want, ("text", recs))  # one-metric reader first
    saved = collect_files._one_metric
    collect_files._one_metric = lambda text: None
    try:
        _assert_series(collect_files.parse_metrics_jsonl(text), want, ("general", recs))
    finally:
        collect_files._one_metric = saved
    # the cache is there exactly when every logged value was a plain number float64 can hold
    all_numbers = all(type(v) is float or (type(v) is int and abs(v) < 10**400)
                      for _, values in recs for v in values.values())
    cache = collect_files.read_cache(folder / CACHE_NAME, path.read_bytes())
    assert (cache is not None) == all_numbers


def _logged(folder, n=3):
    logger = Logger(folder)
    for s in range(n):
        logger.log(step=s, loss=0.5 + s)
    logger.close()
    return folder / "metrics.jsonl"


def test_the_cache_is_not_used_once_the_text_is_edited(tmp_path):
    path = _logged(tmp_path)
    edited = path.read_text().replace("1.5", "1.7")  # same length, another value
    path.write_text(edited)
    assert read_metrics_jsonl(path)["loss"][1].tolist() == [0.5, 1.7, 2.5]


def test_the_cache_is_not_used_once_another_writer_appends(tmp_path):
    path = _logged(tmp_path)
    with path.open("a") as fh:
        fh.write('{"step": 3, "loss": 9.0}\n')
    assert read_metrics_jsonl(path)["loss"][1].tolist() == [0.5, 1.5, 2.5, 9.0]


def test_a_torn_cache_is_not_used(tmp_path):
    path = _logged(tmp_path)
    cache = tmp_path / CACHE_NAME
    whole = cache.read_bytes()
    assert collect_files.read_cache(cache, path.read_bytes()) is not None
    for cut in (1, 25, len(whole) // 2):
        cache.write_bytes(whole[:-cut])
        assert collect_files.read_cache(cache, path.read_bytes()) is None
        assert read_metrics_jsonl(path)["loss"][1].tolist() == [0.5, 1.5, 2.5]


def test_a_logger_appending_to_a_file_it_did_not_start_leaves_no_cache(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "loss": 7.0}\n')
    (tmp_path / CACHE_NAME).write_bytes(b"stale")
    logger = Logger(tmp_path)
    logger.log(step=1, loss=8.0)
    logger.close()
    assert not (tmp_path / CACHE_NAME).exists()
    assert read_metrics_jsonl(path)["loss"][1].tolist() == [7.0, 8.0]


def test_numpy_numbers_are_logged_as_the_numbers_they_hold(tmp_path):
    import numpy as np

    logger = Logger(tmp_path)
    logger.log(step=np.int64(2), loss=np.float32(0.5), best=np.bool_(True), lr=np.float64(0.1))
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        logger.log(step=3, weights=np.array([1.0, 2.0]))
    logger.summary(acc=np.float32(0.25), n=np.int32(7))
    logger.close()
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 2, "loss": 0.5, "best": true, "lr": 0.1}\n'
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"acc": 0.25, "n": 7}


def test_records_waiting_for_a_flush_stay_bounded(tmp_path):
    from benchlab import runlog

    logger = Logger(tmp_path)
    for s in range(3 * runlog._PENDING_MAX):
        logger.log(step=s, loss=1.0)
        assert len(logger._steps) < runlog._PENDING_MAX
    logger.close()
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 3 * runlog._PENDING_MAX


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


def test_a_small_file_is_parsed_from_its_text_and_a_large_one_read_through_its_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_files, "CACHE_WORTH_BYTES", 16 * 1024)
    small, large = tmp_path / "small", tmp_path / "large"
    for folder, n in ((small, 20), (large, 2000)):
        logger = Logger(folder)
        for s in range(n):
            logger.log(step=s, loss=1.0 / (s + 1), acc=s / n)
        logger.close()
    assert (small / "metrics.jsonl").stat().st_size < 16 * 1024 < (large / "metrics.jsonl").stat().st_size
    opened = []
    real = collect_files.read_cache

    def spy(path, jsonl):
        opened.append(path.parent.name)
        return real(path, jsonl)

    monkeypatch.setattr(collect_files, "read_cache", spy)
    got_small = read_metrics_jsonl(small / "metrics.jsonl")
    got_large = read_metrics_jsonl(large / "metrics.jsonl")
    assert opened == ["large"]
    assert got_small["loss"][1].tolist() == [1.0 / (s + 1) for s in range(20)]
    assert got_large["acc"][1].tolist() == [s / 2000 for s in range(2000)]
    assert got_large["loss"][0].tolist() == [float(s) for s in range(2000)]
