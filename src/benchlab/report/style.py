"""What every report figure shares: palette, layout in inches, saving, the Plot record.

Every figure has a title, axis labels naming the metric, a legend and the
Okabe–Ito colour-blind-safe palette (line styles vary too once configs
outnumber its colours). Figures are bare :class:`matplotlib.figure.Figure`
objects rendered by Agg: no pyplot state, no display needed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from benchlab.results import BenchmarkInfo

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
Dash = Literal["-", "--", ":", "-."]
LINESTYLES: list[Dash] = ["-", "--", ":", "-."]
DPI = 100
#: zlib level of the PNG files: 3 writes them in half the time of the default 6, and on these
#: figures (flat colours, lines, text) about as small (the scores figure of 10,000 runs: 0.90 MB
#: at 3, 1.09 MB at 6).
PNG_COMPRESSION = 3


@dataclass
class Plot:
    """One written figure: its path relative to the report folder, a title and a caption."""

    path: str
    title: str
    caption: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "title": self.title, "caption": self.caption}


class LineStyle(TypedDict):
    """Matplotlib keyword arguments (``**style(i)``) that draw one config's lines."""

    color: str
    linestyle: Dash


def style(i: int) -> LineStyle:
    """Colour and line style of the i-th config."""
    return {
        "color": OKABE_ITO[i % len(OKABE_ITO)],
        "linestyle": LINESTYLES[(i // len(OKABE_ITO)) % len(LINESTYLES)],
    }


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "metric"


def new_figure(width: float, height: float) -> Figure:
    # A bare Figure, not pyplot: no global state, no GUI backend, nothing to close.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def grid_figure(
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
    fig = new_figure(fig_w, fig_h)
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


def save(
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
    fig.savefig(folder / name, dpi=DPI, pil_kwargs={"compress_level": PNG_COMPRESSION})
    return f"plots/{name}"


def config_order(info: BenchmarkInfo, present: set[str]) -> list[str]:
    return [c for c in info.configs if c in present] + sorted(present - set(info.configs))


def config_label(config: str, info: BenchmarkInfo) -> str:
    return f"{config} (baseline)" if config == info.baseline else config
