"""Across-task figures: performance profiles and the radar of normalised scores.

Both need scores on one scale: :func:`normalised_scores` maps each task's
scores to 0 (bad) .. 1 (good) with the spec's reference scores, or with the
task's worst and best run when the spec gives none, and says which in the caption.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchlab.report.style import Plot, config_label, config_order, new_figure, save, style

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from benchlab.results import BenchmarkInfo


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
    goal = info.primary_goal
    prim = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
    present = set(prim["task"].tolist())
    tasks = [t for t in info.tasks if t in present] + sorted(present - set(info.tasks))
    configs = config_order(info, set(prim["config"].tolist()))
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


def one_run_each(finals: pd.DataFrame, info: BenchmarkInfo) -> bool:
    """Whether no (task, config) has more than one run with a primary value (single-seed
    evaluations, such as checkpoint evaluations)."""
    prim = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
    return not prim.empty and int(prim.groupby(["task", "config"]).size().max()) <= 1


def profile_omitted(finals: pd.DataFrame, info: BenchmarkInfo) -> str | None:
    """Why no performance profile is drawn, or None when one is.

    With one run per (task, config) and a task without reference scores, min–max
    normalising that task over the configs puts the best config at exactly 1 and the
    worst at 0: every profile would be a 0/1 step that restates the ranks in the tables.
    """
    if not one_run_each(finals, info):
        return None
    prim = finals[(finals["metric"] == info.primary) & finals["value"].notna()]
    unreferenced = sorted(set(prim["task"]) - set(info.references))
    if not unreferenced:
        return None
    return (f"every config has one run per task and {_tasks(unreferenced)} no reference "
            "scores, so normalising over the configs would put the best config at 1 and the "
            "worst at 0 on every such task, and the profile would only restate the ranks in "
            "the tables; give each task `reference: [low, high]` in the spec to draw one")


def _tasks(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{shown} {'has' if len(names) == 1 else 'have'}"


def _sentence(note: str) -> str:
    return note[0].upper() + note[1:] + "."


def _noted_plot(
    fig: Figure,
    folder: Path,
    name: str,
    title: str,
    caption: str,
    note: str,
    note_y: float,
    note_height: float,
) -> Plot:
    """Save ``fig`` as ``name`` with the normalisation ``note`` written under it; returns
    its Plot record, whose caption ends with the same note.

    ``note_y``: where the note's baseline sits; ``note_height``: the strip kept free for it
    under the axes (both fractions of the figure height).
    """
    fig.text(0.5, note_y, _sentence(note), ha="center", va="bottom", fontsize="small", color="0.3")
    fig.tight_layout(rect=(0, note_height, 1, 1))
    return Plot(save(fig, folder, name), title, f"{caption} {_sentence(note)}")


#: Up to this many configs share one panel; beyond, each config gets its own panel (its band
#: over the others' lines in grey), since overlapping bands merge into an unreadable smear.
SHARED_PANEL = 2


def plot_profile(
    finals: pd.DataFrame, info: BenchmarkInfo, folder: Path, reps: int = 200, seed: int = 0
) -> list[Plot]:
    """Performance profiles: fraction of runs whose normalised score exceeds tau, per config."""
    from benchlab.report.style import grid_figure

    if profile_omitted(finals, info) is not None:
        return []  # the report says why (markdown.py)
    tasks, scores, note = normalised_scores(finals, info)
    scores = {c: s for c, s in scores.items() if s.size}
    if not tasks or not scores:
        return []
    # One run per (task, config): resampling it gives a band of zero width, which would
    # claim a certainty a single run cannot give.
    banded = not one_run_each(finals, info)
    allv = np.concatenate([s[~np.isnan(s)] for s in scores.values()])
    # Over the observed range only: below the worst run every profile is 1, above the best 0.
    worst, best = float(allv.min()), float(allv.max())
    pad = 0.02 * (best - worst) if best > worst else 0.5
    taus = np.linspace(worst - pad, best + pad, 101)
    from benchlab.stats import performance_profile

    curves = {cfg: performance_profile(s, taus, reps=reps, seed=seed) for cfg, s in scores.items()}
    names = list(curves)
    shared = len(names) <= SHARED_PANEL
    if shared:
        fig = new_figure(7.5, 4.8)
        axes = [fig.add_subplot()]
    else:
        fig, axes = grid_figure(len(names), width=3.6, height=2.6)
    for k, cfg in enumerate(names):
        ax = axes[0] if shared else axes[k]
        if not shared:  # the others, for reference: one collection, not a line artist each
            from matplotlib.collections import LineCollection

            others = [np.column_stack([taus, curves[other][0]]) for other in names if other != cfg]
            ax.add_collection(LineCollection(others, linewidths=0.8, colors="0.75", zorder=2))
        point, lo, hi = curves[cfg]
        st = style(k)
        if banded:
            ax.fill_between(taus, lo, hi, color=st["color"], alpha=0.18, linewidth=0)
        ax.plot(taus, point, lw=1.8, label=config_label(cfg, info), **st)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if not shared:
            # y given: placed where matplotlib's own search would put it (nothing above the
            # axes), without measuring every tick label of the panel to find that out.
            ax.set_title(config_label(cfg, info), fontsize="medium", y=1.0)
            ax.set_xlabel("normalised score τ", fontsize="small")
            ax.set_ylabel("runs > τ", fontsize="small")
    if shared:
        axes[0].set_xlabel(f"normalised {info.primary} τ")
        axes[0].set_ylabel("fraction of runs with score > τ")
        axes[0].legend(loc="best", fontsize="small")
    title = (f"Performance profiles over {len(tasks)} task{'s' if len(tasks) != 1 else ''}"
             + (" (95% bootstrap bands)" if banded else " (one run each: no bands)"))
    if shared:
        axes[0].set_title(title)
    else:
        fig.suptitle(title + ": one panel per config, the others in grey",
                     y=1 - 0.2 / fig.get_figheight(), va="top")
    caption = (
        f"Fraction of runs (averaged over tasks) whose normalised {info.primary} "
        "exceeds each threshold τ; higher and further right is better"
        + ("" if banded else "; one run per config and task, so no band: resampling a single "
           "run has no spread")
        + ("." if shared else "; each panel shows one config with its band over the other "
           "configs' profiles in grey, since overlapping bands would hide each other.")
    )
    if not shared:
        fig.text(0.5, 0.005, _sentence(note), ha="center", va="bottom", fontsize="small",
                 color="0.3")
        return [Plot(save(fig, folder, "performance_profile.png"), "Performance profiles",
                     f"{caption} {_sentence(note)}")]
    return [
        _noted_plot(
            fig, folder, "performance_profile.png", "Performance profiles", caption, note, 0.005, 0.04
        )
    ]


def plot_radar(finals: pd.DataFrame, info: BenchmarkInfo, folder: Path) -> list[Plot]:
    """Normalised mean score per task as a polygon per config; needs 3 or more tasks and
    3 or more configs (with fewer configs the scores table says the same, more plainly)."""
    tasks, scores, note = normalised_scores(finals, info)
    if len(tasks) < 3 or sum(1 for s in scores.values() if s.size) < 3:
        return []
    angles = np.linspace(0, 2 * np.pi, len(tasks), endpoint=False)
    closed = np.append(angles, angles[0])
    fig = new_figure(7.5, 7.4)
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
        ax.plot(closed, np.append(means, means[0]), lw=1.6, label=config_label(cfg, info), **st)
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
    caption = (
        f"Mean normalised {info.primary} of each config on each task; further out is better."
    )
    return [_noted_plot(fig, folder, "radar.png", "Per-task profile (radar)", caption, note, 0.01, 0.03)]
