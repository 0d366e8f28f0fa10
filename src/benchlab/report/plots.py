"""The report's figures, as PNG files (matplotlib, Agg backend), and drawing them all.

The number of figures is bounded whatever the size of the benchmark: per task
results are small multiples in one figure, and at most :data:`MAX_SEED_LINES`
individual seed curves are drawn per config. Figures (``plots/`` under the
report folder):

- ``curves_<metric>.png``: learning curves, mean and 95% CI band over seeds, per task;
- ``scores_<primary>.png``: mean final score and its 95% CI per task and config;
- ``cv_of_mean_<primary>.png``: coefficient of variation of the mean vs number of seeds;
- ``performance_profile.png``: fraction of runs above each normalised score
  (:mod:`benchlab.report.profiles`);
- ``radar.png``: normalised mean score per task, one polygon per config (3+ tasks).

:func:`draw` draws them all, in worker processes where cores allow.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlab.errors import BenchlabError
from benchlab.report.profiles import SHARED_PANEL, plot_profile, plot_radar
from benchlab.report.style import (
    DPI,
    PNG_COMPRESSION,
    LineStyle,
    Plot,
    add_bands,
    add_lines,
    band_polygons,
    config_label,
    config_order,
    grid_figure,
    is_first_column,
    is_lowest_in_column,
    new_figure,
    save,
    slug,
    style,
    tight,
    top_title,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.results import BenchmarkInfo
    from benchlab.stats.analysis import SummaryRow
    from benchlab.stats.results_analysis import CurveSet, PrimaryFigures, ResultsAnalysis

MAX_SEED_LINES = 20
MAX_PLOT_POINTS = 500


def _task_ranges(sets: list[CurveSet], metric: str,
                 ranges: dict[str, tuple[float, float]] | None) -> dict[str, tuple[float, float] | None]:
    """Each task's range of ``metric``: a task's own declared range (key ``"TASK/METRIC"``) wins
    over the metric's, as in the statistics (:func:`benchlab.stats.accounting.range_of`)."""
    got = ranges or {}
    return {cs.task: got.get(f"{cs.task}/{metric}", got.get(metric)) for cs in sets}


def _band_note(cut_at: dict[str, tuple[float, float] | None]) -> str:
    """The caption's words on where the bands were cut: the metric's range when every task shares
    it, else each task's own."""
    declared = {t: b for t, b in cut_at.items() if b is not None}
    if declared and len(set(declared.values())) == 1 and len(declared) == len(cut_at):
        low, high = next(iter(declared.values()))
        return f"; bands are cut at the metric's range [{low:g}, {high:g}]"
    if declared:
        return "; bands are cut at each task's declared range (" + ", ".join(
            f"{t} [{b[0]:g}, {b[1]:g}]" for t, b in declared.items()) + ")"
    return ""


def _by_metric(curves: Sequence[CurveSet], info: BenchmarkInfo) -> list[list[CurveSet]]:
    """The curve sets grouped by metric, a figure's worth each: the primary metric first, then
    by name; within one, the tasks in the spec's order, then any other by name."""
    by_metric: dict[str, list[CurveSet]] = {}
    for cs in curves:
        by_metric.setdefault(cs.metric, []).append(cs)
    return [
        sorted(
            by_metric[metric],
            key=lambda c: (
                c.task not in info.tasks,
                info.tasks.index(c.task) if c.task in info.tasks else 0,
                c.task,
            ),
        )
        for metric in sorted(by_metric, key=lambda m: (m != info.primary, m))
    ]


def plot_curves(
    curves: list[CurveSet],
    info: BenchmarkInfo,
    folder: Path,
    seeds: bool = False,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> list[Plot]:
    """A figure per metric with curves: a panel per task, mean and 95% CI band per config.

    A config with one seed on a task gets its curve and no band; a metric with a range
    (``ranges``) has its bands cut at it.
    """
    from matplotlib.lines import Line2D

    plots = []
    for sets in _by_metric(curves, info):
        metric = sets[0].metric
        configs = config_order(info, {c for cs in sets for c in cs.values})
        cut_at = _task_ranges(sets, metric, ranges)
        single: set[str] = set()
        # Where every task's curves span the same steps, the steps are labelled once per column.
        same_steps = len({(float(cs.grid[0]), float(cs.grid[-1])) for cs in sets}) == 1
        fig, axes = grid_figure(len(sets), legend_entries=len(configs), column_labels=same_steps)
        for ax, cs in zip(axes, sets, strict=True):
            single |= _curve_panel(ax, cs, configs, seeds, cut_at[cs.task])
            top_title(ax, cs.task)
            if not same_steps or is_lowest_in_column(ax):
                ax.set_xlabel("step")
            ax.set_ylabel(metric)
            ax.grid(alpha=0.3)
            ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
        handles = [Line2D([], [], lw=2, **style(i)) for i in range(len(configs))]
        seeds_note = (
            f"; thin lines: up to {MAX_SEED_LINES} individual seeds per config" if seeds else ""
        )
        if single:
            seeds_note += (
                f"; {', '.join(sorted(single))} ran one seed on some task, where its line is "
                "that seed and has no band"
            )
        seeds_note += _band_note(cut_at)
        any_band = any(v.shape[0] > 1 for cs in sets for v in cs.values.values())
        fig.suptitle(
            f"Learning curves of {metric}: "
            + ("mean over seeds, shaded 95% CI" if any_band else "one seed per config, no interval"),
            y=1 - 0.2 / fig.get_figheight(),
            va="top",
        )
        name = f"curves_{slug(metric)}.png"
        path = save(fig, folder, name, handles, [config_label(c, info) for c in configs])
        plots.append(
            Plot(
                path,
                f"Learning curves: {metric}",
                (f"Mean of {metric} over seeds at each step, with the 95% Student-t "
                 "confidence band of the mean" if any_band else
                 f"{metric} at each step of the one seed each config ran (no interval)")
                + "; curves logged at different steps are "
                "linearly interpolated onto a common grid" + seeds_note + ".",
            )
        )
    return plots


def _curve_panel(ax: Any, cs: CurveSet, configs: list[str], seeds: bool,
                 bounds: tuple[float, float] | None) -> set[str]:
    """One task's panel of :func:`plot_curves`: each config's band (cut at ``bounds``) and mean,
    and with ``seeds`` up to :data:`MAX_SEED_LINES` of its seeds' curves; returns the configs with
    one seed (a line, no band).

    A few collections per panel, not an artist per config and band: the same lines and areas,
    drawn in a fraction of the time (bands under the seeds, the means on top)."""
    grid = cs.grid
    idx = (
        np.linspace(0, grid.shape[0] - 1, MAX_PLOT_POINTS).round().astype(int)
        if grid.shape[0] > MAX_PLOT_POINTS
        else slice(None)
    )
    x = grid[idx]
    polygons: list[np.ndarray] = []
    fills: list[str] = []
    seed_lines: list[np.ndarray] = []
    seed_colours: list[str] = []
    means: list[np.ndarray] = []
    styles: list[LineStyle] = []
    single: set[str] = set()
    for i, cfg in enumerate(configs):
        if cfg not in cs.values:
            continue
        vals = cs.values[cfg][:, idx]
        st = style(i)
        if seeds:
            for run in vals[:MAX_SEED_LINES]:
                seed_lines.append(np.column_stack([x, run]))
                seed_colours.append(st["color"])
        band = cs.bands[cfg]
        mean, low, high = band.mean[idx], band.low[idx], band.high[idx]
        if vals.shape[0] > 1:
            if bounds is not None:
                low, high = np.clip(low, *bounds), np.clip(high, *bounds)
            found = band_polygons(x, low, high)
            polygons += found
            fills += [st["color"]] * len(found)
        else:
            single.add(cfg)
        means.append(np.column_stack([x, mean]))
        styles.append(st)
    add_bands(ax, polygons, fills, alpha=0.2)
    if seed_lines:
        from matplotlib.collections import LineCollection

        ax.add_collection(LineCollection(seed_lines, colors=seed_colours, linewidths=0.5, alpha=0.3))
    add_lines(ax, means, styles, lw=1.6)
    # Collections alone do not autoscale the view on every matplotlib this supports (< 3.11).
    ax.autoscale_view()
    return single


def _score_panel(ax: Any, sub: pd.DataFrame, pts: pd.DataFrame | None, position: dict[str, int],
                 colour: dict[str, str], rgba: np.ndarray, index: dict[str, int],
                 bounds: tuple[float, float] | None, rng: np.random.Generator) -> None:
    """One task's panel of :func:`plot_scores`: its seeds (jittered), each config's mean and
    95% CI (cut at ``bounds``)."""
    if pts is not None:
        py = pts["config"].map(position).to_numpy(dtype=float)
        py += rng.uniform(-0.18, 0.18, py.shape[0])
        ax.scatter(pts["value"].to_numpy(dtype=float), py, s=12, marker="o",
                   facecolors="none", edgecolors=rgba[pts["config"].map(index).to_numpy(dtype=int)],
                   linewidths=0.8, alpha=0.8, zorder=2)
    y = sub["config"].map(position).to_numpy()
    mean = sub["mean"].to_numpy(dtype=float)
    low, high = sub["ci_low"].to_numpy(dtype=float), sub["ci_high"].to_numpy(dtype=float)
    colours = sub["config"].map(colour).tolist()
    has_ci = np.isfinite(low) & np.isfinite(high)
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    if has_ci.any():
        # Three collections per panel rather than an errorbar call per config: the same
        # picture, a fraction of the artists to draw.
        ci_colours = [c for c, k in zip(colours, has_ci, strict=True) if k]
        ax.hlines(y[has_ci], low[has_ci], high[has_ci], colors=ci_colours, lw=1.5)
        ax.scatter(
            np.concatenate([low[has_ci], high[has_ci]]),
            np.concatenate([y[has_ci], y[has_ci]]),
            marker="|",
            s=60,
            c=ci_colours + ci_colours,
            linewidths=1.5,
        )
    ax.scatter(mean, y, s=34, c=colours, marker="D", zorder=3)


def _score_axes(ax: Any, task: str, labels: list[str], bounds: tuple[float, float] | None, xlabel: str) -> None:
    """One task's panel of :func:`plot_scores`, once its data is in: a row per config (named,
    ``labels`` top to bottom, on the first panel of each row of panels only), the x axis ending
    just past the metric's range where it has one."""
    if bounds is not None:
        lo_x, hi_x = ax.get_xlim()
        span = max(hi_x - lo_x, 1e-12)
        ax.set_xlim(max(lo_x, bounds[0] - 0.02 * span), min(hi_x, bounds[1] + 0.02 * span))
    ax.set_yticks(range(len(labels)))
    if is_first_column(ax):
        ax.set_yticklabels(labels[::-1])
    ax.set_ylim(-0.6, len(labels) - 0.4)
    # At the top, as matplotlib would place it (no tick labels there, none above the axis
    # on its left), without measuring every tick label of the panel to find that out.
    ax.set_title(task, y=1.0)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)


def _score_frame(rows: Sequence[SummaryRow]) -> pd.DataFrame:
    """The rows with a completed seed as columns the panels draw (None as NaN)."""
    import pandas as pd

    prim = pd.DataFrame([{"task": r.task, "config": r.config, "n": r.n, "mean": r.mean,
                          "ci_low": r.ci_low, "ci_high": r.ci_high} for r in rows if r.n > 0],
                        columns=["task", "config", "n", "mean", "ci_low", "ci_high"])
    for column in ("mean", "ci_low", "ci_high"):
        prim[column] = prim[column].astype(float)
    return prim


def plot_scores(
    rows: Sequence[SummaryRow],
    info: BenchmarkInfo,
    folder: Path,
    finals: pd.DataFrame | None = None,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> list[Plot]:
    """Final primary score per task and config: every seed as a point, the mean, its 95% CI.

    ``rows`` are the primary metric's summary rows (:mod:`benchlab.stats.results_analysis`); the
    interval is their Student-t interval (``ci_low``, ``ci_high``), the report's 95% CI column,
    cut at the metric's range where it has one, and absent for a config with one seed.
    ``finals`` gives the seeds' values.
    """
    prim = _score_frame(rows)
    if prim.empty:
        return []
    bounds = (ranges or {}).get(info.primary)
    tasks = [t for t in info.tasks if t in set(prim["task"])] + sorted(
        set(prim["task"]) - set(info.tasks)
    )
    configs = config_order(info, set(prim["config"]))
    n = prim["n"].to_numpy(dtype=float)
    from matplotlib.colors import to_rgba

    position = {c: len(configs) - 1 - i for i, c in enumerate(configs)}
    colour = {c: style(i)["color"] for i, c in enumerate(configs)}
    # The seeds' colours as one RGBA array (by config): a list of 10,000 colour names is
    # parsed name by name.
    rgba = np.array([to_rgba(colour[c]) for c in configs])
    index = {c: i for i, c in enumerate(configs)}
    longest = max(len(config_label(c, info)) for c in configs)
    fig, axes = grid_figure(
        len(tasks),
        width=3.4,
        height=max(1.3, 0.35 + 0.3 * len(configs)),
        left=0.3 + 0.075 * longest,
        legend_entries=int(any(info.targets.get(t) is not None for t in tasks)),
        row_labels=True,  # every panel has the configs on the same rows: named once per row
    )
    has_target = False
    by_task = dict(iter(prim.groupby("task", sort=False)))
    points: dict[str, pd.DataFrame] = {}
    if finals is not None and len(finals):
        mine = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
        points = dict(iter(mine.groupby("task", sort=False)))
    labels = [config_label(c, info) for c in configs]
    rng = np.random.default_rng(0)  # the vertical jitter of the seed points, the same every time
    for ax, task in zip(axes, tasks, strict=True):
        _score_panel(ax, by_task[task], points.get(task), position, colour, rgba, index, bounds, rng)
        target = info.targets.get(task)
        if target is not None:
            ax.axvline(target, color="0.4", ls="--", lw=1)
            has_target = True
        _score_axes(ax, task, labels, bounds, f"{info.primary} (seeds, mean, 95% CI)")
    fig.suptitle(
        f"Final {info.primary} per task: "
        + ("each seed (circles), mean (diamond), 95% CI" if (n > 1).any()
           else "one seed per config, no interval"),
        y=1 - 0.2 / fig.get_figheight(),
        va="top",
    )
    name = f"scores_{slug(info.primary)}.png"
    if has_target:
        from matplotlib.lines import Line2D

        path = save(
            fig,
            folder,
            name,
            [Line2D([], [], color="0.4", ls="--", lw=1)],
            ["target (BENCHMARKS.md)"],
        )
    else:
        path = save(fig, folder, name)
    ones = {(r.task, r.config) for r in prim.itertuples() if r.n == 1}
    single = [f"{t}/{c}" for t in tasks for c in configs if (t, c) in ones]
    return [
        Plot(
            path,
            f"Scores: {info.primary}",
            f"Final {info.primary} of every seed (circles, jittered vertically), each config's "
            "mean (diamond) and its 95% Student-t confidence interval over seeds"
            + (f", cut at the metric's range [{bounds[0]:g}, {bounds[1]:g}]" if bounds else "")
            + ("; one seed has no interval (" + ", ".join(single[:6])
               + (" …" if len(single) > 6 else "") + ")" if single else "")
            + "; the dashed line is the task's target, where set.",
        )
    ]


def plot_cv(figures: PrimaryFigures, info: BenchmarkInfo, folder: Path, threshold: float = 0.05) -> list[Plot]:
    """CV of the mean of the primary metric vs number of seeds: one line per config
    (:attr:`benchlab.stats.figures.PrimaryFigures.cv`).

    With several tasks the line is the median over tasks (for up to 3 configs a band
    shows their range), so the figure stays one panel however many tasks there are.
    """
    from matplotlib.ticker import MaxNLocator

    curves = figures.cv
    if curves is None:
        return []
    ns, n_tasks = curves.ns, curves.n_tasks
    fig = new_figure(7.5, 4.8)
    ax = fig.add_subplot()
    for i, line in enumerate(curves.configs):
        st = style(i)
        # Range bands only for a few configs: more of them stack into a grey blot.
        if line.low is not None and line.high is not None and np.isfinite(line.percent).any() and len(
                curves.configs) <= 3:
            ax.fill_between(ns, line.low, line.high, color=st["color"], alpha=0.15, linewidth=0)
        ax.plot(ns, line.line, lw=1.6, label=config_label(line.config, info), **st)
    configs = curves.configs
    ax.axhline(100 * threshold, color="0.4", ls="--", lw=1, label=f"{100 * threshold:g}% threshold")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("number of seeds N")
    ax.set_ylabel(f"CV of the mean {info.primary} (%)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    over = ""
    if n_tasks > 1:
        over = f" (median over {n_tasks} tasks" + (", shaded: their range)" if len(configs) <= 3 else ")")
    ax.set_title(f"How many seeds: CV of the mean {info.primary} vs N" + over, fontsize="medium")
    tight(fig)
    path = save(fig, folder, f"cv_of_mean_{slug(info.primary)}.png")
    return [
        Plot(
            path,
            "CV of the mean vs number of seeds",
            f"Coefficient of variation of the mean {info.primary} of N seeds, s / (√N · |mean|) "
            "from each config's seeds (s their standard deviation, ddof = 1): a projection "
            "from the seeds run, not a resampling of them"
            + (", median over tasks" if n_tasks > 1 else "")
            + (" (shaded: the range over tasks)" if n_tasks > 1 and len(configs) <= 3 else "")
            + f"; where a line drops below the dashed {100 * threshold:g}% line, that many "
            "seeds pin the mean down.",
        )
    ]


@dataclass(frozen=True)
class _Job:
    """One figure function of :func:`draw` with its arguments, and its size in panels (what
    its drawing time grows with), by which the jobs are handed out."""

    fn: Callable[..., list[Plot]]
    args: tuple[Any, ...]
    panels: int


def _die_with(parent: int) -> None:
    """In a figure worker: be killed by the kernel as soon as the report's process ends,
    whatever ends it (SIGKILL included), instead of drawing on as an orphan."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the request took hold
        os._exit(1)


def _first_worker(parent: int, aside: frozenset[int], others: int, jobs: Any, results: Any,
                  lives: list[int]) -> None:
    """The first figure worker (:class:`FigureWorkers`): die with the report's process, import
    matplotlib and draw a warm-up figure while the report's process still reads the results (the
    import is a good part of a figure's cost), then fork the ``others``, which start with
    matplotlib imported and warm, and draw beside them until the jobs end.

    Meanwhile the worker keeps to the CPUs ``aside`` (all but one, where there are two or more):
    the report's process reads the results and computes the statistics on one core, alone (on 2
    cores a worker's import taking turns with it there delayed the end of the statistics by
    0.6-0.9 s). The others are forked once it may run anywhere again, and so may they.

    Ctrl-C is the report's process's to handle (it stops the report and these die with it): a
    worker ignores SIGINT, which the terminal sends the whole process group, rather than print a
    traceback of its own."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the others inherit it
    _die_with(parent)
    anywhere = _pin(aside)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.collections  # noqa: F401
        import matplotlib.figure  # noqa: F401

        _warm_up()
    finally:
        _pin(anywhere)
    import warnings

    me = os.getpid()
    children = []
    for k in range(1, others + 1):
        with warnings.catch_warnings():
            # Python 3.12+ warns when forking a process that has threads (BLAS may have started
            # some here); the workers only draw with matplotlib and touch no lock those hold.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # a further worker: its own life pipe only, and it dies with the first
            code = 1
            try:
                _die_with(me)
                for j, fd in enumerate(lives):
                    if j != k:
                        os.close(fd)
                _serve(jobs, results)
                results.put((_DONE, True, k))
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for fd in lives[1:]:
        os.close(fd)
    try:
        _serve(jobs, results)
        results.put((_DONE, True, 0))
    finally:
        for pid in children:  # the others die with this process: it waits for them to end
            os.waitpid(pid, 0)


#: The number of the message a worker sends once it has drawn its last job and ends, with its index:
#: a worker whose end is seen without it ended early (killed), wherever it was.
_DONE = -1


def _serve(jobs: Any, results: Any) -> None:
    """A figure worker's loop: take the next job, draw it, hand back its result (or its error)."""
    import traceback

    while (job := jobs.get()) is not None:
        number, fn, args = job
        try:
            done = (number, True, fn(*args))
        except BaseException as error:  # noqa: BLE001 - handed back to the caller, which raises it
            # With where it was raised: the traceback itself does not cross the pipe.
            error.add_note("in the figure worker:\n" + "".join(traceback.format_exception(error)).rstrip())
            done = (number, False, error)
        try:
            results.put(done)
        except Exception as error:  # noqa: BLE001 - a result or an error that does not pickle
            results.put((number, False, RuntimeError(f"{type(error).__name__}: {error}")))


@dataclass(frozen=True)
class _Results:
    """The figure workers' end of the pipe their results go back on, and the lock they write it under."""

    sent: Any  # multiprocessing.connection.Connection
    lock: Any  # multiprocessing.synchronize.Lock

    def put(self, item: tuple[int, bool, Any]) -> None:
        with self.lock:
            self.sent.send(item)


class BrokenFigureWorkers(BenchlabError):
    """A figure worker ended before it handed back every job (killed, out of memory): :func:`draw`
    then draws the figures in the calling process."""


class FigureWorkers:
    """The processes that draw a report's figures (:func:`start_workers`), with matplotlib imported
    once: the first is forked from the report's process and imports it, the others are forked from
    it (:func:`_first_worker`). Two workers importing it each cost a report ~0.6-0.9 s of CPU more,
    on the one core left aside for them while the statistics are computed.

    :meth:`submit` queues a job for whichever worker is free first and returns its
    :class:`~concurrent.futures.Future`; a thread here pickles the jobs and another sets the futures,
    so that submitting never waits for a worker still starting. A worker that ends before every job
    is back fails the jobs left with :class:`BrokenFigureWorkers` (:func:`draw` then draws them here).
    Every worker dies with the report's process, whatever ends it (:func:`_die_with`)."""

    def __init__(self, n: int) -> None:
        import multiprocessing
        import threading
        import warnings

        ctx = multiprocessing.get_context("fork")
        self._jobs = ctx.Queue()
        # Jobs a worker never took (it was killed) must not hold this process at its exit.
        self._jobs.cancel_join_thread()
        # Results come back on one pipe, written under a lock (a result may be longer than the
        # pipe writes without interleaving) and read here by one thread.
        self._results, sent = ctx.Pipe(duplex=False)
        results = _Results(sent, ctx.Lock())
        # One pipe per worker, its write end held by that worker alone: its end reads as EOF here.
        pipes = [os.pipe() for _ in range(n)]
        self._lives = [r for r, _ in pipes]
        self._futures: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._count = 0
        self._closing = False  # shut down: no more jobs
        self._broken = False  # a worker ended early: every job fails with BrokenFigureWorkers
        with warnings.catch_warnings():
            # Python 3.12+ warns when forking a process that has threads (here: idle BLAS
            # threads); the workers only draw with matplotlib and touch no lock those hold.
            warnings.simplefilter("ignore", DeprecationWarning)
            self._first = ctx.Process(target=_first_worker, daemon=True, args=(
                os.getpid(), _aside(), n - 1, self._jobs, results, [w for _, w in pipes]))
            self._first.start()
        sent.close()
        for _, w in pipes:
            os.close(w)
        self._reader = threading.Thread(target=self._read, name="figure-results", daemon=True)
        self._reader.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Queue ``fn(*args)`` for the next free worker; returns its Future."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closing:
                raise RuntimeError("figure workers already shut down")
            if self._broken:
                future.set_exception(BrokenFigureWorkers("a figure worker ended before its jobs were done"))
                return future
            number = self._count
            self._count += 1
            self._futures[number] = future
        self._jobs.put((number, fn, args))
        return future

    def _read(self) -> None:
        from multiprocessing.connection import wait

        source = self._results
        open_ = [source]
        lives = dict(zip(self._lives, range(len(self._lives)), strict=True))
        done: set[int] = set()
        early = False
        while lives and not early:
            ready = wait([*open_, *lives])
            # A worker's results are written before it ends: read every one there is first.
            while open_ and source.poll():
                try:
                    number, ok, value = source.recv()
                except EOFError:  # every worker's end of it closed: their lives tell the rest
                    open_ = []
                    break
                if number == _DONE:
                    done.add(value)
                    continue
                with self._lock:
                    future = self._futures.pop(number, None)
                if future is None or not future.set_running_or_notify_cancel():
                    continue  # cancelled
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
            for fd in [fd for fd in lives if fd in ready]:
                early = early or lives[fd] not in done
                del lives[fd]
                os.close(fd)
        for fd in lives:
            os.close(fd)
        source.close()
        self._break()  # a worker ended early, or every one ended: nothing more will be drawn

    def _break(self) -> None:
        with self._lock:
            self._broken = True
            left, self._futures = self._futures, {}
        for future in left.values():
            if future.set_running_or_notify_cancel():
                future.set_exception(BrokenFigureWorkers("a figure worker ended before its jobs were done"))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more jobs: the workers end once those queued are done (with ``cancel_futures``, those
        not started are cancelled); with ``wait``, return once they have. Once one of them has
        ended early the others are killed: killed while it held the lock of the jobs' queue (as
        a worker waiting for a job does), it would hold them there forever."""
        with self._lock:
            again, self._closing = self._closing, True
            if cancel_futures:
                for future in self._futures.values():
                    future.cancel()
        if not again:  # a second call (an error while the first waited) only waits, if asked
            for _ in self._lives:  # one end-of-jobs for each worker
                self._jobs.put(None)
            self._jobs.close()
        if wait:
            self._reader.join()  # every worker ended, or one ended early
            if self._first.is_alive():
                self._first.kill()  # the others die with it (_die_with)
            self._first.join()


def _pin(cpus: frozenset[int]) -> frozenset[int]:
    """Run this process on ``cpus`` (none: leave it as it is, as where the platform cannot pin);
    returns the CPUs it could run on before."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return frozenset()
    before = frozenset(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # a CPU taken away meanwhile (cpuset changed): leave it
        return frozenset()
    return before


def _warm_up() -> None:
    """Draw a small throwaway figure into memory: a worker's first figure otherwise pays for
    finding and opening the font, the PNG writer's import and matplotlib's first-use caches,
    after the statistics are done, when its figures are all that is left to wait for."""
    import io

    from benchlab.report.style import new_figure

    fig = new_figure(2.0, 1.5)
    ax = fig.add_subplot()
    ax.plot([0.0, 1.0], [0.0, 1.0])
    ax.fill_between([0.0, 1.0], [0.0, 0.5], [0.5, 1.0], alpha=0.2)
    ax.scatter([0.5], [0.5], s=12)
    ax.set_title("warm-up", fontsize="medium")
    ax.set_xlabel("x", fontsize="small")
    fig.suptitle("warm-up")
    fig.savefig(io.BytesIO(), format="png", dpi=DPI, pil_kwargs={"compress_level": PNG_COMPRESSION})


#: How many workers :func:`start_workers` starts at most: the figures of a report (five, and one
#: more per further metric with curves) rarely find more cores than that free.
FIGURES = 5


def start_workers(workers: int | None = None) -> FigureWorkers | None:
    """Fork the processes that will draw the figures (:func:`draw`'s ``pool``), before the
    results are read, so that they import matplotlib meanwhile; None where figures are drawn
    in this process (``workers=0``, one core, or not Linux). Shut them down (``shutdown()``) if
    they are not handed to :func:`draw`."""
    n = _default_workers(FIGURES) if workers is None else workers
    if n <= 0:
        return None
    return FigureWorkers(n)


def _aside() -> frozenset[int]:
    """The CPUs the figure workers start on: all this process may use but one, which is left to
    this process; none (no pinning) with fewer than two, or where the platform cannot pin."""
    if not hasattr(os, "sched_getaffinity"):
        return frozenset()
    cpus = sorted(os.sched_getaffinity(0))
    return frozenset(cpus[1:]) if len(cpus) >= 2 else frozenset()


def _default_workers(jobs: int) -> int:
    """One worker per core (at most one per figure): the calling process computes the
    statistics meanwhile, but that is the shorter part, after which it only waits."""
    if not sys.platform.startswith("linux"):
        return 0  # fork is only dependable on Linux; elsewhere draw here
    cores = len(os.sched_getaffinity(0))
    return 0 if cores < 2 else min(jobs, cores)


@dataclass(frozen=True)
class Started:
    """Figure jobs handed to the workers ahead of the rest (:func:`draw_curves`), with their futures."""

    jobs: list[_Job]
    futures: list[Future[list[Plot]]]


def _curve_jobs(curves: Sequence[CurveSet], info: BenchmarkInfo, folder: Path, seeds: bool,
                ranges: dict[str, tuple[float, float]]) -> list[_Job]:
    # A job per curve metric, so that several curve figures draw in parallel too.
    return [_Job(plot_curves, (sets, info, folder, seeds, ranges), len(sets))
            for sets in _by_metric(list(curves), info)]


def draw_curves(
    folder: Path,
    info: BenchmarkInfo,
    curves: Sequence[CurveSet],
    ranges: dict[str, tuple[float, float]],
    *,
    seeds: bool = False,
    pool: FigureWorkers,
) -> Started:
    """Hand the curve figures to ``pool`` now, from the curves' part of the analysis
    (:class:`~benchlab.stats.results_analysis.CurveSummaries`), while the rest of it is computed;
    :func:`draw` (``started``) hands out the others and collects them all."""
    jobs = _curve_jobs(curves, info, folder, seeds, ranges)
    order = sorted(range(len(jobs)), key=lambda i: -jobs[i].panels)
    submitted = {i: pool.submit(jobs[i].fn, *jobs[i].args) for i in order}
    return Started(jobs, [submitted[i] for i in range(len(jobs))])


def draw(
    folder: Path,
    info: BenchmarkInfo,
    analysis: ResultsAnalysis,
    *,
    seeds: bool = False,
    workers: int | None = None,
    ranges: dict[str, tuple[float, float]] | None = None,
    pool: FigureWorkers | None = None,
    started: Started | None = None,
) -> Callable[[], list[Plot]]:
    """Start drawing every figure into ``folder``; call the returned function for the list.

    With two or more cores (on Linux) the figures are drawn in forked worker
    processes, leaving the calling process free to compute the statistics
    meanwhile; ``workers=0`` draws them here, before returning. Forking, unlike
    spawning, never re-imports the caller's ``__main__`` (a script without a
    ``__name__`` guard, a notebook, stdin all work). ``pool`` is workers started
    ahead (:func:`start_workers`); the returned function shuts it down. ``started``: the curve
    figures already handed to ``pool`` (:func:`draw_curves`). Every number a figure
    shows beside the seeds themselves comes from ``analysis`` (the profiles' bootstrap is seeded by
    the analysis' ``seed``, :attr:`~benchlab.stats.figures.PrimaryFigures.seed`).
    """
    finals = analysis.used
    rows = analysis.rows_of()
    ranges = dict(analysis.ranges) if ranges is None else ranges
    jobs = list(started.jobs) if started is not None else _curve_jobs(analysis.curves, info, folder, seeds, ranges)
    ahead = len(jobs) if started is not None else 0
    jobs.append(_Job(plot_scores, (rows, info, folder, finals, ranges), len({r.task for r in rows})))
    if analysis.figures is not None:  # their numbers are computed where they are drawn, on first use
        configs = len({r.config for r in rows})
        jobs += [_Job(plot_cv, (analysis.figures, info, folder), 1),
                 _Job(plot_profile, (analysis.figures, info, folder), configs if configs > SHARED_PANEL else 1),
                 _Job(plot_radar, (analysis.figures, info, folder), 1)]

    def serial() -> list[Plot]:
        return [p for job in jobs for p in job.fn(*job.args)]

    # Forked before scipy.stats is imported (the caller's statistics import it next): the
    # workers need only scipy.special, and the import overlaps with their drawing.
    pool = pool if pool is not None else start_workers(workers)
    if pool is None:
        done = serial()
        return lambda: done

    # The largest first (stably), so that the last job to start is a small one and the workers
    # finish together; the plots are listed in the report's order whatever order they drew in.
    futures: dict[int, Future[list[Plot]]] = dict(enumerate(started.futures)) if started is not None else {}
    for i in sorted(range(ahead, len(jobs)), key=lambda i: -jobs[i].panels):
        futures[i] = pool.submit(jobs[i].fn, *jobs[i].args)

    def collect() -> list[Plot]:
        try:
            drawn = [p for i in range(len(jobs)) for p in futures[i].result()]
        except BrokenFigureWorkers:  # a worker died (e.g. out of memory): draw here instead
            pool.shutdown()
            return serial()
        except BaseException:  # interrupted (Ctrl-C): the figures left are not waited for
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return drawn

    return collect
