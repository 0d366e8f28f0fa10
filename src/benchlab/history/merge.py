"""One report over several results folders, or from a long-format CSV (``benchlab report A B C``,
``benchlab report table.csv``).

The sources' tables are merged into one long-format table; a config name that several sources
use is told apart by its benchmark's name (``v1/fast``, ``v2/fast``), and every such renaming is
stated. The merged table is then written as a results folder of its own (a ledger holding one
imported run per (task, config, seed)), which the report reads like any other.

What a results folder's ledger says beyond its values comes along: every planned seed (a failed
run is imported failed, with its failure class, error and last log lines; a run not yet run is
imported pending), the completed runs scored on part of their evaluation (lm-eval ``--limit``),
and the hardware its sweeps noted, so that the merged report's seed counts, failure log and
Hardware line are those of its sources.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.benchmark_info import BenchmarkInfo
    from benchlab.ledger import HostRecord
    from benchlab.results import Results


@dataclass(frozen=True)
class ImportedRun:
    """A planned run of a source that has no values in the table: failed or not yet run."""

    task: str
    config: str
    seed: int
    failed: bool
    failure_class: str | None = None
    error: str = ""
    tail: str = ""


@dataclass
class Merged:
    """The merged table, its benchmark record and what was renamed."""

    table: pd.DataFrame
    info: BenchmarkInfo
    notes: list[str] = field(default_factory=list)
    #: Planned runs of the sources without values (configs renamed as in ``table``).
    without_values: list[ImportedRun] = field(default_factory=list)
    #: (task, config, seed) -> the note of a completed run scored on part of its evaluation.
    partial: dict[tuple[str, str, int], str] = field(default_factory=dict)
    #: Each host's facts as the sources' sweeps noted them, and the provenance of a source's run.
    hosts: dict[str, HostRecord] = field(default_factory=dict)
    provenance: dict[str, object] = field(default_factory=dict)


def _source(path: Path) -> tuple[pd.DataFrame, BenchmarkInfo | None, str, Results | None]:
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
        return table, None, name, None
    from benchlab import results

    read = results.read(path, curves=False)  # the merged table is loaded whole below
    return results.load(path), read.info, read.info.name, read


def merge_sources(paths: list[Path]) -> Merged:
    """The merged table of ``paths`` (results folders or long-format CSV files)."""
    import pandas as pd

    from benchlab.benchmark_info import BenchmarkInfo

    seen: dict[Path, Path] = {}
    for source in map(Path, paths):
        # The same folder (or file) twice would count each of its runs twice.
        named = seen.setdefault(source.resolve(), source)
        if named is not source:
            same = "" if str(named) == str(source) else f" (as {named} and {source})"
            raise DataError(f"{source.resolve()} is named twice{same}: each results folder or table is "
                            "merged once, or its runs would count twice")
    loaded = [_source(Path(p)) for p in paths]
    names = [name for _, _, name, _ in loaded]
    # Two sources of the same benchmark name are told apart by their path, as given.
    names = [n if names.count(n) == 1 else f"{n}@{p}" for n, p in zip(names, paths, strict=True)]
    owners: dict[str, list[str]] = {}
    for (table, _, _, read), name in zip(loaded, names, strict=True):
        planned = [c for _, c in read.planned] if read is not None else []
        for config in dict.fromkeys([*table["config"].astype(str), *planned]):
            owners.setdefault(config, []).append(name)
    notes = []
    frames = []
    for (table, _, _, _), name in zip(loaded, names, strict=True):
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

    without: list[ImportedRun] = []
    partial: dict[tuple[str, str, int], str] = {}
    hosts: dict[str, HostRecord] = {}
    provenance: dict[str, object] = {}
    for (own, _, _, read), name in zip(loaded, names, strict=True):
        if read is None:
            continue
        done = {(str(t), str(c), int(s)) for t, c, s in zip(own["task"], own["config"], own["seed"], strict=True)}
        failed = {(f.task, f.config, f.seed): f for f in read.failures}
        for (task, config), seeds in read.planned.items():
            for seed in seeds:
                if (task, config, seed) in done:
                    continue
                f = failed.get((task, config, seed))
                is_failed = f is not None or (task, config, seed) in read.failed_runs
                without.append(ImportedRun(task, renamed(name, config) or config, seed, is_failed,
                                           f.failure_class if f else None, f.error if f else "",
                                           f.tail if f else ""))
        for p in read.partial:
            if p.seed is not None:
                partial[(p.task, renamed(name, p.config) or p.config, p.seed)] = p.note
        hosts.update(read.environment.hosts)
        provenance = provenance or dict(read.environment.provenance)

    infos = [(i, n) for (_, i, _, _), n in zip(loaded, names, strict=True)]
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
        configs=list(dict.fromkeys([*table["config"].astype(str), *(r.config for r in without)])),
        tasks=list(dict.fromkeys([*table["task"].astype(str), *(r.task for r in without)])),
        targets=targets, description="Merged from " + ", ".join(str(p) for p in paths) + "."
        + ("" if not notes else " " + "; ".join(notes) + "."),
        seeds=sorted({*(int(s) for s in table["seed"]), *(r.seed for r in without)}),
        metrics=[primary, *[m for m in metrics if m != primary]])
    return Merged(table, info, notes, without, partial, hosts, provenance)


def write_results(merged: Merged, out: Path) -> Path:
    """Write the merged table as a results folder at ``out`` (a fresh ledger) and return it."""
    import numpy as np

    from benchlab.ledger import COMPLETED, DB_NAME, FAILED, Store
    from benchlab.plan import Run
    from benchlab.run_files import PROVENANCE_FILE, run_dir_of

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
    others = []
    for r in merged.without_values:
        rid = hashlib.sha256(f"{merged.info.name}\0{r.task}\0{r.config}\0{r.seed}".encode()).hexdigest()[:12]
        others.append((Run(rid, merged.info.name, r.task, r.config, r.seed, {}, "(imported)"), r))
    host = next(iter(merged.hosts), "imported")
    store = Store.create(out)
    try:
        store.set_benchmark(merged.info)
        store.register([*runs, *(run for run, _ in others)])
        store.set_plan([*(r.run_id for r in runs), *(run.run_id for run, _ in others)])
        if merged.hosts:
            store.set_hardware(merged.hosts)
        for run in runs:
            attempt, _ = store.start_attempt(run.run_id, host=host)
            note = merged.partial.get((run.task, run.config, run.seed))
            store.finish_attempt(attempt, run.run_id, status=COMPLETED, run_status=COMPLETED, exit_code=0,
                                 metrics=finals[run.run_id], series=series[run.run_id], error=note)
        for run, r in others:
            if r.failed:  # a run not yet run stays pending: planned, without an attempt
                attempt, _ = store.start_attempt(run.run_id, host=host)
                store.finish_attempt(attempt, run.run_id, status=FAILED, run_status=FAILED,
                                     failure_class=r.failure_class, error=r.error, log_tail=r.tail)
    finally:
        store.close()
    if merged.provenance and runs:
        # The Hardware line reads a run's provenance: the first source's, under the first run.
        folder = run_dir_of(out, runs[0].run_id)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PROVENANCE_FILE).write_text(json.dumps(merged.provenance, indent=1, default=str))
    return out


__all__ = ["ImportedRun", "Merged", "merge_sources", "write_results"]
