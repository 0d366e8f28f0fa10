"""`benchlab report A B` (several results folders, clashing names told apart by benchmark) and
`benchlab report table.csv` (a long-format CSV, curves included): the whole report, plots too."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np

from benchlab_testing import SCRIPT, run_cli

SPEC = """
name: merge
tasks: [{name: t1, params: {base: BASE}}]
configs: [{name: a, params: {extra: 1}}, {name: b, params: {extra: 2}}]
seeds: 3
command: python run.py base={base} extra={extra}
metrics: {primary: score}
baseline: a
"""


def _folder(root: Path, base: float) -> Path:
    root.mkdir()
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC.replace("BASE", str(base))).lstrip())
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    return root / "results" / "merge"


def test_report_over_two_folders_names_clashing_configs_by_benchmark(tmp_path):
    one, two = _folder(tmp_path / "one", 0.5), _folder(tmp_path / "two", 0.7)
    proc = run_cli("report", str(one), str(two), "--out", str(tmp_path / "rep"), "--no-html", cwd=tmp_path,
                   check=True)
    # Both folders hold a benchmark called "merge": their paths, as given, tell them apart.
    notes = [line for line in proc.stdout.splitlines() if line.startswith("note:")]
    assert notes == [f"note: config '{c}' is in merge@{one}, merge@{two}: named merge@{one}/{c}, merge@{two}/{c}"
                     for c in ("a", "b")]
    report = (tmp_path / "rep" / "BENCHMARK_REPORT.md").read_text()
    rows = [line.split("|") for line in report.splitlines() if line.startswith("| ") and "± " in line
            and "/results/merge/" in line]
    # SCRIPT scores base + seed/100: seeds 0..2 have mean base + 0.01.
    means = {cells[2].strip().split(" ")[0]: float(cells[4].split("±")[0]) for cells in rows}
    assert means == {f"merge@{one}/a": 0.51, f"merge@{one}/b": 0.51, f"merge@{two}/a": 0.71,
                     f"merge@{two}/b": 0.71}
    assert "Merged from" in report
    assert any((tmp_path / "rep" / "plots").glob("curves_*.png"))


def test_the_same_folder_named_twice_is_refused_rather_than_counted_twice(tmp_path):
    one = _folder(tmp_path / "one", 0.5)
    proc = run_cli("report", str(one), f"{one}/../merge/", "--out", str(tmp_path / "rep"), "--no-html",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"error: {one.resolve()} is named twice (as {one} and {one}/../merge): each results folder or "
        "table is merged once, or its runs would count twice"]
    assert not (tmp_path / "rep").exists()  # nothing written


def test_report_from_a_long_format_csv_with_curves(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["benchmark,task,config,seed,metric,step,value"]
    finals: dict[str, list[float]] = {"ppo": [], "dqn": []}
    for config, level in (("ppo", 0.8), ("dqn", 0.6)):
        for seed in range(4):
            for step in range(0, 50, 10):
                value = level * step / 40 + rng.normal(0, 0.01)
                lines.append(f"paper,cartpole,{config},{seed},return,{step},{value:.5f}")
            final = level + rng.normal(0, 0.02)
            finals[config].append(round(final, 5))
            lines.append(f"paper,cartpole,{config},{seed},return,,{final:.5f}")
    table = tmp_path / "paper.csv"
    table.write_text("\n".join(lines) + "\n")
    run_cli("report", str(table), "--no-html", cwd=tmp_path, check=True)
    out = tmp_path / "paper-report"
    report = (out / "BENCHMARK_REPORT.md").read_text()
    assert report.startswith("# Benchmark Report: paper")
    row = next(line for line in report.splitlines() if line.startswith("| ") and "| ppo" in line)
    assert f"{np.mean(finals['ppo']):.3f}"[:4] in row
    assert (out / "plots" / "curves_return.png").exists()
    csv = (out / "results.csv").read_text()
    assert json.dumps("cartpole")[1:-1] in csv
