"""Per (task, config, metric) summaries of final scalars, as the report's tables need them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def describe(finals: pd.DataFrame, goals: dict[str, str], primary: str) -> pd.DataFrame:
    """n, mean, std (ddof=1), min, max per (task, config, metric), and the rank by mean.

    ``finals`` holds one row per (task, config, seed, metric) with a ``value``.
    Rank 1 is the best mean given the metric's goal; NaN values are left out of n.
    """
    import pandas as pd

    grouped = finals.dropna(subset=["value"]).groupby(["task", "config", "metric"], sort=False)[
        "value"
    ]
    table = grouped.agg(n="count", mean="mean", std="std", min="min", max="max").reset_index()
    table["std"] = table["std"].where(table["n"] > 1)
    table["rank"] = pd.Series(np.nan, index=table.index)
    for metric, rows in table.groupby("metric").groups.items():
        ascending = goals.get(str(metric), "max") == "min"
        sub = table.loc[rows]
        table.loc[rows, "rank"] = sub.groupby("task")["mean"].rank(
            ascending=ascending, method="min"
        )
    table["rank"] = table["rank"].astype("Int64")
    table["is_primary"] = table["metric"] == primary
    return table


def fmt(value: float | None, digits: int = 4) -> str:
    """A number for a Markdown table: 4 significant digits, '—' when undefined."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"
