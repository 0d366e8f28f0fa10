"""The Summary, BENCHMARKS.md and the report's tables name the same best config: exact ties are
said to be tied, a partial evaluation (lm-eval ``--limit``) is never ranked best without its
mark, and the Summary counts a winner's seeds over the tasks it wins as the tables count them."""

from __future__ import annotations

from pathlib import Path

from report_world import build_store_world

from benchlab.report import write_report


def _table_rows(report: str, task: str) -> list[list[str]]:
    """The cells of the report's results table of ``task``, the high-variance flag left out."""
    lines = report.split(f"### {task}\n", 1)[1].lstrip("\n").split("\n\n", 1)[0].splitlines()
    return [[c.replace(" ⚠", "").strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def _board_row(board: str, task: str) -> list[str]:
    line = next(line for line in board.splitlines() if line.startswith(f"| {task} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_an_exact_tie_names_the_same_best_everywhere_and_says_tied(tmp_path: Path):
    # zeta and alpha score exactly alike; the spec names zeta first, so zeta is named best and
    # alpha tied with it (a name's alphabetical order must not decide in one file and not another).
    values: dict[tuple[str, str], list[float | None]] = {
        ("t1", "zeta"): [0.5, 0.51, 0.52], ("t1", "alpha"): [0.5, 0.51, 0.52], ("t1", "mid"): [0.1, 0.11, 0.12]}
    folder = build_store_world(tmp_path / "res", values)
    write_report(folder, plots=False, html=False)
    board = (folder / "BENCHMARKS.md").read_text()
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    assert _board_row(board, "t1")[-1] == "zeta; tied with alpha (equal means)"
    summary = report.split("## Summary\n\n", 1)[1].split("\n", 1)[0]
    assert summary.startswith("**zeta** has the best mean score on 1 of 1 task (t1), tied with **alpha** on t1 "
                              "(equal means)"), summary
    rows = _table_rows(report, "t1")
    assert [(r[0], r[1]) for r in rows[:2]] == [("1", "zeta"), ("1 (tied: equal means)", "alpha")]


def test_a_partial_score_is_never_ranked_best_and_is_marked_where_it_is_shown(tmp_path: Path):
    # "lim" has the best mean on t1, but from runs evaluated on 50 of 1000 samples.
    values: dict[tuple[str, str], list[float | None]] = {
        ("t1", "full"): [0.50, 0.52, 0.51], ("t1", "lim"): [0.90, 0.92, 0.91], ("t1", "low"): [0.10, 0.12, 0.11]}
    folder = build_store_world(tmp_path / "res", values, partial={("t1", "lim"): "t1 50 of 1000 samples"})
    write_report(folder, plots=False, html=False)
    board = (folder / "BENCHMARKS.md").read_text()
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    assert _board_row(board, "t1")[-1] == "full"
    assert "(partial†)" in _board_row(board, "t1")[3]
    summary = report.split("## Summary\n\n", 1)[1].split("\n", 1)[0]
    assert summary.startswith("**full** has the best mean score on 1 of 1 task (t1)"), summary
    rows = {r[1]: r[0] for r in _table_rows(report, "t1")}
    # Ranked among the full evaluations; the partial one shown, marked, with no rank.
    assert rows == {"full": "1", "low": "2", "lim (partial†, not ranked)": "—"}


def test_the_summary_counts_a_winners_seeds_over_every_task_it_wins(tmp_path: Path):
    # best wins t1, t2, t3 with 6 planned seeds each; one seed failed on t2: 17 of 18.
    values: dict[tuple[str, str], list[float | None]] = {}
    for task in ("t1", "t2", "t3"):
        values[(task, "best")] = [0.9, 0.91, 0.92, 0.93, 0.94, 0.95]
        values[(task, "other")] = [0.1, 0.11, 0.12, 0.13, 0.14, 0.15]
    values[("t2", "best")][4] = None
    folder = build_store_world(tmp_path / "res", values)
    write_report(folder, plots=False, html=False)
    report = (folder / "BENCHMARK_REPORT.md").read_text()
    summary = report.split("## Summary\n\n", 1)[1].split("\n", 1)[0]
    assert ("**best** has the best mean score on 3 of 3 tasks (t1, t2, t3), from 17 of its 18 planned seeds "
            "there (t2 5/6; failed seeds excluded).") in summary, summary
    # As the table of t2 counts them.
    assert any(r[1] == "best" and r[2].startswith("5/6") for r in _table_rows(report, "t2"))
