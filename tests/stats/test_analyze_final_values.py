"""`benchlab analyze` on a CSV of final values: read without pandas, the same JSON as through pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlab.stats.accounting import analyze_seeds
from benchlab.stats.runvalues import parse_final_values
from benchlab_testing import run_cli


def _plain_table(path: Path) -> Path:
    """3 tasks on different scales x 3 configs x 6 seeds, two metrics, one missing seed, values
    written as Python writes floats (17 digits) and as integers."""
    rng = np.random.default_rng(7)
    lines = ["task,config,seed,metric,value"]
    for t, scale in (("walk", 1.0), ("run", 40.0), ("jump", 0.01)):
        for c, shift in (("base", 0.0), ("wide", 0.3), ("tied", 0.0)):
            for s in range(6):
                if (t, c, s) == ("run", "wide", 4):
                    continue  # a missing seed: counted, and the comparison pairs on the rest
                lines.append(f"{t},{c},{s},score,{scale * (1 + shift + rng.normal(0, 0.2))!r}")
                lines.append(f"{t},{c},{s},steps,{int(rng.integers(100, 200))}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_plain_csv_gives_byte_for_byte_the_json_of_the_pandas_path(tmp_path: Path) -> None:
    table = _plain_table(tmp_path / "t.csv")
    assert parse_final_values(table.read_text().splitlines()) is not None  # the pandas-free path
    args = ["--baseline", "base", "--reps", "400", "--range", "score=0,60"]
    res = run_cli("analyze", str(table), *args, "--json")
    assert res.returncode == 0, res.stderr
    expected = analyze_seeds(pd.read_csv(table), baseline="base", reps=400, source=str(table),
                             ranges={"score": (0.0, 60.0)})
    assert res.stdout == expected.to_json() + "\n"
    assert "1 of 6 seeds missing (4)" in res.stdout  # the accounting ran on this path too
    worst = run_cli("analyze", str(table), *args, "--failed-as", "worst", "--metric", "steps", "--json")
    expected = analyze_seeds(pd.read_csv(table), baseline="base", reps=400, source=str(table),
                             failed_as="worst", metric="steps", ranges={"score": (0.0, 60.0)})
    assert worst.returncode == 0, worst.stderr
    assert worst.stdout == expected.to_json() + "\n"


def test_analyze_of_a_plain_csv_does_not_import_pandas(tmp_path: Path) -> None:
    table = _plain_table(tmp_path / "t.csv")
    probe = textwrap.dedent(f"""
        import runpy, sys
        sys.argv = ["benchlab", "analyze", {str(table)!r}, "--baseline", "base", "--reps", "200", "--json"]
        try:
            runpy.run_module("benchlab", run_name="__main__")
        except SystemExit as exc:
            assert not exc.code, exc.code
        print("pandas" in sys.modules, "scipy.stats" in sys.modules, file=sys.stderr)
    """)
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines()[-1] == "False False"
    assert '"comparisons"' in res.stdout


@pytest.mark.parametrize("body", [
    "t,a,0,nan",           # a failed seed: the accounting names it
    "t,a,0,1_000",         # pandas reads this as text, and says so
    "t,a,1.5,0.3",         # not a seed
    "t,a,0,0.3\nt,a,0,0.4",  # two values of one run: averaged, with a warning
    "NA,a,0,0.3",          # read as missing by pandas
    "7,a,0,0.3",           # read as a number by pandas
    "t,a,0,0.3,extra",     # a ragged row
])
def test_tables_the_plain_reader_cannot_vouch_for_are_left_to_pandas(body: str) -> None:
    assert parse_final_values(["task,config,seed,value", *body.splitlines()]) is None


def test_a_step_or_an_unknown_column_is_left_to_pandas_and_an_empty_step_is_not() -> None:
    assert parse_final_values(["task,config,seed,step,value", "t,a,0,10,0.3"]) is None
    assert parse_final_values(["task,config,seed,value,note", "t,a,0,0.3,x"]) is None
    values = parse_final_values(["task,config,seed,step,value", "t,a,0,,0.25", "t,b,-3,,2"])
    assert values is not None
    assert (values.task, values.config, values.metric, values.seed) == (
        ["t", "t"], ["a", "b"], ["value", "value"], [0, -3])
    assert values.value.tolist() == [0.25, 2.0]
