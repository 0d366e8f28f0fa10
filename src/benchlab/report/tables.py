"""The report's numbers as text, and the summary table it formats (computed by :mod:`benchlab.stats`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def describe(finals: pd.DataFrame, goals: dict[str, str], primary: str) -> pd.DataFrame:
    """:func:`benchlab.stats.describe.describe_groups` of the final values (n, mean, std, min,
    max, Student-t CI, rank with CI ties, rank by mean) and ``is_primary`` per (task, config,
    metric): the numbers the report's tables and figures show, all computed by ``stats``."""
    from benchlab.stats.describe import describe_groups

    table = describe_groups(finals, {m: "min" if g == "min" else "max" for m, g in goals.items()})
    table["is_primary"] = table["metric"] == primary
    return table


def places(spread: float | None, digits: int = 2) -> int | None:
    """Decimal places that show ``spread`` (a CI half-width, a std) to ``digits`` significant
    digits: the precision a number with that uncertainty supports.

    None when the spread is undefined, 0, or rounding noise (below 1e-12: an interval
    of equal values computed in floating point), so the caller prints the number as is.
    """
    if spread is None or not np.isfinite(spread) or spread <= 1e-12:
        return None
    return max(0, digits - 1 - int(np.floor(np.log10(abs(spread)))))


def fmt_at(value: float | None, at: int | None) -> str:
    """``value`` with ``at`` decimal places (fixed notation), or :func:`fmt` when ``at`` is None."""
    if at is None or value is None or not np.isfinite(value):
        return fmt(value)
    return f"{value:.{at}f}"


def mean_pm(mean: float | None, std: float | None, spread: float | None = None) -> str:
    """``mean ± std`` both to the decimals that ``spread`` (default: the std) supports.

    ``419.1 ± 150`` becomes ``419 ± 150``, never ``419.1 ± 1.5e+02``; a zero std prints
    ``± 0`` and an undefined one (one seed) prints the mean alone.
    """
    if mean is None or not np.isfinite(mean):
        return "—"
    if std is None or not np.isfinite(std):
        return fmt(mean)
    at = places(spread if spread is not None and spread > 0 else std)
    if at is None:
        return f"{fmt(mean)} ± 0"
    return f"{mean:.{at}f} ± {std:.{at}f}"


def fmt(value: float | None, digits: int = 4) -> str:
    """A number for a Markdown table: 4 significant digits, '—' when undefined."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "—"
    text = f"{value:.{digits}g}"
    if "e" in text and 1e-4 <= abs(value) < 10**12:  # 1.5e+02: write it out as 150
        text = f"{value:.{max(0, digits - 1 - int(np.floor(np.log10(abs(value)))))}f}"
    return text
