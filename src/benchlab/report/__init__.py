"""Reports: BENCHMARK_REPORT.md, results.csv (and, as they land, plots and report.html).

``write_report`` gathers the results table and the ledger's failures once and
hands them to each writer, so every file tells the same story.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from benchlab.report.markdown import ReportData, write_markdown
from benchlab.results import find_results, info, load
from benchlab.store import Store

__all__ = ["ReportFiles", "gather", "write_report"]


@dataclass
class ReportFiles:
    """The files a report wrote."""

    folder: Path
    markdown: Path
    csv: Path
    extra: list[Path] = field(default_factory=list)


def _hardware(results: Path) -> tuple[str, dict[str, object]]:
    for prov in sorted((results / "runs").glob("*/provenance.json"))[:1]:
        try:
            data = json.loads(prov.read_text())
        except ValueError:
            continue
        gpus = data.get("gpu_names")
        text = f"{data.get('host')}: {data.get('cpu_count')} CPU cores, {data.get('platform')}"
        if gpus:
            text += f"; GPUs: {', '.join(gpus)}"
        return text, data.get("git") or {}
    return "unknown (no run has written provenance yet)", {}


def gather(results: Path | str | None = None) -> ReportData:
    """Everything a report is made of: the final-scalar table, the benchmark info, the failures."""
    from benchlab import __version__

    folder = find_results(results)
    meta = info(folder)
    table = load(folder, series=False)
    failures = []
    with Store.open(folder) as store:
        runs = {r.run_id: r for r in store.runs() if r.status == "failed"}
        attempts: dict[str, list] = {}
        for a in store.attempts():
            if a.run_id in runs:
                attempts.setdefault(a.run_id, []).append(a)
    for rid, run in runs.items():
        tries = attempts.get(rid, [])
        last = tries[-1] if tries else None
        failures.append({
            "run": run.name, "run_id": rid, "attempts": len(tries),
            "failure_class": last.failure_class if last else "unknown",
            "error": (last.error or "").replace("|", "\\|") if last else "",
            "tail": "\n".join((last.log_tail or "").splitlines()[-10:]) if last else "",
        })
    hardware, git = _hardware(folder)
    return ReportData(info=meta, finals=table, failures=failures, hardware=hardware, git=git,
                      benchlab_version=__version__)


def write_report(results: Path | str | None = None, out: Path | str | None = None) -> ReportFiles:
    """Write the report files into ``out`` (default: the results folder) and return their paths."""
    folder = find_results(results)
    out_dir = Path(out) if out is not None else folder
    out_dir.mkdir(parents=True, exist_ok=True)
    data = gather(folder)
    csv_path = out_dir / "results.csv"
    data.finals.to_csv(csv_path, index=False)
    md = write_markdown(data, out_dir / "BENCHMARK_REPORT.md")
    return ReportFiles(folder=out_dir, markdown=md, csv=csv_path)
