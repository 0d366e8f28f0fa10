"""`benchlab report` on a real sweep with known numbers: every file, its values checked by hand."""

from __future__ import annotations

import base64
import math
import re
import statistics
from pathlib import Path

import pandas as pd
import pytest
from report_world import TARGETS, build_run_world, png_size, run_cli, scores
from scipy import stats as sps

from benchlab_testing import linked_run, unlink_score

PLOTS = {
    "curves_score.png",
    "scores_score.png",
    "cv_of_mean_score.png",
    "performance_profile.png",
    "radar.png",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("world")
    results = build_run_world(root)
    done = run_cli("report", str(results), "--out", str(root / "rep"), cwd=root, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("BENCHMARK_REPORT.md", "BENCHMARKS.md", "results.csv", "report.html"):
        assert f"wrote {root / 'rep' / name}" in done.stdout.replace("\n", "")
    return root / "rep"


def _fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}"


def _at(spread: float) -> int:
    """Decimals that show ``spread`` to 2 significant digits (the report's precision rule)."""
    return max(0, 1 - math.floor(math.log10(spread)))


def _rows(text: str, first: str) -> list[list[str]]:
    return [
        [c.strip() for c in ln.strip("|").split("|")]
        for ln in text.splitlines()
        if ln.startswith(f"| {first} |")
    ]


def _by_header(text: str, row: list[str]) -> dict[str, str]:
    """``row``'s cells by the headers of the table it is in (``text`` holds one table), so that
    a column added to the report's tables moves no cell an assertion reads."""
    header = next(ln for ln in text.splitlines() if ln.startswith("| rank |"))
    names = [c.strip() for c in header.strip("|").split("|")]
    assert len(names) == len(row), (names, row)
    return dict(zip(names, row, strict=True))


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end > 0 else None]


def test_results_table_shows_hand_computed_mean_and_std(report: Path):
    text = (report / "BENCHMARK_REPORT.md").read_text()
    t1 = _section(text, "### t1 (target 0.5)")
    for config, rank in (("b", "1"), ("a", "2"), ("c", "2")):
        vals = scores("t1", config)
        mean, std = statistics.mean(vals), statistics.stdev(vals)
        label = config + (" (baseline)" if config == "a" else "")
        row = _by_header(t1, next(
            r for r in _rows(t1, rank) + _rows(t1, rank + " (CI overlaps the best's)") if r[1].startswith(label)
        ))
        assert row["seeds"] == "4/4"  # completed/planned seeds
        # Every number of the row to the decimals the CI's half-width supports.
        half = sps.t.ppf(0.975, 3) * std / 2
        at = _at(half)
        assert row["score mean ± std"] == f"{mean:.{at}f} ± {std:.{at}f}"
        assert row["95% CI"] == f"[{mean - half:.{at}f}, {mean + half:.{at}f}]"
        assert [row["min"], row["max"]] == [f"{min(vals):.{at}f}", f"{max(vals):.{at}f}"]
        # secondary metric time = 10 + seed for every run: mean 11.5, std of 10..13 = 1.29.
        assert row["time"] == "11.5 ± 1.3"


def test_header_names_suite_metric_seeds_and_hardware(report: Path):
    text = (report / "BENCHMARK_REPORT.md").read_text()
    assert "**Task suite:** t1, t2, t3, t4" in text
    assert "**Primary metric:** score (higher is better)" in text
    assert "**Seeds per config:** 4/4 (seeds 0–3)" in text
    assert re.search(r"\*\*Hardware:\*\* CPU: .+ \(\d+ cores\); host ", text)  # no GPU: the CPU first
    assert "benchlab run " in _section(text, "## Reproduction")


def test_benchmarks_md_statuses_by_hand(report: Path):
    text = (report / "BENCHMARKS.md").read_text()
    icon = {"solved": "✅", "close": "⚠️", "failed": "❌"}
    # goal max; close means above 80% of the target.
    expected = {
        # t1 target 0.5: a 0.53, b 0.7375, c 0.53 all reach it.
        "t1": ("solved", "solved", "solved"),
        # t2 target 0.6: a and c (0.53) are above 0.48; b reaches it.
        "t2": ("close", "solved", "close"),
        # t3 target 0.6: a and c (0.33) are below 0.48; b (0.5375) is above it.
        "t3": ("failed", "close", "failed"),
    }
    for task, want in expected.items():
        (row,) = _rows(text, task)
        assert row[1] == _fmt(TARGETS[task])
        for cell, config, st in zip(row[2:5], "abc", want, strict=True):
            vals = scores(task, config)
            mean, std = statistics.mean(vals), statistics.stdev(vals)
            shown, href = unlink_score(cell)
            assert shown == f"{mean:.{_at(std)}f} ± {std:.{_at(std)}f} {icon[st]}"
            # The link is the run folder of the median seed; of 4 seeds, the lower middle one
            # (goal max: the worse of the two): the second lowest score.
            run = linked_run(report, href)
            assert (run["task"], run["config"]) == (task, config)
            assert vals[int(run["seed"])] == sorted(vals)[1]
        assert row[5] == f"b {icon[want[1]]} {want[1]}"
    (row,) = _rows(text, "t4")
    assert row[1] == "—" and row[5] == "b"
    assert not any(i in "".join(row) for i in icon.values())


def test_results_csv_is_the_long_table_of_final_scalars(report: Path):
    table = pd.read_csv(report / "results.csv")
    assert list(table.columns) == ["benchmark", "task", "config", "seed", "metric", "step", "value", "status",
                                   "failure_class"]
    assert (table["status"] == "completed").all()  # every planned run completed
    assert len(table) == 4 * 3 * 4 * 2 and table["step"].isna().all()
    got = table[(table.task == "t3") & (table.config == "b") & (table.metric == "score")]
    assert sorted(got["value"]) == pytest.approx(sorted(scores("t3", "b")))


def test_plots_are_valid_pngs_of_sensible_size(report: Path):
    found = {p.name for p in (report / "plots").glob("*.png")}
    assert found == PLOTS
    for name in PLOTS:
        path = report / "plots" / name
        width, height = png_size(path)
        assert 500 <= width <= 3000 and 300 <= height <= 3000, (name, width, height)
        assert path.stat().st_size > 10_000
    text = (report / "BENCHMARK_REPORT.md").read_text()
    for name in PLOTS:
        assert f"](plots/{name})" in text


def test_html_embeds_every_plot_and_links_nothing_outside(report: Path):
    page = (report / "report.html").read_text()
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    pngs = sorted((report / "plots").glob("*.png"))
    assert len(uris) == len(pngs) == len(PLOTS)
    assert sorted(base64.b64decode(u) for u in uris) == sorted(p.read_bytes() for p in pngs)
    assert 'src="http' not in page and 'href="http' not in page
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert "<table>" in page and "Statistical comparisons" in page


def test_profile_caption_says_scores_were_normalised_without_references(report: Path):
    text = (report / "BENCHMARK_REPORT.md").read_text()
    assert "The spec gives no reference scores, so each task is normalised" in text


def test_comparisons_match_scipy_and_holm_by_hand(report: Path):
    pytest.importorskip("benchlab.stats", reason="the comparisons come from benchlab.stats")
    text = (report / "BENCHMARK_REPORT.md").read_text()
    comp = _section(text, "## Statistical comparisons")
    pvals = {}
    for task in ("t1", "t2", "t3", "t4"):
        for cand in ("b", "c"):
            pvals[(task, cand)] = sps.ttest_rel(scores(task, cand), scores(task, "a")).pvalue
    # Holm over the 8 comparisons: sorted p times (m - i), running maximum, capped at 1.
    order = sorted(pvals, key=pvals.get)
    holm, running = {}, 0.0
    for i, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * pvals[key]))
        holm[key] = running
    for (task, cand), p in pvals.items():
        (row,) = [r for r in _rows(comp, task) if r[1] == cand]
        diff = statistics.mean(scores(task, cand)) - statistics.mean(scores(task, "a"))
        # task | candidate | verdict | mean diff [CI] | Holm p | seeds | design | test p | ...
        assert row[2] == ("✓ significantly better" if cand == "b"
                          else "✗ no significant difference")
        shown, ci = row[3].split(" [")
        decimals = len(shown.split(".")[1]) if "." in shown else 0
        assert all(len(b.split(".")[1]) == decimals for b in ci.rstrip("]").split(", "))
        assert float(shown) == pytest.approx(diff, abs=0.5 * 10**-decimals + 1e-12)
        assert float(row[4]) == pytest.approx(holm[(task, cand)], rel=0.05)
        assert row[5] == "4/4, 4/4"
        assert row[6] == "paired (4)"
        assert float(row[7].split()[1]) == pytest.approx(p, rel=0.05)


def test_summary_is_honest_about_significance(report: Path):
    pytest.importorskip("benchlab.stats", reason="the verdicts come from benchlab.stats")
    summary = _section((report / "BENCHMARK_REPORT.md").read_text(), "## Summary")
    assert "**b** has the best mean score on 4 of 4 tasks" in summary
    assert re.search(
        r"\*\*b\*\* is significantly better on t1 \(Holm-adjusted p=[0-9.e-]+\)", summary
    )
    assert (
        "Over all 8 comparisons with the baseline, 4 are significantly better, 0 "
        "significantly worse, 4 show no significant difference and 0 are undetermined"
    ) in summary


def test_report_without_plots_or_html_writes_only_text(tmp_path: Path, report: Path):
    results = report.parent / "out"
    done = run_cli("report", str(results), "--out", str(tmp_path / "r"), "--no-plots", "--no-html")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [
        "BENCHMARKS.md",
        "BENCHMARK_REPORT.md",
        "results.csv",
    ]
    assert "## Plots" not in (tmp_path / "r" / "BENCHMARK_REPORT.md").read_text()


def test_report_on_a_folder_that_is_not_one_fails_cleanly(tmp_path: Path):
    done = run_cli("report", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "no such results folder" in done.stderr and "Traceback" not in done.stderr


def test_seeds_flag_draws_individual_seed_curves(tmp_path: Path, report: Path):
    results = report.parent / "out"
    done = run_cli("report", str(results), "--out", str(tmp_path / "r"), "--seeds", "--no-html")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "r" / "BENCHMARK_REPORT.md").read_text()
    assert "thin lines: up to 20 individual seeds per config" in text
    assert "individual seeds" not in (report / "BENCHMARK_REPORT.md").read_text()
    # Same grid, same panels: only the seed lines differ, so the picture differs.
    seeded = (tmp_path / "r" / "plots" / "curves_score.png").read_bytes()
    assert seeded != (report / "plots" / "curves_score.png").read_bytes()
