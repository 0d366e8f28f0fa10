"""Across-task figures: performance profiles and the radar of normalised scores.

Both draw scores on one scale, computed in :mod:`benchlab.stats.figures`
(:attr:`~benchlab.stats.figures.PrimaryFigures.normalised`): each task's scores mapped to 0 (bad)
.. 1 (good) with the spec's reference scores, or with the task's worst and best run when the spec
gives none, which the caption says.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchlab.report.style import Plot, config_label, new_figure, save, style, tight

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from benchlab.results import BenchmarkInfo
    from benchlab.stats.results_analysis import PrimaryFigures


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
    tight(fig, rect=(0, note_height, 1, 1))
    return Plot(save(fig, folder, name), title, f"{caption} {_sentence(note)}")


#: Up to this many configs share one panel; beyond, each config gets its own panel (its band
#: over the others' lines in grey), since overlapping bands merge into an unreadable smear.
SHARED_PANEL = 2


def plot_profile(figures: PrimaryFigures, info: BenchmarkInfo, folder: Path) -> list[Plot]:
    """Performance profiles: fraction of runs whose normalised score exceeds tau, per config
    (:attr:`benchlab.stats.figures.PrimaryFigures.profiles`)."""
    from benchlab.report.style import grid_figure, is_first_column, is_lowest_in_column

    profiles = figures.profiles
    if profiles is None:  # the report says why, where it is not for want of scores (markdown.py)
        return []
    tasks, note, banded, taus = profiles.tasks, profiles.note, profiles.banded, profiles.taus
    curves = {p.config: (p.point, p.low, p.high) for p in profiles.configs}
    names = list(curves)
    shared = len(names) <= SHARED_PANEL
    if shared:
        fig = new_figure(7.5, 4.8)
        axes = [fig.add_subplot()]
    else:
        # Every panel has the same axes (τ, fraction of runs): labelled once per row and column.
        fig, axes = grid_figure(len(names), width=3.6, height=2.6, row_labels=True, column_labels=True)
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
            if is_lowest_in_column(ax):
                ax.set_xlabel("normalised score τ", fontsize="small")
            if is_first_column(ax):
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


def plot_radar(figures: PrimaryFigures, info: BenchmarkInfo, folder: Path) -> list[Plot]:
    """Normalised mean score per task as a polygon per config; needs 3 or more tasks and
    3 or more configs (with fewer configs the scores table says the same, more plainly)
    (:attr:`benchlab.stats.figures.PrimaryFigures.radar`)."""
    radar = figures.radar
    if radar is None:
        return []
    tasks, note = radar.tasks, radar.note
    angles = np.linspace(0, 2 * np.pi, len(tasks), endpoint=False)
    closed = np.append(angles, angles[0])
    fig = new_figure(7.5, 7.4)
    ax = fig.add_subplot(projection="polar")
    lo, hi = 0.0, 1.0
    for i, (cfg, means) in enumerate(radar.configs):
        st = style(i)
        if np.any(np.isfinite(means)):
            lo, hi = min(lo, float(np.nanmin(means))), max(hi, float(np.nanmax(means)))
        ax.plot(closed, np.append(means, means[0]), lw=1.6, label=config_label(cfg, info), **st)
        if len(radar.configs) <= 3:  # more fills stack into a grey blot
            ax.fill(closed, np.append(means, means[0]), color=st["color"], alpha=0.06)
    ax.set_xticks(angles)
    ax.set_xticklabels(tasks, fontsize="small")
    ax.set_ylim(lo, hi)
    ax.set_title(f"Normalised mean {info.primary} per task (further out is better)", pad=22)
    ncol = min(len(radar.configs), 5)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=ncol, fontsize="small", frameon=False
    )
    caption = (
        f"Mean normalised {info.primary} of each config on each task; further out is better."
    )
    return [_noted_plot(fig, folder, "radar.png", "Per-task profile (radar)", caption, note, 0.01, 0.03)]
