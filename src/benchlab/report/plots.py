"""The report's figures, as PNG files (matplotlib, Agg backend).

Every figure has a title, axis labels naming the metric, a legend and the
Okabe–Ito colour-blind-safe palette (line styles vary too once configs
outnumber its colours). The number of figures is bounded whatever the size of
the benchmark: per task results are small multiples in one figure, and at most
:data:`MAX_SEED_LINES` individual seed curves are drawn per config.

Figures (``plots/`` under the report folder):

- ``curves_<metric>.png``: learning curves, mean and 95% CI band over seeds, per task;
- ``scores_<primary>.png``: mean final score and its 95% CI per task and config;
- ``cv_of_mean_<primary>.png``: coefficient of variation of the mean vs number of seeds;
- ``performance_profile.png``: fraction of runs above each normalised score;
- ``radar.png``: normalised mean score per task, one polygon per config (3+ tasks).
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from benchlab.report.curves import CurveSet, load_curves, mean_band

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from benchlab.results import BenchmarkInfo

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
LINESTYLES = ["-", "--", ":", "-."]
MAX_SEED_LINES = 20
MAX_PLOT_POINTS = 500
DPI = 100


@dataclass
class Plot:
    """One written figure: its path relative to the report folder, a title and a caption."""

    path: str
    title: str
    caption: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "title": self.title, "caption": self.caption}


def style(i: int) -> dict[str, Any]:
    """Colour and line style of the i-th config."""
    return {
        "color": OKABE_ITO[i % len(OKABE_ITO)],
        "linestyle": LINESTYLES[(i // len(OKABE_ITO)) % len(LINESTYLES)],
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "metric"


def _figure(width: float, height: float) -> Figure:
    # A bare Figure, not pyplot: no global state, no GUI backend, nothing to close.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _grid_figure(
    n: int, width: float = 3.6, height: float = 2.5, left: float = 0.8, legend_entries: int = 0
) -> tuple[Figure, list[Any]]:
    """A figure of ``n`` panels of ``width`` x ``height`` inches, laid out by hand.

    A fixed layout in inches (room for tick labels, axis labels, titles, the
    suptitle and a legend row under the panels) instead of ``tight_layout``,
    which draws the whole figure an extra time.
    """
    ncols = 1 if n == 1 else 2 if n <= 4 else 3 if n <= 9 else 4
    nrows = math.ceil(n / ncols)
    gap_x, gap_y, right, top = left + 0.15, 0.8, 0.25, 0.75
    legend_rows = math.ceil(legend_entries / _legend_cols(legend_entries)) if legend_entries else 0
    bottom = 0.6 + 0.28 * legend_rows
    fig_w = left + ncols * width + (ncols - 1) * gap_x + right
    fig_h = top + nrows * height + (nrows - 1) * gap_y + bottom
    fig = _figure(fig_w, fig_h)
    fig.subplots_adjust(
        left=left / fig_w,
        right=1 - right / fig_w,
        bottom=bottom / fig_h,
        top=1 - top / fig_h,
        wspace=gap_x / width,
        hspace=gap_y / height,
    )
    axes = fig.subplots(nrows, ncols, squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _legend_cols(entries: int) -> int:
    return max(1, min(entries, 5))


def _save(
    fig: Figure,
    folder: Path,
    name: str,
    legend_handles: list[Any] | None = None,
    legend_labels: list[str] | None = None,
) -> str:
    if legend_handles:
        fig.legend(  # type: ignore[call-overload]
            legend_handles,
            legend_labels,
            loc="lower center",
            ncol=_legend_cols(len(legend_handles)),
            frameon=False,
            bbox_to_anchor=(0.5, 0.1 / fig.get_figheight()),
        )
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / name, dpi=DPI)
    return f"plots/{name}"


def _config_order(info: BenchmarkInfo, present: set[str]) -> list[str]:
    return [c for c in info.configs if c in present] + sorted(present - set(info.configs))


def _label(config: str, info: BenchmarkInfo) -> str:
    return f"{config} (baseline)" if config == info.baseline else config


def plot_curves(
    curves: list[CurveSet], info: BenchmarkInfo, folder: Path, seeds: bool = False
) -> list[Plot]:
    """A figure per metric with curves: a panel per task, mean and 95% CI band per config."""
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    by_metric: dict[str, list[CurveSet]] = {}
    for cs in curves:
        by_metric.setdefault(cs.metric, []).append(cs)
    metrics = sorted(by_metric, key=lambda m: (m != info.primary, m))
    plots = []
    for metric in metrics:
        sets = sorted(
            by_metric[metric],
            key=lambda c: (
                c.task not in info.tasks,
                info.tasks.index(c.task) if c.task in info.tasks else 0,
                c.task,
            ),
        )
        configs = _config_order(info, {c for cs in sets for c in cs.values})
        fig, axes = _grid_figure(len(sets), legend_entries=len(configs))
        for ax, cs in zip(axes, sets, strict=True):
            grid = cs.grid
            idx = (
                np.linspace(0, grid.shape[0] - 1, MAX_PLOT_POINTS).round().astype(int)
                if grid.shape[0] > MAX_PLOT_POINTS
                else slice(None)
            )
            x = grid[idx]
            for i, cfg in enumerate(configs):
                if cfg not in cs.values:
                    continue
                vals = cs.values[cfg][:, idx]
                st = style(i)
                if seeds:
                    lines = np.stack(
                        [np.broadcast_to(x, vals[:MAX_SEED_LINES].shape), vals[:MAX_SEED_LINES]],
                        axis=-1,
                    )
                    ax.add_collection(
                        LineCollection(list(lines), colors=st["color"], linewidths=0.5, alpha=0.3)
                    )
                mean, low, high = mean_band(vals)
                ax.fill_between(x, low, high, color=st["color"], alpha=0.2, linewidth=0)
                ax.plot(x, mean, lw=1.6, **st)
            ax.set_title(cs.task)
            ax.set_xlabel("step")
            ax.set_ylabel(metric)
            ax.grid(alpha=0.3)
            ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))
        handles = [Line2D([], [], lw=2, **style(i)) for i in range(len(configs))]
        seeds_note = (
            f"; thin lines: up to {MAX_SEED_LINES} individual seeds per config" if seeds else ""
        )
        fig.suptitle(
            f"Learning curves of {metric}: mean over seeds, shaded 95% CI",
            y=1 - 0.2 / fig.get_figheight(),
            va="top",
        )
        name = f"curves_{_slug(metric)}.png"
        path = _save(fig, folder, name, handles, [_label(c, info) for c in configs])
        plots.append(
            Plot(
                path,
                f"Learning curves: {metric}",
                f"Mean of {metric} over seeds at each step, with the 95% Student-t "
                "confidence band of the mean; curves logged at different steps are "
                "linearly interpolated onto a common grid" + seeds_note + ".",
            )
        )
    return plots


def plot_scores(desc: pd.DataFrame, info: BenchmarkInfo, folder: Path) -> list[Plot]:
    """Mean final primary score with its 95% Student-t CI, a panel per task (configs on the y axis).

    ``desc`` is :func:`benchlab.report.tables.describe`'s table; the interval is
    the same t-interval as the report's 95% CI column.
    """
    prim = desc[desc["is_primary"]].copy()
    if prim.empty:
        return []
    tasks = [t for t in info.tasks if t in set(prim["task"])] + sorted(
        set(prim["task"]) - set(info.tasks)
    )
    configs = _config_order(info, set(prim["config"]))
    n = prim["n"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = np.where(
            n > 1,
            sps.t.ppf(0.975, np.maximum(n - 1, 1))
            * prim["std"].to_numpy(dtype=float, na_value=np.nan)
            / np.sqrt(n),
            0.0,
        )
    prim["half"] = np.nan_to_num(half)
    position = {c: len(configs) - 1 - i for i, c in enumerate(configs)}
    colour = {c: style(i)["color"] for i, c in enumerate(configs)}
    longest = max(len(_label(c, info)) for c in configs)
    fig, axes = _grid_figure(
        len(tasks),
        width=3.4,
        height=max(1.3, 0.35 + 0.3 * len(configs)),
        left=0.3 + 0.075 * longest,
        legend_entries=int(any(info.targets.get(t) is not None for t in tasks)),
    )
    has_target = False
    by_task = dict(iter(prim.groupby("task", sort=False)))
    labels = [_label(c, info) for c in reversed(configs)]
    for ax, task in zip(axes, tasks, strict=True):
        sub = by_task[task]
        y = sub["config"].map(position).to_numpy()
        mean, h = sub["mean"].to_numpy(dtype=float), sub["half"].to_numpy()
        colours = sub["config"].map(colour).tolist()
        # Three collections per panel rather than an errorbar call per config: the same
        # picture, a fraction of the artists to draw.
        ax.hlines(y, mean - h, mean + h, colors=colours, lw=1.5)
        ax.scatter(
            np.concatenate([mean - h, mean + h]),
            np.concatenate([y, y]),
            marker="|",
            s=60,
            c=colours + colours,
            linewidths=1.5,
        )
        ax.scatter(mean, y, s=30, c=colours, zorder=3)
        target = info.targets.get(task)
        if target is not None:
            ax.axvline(target, color="0.4", ls="--", lw=1)
            has_target = True
        ax.set_yticks(range(len(configs)))
        ax.set_yticklabels(labels)
        ax.set_ylim(-0.6, len(configs) - 0.4)
        ax.set_title(task)
        ax.set_xlabel(f"{info.primary} (mean, 95% CI)")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(
        f"Final {info.primary} per task: mean over seeds with 95% CI",
        y=1 - 0.2 / fig.get_figheight(),
        va="top",
    )
    name = f"scores_{_slug(info.primary)}.png"
    if has_target:
        from matplotlib.lines import Line2D

        path = _save(
            fig,
            folder,
            name,
            [Line2D([], [], color="0.4", ls="--", lw=1)],
            ["target (BENCHMARKS.md)"],
        )
    else:
        path = _save(fig, folder, name)
    return [
        Plot(
            path,
            f"Scores: {info.primary}",
            f"Mean final {info.primary} of each config with its 95% Student-t confidence "
            "interval over seeds; the dashed line is the task's target, where set.",
        )
    ]


def _cv(values: np.ndarray, ns: np.ndarray, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        from benchlab.stats import cv_of_mean
    except ImportError:  # its expectation in closed form: sd / (sqrt(N) |mean|)
        m = abs(values.mean())
        return ns, (values.std() / np.sqrt(ns) / m) if m > 0 else np.full(ns.shape, np.nan)
    return cv_of_mean(values, ns=ns, reps=reps, seed=seed)


def plot_cv(
    finals: pd.DataFrame,
    info: BenchmarkInfo,
    folder: Path,
    reps: int = 1000,
    seed: int = 0,
    threshold: float = 0.05,
) -> list[Plot]:
    """CV of the mean of the primary metric vs number of seeds: one line per config.

    With several tasks the line is the median over tasks (for up to 3 configs a band
    shows their range), so the figure stays one panel however many tasks there are.
    """
    from matplotlib.ticker import MaxNLocator

    prim = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
    groups = {k: g.to_numpy() for k, g in prim.groupby(["config", "task"], sort=False)["value"]}
    groups = {k: v for k, v in groups.items() if v.shape[0] >= 2}
    if not groups:
        return []
    n_max = max(v.shape[0] for v in groups.values())
    ns = np.arange(1, n_max + 1)
    configs = _config_order(info, {c for c, _ in groups})
    n_tasks = len({t for _, t in groups})
    fig = _figure(7.5, 4.8)
    ax = fig.add_subplot()
    for i, cfg in enumerate(configs):
        rows = [_cv(v, ns, reps, seed)[1] for (c, _), v in groups.items() if c == cfg]
        if not rows:
            continue
        cv = 100 * np.vstack(rows)
        st = style(i)
        with np.errstate(invalid="ignore"):
            # Range bands only for a few configs: more of them stack into a grey blot.
            if cv.shape[0] > 1 and np.isfinite(cv).any() and len(configs) <= 3:
                ax.fill_between(
                    ns,
                    np.nanmin(cv, axis=0),
                    np.nanmax(cv, axis=0),
                    color=st["color"],
                    alpha=0.15,
                    linewidth=0,
                )
            ax.plot(
                ns,
                np.nanmedian(cv, axis=0) if cv.shape[0] > 1 else cv[0],
                lw=1.6,
                label=_label(cfg, info),
                **st,
            )
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
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    name = f"cv_of_mean_{_slug(info.primary)}.png"
    fig.savefig(folder / name, dpi=DPI)
    return [
        Plot(
            f"plots/{name}",
            "CV of the mean vs number of seeds",
            f"Coefficient of variation (sd / |mean|) of the mean {info.primary} of N seeds, "
            "estimated by resampling each config's runs with replacement"
            + (", median over tasks" if n_tasks > 1 else "")
            + (" (shaded: the range over tasks)" if n_tasks > 1 and len(configs) <= 3 else "")
            + f"; where a line drops below the dashed {100 * threshold:g}% line, that many "
            "seeds pin the mean down.",
        )
    ]


def normalised_scores(
    finals: pd.DataFrame, info: BenchmarkInfo
) -> tuple[list[str], dict[str, np.ndarray], str]:
    """Per-config scores normalised per task, higher is better.

    Returns ``(tasks, {config: array (runs, tasks)}, note)``: tasks with a reference
    pair ``(low, high)`` map low to 0 and high to 1; without references every
    task is normalised by the worst and best run over all configs (``note`` says which).
    Runs are NaN-padded where configs have fewer seeds on a task. Tasks some config
    has no run on are left out (so every config is profiled over the same tasks), as
    are tasks whose two normalising values are equal; ``note`` names them.
    """
    goal = info.goal.get(info.primary, "max")
    prim = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
    tasks = [t for t in info.tasks if t in set(prim["task"])] + sorted(
        set(prim["task"]) - set(info.tasks)
    )
    configs = _config_order(info, set(prim["config"]))
    groups = {k: g.to_numpy() for k, g in prim.groupby(["task", "config"], sort=False)["value"]}
    used, bounds, referenced, dropped = [], [], 0, []
    for t in tasks:
        if any((t, c) not in groups for c in configs):
            dropped.append(t)
            continue
        if t in info.references:
            lo, hi = info.references[t]
        else:
            vals = prim.loc[prim["task"] == t, "value"]
            lo, hi = (vals.min(), vals.max()) if goal == "max" else (vals.max(), vals.min())
        if lo == hi:
            dropped.append(t)
            continue
        used.append(t)
        bounds.append((float(lo), float(hi)))
        referenced += t in info.references
    if referenced == len(used):
        note = "scores are normalised by each task's reference scores (low → 0, high → 1)"
    elif referenced == 0:
        note = (
            "the spec gives no reference scores, so each task is normalised by its worst (0) "
            "and best (1) run over all configs"
        )
    else:
        note = (
            "scores are normalised by reference scores where the spec gives them, otherwise "
            "by the task's worst (0) and best (1) run over all configs"
        )
    if dropped:
        note += (f"; left out: {', '.join(dropped)} (a config has no run there, or all "
                 "scores are equal)")
    out = {}
    for cfg in configs:
        cols = [groups.get((t, cfg), np.empty(0)) for t in used]
        width = max((c.shape[0] for c in cols), default=0)
        arr = np.full((width, len(used)), np.nan)
        for j, (c, (lo, hi)) in enumerate(zip(cols, bounds, strict=True)):
            arr[: c.shape[0], j] = (c - lo) / (hi - lo)
        out[cfg] = arr
    return used, out, note


def _sentence(note: str) -> str:
    return note[0].upper() + note[1:] + "."


def plot_profile(
    finals: pd.DataFrame, info: BenchmarkInfo, folder: Path, reps: int = 200, seed: int = 0
) -> list[Plot]:
    """Performance profiles: fraction of runs whose normalised score exceeds tau, per config."""
    tasks, scores, note = normalised_scores(finals, info)
    scores = {c: s for c, s in scores.items() if s.size}
    if not tasks or not scores:
        return []
    allv = np.concatenate([s[~np.isnan(s)] for s in scores.values()])
    # Over the observed range only: below the worst run every profile is 1, above the best 0.
    worst, best = float(allv.min()), float(allv.max())
    pad = 0.02 * (best - worst) if best > worst else 0.5
    taus = np.linspace(worst - pad, best + pad, 101)
    profile: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]] | None
    try:
        from benchlab.stats import performance_profile as profile
    except ImportError:
        profile = None
    fig = _figure(7.5, 4.8)
    ax = fig.add_subplot()
    for i, (cfg, s) in enumerate(scores.items()):
        st = style(i)
        if profile is not None:
            point, lo, hi = profile(s, taus, reps=reps, seed=seed)
            ax.fill_between(taus, lo, hi, color=st["color"], alpha=0.2, linewidth=0)
        else:
            valid = ~np.isnan(s)
            point = (
                ((s[..., None] > taus) & valid[..., None]).sum(axis=0) / valid.sum(axis=0)[:, None]
            ).mean(axis=0)
        ax.plot(taus, point, lw=1.8, label=_label(cfg, info), **st)
    ax.set_xlabel(f"normalised {info.primary} τ")
    ax.set_ylabel("fraction of runs with score > τ")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title(
        f"Performance profiles over {len(tasks)} task{'s' if len(tasks) != 1 else ''}"
        + (" (95% bootstrap bands)" if profile is not None else "")
    )
    fig.text(0.5, 0.005, _sentence(note), ha="center", va="bottom", fontsize="small", color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "performance_profile.png", dpi=DPI)
    return [
        Plot(
            "plots/performance_profile.png",
            "Performance profiles",
            f"Fraction of runs (averaged over tasks) whose normalised {info.primary} "
            f"exceeds each threshold τ; higher and further right is better. "
            f"{_sentence(note)}",
        )
    ]


def plot_radar(finals: pd.DataFrame, info: BenchmarkInfo, folder: Path) -> list[Plot]:
    """Normalised mean score per task as a polygon per config; needs 3 or more tasks."""
    tasks, scores, note = normalised_scores(finals, info)
    if len(tasks) < 3:
        return []
    angles = np.linspace(0, 2 * np.pi, len(tasks), endpoint=False)
    closed = np.append(angles, angles[0])
    fig = _figure(7.5, 7.4)
    ax = fig.add_subplot(projection="polar")
    lo, hi = 0.0, 1.0
    for i, (cfg, s) in enumerate(scores.items()):
        if not s.size:
            continue
        with np.errstate(invalid="ignore"):
            means = np.array(
                [
                    np.nanmean(s[:, j]) if np.any(~np.isnan(s[:, j])) else np.nan
                    for j in range(s.shape[1])
                ]
            )
        st = style(i)
        if np.any(np.isfinite(means)):
            lo, hi = min(lo, float(np.nanmin(means))), max(hi, float(np.nanmax(means)))
        ax.plot(closed, np.append(means, means[0]), lw=1.6, label=_label(cfg, info), **st)
        if len(scores) <= 3:  # more fills stack into a grey blot
            ax.fill(closed, np.append(means, means[0]), color=st["color"], alpha=0.06)
    ax.set_xticks(angles)
    ax.set_xticklabels(tasks, fontsize="small")
    ax.set_ylim(lo, hi)
    ax.set_title(f"Normalised mean {info.primary} per task (further out is better)", pad=22)
    ncol = min(len(scores), 5)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=ncol, fontsize="small", frameon=False
    )
    fig.text(0.5, 0.01, _sentence(note), ha="center", va="bottom", fontsize="small", color="0.3")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    folder.mkdir(parents=True, exist_ok=True)
    fig.savefig(folder / "radar.png", dpi=DPI)
    return [
        Plot(
            "plots/radar.png",
            "Per-task profile (radar)",
            f"Mean normalised {info.primary} of each config on each task (1 = best, "
            f"further out is better). {_sentence(note)}",
        )
    ]


def _curve_plots(results: Path, info: BenchmarkInfo, folder: Path, seeds: bool) -> list[Plot]:
    # Read in the worker: the curves never cross a process boundary.
    return plot_curves(load_curves(results), info, folder, seeds=seeds)


def _default_workers(jobs: int) -> int:
    if not sys.platform.startswith("linux"):
        return 0  # fork is only dependable on Linux; elsewhere draw here
    cores = len(os.sched_getaffinity(0))
    return 0 if cores < 2 else min(jobs, cores - 1)


def draw(
    results: Path,
    folder: Path,
    info: BenchmarkInfo,
    finals: pd.DataFrame,
    desc: pd.DataFrame,
    *,
    seeds: bool = False,
    seed: int = 0,
    workers: int | None = None,
) -> Callable[[], list[Plot]]:
    """Start drawing every figure into ``folder``; call the returned function for the list.

    With two or more cores (on Linux) the figures are drawn in forked worker
    processes, leaving the calling process free to compute the statistics
    meanwhile; ``workers=0`` draws them here, before returning. Forking, unlike
    spawning, never re-imports the caller's ``__main__`` (a script without a
    ``__name__`` guard, a notebook, stdin all work).
    """
    jobs: list[tuple[Callable[..., list[Plot]], tuple[Any, ...]]] = [
        (_curve_plots, (results, info, folder, seeds)),
        (plot_scores, (desc, info, folder)),
        (plot_cv, (finals, info, folder, 1000, seed)),
        (plot_profile, (finals, info, folder, 200, seed)),
        (plot_radar, (finals, info, folder)),
    ]

    def serial() -> list[Plot]:
        return [p for fn, args in jobs for p in fn(*args)]

    n = _default_workers(len(jobs)) if workers is None else workers
    if n <= 0:
        done = serial()
        return lambda: done
    import multiprocessing
    import warnings
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:  # imported once here (the caller needs it next anyway), not again in every worker
        import benchlab.stats  # noqa: F401
    except ImportError:
        pass

    with warnings.catch_warnings():
        # Python 3.12+ warns when forking a process that has threads (here: idle BLAS
        # threads); the workers only draw with matplotlib and touch no lock those hold.
        warnings.simplefilter("ignore", DeprecationWarning)
        pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(fn, *args) for fn, args in jobs]

    def collect() -> list[Plot]:
        try:
            return [p for f in futures for p in f.result()]
        except BrokenProcessPool:  # a worker died (e.g. out of memory): draw here instead
            return serial()
        finally:
            pool.shutdown()

    return collect
