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

The merged folder is a whole results folder: each source run's folder is brought into it under
the run's merged id (hard links where the file system allows, else copies), so every run link of
the merged report resolves inside ``--out`` and the folder can be exported on its own. What each
source is (its path, its spec, the code versions its runs ran at) is written to ``merged.json``
(:func:`read_sources`), from which the report names each source's code and reproduces each source
on its own: a merge of runs made at several codes cannot be re-run by one command, and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import DataError
from benchlab.names.benchmark_info import goal_of
from benchlab.names.results_files import SOURCES_FILE

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.json_types import ConfigValues, JsonObject
    from benchlab.ledger import HostRecord
    from benchlab.names.benchmark_info import BenchmarkInfo
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


@dataclass(frozen=True)
class SourceCode:
    """A version of the code under test a source's runs ran at: its commit (None outside git),
    whether the work tree had uncommitted changes, and how many of the source's runs ran at it."""

    commit: str | None
    dirty: bool = False
    runs: int = 0


@dataclass(frozen=True)
class MergedSource:
    """One source of a merged report, as the report names and reproduces it."""

    name: str  # the benchmark's name in the merged report (``merge@one`` where two share a name)
    path: str  # the results folder or CSV file, resolved
    is_table: bool  # a long-format CSV: values only, no run benchlab made
    spec_path: str | None = None
    overrides: ConfigValues = field(default_factory=dict)
    codes: list[SourceCode] = field(default_factory=list)  # empty where no run recorded its code

    def code_text(self) -> str:
        """The source's code in words: ``commit 1a2b3c4d5e`` (``with uncommitted changes``), or
        each of its codes with its number of runs."""
        if self.is_table:
            return "a long-format table (no code recorded)"
        if not self.codes:
            return "code not recorded (no run wrote provenance)"

        def one(c: SourceCode) -> str:
            return ((f"commit {c.commit[:10]}" if c.commit else "no git commit")
                    + (" with uncommitted changes" if c.dirty else ""))

        if len(self.codes) == 1:
            return one(self.codes[0])
        return ", ".join(f"{c.runs} runs at {one(c)}" for c in self.codes)


def read_sources(folder: Path | None) -> list[MergedSource]:
    """The sources of the merged results folder ``folder`` ([] for any other folder)."""
    if folder is None:
        return []
    try:
        raw = json.loads((Path(folder) / SOURCES_FILE).read_text())
    except (OSError, ValueError):
        return []
    out = []
    for s in raw.get("sources", []) if isinstance(raw, dict) else []:
        codes = [SourceCode(c.get("commit"), bool(c.get("dirty")), int(c.get("runs") or 0))
                 for c in s.get("codes", [])]
        out.append(MergedSource(str(s["name"]), str(s["path"]), bool(s.get("is_table")), s.get("spec_path"),
                                dict(s.get("overrides") or {}), codes))
    return out


def _codes_of(read: Results) -> list[SourceCode]:
    """The codes a source's completed runs ran at (the ledger's versions where several, else the
    first run's provenance)."""
    if read.code_versions:
        return [SourceCode(cv.commit, bool(cv.dirty), len(cv.runs)) for cv in read.code_versions]
    git = read.environment.provenance.get("git") if read.environment.provenance else None
    if not isinstance(git, dict):
        return []
    n = sum(len(v) for v in read.run_ids.values())
    return [SourceCode(git.get("commit") or None, bool(git.get("dirty")), n)]


def _link_or_copy(src: str, dst: str) -> object:
    """A hard link of ``src`` at ``dst``; a copy where the file system refuses one (another
    device, no hard links)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


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
    provenance: JsonObject = field(default_factory=dict)
    #: What each source is, in the order given.
    sources: list[MergedSource] = field(default_factory=list)
    #: (task, config, seed) (configs renamed) -> the source run's folder, for every run that has one.
    run_folders: dict[tuple[str, str, int], Path] = field(default_factory=dict)


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

    from benchlab.names.benchmark_info import BenchmarkInfo
    from benchlab.names.run_files import run_dir_of

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
    provenance: JsonObject = {}
    sources: list[MergedSource] = []
    run_folders: dict[tuple[str, str, int], Path] = {}
    for (own, _, _, read), name, path in zip(loaded, names, paths, strict=True):
        if read is None:
            sources.append(MergedSource(name, str(Path(path).resolve()), True))
            continue
        folder = read.folder or Path(path)
        sources.append(MergedSource(name, str(folder.resolve()), False, read.info.spec_path,
                                    dict(read.info.overrides), _codes_of(read)))
        for (task, config), seeds_ids in read.run_ids.items():
            for seed, rid in seeds_ids:
                run_folders[(task, renamed(name, config) or config, seed)] = run_dir_of(folder, rid)
        for failure in read.failures:
            if failure.seed is not None:
                run_folders.setdefault((failure.task, renamed(name, failure.config) or failure.config,
                                        int(failure.seed)), run_dir_of(folder, failure.run_id))
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
        name=" + ".join(names), primary=primary, goal={m: goal_of(goals, m) for m in metrics}, baseline=baseline,
        configs=list(dict.fromkeys([*table["config"].astype(str), *(r.config for r in without)])),
        tasks=list(dict.fromkeys([*table["task"].astype(str), *(r.task for r in without)])),
        targets=targets, description="Merged from " + ", ".join(f"{p} ({s.code_text()})"
                                                                 for p, s in zip(paths, sources, strict=True)) + "."
        + ("" if not notes else " " + "; ".join(notes) + "."),
        seeds=sorted({*(int(s) for s in table["seed"]), *(r.seed for r in without)}),
        metrics=[primary, *[m for m in metrics if m != primary]])
    return Merged(table, info, notes, without, partial, hosts, provenance, sources, run_folders)


def write_results(merged: Merged, out: Path) -> Path:
    """Write the merged table as a results folder at ``out`` (a fresh ledger) and return it."""
    import numpy as np

    from benchlab.ledger import COMPLETED, DB_NAME, FAILED, Store
    from benchlab.names.run_files import PROVENANCE_FILE, run_dir_of
    from benchlab.plan import Run

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
    # Each source run's folder under its merged id, so that the report's links resolve in ``out``.
    for run in [*runs, *(run for run, _ in others)]:
        source = merged.run_folders.get((run.task, run.config, run.seed))
        if source is not None and source.is_dir():
            shutil.copytree(source, run_dir_of(out, run.run_id), copy_function=_link_or_copy, symlinks=True,
                            dirs_exist_ok=True)
    if merged.provenance and runs and not any(run_dir_of(out, r.run_id).is_dir() for r in runs):
        # The Hardware line reads a run's provenance: the first source's, under the first run.
        folder = run_dir_of(out, runs[0].run_id)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / PROVENANCE_FILE).write_text(json.dumps(merged.provenance, indent=1, default=str))
    (out / SOURCES_FILE).write_text(json.dumps({"sources": [asdict(s) for s in merged.sources]}, indent=1,
                                               default=str))
    return out


__all__ = ["SOURCES_FILE", "ImportedRun", "Merged", "MergedSource", "SourceCode", "merge_sources", "read_sources",
           "write_results"]
