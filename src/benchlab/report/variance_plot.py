"""``benchlab variance --output PLOT``: the coefficient of variation of the mean against the
number of seeds, in two panels, one for the area under the learning curve and one for its
derivative summary (the slope), a line per task, the threshold drawn across and each task's
smallest N marked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.report.style import new_figure

if TYPE_CHECKING:
    from benchlab.stats.sizing import VarianceAnalysis

#: The panels and the summaries they draw, left to right.
PANELS = (("auc", "AUC"), ("slope", "derivative (slope)"))


def plot_variance(report: VarianceAnalysis, path: Path) -> list[str]:
    """Write the two-panel figure to ``path`` (its suffix picks the format: .png, .pdf, .svg).

    Returns what a panel could not show (no learning curves, fewer than 2 seeds), one line each;
    an empty panel says so on the figure too.
    """
    fig = new_figure(10.0, 4.0)
    axes = fig.subplots(1, 2)
    notes: list[str] = []
    for ax, (key, title) in zip(axes, PANELS, strict=True):
        drawn = 0
        for task in report.tasks:
            curve = getattr(task, key)
            if curve is None:
                continue
            ns = [n for n, c in zip(curve.n, curve.cv, strict=True) if c is not None]
            cvs = [c for c in curve.cv if c is not None]
            if not ns:
                continue
            (line,) = ax.plot(ns, cvs, marker="o", markersize=3, label=str(task.task))
            drawn += 1
            if curve.smallest_n is not None:
                at = curve.cv[curve.n.index(curve.smallest_n)]
                ax.plot([curve.smallest_n], [at], marker="*", markersize=11, color=line.get_color())
        ax.axhline(report.threshold, color="0.3", linestyle="--", linewidth=1,
                   label=f"threshold {report.threshold:g}")
        ax.set_xlabel("seeds N")
        ax.set_ylabel("CV of the mean")
        ax.set_title(f"{title}: {report.config} {report.metric}", fontsize=10)
        if drawn:
            ax.legend(fontsize=8)
        else:
            why = f"no {title} curve (no learning curves, or fewer than 2 seeds)"
            ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, fontsize=9, wrap=True)
            notes.append(f"{path}: {why}")
    fig.suptitle("CV of the mean vs seeds (★: smallest N under the threshold)", fontsize=11)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.14, top=0.84, wspace=0.25)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return notes
