"""Reading a config's row back from BENCHMARK_REPORT.md, with the precision the report shows."""

from __future__ import annotations

import re


def _shown(text: str) -> tuple[float, float]:
    """A number as printed and half a unit of its last printed digit (what rounding may have moved)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return float(text), 0.5 * 10.0 ** -decimals + 1e-12


def report_row(report: str, config: str, seeds: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """``((mean, tolerance), (std, tolerance))`` of ``config``'s row: | rank | config | seeds | mean ± std | ..."""
    row = re.search(rf"^\|[^|]*\| {re.escape(config)}\b[^|]*\| {seeds} \| ([-\d.]+) ± ([-\d.]+) \|", report, re.M)
    assert row, report
    return _shown(row.group(1)), _shown(row.group(2))
