"""How the report's figures are drawn: a few collections per panel, one layout pass, the panels
of a row labelled once, the jobs handed out largest first. Each drawing is checked against what
plain matplotlib (``fill_between``, ``plot``, ``tight_layout``, the title's own placement) does
with the same numbers."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import psutil
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import to_rgba

from benchlab.report import plots
from benchlab.report.style import Plot, add_bands, band_polygons, new_figure, style, tight, top_title
from benchlab.results import BenchmarkInfo
from benchlab.stats.curves import CurveSet
from benchlab.stats.table import AnalysisOptions, describe_runs


def _drawn(fig: Any) -> None:
    FigureCanvasAgg(fig).draw()


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the plot functions draw, as they are just before saving."""
    figures: list[Any] = []

    def keep(fig: Any, folder: Path, name: str, *args: Any, **kwargs: Any) -> str:
        figures.append(fig)
        return f"plots/{name}"

    monkeypatch.setattr(plots, "save", keep)
    return figures


def test_band_polygons_fill_the_area_fill_between_fills_broken_where_a_value_is_missing():
    x = np.arange(7.0)
    low = np.array([0.0, 1.0, np.nan, 3.0, 4.0, 5.0, 6.0])
    high = low + np.array([2.0, 1.0, 1.0, 3.0, 0.5, 1.0, 2.0])
    high[5] = np.inf  # not finite either: a gap, as fill_between masks it
    ax = new_figure(3, 2).add_subplot()
    expected = [p.vertices for p in ax.fill_between(x, low, high).get_paths()]
    add_bands(ax, band_polygons(x, low, high), ["#0072B2"] * 3, alpha=0.2)
    got = [p.vertices for p in ax.collections[-1].get_paths()]
    # Steps 0-1, 3-4 and the lone step 6 (which encloses no area, as in fill_between).
    assert len(got) == len(expected) == 3
    for mine, theirs in zip(got, expected, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_curve_panel_draws_each_configs_band_and_mean_and_scales_as_plotting_them_one_by_one(kept):
    grid = np.array([0.0, 10.0, 20.0, 30.0])
    rng = np.random.default_rng(4)
    values = {"a": rng.normal(1.0, 0.2, (4, 4)), "b": rng.normal(3.0, 0.5, (3, 4)),
              "c": rng.normal(-1.0, 0.1, (1, 4))}  # c: one seed, a line and no band
    curve = CurveSet("loss", "t", grid, values, {c: list(range(v.shape[0])) for c, v in values.items()})
    info = BenchmarkInfo(name="x", primary="loss", goal={"loss": "min"}, baseline="a",
                         configs=["a", "b", "c"], tasks=["t"])
    (plot,) = plots.plot_curves([curve], info, Path("unused"))
    ax = kept[0].axes[0]
    (bands,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    (means,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bands.get_paths()) == 2  # a and b
    np.testing.assert_allclose(bands.get_facecolor(), [to_rgba(style(0)["color"], 0.2),
                                                       to_rgba(style(1)["color"], 0.2)])
    for segment, config in zip(means.get_segments(), ["a", "b", "c"], strict=True):
        np.testing.assert_allclose(segment[:, 1], curve.bands[config].mean)
    np.testing.assert_allclose(means.get_colors(), [to_rgba(style(i)["color"]) for i in range(3)])
    assert "c ran one seed on some task" in plot.caption
    # The same numbers drawn the plain way: one fill_between and one plot per config.
    plain = new_figure(3, 2).add_subplot()
    for i, config in enumerate(["a", "b", "c"]):
        band = curve.bands[config]
        if values[config].shape[0] > 1:
            plain.fill_between(grid, band.low, band.high, alpha=0.2, **style(i))
        plain.plot(grid, band.mean, **style(i))
    assert ax.get_xlim() == pytest.approx(plain.get_xlim())
    assert ax.get_ylim() == pytest.approx(plain.get_ylim())


def test_a_panel_title_sits_where_matplotlib_puts_it_and_above_an_offset_it_would_meet():
    fig = new_figure(6, 2.5)
    axes = fig.subplots(1, 4)
    for ax, ys in zip(axes, ([0.0, 1.0], [0.0, 1.0], [1000.0001, 1000.0002], [1000.0001, 1000.0002]),
                      strict=True):
        ax.plot([0.0, 1.0], ys)
    long = "a title as wide as its panel"
    top_title(axes[0], long)
    axes[1].set_title(long)
    top_title(axes[2], long)  # this y axis writes its offset (+1e3) at its top left
    axes[3].set_title(long)
    _drawn(fig)
    renderer = fig.canvas.get_renderer()
    place = [ax.title.get_window_extent(renderer).bounds for ax in axes]
    assert axes[2].yaxis.offsetText.get_text()
    assert place[0][1:] == pytest.approx(place[1][1:]) and place[2][1:] == pytest.approx(place[3][1:])
    offset = axes[2].yaxis.offsetText.get_window_extent(renderer)
    assert axes[2].title.get_window_extent(renderer).y0 >= offset.y1 - 1e-6  # moved above it


def test_tight_lays_out_as_tight_layout_and_saving_then_draws_the_figure_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from matplotlib.figure import Figure

    def figure() -> Figure:
        fig = new_figure(4, 3)
        ax = fig.add_subplot()
        ax.plot([0, 1], [0, 1])
        ax.set_ylabel("a long label on the y axis")
        ax.set_title("title")
        return fig

    plain, mine = figure(), figure()
    plain.tight_layout(rect=(0, 0.05, 1, 1))
    tight(mine, rect=(0, 0.05, 1, 1))
    assert vars(mine.subplotpars) == pytest.approx(vars(plain.subplotpars))
    draws: list[Figure] = []
    real = Figure.draw

    def counted(self: Figure, renderer: Any) -> None:
        draws.append(self)
        real(self, renderer)

    monkeypatch.setattr(Figure, "draw", counted)
    plain.savefig(tmp_path / "plain.png")
    mine.savefig(tmp_path / "mine.png")
    assert draws.count(plain) == 2 and draws.count(mine) == 1


def test_the_scores_figure_names_the_configs_once_per_row_of_panels(kept):
    tasks, configs = [f"t{i}" for i in range(5)], ["base", "x", "y"]
    finals = pd.DataFrame([{"task": t, "config": c, "seed": s, "metric": "acc", "value": 0.5 + 0.01 * s}
                           for t in tasks for c in configs for s in range(3)])
    info = BenchmarkInfo(name="b", primary="acc", goal={"acc": "max"}, baseline="base", configs=configs,
                         tasks=tasks)
    plots.plot_scores(describe_runs(finals, AnalysisOptions(goal={"acc": "max"})), info, Path("unused"), finals)
    fig = kept[0]
    _drawn(fig)
    shown = [[t.get_text() for t in ax.get_yticklabels() if t.get_visible() and t.get_text()] for ax in fig.axes]
    # 5 panels in rows of 3: the first of each row (t0, t3) names the configs, top to bottom.
    assert shown == [["y", "x", "base (baseline)"], [], [], ["y", "x", "base (baseline)"], []]
    assert {tuple(ax.get_yticks()) for ax in fig.axes} == {(0.0, 1.0, 2.0)}
    assert {ax.get_ylim() for ax in fig.axes} == {(-0.6, 2.6)}
    rows = {round(ax.get_position().y0, 6) for ax in fig.axes}
    assert len(rows) == 2


class _Recorder:
    """A pool that runs nothing: records the order of the jobs and answers each with a Plot
    naming it."""

    def __init__(self) -> None:
        self.order: list[str] = []

    @staticmethod
    def name(fn: Any, args: tuple[Any, ...]) -> str:
        return f"{fn.__name__}:{args[0][0].metric}" if fn is plots.plot_curves else fn.__name__

    def submit(self, fn: Any, *args: Any) -> Future[list[Plot]]:
        self.order.append(self.name(fn, args))
        done: Future[list[Plot]] = Future()
        done.set_result([Plot(self.order[-1], "", "")])
        return done

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_figures_are_handed_out_largest_first_and_listed_in_the_reports_order():
    grid = np.array([0.0, 1.0])
    one = {"a": np.ones((2, 2))}
    curves = [CurveSet("score", f"t{i}", grid, one, {"a": [0, 1]}) for i in range(3)]
    curves.append(CurveSet("loss", "t0", grid, one, {"a": [0, 1]}))
    rows = [SimpleNamespace(task=f"t{i}", config=f"c{j}") for i in range(4) for j in range(5)]
    analysis = SimpleNamespace(used=None, rows_of=lambda: rows, ranges={}, curves=curves, figures=object())
    info = BenchmarkInfo(name="b", primary="score", goal={"score": "max"}, baseline=None,
                         configs=[f"c{j}" for j in range(5)], tasks=["t0", "t1", "t2", "t3"])
    pool = _Recorder()
    listed = plots.draw(Path("unused"), info, analysis, pool=pool)()  # type: ignore[arg-type]
    # In panels: the profile 5 (a panel per config), the scores 4 (per task), the score curves 3;
    # one each for the loss curves, the CV and the radar, which keep the report's order.
    assert pool.order == ["plot_profile", "plot_scores", "plot_curves:score", "plot_curves:loss", "plot_cv",
                          "plot_radar"]
    assert [p.path for p in listed] == ["plot_curves:score", "plot_curves:loss", "plot_scores", "plot_cv",
                                        "plot_profile", "plot_radar"]


def test_curves_over_the_same_steps_label_them_once_per_column(kept):
    grid = np.array([0.0, 5e5, 1e6])
    one = {"a": np.array([[0.0, 0.5, 1.0], [0.0, 0.6, 0.9]])}
    info = BenchmarkInfo(name="b", primary="score", goal={"score": "max"}, baseline=None, configs=["a"],
                         tasks=[f"t{i}" for i in range(5)])
    plots.plot_curves([CurveSet("score", f"t{i}", grid, one, {"a": [0, 1]}) for i in range(5)], info,
                      Path("unused"))
    # Tasks logged to other steps keep their own labels on every panel.
    ragged = [CurveSet("score", f"t{i}", grid * (i + 1), one, {"a": [0, 1]}) for i in range(5)]
    plots.plot_curves(ragged, info, Path("unused"))
    for fig in kept:
        _drawn(fig)

    def labelled(ax: Any) -> bool:
        ticks = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        return bool(ticks) and ax.get_xlabel() == "step" and ax.xaxis.offsetText.get_visible()

    # 5 panels in rows of 3: t3 and t4 end their columns, and so does t2, above an empty cell.
    assert [labelled(ax) for ax in kept[0].axes] == [False, False, True, True, True]
    assert {ax.get_xlim() for ax in kept[0].axes} == {kept[0].axes[0].get_xlim()}
    assert all(labelled(ax) for ax in kept[1].axes)


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: [])(0)) < 2,
                    reason="figure workers start aside only where there are two or more cores")
def test_figure_workers_start_off_the_reports_core_and_then_draw_on_any(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    everywhere = os.sched_getaffinity(0)
    seen = tmp_path / "while-starting"

    def record() -> None:  # in place of the warm-up drawing, inside the starting worker
        with seen.open("a") as out:
            out.write(" ".join(map(str, sorted(os.sched_getaffinity(0)))) + "\n")

    monkeypatch.setattr(plots, "_warm_up", record)
    pool = plots.start_workers(2)
    assert pool is not None
    try:
        after = {frozenset(pool.submit(os.sched_getaffinity, 0).result(timeout=60)) for _ in range(4)}
    finally:
        pool.shutdown()
    starting = {frozenset(map(int, line.split())) for line in seen.read_text().splitlines()}
    assert starting == {frozenset(everywhere) - {min(everywhere)}}
    assert after == {frozenset(everywhere)}


def _who(delay: float) -> tuple[int, int]:
    """A job: this worker's process id and its parent's, after ``delay`` (so that every worker takes one)."""
    time.sleep(delay)
    return os.getpid(), os.getppid()


def _die() -> None:
    """A job whose worker is killed while drawing it (as by the kernel, out of memory)."""
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: [])(0)) < 2,
                    reason="figures are drawn in workers only with two or more cores")
def test_matplotlib_is_imported_and_warmed_up_once_and_the_other_workers_are_forked_from_that_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    warmed = tmp_path / "warmed"

    def record() -> None:  # in place of the warm-up drawing: which process warms up
        with warmed.open("a") as out:
            out.write(f"{os.getpid()}\n")

    monkeypatch.setattr(plots, "_warm_up", record)
    before = set(psutil.Process().children(recursive=True))  # the tests' own (their command server)
    pool = plots.start_workers(3)
    assert pool is not None
    try:
        seen = {f.result(timeout=60) for f in [pool.submit(_who, 0.3) for _ in range(9)]}
    finally:
        pool.shutdown()
    first = int(warmed.read_text())  # one line: one process warmed up
    assert {pid for pid, _ in seen} == {first} | {pid for pid, parent in seen if parent == first}
    assert len(seen) == 3 and (first, os.getpid()) in seen
    assert set(psutil.Process().children(recursive=True)) == before  # shut down: every worker ended


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: [])(0)) < 2,
                    reason="figures are drawn in workers only with two or more cores")
@pytest.mark.parametrize("killed", ["while drawing", "the first, while waiting", "another, while waiting"])
def test_a_figure_worker_killed_fails_the_jobs_left_at_once_and_shutting_down_ends_the_others(killed):
    before = set(psutil.Process().children(recursive=True))  # the tests' own (their command server)
    pool = plots.start_workers(2)
    assert pool is not None
    started = time.monotonic()
    try:
        if killed == "while drawing":
            with pytest.raises(plots.BrokenFigureWorkers):
                pool.submit(_die).result(timeout=60)
        else:
            pids = {f.result(timeout=60) for f in [pool.submit(_who, 0.3) for _ in range(4)]}
            first = next(pid for pid, parent in pids if parent == os.getpid())
            other = next(pid for pid, parent in pids if parent == first)
            os.kill(first if "first" in killed else other, signal.SIGKILL)
        # Once its end is seen (at once, or after a job the other drew meanwhile), every job fails
        # without waiting: the one left may be stuck on the queue's lock the killed one held.
        deadline = time.monotonic() + 30
        while True:
            try:
                pool.submit(_who, 0.0).result(timeout=30)
            except plots.BrokenFigureWorkers:
                break
            assert time.monotonic() < deadline, "the killed worker was never noticed"
    finally:
        pool.shutdown()
    assert time.monotonic() - started < 60
    assert set(psutil.Process().children(recursive=True)) == before


def test_the_figures_are_drawn_here_when_the_workers_are_broken(monkeypatch: pytest.MonkeyPatch):
    drawn: list[str] = []
    for name in ("plot_curves", "plot_scores", "plot_cv", "plot_profile", "plot_radar"):
        def fake(*args: Any, name: str = name) -> list[Plot]:
            drawn.append(f"{name} in {os.getpid()}")
            return [Plot(name, "", "")]

        monkeypatch.setattr(plots, name, fake)

    class Broken(_Recorder):
        def submit(self, fn: Any, *args: Any) -> Future[list[Plot]]:
            failed: Future[list[Plot]] = Future()
            failed.set_exception(plots.BrokenFigureWorkers("a figure worker ended before its jobs were done"))
            return failed

    grid = np.array([0.0, 1.0])
    curves = [CurveSet("score", "t0", grid, {"a": np.ones((2, 2))}, {"a": [0, 1]})]
    rows = [SimpleNamespace(task="t0", config="a")]
    analysis = SimpleNamespace(used=None, rows_of=lambda: rows, ranges={}, curves=curves, figures=object())
    info = BenchmarkInfo(name="b", primary="score", goal={"score": "max"}, baseline=None, configs=["a"],
                         tasks=["t0"])
    listed = plots.draw(Path("unused"), info, analysis, pool=Broken())()  # type: ignore[arg-type]
    assert [p.path for p in listed] == ["plot_curves", "plot_scores", "plot_cv", "plot_profile", "plot_radar"]
    assert drawn == [f"{p.path} in {os.getpid()}" for p in listed]


def test_the_curve_figures_are_handed_out_before_the_analysis_and_it_keeps_their_curves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from report_world import build_store_world

    from benchlab.report import writer
    from benchlab.results import read
    from benchlab.stats.results_analysis import analyze_table

    folder = build_store_world(tmp_path / "r", {("t1", "a"): [0.5, 0.6, 0.7], ("t1", "b"): [0.6, 0.7, 0.8],
                                                ("t2", "a"): [0.4, 0.5, 0.6], ("t2", "b"): [0.5, 0.5, 0.7]},
                               curves=True, baseline="a")
    pool = _Recorder()
    monkeypatch.setattr(plots, "start_workers", lambda workers=None: pool)
    analyzed = writer.analyze
    handed_out_first: list[list[str]] = []
    sent: list[Any] = []

    def analyze(data: Any, **kwargs: Any) -> Any:
        handed_out_first.append(list(pool.order))
        done = analyzed(data, **kwargs)
        sent.append(done.analysis)
        return done

    monkeypatch.setattr(writer, "analyze", analyze)
    writer.write_report(folder, tmp_path / "out")
    assert handed_out_first == [["plot_curves:score"]]
    assert pool.order[0] == "plot_curves:score" and "plot_scores" in pool.order
    # The analysis holds the very curves drawn ahead, as the one builder computes them from the table.
    table = read(folder)
    whole = analyze_table(table.finals, table.info, curves=table.curves)

    def as_lists(sets: Any) -> list[Any]:
        return [(c.metric, c.task, c.grid.tolist(), {k: v.tolist() for k, v in c.values.items()}) for c in sets]

    assert as_lists(sent[0].curves) == as_lists(whole.curves) != []
    assert sent[0].ranges == whole.ranges and sent[0].summary == whole.summary
