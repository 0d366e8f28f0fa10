"""The samples table from a CSV (any harness's export) and from NeMo-Skills outputs; bad input is
one message naming the file, line and field."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from benchlab.collect.samples import check_pairing, read_samples
from benchlab.errors import DataError
from benchlab_testing import run_cli


def _csv(path, rows, header="task,config,seed,repeat,question,cluster,metric,value"):
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


def test_a_samples_csv_is_read_with_defaults_for_optional_columns(tmp_path):
    path = _csv(tmp_path / "s.csv", [("gsm8k", "a", 1), ("gsm8k", "b", 0)], header="task,config,value")
    with pytest.raises(DataError, match="missing column"):
        read_samples(path)
    path = _csv(tmp_path / "s.csv", [("gsm8k", "a", "q1", 1), ("gsm8k", "b", "q1", 0)],
                header="task,config,question,value")
    table, _ = read_samples(path)
    assert list(table["seed"]) == [0, 0] and list(table["repeat"]) == [0, 0]
    assert table["cluster"].isna().all() and list(table["metric"]) == ["value", "value"]


def test_a_non_number_in_a_samples_csv_names_its_line_and_column(tmp_path):
    path = _csv(tmp_path / "s.csv", [("gsm8k", "a", "q1", 1), ("gsm8k", "b", "q1", "right")],
                header="task,config,question,value")
    proc = run_cli("analyze", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{path}:3 column 'value': expected a number, got 'right'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_analyze_a_samples_csv_with_repeats_splits_the_variance(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    truth = rng.random(50)
    for q in range(50):
        for k in range(4):
            rows.append(("math", "step20", 42, k, f"q{q}", "", "acc", int(rng.random() < truth[q])))
    path = _csv(tmp_path / "s.csv", rows)
    proc = run_cli("analyze", str(path), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["summary"][0]
    values = np.array([r[-1] for r in rows], dtype=float).reshape(50, 4)
    means = values.mean(axis=1)
    assert row["n_samples"] == 4 and row["se_type"] == "over questions"
    assert row["se"] == pytest.approx(stats.sem(means))
    within = values.var(axis=1, ddof=1).mean()
    assert row["split"]["within"] == pytest.approx(within)
    assert row["split"]["between"] == pytest.approx(max(0.0, means.var(ddof=1) - within / 4))
    assert row["split"]["se_reruns"] == pytest.approx(math.sqrt(within / 4 / 50))


def test_a_question_asked_differently_is_refused_or_dropped(tmp_path):
    header = "task,config,question,value,question_hash"
    rows = [("t", "a", "1", 1, "h1"), ("t", "b", "1", 0, "h1"), ("t", "a", "2", 1, "h2"), ("t", "b", "2", 1, "zz")]
    table, _ = read_samples(_csv(tmp_path / "s.csv", rows, header=header))
    with pytest.raises(DataError, match=r"task 't' question '2' was asked differently"):
        check_pairing(table)
    kept, warnings = check_pairing(table, drop=True)
    assert sorted({str(q) for q in kept["question"]}) == ["1"]
    assert warnings == ["t: 1 question(s) asked differently by the configs (their document or prompt hash "
                        "differs) left out of every config"]


def test_nemo_skills_reruns_are_repeats_of_a_question(tmp_path):
    # NeMo-Skills' layout: <output>/eval-results/<benchmark>/output-rs<k>.jsonl, one line per problem.
    for ckpt, right in (("step20", {0, 1}), ("step40", {0, 1, 2})):
        folder = tmp_path / "evals" / ckpt / "eval-results" / "math500"
        folder.mkdir(parents=True)
        for k in range(3):
            lines = [json.dumps({"problem": f"p{i}", "expected_answer": "1", "predicted_answer": "1",
                                 "symbolic_correct": (i in right) or (k == 2 and i == 3)}) for i in range(5)]
            (folder / f"output-rs{k}.jsonl").write_text("\n".join(lines) + "\n")
    table, _ = read_samples(tmp_path / "evals")
    assert set(table["config"]) == {"step20", "step40"}
    assert set(table["task"]) == {"math500"} and set(table["metric"]) == {"symbolic_correct"}
    assert sorted(set(table["repeat"])) == [0, 1, 2]
    proc = run_cli("compare", str(tmp_path / "evals"), "--baseline", "step20", "--candidate", "step40", "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)["comparisons"][0]
    # Question means: step20 [1, 1, 0, 1/3, 0], step40 [1, 1, 1, 1/3, 0]; d = [0, 0, 1, 0, 0].
    d = np.array([0, 0, 1, 0, 0], dtype=float)
    assert comp["mean_diff"] == pytest.approx(0.2)
    assert comp["se"] == pytest.approx(stats.sem(d))
    assert comp["test"] == "paired t"  # three samples a question: not McNemar's one-sample case


def test_compare_on_records_without_the_baseline_says_which_configs_there_are(tmp_path):
    path = _csv(tmp_path / "s.csv", [("t", "a", "1", 1), ("t", "b", "1", 0)], header="task,config,question,value")
    proc = run_cli("compare", str(path), "--baseline", "c", "--candidate", "b", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no config 'c' in the samples; configs are a, b" in proc.stderr


@pytest.mark.slow
def test_benchlab_eval_records_compare_two_checkpoints_over_items(tmp_path):
    """Two checkpoints (the stub model at two skills) evaluated by the real `benchlab eval`."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from evals_kit import eval_config

    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    config = eval_config(tmp_path)
    for name, p in (("step20", "0.3"), ("step40", "0.9")):
        port = free_port()
        stub = subprocess.Popen([sys.executable, "-m", "benchlab.evaluate.stub", "--port", str(port), "--config",
                                 str(config), "--p-correct", p, "--p-no-answer", "0.0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1).read()
                    break
                except OSError:
                    assert stub.poll() is None and time.monotonic() < deadline, "the stub did not start"
                    time.sleep(0.2)
            proc = run_cli("eval", "--model-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                           "--benchmarks", "arith", "--n-samples", "2", "--config", str(config),
                           "--out", str(tmp_path / "evals" / name), cwd=tmp_path, timeout=300)
            assert proc.returncode == 0, proc.stderr
        finally:
            stub.terminate()
            stub.wait(10)
    table, _ = read_samples(tmp_path / "evals")
    assert set(table["task"]) == {"arith"} and set(table["repeat"]) == {0, 1}
    proc = run_cli("compare", str(tmp_path / "evals"), "--baseline", "step20", "--candidate", "step40", "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)["comparisons"][0]
    # By hand from the records: each item's mean over its two samples, paired by id.
    means = {}
    for name in ("step20", "step40"):
        for line in (tmp_path / "evals" / name / "arith.jsonl").read_text().splitlines():
            rec = json.loads(line)
            means.setdefault(rec["id"], {})[name] = np.mean([float(c) for c in rec["correct"]])
    d = np.array([m["step40"] - m["step20"] for m in means.values()])
    assert comp["n_questions"] == len(d)
    assert comp["mean_diff"] == pytest.approx(d.mean())
    assert comp["se"] == pytest.approx(stats.sem(d))


def test_compare_with_effect_says_how_many_questions_it_needs(tmp_path):
    rng = np.random.default_rng(2)
    rows = []
    for q in range(120):
        p = rng.random()
        for name, shift in (("step20", 0.0), ("step40", 0.1)):
            rows.append(("gsm8k", name, 42, 0, f"q{q}", "", "acc", int(rng.random() < min(1.0, p + shift))))
    path = _csv(tmp_path / "s.csv", rows)
    proc = run_cli("compare", str(path), "--baseline", "step20", "--candidate", "step40", "--effect", "0.03",
                   "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)["comparisons"][0]
    values = np.array([r[-1] for r in rows], dtype=float).reshape(120, 2)
    se = stats.sem(values[:, 1] - values[:, 0])
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert comp["mde"] == pytest.approx(z * se)
    assert comp["power"]["questions"] == math.ceil(120 * (se / (0.03 / z)) ** 2)
    assert comp["power"]["samples"] is None and comp["power"]["samples_note"] == "one sample per question"
    proc = run_cli("compare", str(path), "--baseline", "step20", "--candidate", "step40", "--effect", "0",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "--effect: expected a difference > 0" in proc.stderr


def test_a_parquet_samples_table_reads_as_the_csv_does(tmp_path):
    import pandas as pd

    rows = [("t", "a", 0, 0, "q1", "", "acc", 1), ("t", "b", 0, 0, "q1", "", "acc", 0),
            ("t", "a", 0, 0, "q2", "", "acc", 1), ("t", "b", 0, 0, "q2", "", "acc", 1)]
    csv = _csv(tmp_path / "s.csv", rows)
    pd.read_csv(csv).to_parquet(tmp_path / "s.parquet", index=False)
    from_csv, _ = read_samples(csv)
    from_parquet, _ = read_samples(tmp_path / "s.parquet")
    assert from_parquet["value"].tolist() == from_csv["value"].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert [str(c) for c in from_parquet["config"]] == ["a", "b", "a", "b"]
    proc = run_cli("compare", str(tmp_path / "s.parquet"), "--baseline", "a", "--candidate", "b", "--json",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["comparisons"][0]["mean_diff"] == pytest.approx(-0.5)


def test_names_new_in_a_later_part_of_the_file_keep_their_rows(tmp_path):
    # Each Parquet row group (and each block of a large CSV) comes with its own dictionary of
    # names; the reader maps every part's codes onto one set of names.
    import pandas as pd

    columns = {"task": ["t", "t", "u", None, "u", "v"], "config": ["a", "b", "b", "a", "c", "a"],
               "question": ["1", "1", "2", "2", "3", "3"], "value": [1, 0, 1, 1, 0, 1],
               "cluster": [None, None, "k", None, "k", "j"]}
    pd.DataFrame(columns).to_parquet(tmp_path / "s.parquet", index=False, row_group_size=2)
    table, _ = read_samples(tmp_path / "s.parquet")
    for col in ("task", "config", "cluster"):
        assert [None if pd.isna(v) else str(v) for v in table[col]] == columns[col]
    assert list(table["config"].cat.categories) == ["a", "b", "c"]  # in order of appearance
    assert table["value"].tolist() == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]


def test_a_runs_own_curves_beside_benchlab_eval_records_are_not_read_as_questions(tmp_path):
    run = tmp_path / "evals" / "step20"
    run.mkdir(parents=True)
    (run / "raw_metrics.json").write_text("{}")
    (run / "metrics.json").write_text('{"arith/pass@1/accuracy": 0.5}')
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.3}\n')
    (run / "arith.jsonl").write_text('{"id": "a1", "correct": [true, false]}\n{"id": "a2", "correct": [true, null]}\n')
    table, _ = read_samples(tmp_path / "evals")
    assert sorted(zip(table["question"], table["repeat"], table["value"], strict=True)) == [
        ("a1", 0, 1.0), ("a1", 1, 0.0), ("a2", 0, 1.0)]
    assert set(table["task"]) == {"arith"} and set(table["config"]) == {"step20"}


def test_the_pairing_refusal_shows_the_part_of_the_hash_that_differs(tmp_path):
    # lm-eval's hash is <doc_hash>:<prompt_hash>; here the documents agree and the prompts differ.
    header = "task,config,question,value,question_hash"
    doc = "d" * 64
    rows = [("t", "a", "1", 1, f"{doc}:{'a' * 64}"), ("t", "b", "1", 0, f"{doc}:{'b' * 64}")]
    table, _ = read_samples(_csv(tmp_path / "s.csv", rows, header=header))
    with pytest.raises(DataError) as err:
        check_pairing(table)
    assert f"prompt hash a: {'a' * 16}; b: {'b' * 16}" in str(err.value)
    assert "d" * 16 not in str(err.value)


def test_nemo_skills_files_with_and_without_ids_pair_by_the_problem(tmp_path):
    # The baseline's file numbers its problems; the candidate's has no id and another order.
    for ckpt, order, with_id in (("step20", range(30), True), ("step40", reversed(range(30)), False)):
        folder = tmp_path / "evals" / ckpt / "eval-results" / "aime"
        folder.mkdir(parents=True)
        lines = []
        for i in order:
            rec = {"problem": f"problem {i}", "symbolic_correct": i % 2 == 0 or (ckpt == "step40" and i < 6)}
            if with_id:
                rec["id"] = i
            lines.append(json.dumps(rec))
        (folder / "output-rs0.jsonl").write_text("\n".join(lines) + "\n")
    table, notes = read_samples(tmp_path / "evals")
    assert table.groupby("config")["question"].nunique().to_dict() == {"step20": 30, "step40": 30}
    assert table["question"].nunique() == 30
    assert any("keyed by the hash of its problem text" in n for n in notes)
    from benchlab.stats.question_table import analyze_questions

    comp = analyze_questions(table, baseline="step20").comparisons[0].result
    assert comp.n_questions == 30 and (comp.better, comp.worse) == (3, 0)


def _numbered(count):
    return [("t", "ab"[i % 2], 0, i % 3, i // 2, "", "acc", i % 2) for i in range(count)]


def _head_of(monkeypatch, size):
    # The CSV reader converts with the types pyarrow infers from the file's head: a tiny head
    # puts the rows below past it, as millions of rows put them past the real one.
    from benchlab.collect import samples_table

    monkeypatch.setattr(samples_table, "_HEAD_BLOCK", size)


def test_a_csv_reads_the_same_whether_its_types_show_in_its_head_or_later(tmp_path, monkeypatch):
    import pandas as pd

    late = {"text question": ("t", "a", 0, 0, "q9", "", "acc", 1),
            "real value": ("t", "a", 0, 0, 7, "", "acc", 0.25),
            "missing question": ("t", "a", 0, 0, "", "", "acc", 1),
            "missing value": ("t", "a", 0, 0, 7, "", "acc", ""),
            "question past 32 bits": ("t", "a", 0, 0, 2**40, "", "acc", 1),
            "seed below -2**31": ("t", "a", -(2**35), 0, 7, "", "acc", 1),
            "new names": ("u", "c", 0, 0, 7, "k", "acc2", 1)}
    for what, row in late.items():
        path = _csv(tmp_path / "s.csv", [*_numbered(60), row, *_numbered(60)])
        whole, _ = read_samples(path)
        _head_of(monkeypatch, 256)
        headed, _ = read_samples(path)
        monkeypatch.undo()
        pd.testing.assert_frame_equal(headed, whole, check_exact=True, obj=what)
        for col in ("task", "config", "cluster", "metric"):
            assert list(headed[col].cat.categories) == list(whole[col].cat.categories), (what, col)
    assert whole["task"].cat.categories.tolist() == ["t", "u"]  # in order of appearance
    table, _ = read_samples(_csv(tmp_path / "s.csv", [*_numbered(60), late["text question"]]))
    assert table["question"].iloc[-1] == "q9"


def test_a_malformed_row_past_the_head_of_a_csv_is_refused_as_before(tmp_path, monkeypatch):
    _head_of(monkeypatch, 256)
    short = _csv(tmp_path / "short.csv", [*_numbered(60), ("t", "a", 0, 0, 7, "", "acc"), *_numbered(4)])
    with pytest.raises(DataError, match=r"short\.csv: not a readable CSV \(CSV parse error: Expected 8 columns"):
        read_samples(short)
    word = _csv(tmp_path / "word.csv", [*_numbered(60), ("t", "a", 0, 0, 7, "", "acc", "right")])
    with pytest.raises(DataError, match=r"word\.csv:62 column 'value': expected a number, got 'right'"):
        read_samples(word)


def test_names_that_look_like_numbers_stay_names_in_a_csv(tmp_path):
    path = _csv(tmp_path / "s.csv", [("t", "1.0", 0, 0, 1, "", "acc", 1), ("t", "1", 0, 0, 1, "", "acc", 0),
                                     ("t", "None", 0, 0, 1, "", "acc", 1), ("t", "", 0, 0, 1, "", "acc", 1)])
    table, _ = read_samples(path)
    assert table["config"].cat.categories.tolist() == ["1.0", "1", "None"]
    assert table["config"].isna().tolist() == [False, False, False, True]


def test_a_bad_value_after_blank_lines_is_named_by_its_own_line(tmp_path):
    """pyarrow skips empty lines, so a row's index is not its line: the error must name the line
    a user opens the file at."""
    from benchlab.collect.samples_table import read_samples_csv

    path = tmp_path / "gaps.csv"
    path.write_text("task,config,question,value\n\nt,a,1,0.5\n\r\n\nt,a,2,oops\nt,a,3,1\n")
    with pytest.raises(DataError, match=r"gaps\.csv:6 column 'value': expected a number, got 'oops'"):
        read_samples_csv(path)


def test_integer_columns_keep_the_type_pyarrows_own_conversion_gives_them(tmp_path):
    # Gathered chunk by chunk (samples_table._frame): the same numpy types as pyarrow's
    # to_pandas, over several chunks, and a column with a missing integer as reals with NaN.
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 3000
    table = pa.table({
        "task": ["t"] * n, "config": ["a", "b"] * (n // 2),
        "seed": pa.array(np.arange(n) % 3, pa.int32()), "repeat": pa.array(np.arange(n) % 2, pa.int8()),
        "question": pa.array([None if i == 7 else i // 2 for i in range(n)], pa.int64()),
        "value": pa.array(np.arange(n) % 2, pa.int16()),
    })
    path = tmp_path / "s.parquet"
    pq.write_table(table, path, row_group_size=700)  # several chunks to gather
    read, _ = read_samples(path)
    expected = table.to_pandas()
    for column in ("seed", "repeat", "question"):
        assert read[column].dtype == expected[column].dtype, column
        np.testing.assert_array_equal(read[column].to_numpy(), expected[column].to_numpy())
    assert read["seed"].dtype == np.int32 and read["repeat"].dtype == np.int8
    assert math.isnan(read["question"].iloc[7]) and read["value"].dtype == np.float64


def test_integers_parsed_in_32_bits_come_back_as_pyarrow_reads_them(tmp_path, monkeypatch):
    # The typed read parses 64-bit integer columns as int32 first and widens them in the frame;
    # a value past 32 bits (here after the head) makes it read them as int64: either way the
    # columns are pyarrow's own reading of the file, type and values.
    import pyarrow.csv as pacsv

    _head_of(monkeypatch, 256)
    for late in ((), (("t", "a", 3, 1, 2**40, "", "acc", 1),), (("t", "a", -(2**35), 1, 5, "", "acc", 0),)):
        path = _csv(tmp_path / "s.csv", [*_numbered(60), *late, *_numbered(3)])
        table, _ = read_samples(path)
        own = pacsv.read_csv(path).to_pandas()
        for col in ("seed", "repeat", "question"):
            assert table[col].dtype == own[col].dtype == np.int64, (late, col)
            np.testing.assert_array_equal(table[col].to_numpy(), own[col].to_numpy())


def test_name_columns_read_the_same_in_runs_or_changing_every_row(tmp_path, monkeypatch):
    # A name column whose head runs is encoded run by run, the others by the parser: either way
    # the categorical is pyarrow's own reading of the file (its dictionaries unified, categories
    # in order of appearance, a missing name as NaN), over many blocks, with names first seen in
    # a later block and runs that cross a block's end.
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from benchlab.collect import samples_table

    encoded = []
    original = samples_table._categorical_of_runs
    monkeypatch.setattr(samples_table, "_categorical_of_runs",
                        lambda column, pool=None: encoded.append(len(column)) or original(column, pool))
    monkeypatch.setattr(samples_table, "_TYPED_BLOCK", 1 << 10)  # dozens of blocks
    _head_of(monkeypatch, 1 << 10)
    rng = np.random.default_rng(3)
    n = 1200
    grouped = [f"cfg{i * 7 // n}" for i in range(n)]  # runs of ~170 rows, a new name every run
    shuffled = [f"m{k}" for k in rng.integers(0, 40, n)]
    orders = {  # config, metric, and how many of the two the head shows in runs
        "runs throughout": (grouped, grouped, 2),
        "changing every row": (shuffled, shuffled, 0),
        "runs in the head only": (grouped[:100] + shuffled[100:], shuffled, 1),
        "runs after the head only": (shuffled[:100] + grouped[100:], grouped, 1),
    }
    for what, (config, metric, in_runs) in orders.items():
        config = [None if i % 301 == 150 else c for i, c in enumerate(config)]  # missing names, runs cut
        rows = [("t", "" if c is None else c, 0, 0, i, "", m, i % 2)
                for i, (c, m) in enumerate(zip(config, metric, strict=True))]
        path = _csv(tmp_path / "s.csv", rows)
        encoded.clear()
        table, _ = read_samples(path)
        names = pa.dictionary(pa.int32(), pa.string())
        own = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types={"config": names, "metric": names, "task": names}, strings_can_be_null=True)).to_pandas()
        for col in ("config", "metric"):
            pd.testing.assert_series_equal(table[col].astype(object), own[col].astype(object), obj=f"{what}: {col}")
            assert table[col].cat.categories.tolist() == own[col].cat.categories.tolist(), (what, col)
        assert table["config"].isna().sum() == sum(c is None for c in config)
        # task and cluster (one name, and no name at all) run throughout
        assert len(encoded) == in_runs + 2, what
