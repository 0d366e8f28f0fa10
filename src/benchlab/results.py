"""The long-format results table that everything downstream of execution reads.

Columns: ``benchmark, task, config, seed, metric, step, value``; ``step`` is NaN
for a run's final scalars and a number for each point of a logged curve.
Only the completed runs of the spec as ``benchlab run`` last ran it appear: runs
the spec no longer names (a removed config or seed, a changed definition) stay
in the ledger but not in the table, unless asked for with ``all_runs=True``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from benchlab.errors import ResultsNotFound
from benchlab.json_types import JsonObject
from benchlab.ledger import DB_NAME, HostRecord, SequentialRecord, Store, VersionRecord, find_db
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.names.failures import failed_runs
from benchlab.names.long_format import COLUMNS as LONG_COLUMNS
from benchlab.names.results_files import SEARCH_DIR, SavedSpec, benchmark_file
from benchlab.names.run_files import PROVENANCE_FILE, runs_dir

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from benchlab.ledger import Registration
    from benchlab.names.report_tables import NumbersKey
    from benchlab.search.summary import StudySection
    from benchlab.spec import Spec

COLUMNS = list(LONG_COLUMNS)  # the long format (benchlab.names.long_format), as a list for pandas


def find_results(path: Path | str | None = None) -> Path:
    """The results folder meant by ``path``; with None: ./benchlab.db's folder, or the only one under ./results."""
    if path is not None:
        p = Path(path)
        find_db(p)
        return p if p.is_dir() else p.parent
    here = Path.cwd()
    if (here / DB_NAME).exists():
        return here
    candidates = sorted(p.parent for p in (here / "results").glob(f"*/{DB_NAME}"))
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ResultsNotFound(here, "no results folder given and none found here "
                                    "(looked for ./benchlab.db and ./results/*/benchlab.db)")
    raise ResultsNotFound(here, "several results folders here; name one: "
                                + ", ".join(str(c.relative_to(here)) for c in candidates))


def load(results: Path | str | None = None, *, series: bool = True, all_runs: bool = False,
         search: bool = False, samples: bool = False) -> pd.DataFrame:
    """The results table of a results folder, as a pandas DataFrame in long format.

    It holds the completed runs of the spec as ``benchlab run`` last ran it.
    ``series=False`` leaves out the logged curves (only final scalars), which is
    much smaller for large sweeps. ``all_runs=True`` adds the runs kept in the
    ledger that the spec no longer names, with two more columns to tell them
    apart: ``run_id`` and ``in_spec`` (False for those runs).

    Search trials (``benchlab search``) are never part of it. ``search=True`` reads them
    instead: the completed runs of every study under ``<results>/search/`` (or of the one study
    folder given), with two more columns, ``study`` and ``trial`` (the trial's number).

    ``samples=True`` reads the per-question records instead, in the samples table's columns
    (:data:`benchlab.names.long_format.SAMPLE_COLUMNS`): those the completed runs' directories hold
    (lm-eval ``samples_*.jsonl``, Inspect AI logs, NeMo-Skills outputs), or those of ``results``
    when it is a harness's output folder, a log or a samples CSV (see
    :func:`benchlab.collect.samples.read_samples`).
    """
    if samples:
        from benchlab.collect.samples import read_samples

        return read_samples(Path(results) if results is not None else find_results(None))[0]
    if search:
        return _load_search(results, series=series)
    folder = find_results(results)
    return _load_folder(folder, series=series, all_runs=all_runs)


def _load_folder(folder: Path, *, series: bool, all_runs: bool, trials: bool = False) -> pd.DataFrame:
    with Store.open(folder) as store:
        return _table(store, folder, series=series, all_runs=all_runs, trials=trials)


def _table(store: Store, folder: Path, *, series: bool, all_runs: bool, trials: bool = False) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    columns = [*COLUMNS, "run_id", "in_spec"] if all_runs else COLUMNS
    search = store.search_record()
    if search is not None and not trials:
        raise ResultsNotFound(folder, f"{folder} holds the trials of a search ({search.study}), "
                                      "which never enter a benchmark table; read them with "
                                      "benchlab.load(..., search=True) or `benchlab search --report`")
    recorded = store.benchmark()
    name = recorded.name if recorded is not None else folder.name
    finals = store.metric_rows(current_only=not all_runs)
    in_spec = store.in_spec_ids() if all_runs else set()
    frames = []
    if finals:
        rid, task, cfg, seed, metric, value = zip(*finals, strict=True)
        frames.append(pd.DataFrame({
            "benchmark": name, "task": task, "config": cfg, "seed": seed, "metric": metric,
            "step": np.nan, "value": np.asarray(value, dtype=float),
            **({"run_id": rid, "in_spec": [r in in_spec for r in rid]} if all_runs else {})}))
    if series:
        rows = list(store.series_rows(current_only=not all_runs))
        if rows:
            lengths = np.array([len(r[5]) for r in rows])
            extra = {}
            if all_runs:
                extra = {"run_id": _repeated([r[0] for r in rows], lengths),
                         "in_spec": np.repeat([r[0] in in_spec for r in rows], lengths)}
            frames.append(pd.DataFrame({
                "benchmark": name,
                "task": _repeated([r[1] for r in rows], lengths),
                "config": _repeated([r[2] for r in rows], lengths),
                "seed": np.repeat([r[3] for r in rows], lengths),
                "metric": _repeated([r[4] for r in rows], lengths),
                "step": np.concatenate([r[5] for r in rows]),
                "value": np.concatenate([r[6] for r in rows]),
                **extra,
            }))
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("step", "value") else
                                          bool if c == "in_spec" else object) for c in columns})
    table = pd.concat(frames, ignore_index=True)
    table["seed"] = table["seed"].astype(int)
    return table[columns]



def search_folders(results: Path | str | None = None) -> list[Path]:
    """The study folders of a results folder (``<results>/search/<name>``), or the one study folder given."""
    if results is not None and (Path(results) / SEARCH_DIR).is_dir():
        folder = Path(results)  # a search alone makes no benchmark ledger beside its own
    else:
        folder = find_results(results)
        with Store.open(folder) as store:
            if store.search_record() is not None:
                return [folder]
    return sorted(p.parent for p in (folder / SEARCH_DIR).glob(f"*/{DB_NAME}"))


def _load_search(results: Path | str | None, *, series: bool) -> pd.DataFrame:
    import pandas as pd

    frames = []
    for folder in search_folders(results):
        table = _load_folder(folder, series=series, all_runs=False, trials=True)
        with Store.open(folder) as store:
            search = store.search_record()
            study = search.study if search is not None else folder.name
        table["study"] = study
        table["trial"] = table["config"].str.extract(r"\[trial=(\d+)\]$", expand=False).astype(float)
        frames.append(table)
    if not frames:
        columns = [*COLUMNS, "study", "trial"]
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("step", "value", "trial") else object)
                             for c in columns})
    return pd.concat(frames, ignore_index=True)


def _repeated(names: list[str], lengths: np.ndarray) -> Any:
    """``names[i]`` repeated ``lengths[i]`` times, as the column pandas makes of strings.

    Curves have a row per point, and turning each row's string into pandas' own
    string type costs more than reading the points; with pyarrow behind that type,
    the column is built from codes in one cast instead.
    """
    import numpy as np
    import pandas as pd

    uniques, codes = np.unique(np.array(names, dtype=object), return_inverse=True)
    codes = np.repeat(codes, lengths)
    dtype = pd.Series(["x"]).dtype
    if getattr(dtype, "storage", None) == "pyarrow":
        import pyarrow as pa

        column = pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                                pa.array(list(uniques), type=pa.string()))
        return pd.array(column.cast(pa.string()), dtype=dtype)
    return uniques[codes]


def info(results: Path | str | None = None) -> BenchmarkInfo:
    """The benchmark's metadata: primary metric and goals, baseline, tasks, configs, targets."""
    folder = find_results(results)
    with Store.open(folder) as store:
        return _recorded(store, folder)


def _recorded(store: Store, folder: Path) -> BenchmarkInfo:
    recorded = store.benchmark()
    if recorded is None:
        raise ResultsNotFound(folder, f"{folder}: the ledger holds no benchmark yet")
    return recorded


# ---------------------------------------------------------------- the results, as a report reads them


@dataclass(frozen=True)
class FailedRun:
    """A run of the spec that failed, as its last attempt left it."""

    run: str  # the run's name
    run_id: str
    attempts: int
    failure_class: str | None  # "unknown" when the ledger holds no attempt of it
    error: str  # the last attempt's error message, as recorded
    tail: str  # the last 10 lines of its log
    task: str = ""
    config: str = ""
    seed: int | None = None


@dataclass(frozen=True)
class PartialRun:
    """A completed run scored on part of its evaluation set (lm-eval ``--limit``)."""

    run: str
    note: str
    task: str = ""
    config: str = ""
    seed: int | None = None


@dataclass(frozen=True)
class GpuPlacement:
    """A run placed on GPUs, from its latest such attempt; the use is None where not sampled."""

    run: str
    host: str
    gpus: str  # the device indices, comma-separated
    util_mean: float | None
    util_max: float | None
    mem_peak_mib: float | None
    note: str  # "likely CPU-bound", "" or "not sampled"


@dataclass(frozen=True)
class CodeVersion:
    """A version of the code under test and the completed runs that ran at it."""

    version: str  # the benchmark version's id (versions/<id>/)
    commit: str | None
    dirty: bool | None
    runs: list[tuple[str, str, int]]  # (task, config, seed)


@dataclass(frozen=True)
class Environment:
    """Where the runs ran: each host's CPU, cores and GPU models by index (as the sweeps noted
    them in the ledger), and the provenance of the first run (host, platform, CPU, git)."""

    hosts: dict[str, HostRecord] = field(default_factory=dict)
    #: The first run's provenance.json as written (any release's layout), read once here.
    provenance: JsonObject = field(default_factory=dict)


class Curve(NamedTuple):
    """One completed run's logged curve of a metric: its steps and values (float64, shape ``(n,)``)."""

    config: str
    seed: int
    steps: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class CurveGroup:
    """The curves of one (metric, task), in the order they were logged, packed end to end: run
    ``i`` is ``steps[bounds[i]:bounds[i + 1]]`` (and the same of ``values``), float64. Packed,
    a report's figure worker receives a few large arrays, not two per run (at 10,000 runs the
    pickling between processes is a tenth of the time)."""

    metric: str
    task: str
    configs: tuple[str, ...]
    seeds: tuple[int, ...]
    bounds: np.ndarray  # shape (runs + 1,), int64
    steps: np.ndarray  # shape (points,)
    values: np.ndarray  # shape (points,)

    @property
    def runs(self) -> list[Curve]:
        """Each run's curve (views into the packed arrays)."""
        b = self.bounds.tolist()
        return [Curve(config, seed, self.steps[b[i]:b[i + 1]], self.values[b[i]:b[i + 1]])
                for i, (config, seed) in enumerate(zip(self.configs, self.seeds, strict=True))]


@dataclass(frozen=True)
class Curves:
    """The logged curves of the results table, one array per run instead of a row per point,
    read once with the rest of the table (:func:`read`): a report draws them from here and
    opens no ledger. Every curve has at least one point."""

    by_name: tuple[CurveGroup, ...] = ()

    def groups(self) -> dict[tuple[str, str], list[Curve]]:
        """``{(metric, task): [(config, seed, steps, values), ...]}``, in the order logged."""
        return {(g.metric, g.task): g.runs for g in self.by_name}

    @classmethod
    def of(cls, store: Store) -> Curves:
        """The curves of the completed runs in the spec, in one pass over the ledger's series."""
        import numpy as np

        found: dict[tuple[str, str], list[tuple[str, int, np.ndarray, np.ndarray]]] = {}
        for _, task, config, seed, metric, steps, vals in store.series_rows():
            if steps.shape[0]:
                found.setdefault((metric, task), []).append((config, int(seed), steps, vals))
        groups = []
        for (metric, task), runs in found.items():
            bounds = np.zeros(len(runs) + 1, dtype=np.int64)
            np.cumsum([r[2].shape[0] for r in runs], out=bounds[1:])
            steps, values = np.concatenate([r[2] for r in runs]), np.concatenate([r[3] for r in runs])
            for array in (bounds, steps, values):
                array.flags.writeable = False
            groups.append(CurveGroup(metric, task, tuple(r[0] for r in runs), tuple(r[1] for r in runs),
                                     bounds, steps, values))
        return cls(tuple(groups))


@dataclass(frozen=True)
class Results:
    """The results table and what the ledger says about its runs: what a report is made from.

    ``finals`` is the long-format table of final scalars (``step`` NaN); ``curves`` holds the
    same table's logged curves, read with it. ``planned`` lists the seeds the spec meant to run per
    (task, config) and ``failed_runs`` the (task, config, seed) of runs that failed.
    """

    info: BenchmarkInfo
    finals: pd.DataFrame
    folder: Path | None = None
    curves: Curves = field(default_factory=Curves)
    planned: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    failed_runs: list[tuple[str, str, int]] = field(default_factory=list)
    failures: list[FailedRun] = field(default_factory=list)
    partial: list[PartialRun] = field(default_factory=list)
    gpu_use: list[GpuPlacement] = field(default_factory=list)
    environment: Environment = field(default_factory=Environment)
    #: The pre-registered analysis plan as the ledger holds it (:mod:`benchlab.history.preregistration`).
    registered_plan: Registration | None = None
    #: (task, config) -> [(seed, run id)] of the completed runs, by seed.
    run_ids: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: ``run --until-decided``'s design and each pair's seeds and stop reason as of its last look
    #: None when the results were not run that way.
    sequential: SequentialRecord | None = None
    #: The versions of the code under test the completed runs ran at, oldest first; empty when
    #: the ledger records one (every run ran at the same code).
    code_versions: list[CodeVersion] = field(default_factory=list)
    #: The search studies kept under ``<results>/search/`` (``benchlab search``), summarised: their
    #: trials never enter the table, and the report shows each in a section of its own.
    searches: tuple[StudySection, ...] = ()
    #: The ledger's content digest (:meth:`benchlab.ledger.Store.content_digest`), taken before
    #: anything else was read: the key the report's tables are kept under (:func:`tables_key`).
    #: None for a table read from no ledger.
    ledger_digest: str | None = None


def tables_key(folder: Path, ledger_digest: str, *, failed_as: str = "exclude", reps: int | None = None,
               seed: int = 0) -> NumbersKey:
    """The key of the report's tables of ``folder`` (:mod:`benchlab.names.report_tables`): its
    ledger's content digest, the signature of its per-question record files, and the analysis'
    options, by default the report's and the dashboard's (failed seeds excluded, 2,000 resamples,
    seed 0). The record files are looked at now: a caller takes the key before it reads them."""
    from benchlab.collect.samples import records_signature
    from benchlab.names.choices import DEFAULT_REPS
    from benchlab.names.report_tables import NumbersKey

    return NumbersKey(ledger_digest, records_signature(runs_dir(folder)), failed_as,
                      DEFAULT_REPS if reps is None else reps, seed)


def read(results: Path | str | None = None, *, searches: bool = True, curves: bool = True,
         keyed: bool = True) -> Results:
    """Everything a report needs of a results folder, read in one pass over its ledger, the
    logged curves included (``curves=False`` leaves them out, for a reader that draws none),
    and (``searches=True``) the summaries of the search studies kept in it, each read from its
    own study and ledger: the report renders what this returns and opens no ledger itself, in
    its figures' workers neither. ``keyed=False`` leaves out the ledger's content digest
    (``Results.ledger_digest``, about 0.1 s at 10,000 runs), for a reader that keeps nothing."""

    folder = find_results(results)
    with Store.open(folder) as store:
        # First: a run that lands while the rest is read moves the ledger past this digest, so the
        # tables computed from what is read are never kept under a key newer than their runs.
        digest = store.content_digest() if keyed else None
        recorded = _recorded(store, folder)
        finals = _table(store, folder, series=False, all_runs=False)
        planned, failed_seeds = _planned_and_failed(store)
        failures: list[FailedRun] = []
        # Reading every run and attempt costs ~0.3 s at 10,000 runs; most sweeps have no failure.
        if failed_seeds:
            for found in failed_runs(store.runs(), store.attempts()):
                last = found.last
                failures.append(FailedRun(
                    run=found.run.name, run_id=found.run.run_id, attempts=len(found.attempts),
                    failure_class=last.failure_class if last else "unknown",
                    error=(last.error or "") if last else "",
                    tail="\n".join((last.log_tail or "").splitlines()[-10:]) if last else "",
                    task=found.run.task, config=found.run.config, seed=found.run.seed))
        # A completed attempt's error is a note that qualifies it: an lm-eval run cut short by --limit
        # (collect/lm_eval.py). One indexed-free scan of the attempts, only the matching rows read.
        partial = [PartialRun(p.name, p.note, p.task, p.config, p.seed) for p in store.partial_runs()]
        placed = store.gpu_attempts()
        hosts, registered, sequential, versions = (store.hardware(), store.registration(), store.sequential(),
                                                   store.versions())
        run_ids: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for task, config, seed, rid in store.completed_runs_by_seed():
            run_ids.setdefault((task, config), []).append((seed, rid))
        logged = Curves.of(store) if curves else Curves()
    gpu_use = []
    for name, a in placed:
        use = a.gpu_use
        gpu_use.append(GpuPlacement(
            run=name, host=a.host or "", gpus=a.gpus or "",
            util_mean=use.util_mean if use else None, util_max=use.util_max if use else None,
            mem_peak_mib=use.mem_peak_mib if use else None,
            note=use.note if use else "not sampled"))
    return Results(
        info=recorded, finals=finals, folder=folder, curves=logged, planned=planned,
        failed_runs=failed_seeds, failures=failures, partial=partial, gpu_use=gpu_use,
        environment=Environment(hosts=hosts, provenance=_first_provenance(folder)),
        registered_plan=registered, run_ids=run_ids, sequential=sequential,
        code_versions=_code_versions(folder, versions, run_ids),
        searches=_searches(folder) if searches else (),
        ledger_digest=digest,
    )


def _searches(folder: Path) -> tuple[StudySection, ...]:
    if not (folder / SEARCH_DIR).is_dir():
        return ()  # without importing the search package (and Optuna)
    from benchlab.search.summary import summarize_studies

    return summarize_studies(folder)


def _code_versions(folder: Path, versions: list[VersionRecord],
                   run_ids: dict[tuple[str, str], list[tuple[int, str]]]) -> list[CodeVersion]:
    """Which completed run ran at which code, from each run's provenance.json; read only where
    the ledger records more than one code (``run --allow-changed``), so most reports read none."""
    codes = {(v.commit, v.diff_sha256) for v in versions}
    if len(codes) <= 1:
        return []
    by_id = {v.id: v for v in versions}
    groups: dict[str, list[tuple[str, str, int]]] = {}
    for (task, config), seeds in run_ids.items():
        for seed, rid in seeds:
            try:
                version = json.loads((runs_dir(folder) / rid / PROVENANCE_FILE).read_text()).get("benchmark_version")
            except (OSError, ValueError, AttributeError):
                version = None
            groups.setdefault(str(version or "unknown"), []).append((task, config, seed))
    # Versions by the order the ledger recorded them; a run whose provenance names none comes last.
    order = {v: i for i, v in enumerate(by_id)}
    out = []
    for version in sorted(groups, key=lambda v: order.get(v, len(order))):
        v = by_id.get(version)
        out.append(CodeVersion(version, v.commit if v else None, v.dirty if v else None, groups[version]))
    # Versions of one code (an env or package change) are one code for reproduction.
    merged: dict[tuple[Any, Any], CodeVersion] = {}
    for cv in out:
        found = by_id.get(cv.version)
        key = (cv.commit, found.diff_sha256 if found else None)
        if key in merged:
            first = merged[key]
            merged[key] = CodeVersion(first.version, first.commit, first.dirty, first.runs + cv.runs)
        else:
            merged[key] = cv
    return list(merged.values()) if len(merged) > 1 else []


def ledger_seeds(
    results: Path | str,
) -> tuple[dict[tuple[str, str], list[int]], list[tuple[str, str, int]]]:
    """``(planned, failed)`` of the runs in the spec (as last run), from a results folder's ledger.

    ``planned[(task, config)]`` lists the seeds the spec meant to run; ``failed`` holds the
    ``(task, config, seed)`` of runs that failed.
    """
    with Store.open(results) as store:
        return _planned_and_failed(store)


def outside_spec_runs(results: Path | str) -> dict[str, int]:
    """Config -> how many of its runs the ledger keeps that the spec (as last run) no longer names."""
    counts: dict[str, int] = {}
    with Store.open(find_results(results)) as store:
        for r in store.runs(current_only=False):
            if not r.in_spec:
                counts[r.config] = counts.get(r.config, 0) + 1
    return counts


def _planned_and_failed(
    store: Store,
) -> tuple[dict[tuple[str, str], list[int]], list[tuple[str, str, int]]]:
    from benchlab.ledger import FAILED

    # Neither params nor commands are read, so a ledger of 10,000 runs costs a few milliseconds.
    planned: dict[tuple[str, str], list[int]] = {}
    failed: list[tuple[str, str, int]] = []
    for run in store.run_states():
        planned.setdefault((run.task, run.config), []).append(run.seed)
        if run.status == FAILED:
            failed.append((run.task, run.config, run.seed))
    return planned, failed


def _first_provenance(folder: Path) -> JsonObject:
    """The provenance.json of the first run directory, by name, that has one ({} if none, or if
    it cannot be read)."""
    import os

    # Names sorted as text and looked at in turn until one has the file: a glob of every run's
    # file and a sort of their paths took a tenth of a second at 10,000 runs.
    try:
        names = sorted(n for n in os.listdir(runs_dir(folder)) if not n.startswith("."))
    except OSError:
        return {}
    for name in names:
        path = runs_dir(folder) / name / PROVENANCE_FILE
        try:
            text = path.read_text()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return {}
        try:
            found = json.loads(text)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}
    return {}


def write_benchmark_meta(store: Store, spec: Spec, results_dir: Path) -> None:
    """Record the benchmark of ``spec`` in the ledger, and the spec itself next to it
    (``benchmark.json``, read back when the ledger is rebuilt)."""
    record = BenchmarkInfo.from_spec(spec)
    store.set_benchmark(record)
    SavedSpec(record.spec, record.spec_path, record.overrides).write(benchmark_file(results_dir))
