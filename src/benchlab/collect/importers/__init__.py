"""Runs made elsewhere (MLflow, W&B, a Hydra multirun folder) into an ordinary results folder.

Each source module reads its runs with the tool's own reader into :class:`SourceRun` records;
:func:`import_runs` names each one's (task, config, seed) by the keys the user gave
(:class:`Naming`) and writes it as ``benchlab run`` would have: a run directory with
``config.yaml``, ``metrics.json``, ``metrics.jsonl`` and a ``provenance.json`` that says where the
run came from, and the ledger's record of it. Everything downstream (report, compare, ui, diff,
export, ``collect --rebuild``) then reads the folder as any other.

What makes a second import add only the new runs: a run's id is the hash of its coordinates,
params and its origin (the source's own id of the run), so a run seen before has the same id and
is left as it is. What keeps a bad run from costing the others: each source run is checked on
its own (seed, primary metric, coordinates claimed by one run only) and one that fails is
named in :attr:`Imported.skipped` with the reason, never written.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from benchlab.errors import DataError, UsageError
from benchlab.json_types import ConfigValues, JsonObject
from benchlab.ledger import COMPLETED, ResultsLock, Store
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.names.results_files import benchmark_file
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE, METRICS_FILE, PROVENANCE_FILE, SERIES_FILE, run_dir_of
from benchlab.plan import Run, run_id

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Imported", "Naming", "Skipped", "SourceRun", "import_runs"]

#: The key of ``provenance.json`` that holds where an imported run came from.
ORIGIN_KEY = "imported_from"


@dataclass(frozen=True)
class SourceRun:
    """One run as its tracking tool keeps it, read with that tool's own reader."""

    source: str  # "mlflow", "wandb" or "hydra"
    source_id: str  # the tool's own id of the run (MLflow run id, W&B run id, a Hydra job's folder)
    name: str  # its display name, for messages
    params: ConfigValues  # flat: key -> value (MLflow params, W&B config, Hydra config, dotted)
    tags: dict[str, str] = field(default_factory=dict)
    finals: dict[str, float] = field(default_factory=dict)
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: Why a metric could not be read (an extractor's message), by metric name.
    problems: dict[str, str] = field(default_factory=dict)
    started: float | None = None
    ended: float | None = None
    #: What the source says of the run and where it is: written to ``provenance.json`` as it is.
    origin: JsonObject = field(default_factory=dict)
    #: Files of the run to keep in its run directory (a Hydra job's log and config), by name there.
    files: dict[str, Path] = field(default_factory=dict)
    #: The task when the naming gives no task key (the MLflow experiment, W&B project, Hydra job).
    default_task: str = ""
    #: The keys its maker varied (a Hydra job's overrides): the default config name is made of them.
    swept: tuple[str, ...] | None = None
    #: Why the run did not finish (its status), for a run the source holds as running, failed or killed.
    unfinished: str | None = None

    def label(self) -> str:
        return f"{self.source} run {self.source_id}" + (f" ({self.name})" if self.name and self.name != self.source_id
                                                         else "")


@dataclass(frozen=True)
class Naming:
    """Which of a run's keys say its task, config and seed.

    A key is a param (``lr``; dotted for nested configs: ``optimizer.lr``), or ``tags.NAME`` for a
    tag. ``config`` empty names each run's config by every param but the task and the seed, as
    ``key=value`` pairs (a Hydra job: by its overrides but the task and the seed), so that the
    runs of one sweep point share it.
    """

    seed: str = "seed"
    task: str | None = None
    config: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A source run that was not imported, and why (one line)."""

    run: str  # the run's label (source, id, name)
    reason: str
    #: True for a run the source holds as not finished (it may finish later): no fault of the input.
    unfinished: bool = False

    def __str__(self) -> str:
        return f"{self.run}: {self.reason}"


@dataclass
class Imported:
    """What an import did."""

    results: Path
    added: list[str] = field(default_factory=list)  # run names (task/config/sSEED) written now
    already: int = 0  # runs of the source the folder held already
    skipped: list[Skipped] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {"results": str(self.results), "added": self.added, "already": self.already,
                "skipped": [{"run": s.run, "reason": s.reason, "unfinished": s.unfinished} for s in self.skipped]}

    @property
    def bad(self) -> list[Skipped]:
        """The runs skipped for a fault of the input (not those the source holds as unfinished)."""
        return [s for s in self.skipped if not s.unfinished]


@dataclass(frozen=True)
class _Placed:
    source: SourceRun
    run: Run


def _value(run: SourceRun, key: str) -> object | None:
    if key.startswith("tags."):
        return run.tags.get(key[5:])
    return run.params.get(key[7:] if key.startswith("params.") else key)


def _text(value: object) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _seed(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def _keys_of(run: SourceRun) -> str:
    keys = sorted(run.params)
    shown = ", ".join(keys[:12]) + (f" and {len(keys) - 12} more" if len(keys) > 12 else "")
    return shown or "none"


def _place(run: SourceRun, naming: Naming, benchmark: str, primary: str) -> _Placed | Skipped:
    """The run's coordinates and id, or why it cannot be imported."""
    if run.unfinished:
        return Skipped(run.label(), f"{run.unfinished}; only finished runs are imported", unfinished=True)
    raw_seed = _value(run, naming.seed)
    if raw_seed is None:
        return Skipped(run.label(), f"has no {naming.seed!r} to read its seed from (its params: {_keys_of(run)})")
    seed = _seed(raw_seed)
    if seed is None:
        return Skipped(run.label(), f"its seed {naming.seed}={raw_seed!r} is not an integer")
    if naming.task is not None:
        raw_task = _value(run, naming.task)
        if raw_task is None:
            return Skipped(run.label(), f"has no {naming.task!r} to read its task from (its params: {_keys_of(run)})")
        task = _text(raw_task)
    else:
        task = run.default_task or run.source
    if naming.config:
        missing = [k for k in naming.config if _value(run, k) is None]
        if missing:
            return Skipped(run.label(), f"has no {missing[0]!r} to read its config from (its params: "
                                        f"{_keys_of(run)})")
        values = [_text(_value(run, k)) for k in naming.config]
        config = values[0] if len(values) == 1 else ",".join(f"{k}={v}" for k, v in zip(naming.config, values,
                                                                                       strict=True))
    else:
        skip = {naming.seed, naming.task, *(k[7:] for k in (naming.seed, naming.task or "") if k.startswith("params."))}
        keys = sorted(run.params) if run.swept is None else list(run.swept)
        config = ",".join(f"{k}={_text(run.params.get(k))}" for k in keys if k not in skip) or "default"
    why = run.problems.get(primary)
    value = run.finals.get(primary)
    if value is None or not math.isfinite(value):
        if why is None:
            logged = ", ".join(sorted(run.finals)[:12]) or "no metrics"
            why = (f"logged no {primary!r} (it logged: {logged})" if value is None
                   else f"its {primary!r} is not finite ({value})")
        return Skipped(run.label(), why)
    origin = f"{run.source}:{run.source_id}"
    rid = run_id(benchmark, task, config, dict(run.params), seed, origin)
    return _Placed(run, Run(run_id=rid, benchmark=benchmark, task=task, config=config, seed=seed,
                            params=dict(run.params), command=origin))


def _claims(placed: list[_Placed], held: dict[tuple[str, str, int], str]) -> tuple[list[_Placed], list[Skipped]]:
    """The runs that alone claim their (task, config, seed); the others, each with the run it contests."""
    by_key: dict[tuple[str, str, int], list[_Placed]] = {}
    for p in placed:
        by_key.setdefault((p.run.task, p.run.config, p.run.seed), []).append(p)
    kept: list[_Placed] = []
    skipped: list[Skipped] = []
    for key, group in by_key.items():
        name = f"{key[0]}/{key[1]}/s{key[2]}"
        holder = held.get(key)
        if holder is not None and all(p.run.run_id != holder for p in group):
            skipped += [Skipped(p.source.label(), f"claims {name}, which this results folder holds already from "
                                                  "another run; not imported") for p in group]
        elif len(group) > 1:
            for p in group:
                others = ", ".join(o.source.source_id for o in group if o is not p)
                skipped.append(Skipped(p.source.label(), f"claims {name}, as does {others}; none of them imported "
                                                         "(name the key that tells them apart with --config or "
                                                         "--seed)"))
        else:
            kept.append(group[0])
    return kept, skipped


def import_runs(runs: Iterable[SourceRun], results: Path | str, *, naming: Naming, primary: str,
                goal: str = "max", benchmark: str | None = None, baseline: str | None = None) -> Imported:
    """Write ``runs`` into the results folder ``results`` (created if missing): each run that has
    its seed, its primary metric and (task, config, seed) coordinates of its own, once.

    ``goal`` (max|min) is the primary metric's direction; ``benchmark`` names the benchmark
    (default: the folder's name); ``baseline`` the config the others are compared with.
    """
    folder = Path(results)
    if goal not in ("max", "min"):
        raise UsageError(f"--goal must be max or min, got {goal!r}")
    if benchmark_file(folder).exists():
        raise DataError(f"{folder} holds the runs of a spec (benchmark.json); import into a results folder "
                        "of its own")
    with ResultsLock(folder, purpose="benchlab import"):
        with Store.create(folder) as store:
            recorded = store.benchmark()
            name = benchmark or (recorded.name if recorded is not None else folder.resolve().name)
            if recorded is not None and recorded.primary != primary:
                raise DataError(f"{folder} holds runs imported with primary metric {recorded.primary!r}, not "
                                f"{primary!r}; import into another results folder")
            out = Imported(folder)
            placed: list[_Placed] = []
            for run in runs:
                found = _place(run, naming, name, primary)
                (out.skipped.append if isinstance(found, Skipped) else placed.append)(found)  # type: ignore[arg-type]
            statuses = store.statuses()
            held = {(r.task, r.config, r.seed): r.run_id for r in store.runs(current_only=False)
                    if statuses.get(r.run_id) == COMPLETED.value}
            ids = set(held.values())
            new = [p for p in placed if p.run.run_id not in ids]
            out.already = len(placed) - len(new)
            kept, contested = _claims(new, held)
            out.skipped += contested
            for p in kept:
                _write_run_dir(folder, p, primary, goal)
            _record(store, recorded, kept, name=name, primary=primary, goal=goal, baseline=baseline)
            out.added = [p.run.name for p in kept]
    return out


def _record(store: Store, recorded: BenchmarkInfo | None, kept: Sequence[_Placed], *, name: str, primary: str,
            goal: str, baseline: str | None) -> None:
    """The ledger's record of the new runs and of the benchmark they extend, in one transaction."""
    with store.transaction():
        before = recorded or BenchmarkInfo(name=name, primary=primary, goal={primary: goal}, baseline=None,
                                           configs=[], tasks=[], metrics=[primary])
        metrics = list(before.metrics or [primary])
        for p in kept:
            metrics += [m for m in sorted(p.source.finals) if m not in metrics]
        goals = {**{m: "max" for m in metrics}, **before.goal, primary: goal}
        info = BenchmarkInfo(
            name=name, primary=primary, goal=goals, baseline=baseline or before.baseline,
            configs=list(dict.fromkeys([*before.configs, *(p.run.config for p in kept)])),
            tasks=list(dict.fromkeys([*before.tasks, *(p.run.task for p in kept)])),
            seeds=sorted({*before.seeds, *(p.run.seed for p in kept)}),
            description=before.description or "runs imported from " + ", ".join(
                sorted({p.source.source for p in kept})), metrics=metrics)
        store.set_benchmark(info)
        store.add_runs([p.run for p in kept])
        for p in kept:
            started = p.source.started or time.time()
            attempt, _ = store.start_attempt(p.run.run_id, host=str(p.source.origin.get("host") or ""),
                                             started=started)
            store.finish_attempt(attempt, p.run.run_id, status=COMPLETED, run_status=COMPLETED, exit_code=0,
                                 ended=p.source.ended or started, metrics=_finite(p.source.finals),
                                 series=p.source.series)
        store.add_to_plan(p.run.run_id for p in kept)


def _finite(finals: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in finals.items() if math.isfinite(v)}


def _write_run_dir(folder: Path, placed: _Placed, primary: str, goal: str) -> None:
    """The run directory as ``collect --rebuild`` reads it back: the same record the ledger gets."""
    import shutil

    run, source = placed.run, placed.source
    where = run_dir_of(folder, run.run_id)
    where.mkdir(parents=True, exist_ok=True)
    for name, path in source.files.items():
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(path, target)
    (where / CONFIG_FILE).write_text(yaml.safe_dump(run.resolved_config(), sort_keys=False))
    (where / METRICS_FILE).write_text(json.dumps(_finite(source.finals), indent=1) + "\n")
    lines = [json.dumps({"step": int(s) if float(s).is_integer() else s, name: v})
             for name, (steps, values) in sorted(source.series.items())
             for s, v in zip(steps.tolist(), values.tolist(), strict=True)]
    (where / SERIES_FILE).write_text("".join(line + "\n" for line in lines))
    if not (where / LOG_FILE).exists():
        (where / LOG_FILE).write_text(f"imported from {source.label()}; this run's log was not imported\n")
    started = source.started or time.time()
    provenance = {
        ORIGIN_KEY: {"source": source.source, "id": source.source_id, "name": source.name, **source.origin,
                     "imported": time.time()},
        "run_id": run.run_id, "started": started, "ended": source.ended or started, "exit_code": 0,
        "host": str(source.origin.get("host") or ""),
        "metrics": {"primary": primary, "goals": {primary: goal}},
    }
    (where / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=1, default=str) + "\n")
