"""The report says only what the data supports: one seed, undetermined verdicts, precision,
tie labels, the radar, the profiles, seed points, and a Reproduction block that works."""

from __future__ import annotations

import shlex
import statistics
import textwrap
from pathlib import Path

from report_world import build_store_world

from benchlab.report import write_report
from benchlab_testing import run_cli


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start: end if end > 0 else None]


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines()
            if ln.startswith("| ") and not ln.startswith("|---")]


def test_one_seed_shows_no_interval_anywhere(tmp_path: Path):
    values = {(t, c): [v] for t, v0 in (("walk", 0.4), ("run", 0.6))
              for c, v in (("old", v0), ("new", v0 + 0.1))}
    folder = build_store_world(tmp_path / "res", values, baseline="old", curves=True)
    files = write_report(folder, tmp_path / "rep")
    text = files.markdown.read_text()
    rows = _rows(_section(text, "### walk"))
    new = next(r for r in rows if r[1] == "new")
    assert new[2] == "1/1" and new[3] == "0.5" and new[4] == "— (one seed)"
    assert "± —" not in text and "± nan" not in text
    curves = text.split("### Learning curves: score")[1].split("###")[0]
    assert "shaded 95% CI" not in curves and "(no interval)" in curves
    scores = text.split("### Scores: score")[1].split("###")[0]
    assert "one seed has no interval (walk/old, walk/new, run/old, run/new)" in scores
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "— (one seed)" in page


def test_one_seed_uses_the_evaluations_own_standard_error(tmp_path: Path):
    values = {("gsm8k", "ckpt"): [0.5625]}
    folder = build_store_world(tmp_path / "res", values)
    from benchlab.ledger import Store

    with Store.open(folder) as store:  # the evaluation's standard error, as a second metric
        store.conn.execute("INSERT INTO metrics SELECT run_id, 'score_stderr', 0.0137 "
                           "FROM metrics WHERE metric = 'score'")
        store.conn.commit()
    files = write_report(folder, tmp_path / "rep", plots=False)
    text = files.markdown.read_text()
    row = next(r for r in _rows(_section(text, "### gsm8k")) if r[1] == "ckpt")
    low, high = 0.5625 - 1.959964 * 0.0137, 0.5625 + 1.959964 * 0.0137
    assert row[3] == f"{0.5625:.3f} ± 0.014 (s.e.)"  # the s.e. to 2 significant digits: 3 decimals
    assert row[4] == f"[{low:.3f}, {high:.3f}] (s.e.)"
    assert "marked s.e.: the normal interval value ± 1.96 s.e." in text


def test_undetermined_is_its_own_category_in_the_summary(tmp_path: Path):
    # b - a is 0.1 on every seed (no variance of the differences: undetermined); c beats a
    # clearly; d equals a on average (no significant difference).
    a = [0.50, 0.53, 0.49, 0.55]
    values = {("t", "a"): a, ("t", "b"): [x + 0.1 for x in a],
              ("t", "c"): [0.70, 0.74, 0.71, 0.77], ("t", "d"): [0.52, 0.51, 0.50, 0.54]}
    folder = build_store_world(tmp_path / "res", values, baseline="a")
    files = write_report(folder, tmp_path / "rep", plots=False)
    summary = _section(files.markdown.read_text(), "## Summary")
    assert ("Over all 3 comparisons with the baseline, 1 is significantly better, 0 "
            "significantly worse, 1 shows no significant difference and 1 is undetermined"
            ) in summary
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "1 shows no significant difference and 1 is undetermined" in page


def test_numbers_are_written_to_the_precision_their_spread_supports(tmp_path: Path):
    values = {("cart", "ppo"): [250.0, 400.0, 600.0], ("cart", "dqn"): [410.0, 412.0, 415.0]}
    folder = build_store_world(tmp_path / "res", values, baseline="dqn")
    files = write_report(folder, tmp_path / "rep", plots=False)
    bench = (tmp_path / "rep" / "BENCHMARKS.md").read_text()
    ppo_std = statistics.stdev(values[("cart", "ppo")])  # 175.6: whole numbers
    dqn_std = statistics.stdev(values[("cart", "dqn")])  # 2.52: one decimal
    # Each score links to its median seed's run folder: 400 and 412, both seed 1.
    assert f"| [417 ± {ppo_std:.0f}](../res/runs/cart-ppo-1/) |" in bench
    assert f"| [412.3 ± {dqn_std:.1f}](../res/runs/cart-dqn-1/) |" in bench
    for text in (bench, files.markdown.read_text(), (tmp_path / "rep" / "report.html").read_text()):
        assert "e+0" not in text


def test_configs_whose_ci_overlaps_the_best_read_rank_1_and_are_not_called_tied(tmp_path: Path):
    # Three overlapping configs and one far below: ranks 1, 1, 1, 4; an overlap of intervals
    # is not a test, so it is labelled as what it is, never "tied".
    values = {("t", "a"): [0.50, 0.60, 0.55], ("t", "b"): [0.52, 0.58, 0.54],
              ("t", "c"): [0.51, 0.57, 0.53], ("t", "z"): [0.10, 0.11, 0.12]}
    folder = build_store_world(tmp_path / "res", values, baseline="z")
    files = write_report(folder, tmp_path / "rep", plots=False)
    rows = _rows(_section(files.markdown.read_text(), "### t"))[1:]
    overlap = "1 (CI overlaps the best's)"
    assert [r[0] for r in rows] == ["1", overlap, overlap, "4"]
    assert "tied" not in files.markdown.read_text()
    # Paired by seed, the effect size is d_z = mean(diff) / sd(diff), and is labelled so.
    text = files.markdown.read_text()
    assert "effect size (d_z paired, d unpaired)" in text and "| d_z = " in text


def test_radar_needs_three_configs_and_says_what_one_means(tmp_path: Path):
    two = {(t, c): [0.1 * i + 0.02 * j + 0.01 * s for s in range(3)]
           for i, t in enumerate(("t1", "t2", "t3"), start=1) for j, c in enumerate("ab")}
    files = write_report(build_store_world(tmp_path / "two", two), tmp_path / "rep2")
    assert not (tmp_path / "rep2" / "plots" / "radar.png").exists()
    assert "radar" not in files.markdown.read_text().split("## Statistical comparisons")[0]
    three = {(t, c): [0.1 * i + 0.02 * j + 0.01 * s for s in range(3)]
             for i, t in enumerate(("t1", "t2", "t3"), start=1) for j, c in enumerate("abc")}
    files = write_report(build_store_world(tmp_path / "three", three), tmp_path / "rep3")
    text = files.markdown.read_text()
    radar = text.split("### Per-task profile (radar)")[1].split("##")[0]
    assert "1 = best" not in radar
    assert "normalised by its worst (0) and best (1) run" in radar


def test_many_configs_get_one_profile_panel_each_and_seed_points(tmp_path: Path):
    values = {(t, c): [0.1 * i + 0.03 * j + 0.01 * s for s in range(3)]
              for i, t in enumerate(("t1", "t2"), start=1) for j, c in enumerate("abcd")}
    files = write_report(build_store_world(tmp_path / "res", values), tmp_path / "rep")
    text = files.markdown.read_text()
    profile = text.split("### Performance profiles")[1].split("###")[0]
    assert "each panel shows one config with its band over the other configs' profiles" in profile
    scores = text.split("### Scores: score")[1].split("###")[0]
    assert "of every seed (circles" in scores


def test_reproduction_block_runs_as_written(tmp_path: Path):
    root = tmp_path / "bench"
    root.mkdir()
    (root / "run.py").write_text(textwrap.dedent("""
        import json, os
        seed = int(os.environ["BENCHLAB_SEED"])
        with open(os.path.join(os.environ["BENCHLAB_RUN_DIR"], "metrics.json"), "w") as f:
            json.dump({"score": 0.5 + seed / 100}, f)
        """))
    (root / "bench.yaml").write_text(textwrap.dedent("""
        name: repro
        tasks: [{name: t}]
        configs: [{name: a}, {name: b, params: {x: 1}}]
        seeds: 2
        variables: {level: low}
        command: python run.py
        metrics: {primary: score}
        baseline: a
        """).lstrip())
    # Two results folders under ./results: a bare `benchlab report` could not pick one.
    for name in ("one", "two"):
        done = run_cli("run", "bench.yaml", "--results", f"results/{name}", "-s", "level=high",
                       "--no-report", cwd=root, timeout=300)
        assert done.returncode == 0, done.stderr
    done = run_cli("report", "results/one", cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (root / "results" / "one" / "BENCHMARK_REPORT.md").read_text()
    block = text.split("## Reproduction")[1].split("```bash\n")[1].split("```")[0]
    assert "benchlab==" not in block
    commands = [ln for ln in block.splitlines() if ln.startswith("benchlab ")]
    assert [shlex.split(c)[1] for c in commands] == ["run", "report"]
    assert "-s level=high" in commands[0]
    assert any(ln.startswith("pip install ") for ln in block.splitlines())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands:  # from another folder, exactly as written
        done = run_cli(*shlex.split(command)[1:], cwd=elsewhere, timeout=300)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    again = Path(shlex.split(commands[1])[2])
    assert (again / "BENCHMARK_REPORT.md").is_file()
    assert "this report again, from the runs it was made of: benchlab report " + str(
        (root / "results" / "one").resolve()) in block
