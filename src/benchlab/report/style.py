"""What every report figure shares: palette, layout in inches, saving, the Plot record.

Every figure has a title, axis labels naming the metric, a legend and the
Okabe–Ito colour-blind-safe palette (line styles vary too once configs
outnumber its colours). Figures are bare :class:`matplotlib.figure.Figure`
objects rendered by Agg: no pyplot state, no display needed.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
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
    n: int, width: float = 3.6, height: float = 2.5, left: float = 0.8, legend_entries: int = 0,
    row_labels: bool = False, column_labels: bool = False,
) -> tuple[Figure, list[Any]]:
    """A figure of ``n`` panels of ``width`` x ``height`` inches, laid out by hand.

    A fixed layout in inches (room for tick labels, axis labels, titles, the
    suptitle and a legend row under the panels) instead of ``tight_layout``,
    which draws the whole figure an extra time. Where the panels share an axis,
    its labels are written once, not drawn again on every panel: with
    ``row_labels`` (the same y axis in every panel) only the first panel of a
    row shows its y tick labels (:func:`is_first_column`) and only it has room
    (``left``) for them; with ``column_labels`` (the same x axis) only the
    lowest panel of a column shows its x tick labels (:func:`is_lowest_in_column`),
    and the rows need room for titles only.
    """
    ncols = 1 if n == 1 else 2 if n <= 4 else 3 if n <= 9 else 4
    nrows = math.ceil(n / ncols)
    gap_x = 0.5 if row_labels else left + 0.15
    gap_y, right, top = (0.45 if column_labels else 0.8), 0.25, 0.75
    legend_rows = math.ceil(legend_entries / _legend_cols(legend_entries)) if legend_entries else 0
    bottom = 0.6 + 0.28 * legend_rows
    fig_w = left + ncols * width + (ncols - 1) * gap_x + right
    fig_h = top + nrows * height + (nrows - 1) * gap_y + bottom
    fig = new_figure(fig_w, fig_h)
    grid = fig.add_gridspec(
        nrows,
        ncols,
        left=left / fig_w,
        right=1 - right / fig_w,
        bottom=bottom / fig_h,
        top=1 - top / fig_h,
        wspace=gap_x / width,
        hspace=gap_y / height,
    )
    # Only the n panels: an unused cell of the last row gets no (hidden) axes to set up.
    axes = [fig.add_subplot(grid[i // ncols, i % ncols]) for i in range(n)]
    locator = _in_view_locator()
    for ax in axes:
        ax.xaxis.set_major_locator(locator())
        ax.yaxis.set_major_locator(locator())
        if row_labels and not is_first_column(ax):
            ax.tick_params(axis="y", labelleft=False)
        if column_labels and not is_lowest_in_column(ax):
            ax.tick_params(axis="x", labelbottom=False)
            ax.xaxis.offsetText.set_visible(False)  # the "1e6" under the axis, as the labels
    return fig, axes


@functools.cache
def _in_view_locator() -> type:
    """matplotlib's default tick locator, less the ticks it places outside the axis' view.

    ``AutoLocator`` returns a tick a step beyond each end of the view, and the axis makes a tick
    (two lines, a grid line and two labels) for each location before it leaves those two out of
    the drawing: a quarter of a small multiple's ticks, made for nothing. The ticks drawn are the
    same, and so are their labels: the formatter picks its offset from the ticks in view already,
    and its decimals from the step between ticks, which is unchanged (the report's PNGs are
    byte-identical, and ``tests/report/test_style.py`` draws both ways and compares)."""
    from matplotlib.ticker import AutoLocator

    class InViewLocator(AutoLocator):
        def __call__(self) -> Any:
            locs = super().__call__()
            if self.axis is None or len(locs) == 0:
                return locs
            low, high = sorted(self.axis.get_view_interval())
            slack = (high - low) * 1e-10  # matplotlib's own test of "in view" allows for rounding
            return locs[(locs >= low - slack) & (locs <= high + slack)]

    return InViewLocator


def is_first_column(ax: Axes) -> bool:
    """Whether ``ax`` is the first panel of its row in a :func:`grid_figure`."""
    spec = ax.get_subplotspec()
    return spec is not None and spec.is_first_col()


def is_lowest_in_column(ax: Axes) -> bool:
    """Whether no panel of a :func:`grid_figure` lies below ``ax`` (the last row's, and those
    above an empty cell of it)."""
    spec = ax.get_subplotspec()
    if spec is None:
        return True
    figure = ax.get_figure()
    others = [] if figure is None else [a.get_subplotspec() for a in figure.axes]
    return not any(o is not None and o.colspan.start == spec.colspan.start and o.rowspan.start > spec.rowspan.start
                   for o in others)


def tight(fig: Figure, rect: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)) -> None:
    """Lay ``fig`` out as ``fig.tight_layout(rect=rect)`` does, once: ``tight_layout`` leaves a
    placeholder layout engine on the figure (matplotlib 3.8 and later), and ``savefig`` then draws
    the whole figure once more, unrendered, before drawing it for the file."""
    import matplotlib as mpl

    fig.tight_layout(rect=rect)
    if not (mpl.rcParams["figure.autolayout"] or mpl.rcParams["figure.constrained_layout.use"]):
        fig.set_layout_engine(None)  # no engine at all (with such an rc, None would set one)


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


def top_title(ax: Axes, text: str, **kwargs: Any) -> None:
    """Title ``ax`` with ``text`` just above its top edge, which is where matplotlib's own
    search puts the title of a panel with no tick labels above it, without that search: it
    measures every tick label of the y axis at each draw, a good part of a small multiple's cost.
    Where the y axis shows an offset or a scale (``1e-5``, ``+1000``) at its top, that text may
    meet the title, and the search is left to move it; call this once the panel's data is in."""
    from matplotlib.ticker import ScalarFormatter

    formatter = ax.yaxis.get_major_formatter()
    if isinstance(formatter, ScalarFormatter):
        formatter.set_locs(list(ax.yaxis.get_majorticklocs()))
        if not formatter.get_offset():
            ax.set_title(text, y=1.0, **kwargs)
            return
    ax.set_title(text, **kwargs)


def band_polygons(x: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[np.ndarray]:
    """The polygons ``Axes.fill_between(x, low, high)`` fills: one per run of steps where ``x``,
    ``low`` and ``high`` are all finite, each of shape ``(2 * steps + 2, 2)`` (along ``low``, back
    along ``high``), so that a band drawn from them shows the same area."""
    finite = np.isfinite(x) & np.isfinite(low) & np.isfinite(high)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], finite.astype(np.int8), [0]])))
    out = []
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        t, lo, hi = x[start:stop], low[start:stop], high[start:stop]
        n = t.shape[0]
        pts = np.empty((2 * n + 2, 2))
        pts[0] = t[0], hi[0]
        pts[1:n + 1, 0], pts[1:n + 1, 1] = t, lo
        pts[n + 1] = t[-1], hi[-1]
        pts[n + 2:, 0], pts[n + 2:, 1] = t[::-1], hi[::-1]
        out.append(pts)
    return out


def add_bands(ax: Axes, polygons: Sequence[np.ndarray], colours: Sequence[str], alpha: float) -> None:
    """Fill ``polygons`` (:func:`band_polygons`), ``colours[i]`` the i-th's, as one artist: the
    same picture as a ``fill_between`` per band, for a fraction of the per-artist cost (every
    artist is set up, measured for the data limits and drawn on its own)."""
    from matplotlib.collections import PolyCollection

    if polygons:
        ax.add_collection(PolyCollection(list(polygons), facecolors=list(colours), edgecolors=list(colours),
                                         linewidths=0, alpha=alpha))


def add_lines(ax: Axes, lines: Sequence[np.ndarray], styles: Sequence[LineStyle], lw: float) -> None:
    """Draw ``lines`` (each of shape ``(points, 2)``), ``styles[i]`` the i-th's, as one collection
    per line style rather than a ``Line2D`` each; the caps and joins are those of ``Axes.plot``
    (projecting caps on solid lines, butt on dashed ones, round joins). Lines with a NaN break
    there, as a plotted line does."""
    from matplotlib.collections import LineCollection

    for dash in LINESTYLES:
        mine = [i for i, st in enumerate(styles) if st["linestyle"] == dash]
        if mine:
            ax.add_collection(LineCollection(
                [lines[i] for i in mine], colors=[styles[i]["color"] for i in mine], linestyles=dash,
                linewidths=lw, capstyle="projecting" if dash == "-" else "butt", joinstyle="round",
                zorder=2))


def config_order(info: BenchmarkInfo, present: set[str]) -> list[str]:
    return [c for c in info.configs if c in present] + sorted(present - set(info.configs))


def config_label(config: str, info: BenchmarkInfo) -> str:
    return f"{config} (baseline)" if config == info.baseline else config
