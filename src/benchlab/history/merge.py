"""One report over several results folders, or from a long-format CSV (``benchlab report A B C``,
``benchlab report table.csv``).

The sources' tables are merged into one long-format table; a config name that several sources
use is told apart by its benchmark's name (``v1/fast``, ``v2/fast``), and every such renaming is
stated. The merged table is then written as a results folder of its own (a ledger holding one
imported run per (task, config, seed)), which the report reads like any other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.benchmark_info import BenchmarkInfo


@dataclass
class Merged:
    """The merged table, its benchmark record and what was renamed."""

    table: pd.DataFrame
    info: BenchmarkInfo
    notes: list[str] = field(default_factory=list)


def _source(path: Path) -> tuple[pd.DataFrame, BenchmarkInfo | None, str]:
    import pandas as pd

    from benchlab.stats import validate_table

    if path.is_file() and path.suffix.lower() == ".csv":
        try:
            raw = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise DataError(f"{path}: not a readable long-format CSV ({str(exc).strip()})") from None
        table = validate_table(raw, str(path))
        name = str(raw["benchmark"].iloc[0]) if "benchmark" in raw.columns and raw["benchmark"].nunique() == 1 \
            else path.stem
        return table, None, name
    from benchlab import results

    info = results.info(path)
    return results.load(path), info, info.name


def merge_sources(paths: list[Path]) -> Merged:
    """The merged table of ``paths`` (results folders or long-format CSV files)."""
    import pandas as pd

    from benchlab.benchmark_info import BenchmarkInfo

    loaded = [_source(Path(p)) for p in paths]
    names = [name for _, _, name in loaded]
    # Two sources of the same benchmark name are told apart by their path, as given.
    names = [n if names.count(n) == 1 else f"{n}@{p}" for n, p in zip(names, paths, strict=True)]
    owners: dict[str, list[str]] = {}
    for (table, _, _), name in zip(loaded, names, strict=True):
        for config in dict.fromkeys(table["config"].astype(str)):
            owners.setdefault(config, []).append(name)
    notes = []
    frames = []
    for (table, _, _), name in zip(loaded, names, strict=True):
        t = table.copy()
        t["config"] = [f"{name}/{c}" if len(owners[str(c)]) > 1 else str(c) for c in t["config"]]
        t["benchmark"] = name
        frames.append(t)
    for config, where in owners.items():
        if len(where) > 1:
            notes.append(f"config {config!r} is in {', '.join(where)}: named " +
                         ", ".join(f"{w}/{config}" for w in where))
    table = pd.concat(frames, ignore_index=True)

    def renamed(name: str, config: str | None) -> str | None:
        if config is None:
            return None
        return f"{name}/{config}" if len(owners.get(config, [])) > 1 else config

    infos = [(i, n) for (_, i, _), n in zip(loaded, names, strict=True)]
    first = next((i for i, _ in infos if i is not None), None)
    metrics = list(dict.fromkeys(table["metric"].astype(str)))
    primary = first.primary if first is not None else metrics[0]
    goals: dict[str, str] = {}
    targets: dict[str, float | None] = {}
    for i, _ in infos:
        if i is not None:
            goals = {**i.goal, **goals}
            targets = {**i.targets, **targets}
    baseline = next((renamed(n, i.baseline) for i, n in infos if i is not None and i.baseline), None)
    info = BenchmarkInfo(
        name=" + ".join(names), primary=primary, goal={m: goals.get(m, "max") for m in metrics}, baseline=baseline,
        configs=list(dict.fromkeys(table["config"].astype(str))), tasks=list(dict.fromkeys(table["task"].astype(str))),
        targets=targets, description="Merged from " + ", ".join(str(p) for p in paths) + "."
        + ("" if not notes else " " + "; ".join(notes) + "."),
        seeds=sorted({int(s) for s in table["seed"]}), metrics=[primary, *[m for m in metrics if m != primary]])
    return Merged(table, info, notes)


def write_results(merged: Merged, out: Path) -> Path:
    """Write the merged table as a results folder at ``out`` (a fresh ledger) and return it."""
    import numpy as np

    from benchlab.plan import Run
    from benchlab.store import COMPLETED, DB_NAME, Store

    if (out / DB_NAME).exists():
        raise DataError(f"{out}: already holds a results folder; write the merged report elsewhere with --out")
    table = merged.table
    runs = []
    finals: dict[str, dict[str, float]] = {}
    series: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for (task, config, seed), group in table.groupby(["task", "config", "seed"], sort=False):
        rid = hashlib.sha256(f"{merged.info.name}\0{task}\0{config}\0{seed}".encode()).hexdigest()[:12]
        runs.append(Run(rid, merged.info.name, str(task), str(config), int(seed), {}, "(imported)"))
        scalars = group[group["step"].isna()]
        finals[rid] = {str(m): float(v) for m, v in zip(scalars["metric"], scalars["value"], strict=True)}
        curves = group[group["step"].notna()]
        series[rid] = {str(m): (g["step"].to_numpy(dtype=float), g["value"].to_numpy(dtype=float))
                       for m, g in curves.groupby("metric", sort=False)}
        for m, (steps, values) in series[rid].items():
            finals[rid].setdefault(m, float(values[np.argmax(steps)]))  # a curve's last point is its final
    store = Store.create(out)
    try:
        store.set_benchmark(merged.info)
        store.register(runs)
        store.set_plan(r.run_id for r in runs)
        for run in runs:
            attempt, _ = store.start_attempt(run.run_id, host="imported")
            store.finish_attempt(attempt, run.run_id, status=COMPLETED, run_status=COMPLETED, exit_code=0,
                                 metrics=finals[run.run_id], series=series[run.run_id])
    finally:
        store.close()
    return out


__all__ = ["Merged", "merge_sources", "write_results"]
