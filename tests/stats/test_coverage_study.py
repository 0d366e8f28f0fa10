"""bench/coverage.py, reduced (--fast): the study behind docs/statistics.md's coverage tables runs,
and on normal data every default interval it shows covers 93–97% within Monte Carlo error."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "coverage.py"


def _cells(text: str) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    header: list[str] = []
    for line in text.splitlines():
        if line.startswith("**"):  # a new table's title: the false-positive table is not parsed
            header = []
        elif line.startswith("| distribution |"):
            header = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("| ") and header and not line.startswith("|---"):
            cols = [c.strip() for c in line.strip("|").split("|")]
            for name, cell in zip(header[2:], cols[2:], strict=True):
                out[(cols[0], cols[1], name)] = cell
    return out


def test_the_coverage_study_runs_and_normal_data_is_covered_93_to_97_percent(capsys):
    spec = importlib.util.spec_from_file_location("coverage_study", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["coverage_study"] = module
    spec.loader.exec_module(module)
    module.main(["--fast"])
    cells = _cells(capsys.readouterr().out)
    normal = {k: v for k, v in cells.items() if k[0] == "normal"}
    assert len(normal) >= 20
    for key, cell in normal.items():
        if cell in ("—", "not shown"):
            continue
        m = re.match(r"([\d.]+) ± ([\d.]+)(?: \((\d+) null\))?", cell)
        assert m, (key, cell)
        p, se, nulls = float(m[1]), float(m[2]), int(m[3] or 0)
        assert not nulls, (key, cell)  # shown for some samples and not others: never
        assert 93 - 3 * se <= p <= 97 + 3 * se, (key, cell)
    # Tiny layouts show no across-task interval at all (their bootstrap covered 52–64%).
    assert cells[("normal", "mean", "1 × 2")] == cells[("normal", "iqm", "2 × 2")] == "not shown"
