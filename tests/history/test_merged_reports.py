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


def _git_folder(root: Path, base: float) -> tuple[Path, str]:
    """A results folder whose spec and script are committed in a git repository of their own."""
    import subprocess

    root.mkdir()
    (root / "run.py").write_text(SCRIPT + f"\n# version {base}\n")
    (root / "bench.yaml").write_text(textwrap.dedent(SPEC.replace("BASE", str(base))).lstrip())
    (root / ".gitignore").write_text("results/\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    run_cli("run", "bench.yaml", "--no-report", cwd=root, check=True)
    return root / "results" / "merge", sha


def _links(path: Path) -> list[str]:
    """Every link and image target of a Markdown or HTML report file, as written."""
    import re

    from markdown_it import MarkdownIt

    text = path.read_text()
    if path.suffix == ".html":
        return re.findall(r'(?:href|src)="([^"]+)"', text)
    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(text):
        for child in token.children or []:
            if child.type in ("link_open", "image"):
                found.append(str(child.attrGet("href") or child.attrGet("src")))
    return found


def test_every_link_of_a_merged_report_resolves_and_each_source_is_named_and_reproduced(tmp_path):
    import html
    from urllib.parse import unquote

    one, sha_one = _git_folder(tmp_path / "one", 0.5)
    two, sha_two = _git_folder(tmp_path / "two", 0.7)
    out = tmp_path / "pub" / "merged"
    run_cli("report", str(one), str(two), "--out", str(out), "--no-plots", cwd=tmp_path, check=True)
    checked = 0
    for name in ("BENCHMARKS.md", "BENCHMARK_REPORT.md", "report.html"):
        for href in _links(out / name):
            href = html.unescape(href)
            if href.startswith(("http://", "https://", "mailto:", "data:", "#")):
                continue
            target = (out / unquote(href.split("#")[0])).resolve()
            assert target.exists(), (name, href)
            checked += 1
    # 2 folders x 2 configs x 3 seeds: each seed's run folder is listed, each score links one.
    assert checked >= 12 + 4
    seeds_listed = [h for h in _links(out / "BENCHMARKS.md") if h.startswith("runs/")]
    assert len(set(seeds_listed)) == 12
    for href in set(seeds_listed):
        assert (out / href / "metrics.json").is_file()
    report = (out / "BENCHMARK_REPORT.md").read_text()
    # Each source's code is named, and the Reproduction section checks out each folder's own.
    assert f"commit {sha_one[:10]}" in report and f"commit {sha_two[:10]}" in report
    repro = report.split("## Reproduction", 1)[1]
    assert f"checkout {sha_one}" in repro and f"checkout {sha_two}" in repro
    assert "one command cannot reproduce them all" in repro
    assert f"--results {one.resolve()}-again" in repro and f"--results {two.resolve()}-again" in repro
