"""Re-reading run directories: refresh metrics, or rebuild the whole ledger from ``runs/``.

The run directories hold what each run was and how it ended: ``config.yaml`` (what the run
was), ``provenance.json`` (how its last attempt ended) and the metric files. The spec the folder
was run with is kept in ``benchmark.json``, the pre-registration in ``preregistration.json``, the
versions under ``versions/``.

What only the ledger holds (the earlier attempts of a retried run, the hosts' hardware, what
changed between versions, ``run --until-decided``'s design and state, the pairs whose every run
failed) is read from the old ledger where there is one, else from :data:`RECORDS_FILE`, the copy of
those records that ``benchlab export`` publishes beside the run folders (:func:`ledger_records`),
so that a published copy rebuilds to the same report. What neither holds, the rebuild names
(:attr:`Rebuilt.unrecovered`).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

import yaml

from benchlab import triage
from benchlab.collect import collect_run
from benchlab.collect.described import described_meta, described_primary
from benchlab.errors import BenchlabError, LedgerError, NewerLedger, ResultsNotFound, StoreError
from benchlab.json_types import JsonObject
from benchlab.ledger import (
    COMPLETED,
    DB_NAME,
    FAILED,
    INTERRUPTED,
    REBUILDING,
    SCHEMA_VERSION,
    AttemptRecord,
    FlaggedPair,
    GpuUse,
    HostRecord,
    Registration,
    ResultsLock,
    SequentialRecord,
    Store,
    VersionRecord,
)
from benchlab.names.results_files import (
    RECORDS_FILE,
    REGISTRATION_FILE,
    VERSION_FILE,
    VERSIONS_DIR,
    SavedSpec,
    benchmark_file,
)
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE, PROVENANCE_FILE, RUNS_DIR
from benchlab.plan import Run, expand
from benchlab.secrets import Fingerprint, known_fingerprints
from benchlab.spec import Metric, Spec

_T = TypeVar("_T")

#: The attempt fields a published record keeps: not the local process (pid, process group).
_ATTEMPT_FIELDS = ("number", "status", "exit_code", "signal", "started", "ended", "host", "node", "gpus",
                   "failure_class", "error", "log_tail", "gpu_util_mean", "gpu_util_max", "gpu_mem_peak_mib")


def _spec_of(saved: SavedSpec) -> Spec:
    spec = Spec.model_validate(saved.spec)
    # Where the spec was and the -s it was run with: the report's reproduction commands name them.
    if saved.spec_path is not None:
        spec.path = Path(saved.spec_path)
    spec.overrides = dict(saved.overrides)
    return spec


def _metrics(spec: Spec) -> tuple[str, list[Metric]]:
    return spec.metrics.primary.name, spec.metrics.all



@dataclass
class Rebuilt:
    """What ``rebuild_store`` did: counts of run directories by outcome, and where the old ledger went."""

    runs: int = 0
    completed: int = 0
    failed: int = 0
    interrupted: int = 0
    pending: int = 0
    backup: Path | None = None
    #: Where the ledger's own records came from: "the old ledger", RECORDS_FILE, or None (neither).
    records_from: str | None = None
    #: What the rebuilt ledger lacks that the old one may have held, one phrase each.
    unrecovered: list[str] = field(default_factory=list)


def rebuild_store(folder: Path | str) -> Rebuilt:
    """Recreate ``benchlab.db`` from ``runs/*``, keeping the old ledger as a backup.

    It holds the results folder's lock, as a sweep does, so it never runs beside one.
    The new ledger is built in a file of its own next to the old one and swapped in
    with one rename only once it is complete: a rebuild killed at any moment leaves
    the old ledger as it was (and a half-built file that ``benchlab status`` lists and the
    next ``benchlab run`` or rebuild removes).
    The old ledger keeps a name no other backup has (``benchlab.db.bak-<time>[-n]``).
    """
    folder = Path(folder)
    runs_dir = folder / RUNS_DIR
    if not runs_dir.is_dir():
        raise ResultsNotFound(folder, f"{folder}: no runs/ folder to rebuild from")
    # Without the spec, the run directories describe themselves: benchlab's metrics.json (which
    # holds what extractors read) and the metrics each run was judged by, in provenance.json.
    saved = SavedSpec.read(benchmark_file(folder))
    spec = _spec_of(saved) if saved is not None else None
    # Taking the lock removes what a killed rebuild left (as every holder of the lock does).
    with ResultsLock(folder, purpose="benchlab collect --rebuild"):
        db = folder / DB_NAME
        fresh = folder / f"{DB_NAME}{REBUILDING}"
        earlier = _earlier_of(db)
        counts = _build(fresh, folder, runs_dir, spec, earlier)
        counts.backup = _back_up(db) if db.exists() else None
        os.replace(fresh, db)
        # The old file's shared-memory index must not be read as the new one's.
        (folder / f"{DB_NAME}-shm").unlink(missing_ok=True)
    return counts


@dataclass(frozen=True)
class _Earlier:
    """What the old ledger (or its published records) holds that the run folders cannot tell again."""

    registration: Registration | None = None
    versions: list[VersionRecord] | None = None
    hardware: dict[str, HostRecord] | None = None
    sequential: SequentialRecord | None = None
    flagged: list[FlaggedPair] | None = None
    #: Each run's attempts, oldest first (None: not known, as for a ledger lost with no records).
    attempts: dict[str, list[AttemptRecord]] | None = None
    #: The runs in the spec, in plan order, seeds added after the spec's own included.
    plan: list[str] | None = None
    #: Every run on record in the order the ledger had them (the tables and results.csv follow it).
    order: list[str] | None = None
    source: str | None = None


def _attempt_json(a: AttemptRecord) -> JsonObject:
    data = asdict(a)
    return {k: data[k] for k in ("run_id", *_ATTEMPT_FIELDS)}


def _attempt_of(data: JsonObject) -> AttemptRecord:
    values = {k: data.get(k) for k in _ATTEMPT_FIELDS}
    return AttemptRecord(attempt_id=0, run_id=str(data["run_id"]), pid=None, pgid=None, proc_start=None,
                         **values)  # type: ignore[arg-type]


def ledger_records(folder: Path) -> bytes | None:
    """What the folder's ledger holds that its run folders do not, as :data:`RECORDS_FILE`'s
    bytes (the same bytes for the same ledger, so that an unchanged folder exports nothing new);
    None when the folder has no ledger. The ledger is read, never written."""
    db = folder / DB_NAME
    if not db.exists():
        return None
    with Store(db, read_only=True) as store:
        registration, versions, hardware = store.registration(), store.versions(), store.hardware()
        sequential, flagged, attempts = store.sequential(), store.flagged(), store.attempts()
        plan, order = store.plan_ids(), [r.run_id for r in store.runs(current_only=False)]
    out: JsonObject = {
        "about": "what benchlab's ledger holds beyond the run folders; `benchlab collect --rebuild` reads it",
        "schema_version": SCHEMA_VERSION,
        "preregistration": registration.to_json() if registration else None,
        "versions": [v.to_json() for v in versions],
        "hardware": {host: h.to_json() for host, h in hardware.items()},
        "sequential": sequential.to_json() if sequential else None,
        "flagged": [f.to_json() for f in flagged],
        "attempts": [_attempt_json(a) for a in attempts],
        "plan": plan,
        "order": order,
    }
    return json.dumps(out, indent=1, sort_keys=True, default=str).encode("utf-8")


def _records_of(path: Path) -> _Earlier:
    """The records :func:`ledger_records` wrote, each on its own (one that cannot be read is left
    out, the others kept); an empty record when the file cannot be read at all."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _Earlier()
    if not isinstance(data, dict):
        return _Earlier()
    if isinstance(data.get("schema_version"), int) and data["schema_version"] > SCHEMA_VERSION:
        raise NewerLedger(path, data["schema_version"])

    def read(convert: Callable[[], _T]) -> _T | None:
        try:
            return convert()
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    attempts: dict[str, list[AttemptRecord]] = {}
    for a in read(lambda: [_attempt_of(x) for x in data["attempts"]]) or []:
        attempts.setdefault(a.run_id, []).append(a)
    return _Earlier(
        read(lambda: Registration.from_json(data["preregistration"]) if data.get("preregistration") else None),
        read(lambda: [VersionRecord.from_json(v) for v in data["versions"]]) or None,
        read(lambda: {str(h): HostRecord.from_json(f or {}) for h, f in data["hardware"].items()}) or None,
        read(lambda: SequentialRecord.from_json(data["sequential"]) if data.get("sequential") else None),
        read(lambda: [FlaggedPair.from_json(f) for f in data["flagged"]]) or None,
        attempts or None, read(lambda: [str(r) for r in data["plan"]]) or None,
        read(lambda: [str(r) for r in data["order"]]) or None, RECORDS_FILE)


def _earlier_of(db: Path) -> _Earlier:
    """The pre-registration, the versions with their recorded changes, the hosts, the
    ``--until-decided`` record, the flagged pairs and the attempts of the old ledger, where it can
    still be read; else those of :data:`RECORDS_FILE` beside it (a published copy)."""
    records = db.parent / RECORDS_FILE
    if not db.exists():
        return _records_of(records) if records.exists() else _Earlier()

    def readable(read: Callable[[], _T]) -> _T | None:
        # Each record on its own: a damaged one is left behind (the registration is then read from
        # preregistration.json, the versions from versions/) without dropping the others.
        try:
            return read()
        except LedgerError:
            raise  # SQLite failing on the file: the whole ledger is taken as unreadable
        except StoreError:
            return None

    try:
        with Store(db) as old:
            attempts: dict[str, list[AttemptRecord]] = {}
            for a in readable(old.attempts) or []:
                attempts.setdefault(a.run_id, []).append(a)
            return _Earlier(readable(old.registration), readable(old.versions) or None,
                            readable(old.hardware) or None, readable(old.sequential), readable(old.flagged) or None,
                            attempts or None, readable(old.plan_ids) or None,
                            [r.run_id for r in readable(lambda: old.runs(current_only=False)) or []] or None,
                            "the old ledger")
    except NewerLedger:
        raise  # a newer benchlab's ledger is not replaced by what this one can rebuild
    except (StoreError, ValueError, OSError):
        return _records_of(records) if records.exists() else _Earlier()


def _versions_of(folder: Path) -> list[VersionRecord]:
    """The versions written under ``versions/`` (for a ledger that is lost), oldest first; what
    changed between them was recorded in the ledger only, so they carry no ``changes``."""
    found = []
    for path in (folder / VERSIONS_DIR).glob(f"*/{VERSION_FILE}"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("id"):
            try:
                found.append(VersionRecord.from_json({**data, "changes": []}))
            except (KeyError, TypeError, ValueError):  # a hand-edited or truncated version.json
                continue
    return sorted(found, key=lambda v: v.recorded_at)


def _build(path: Path, folder: Path, runs_dir: Path, spec: Spec | None,
           earlier: _Earlier | None = None) -> Rebuilt:
    # here: history/ imports collect/ (export reads a ledger's records through this module)
    from benchlab.history.preregistration import restore
    from benchlab.results import write_benchmark_meta

    primary, metrics = _metrics(spec) if spec is not None else (described_primary(runs_dir), [])
    counts = Rebuilt()
    with Store(path, create=True) as store:
        # One transaction: nothing of a half-built ledger is ever committed, and it is much faster.
        with store.transaction():
            if spec is not None:
                write_benchmark_meta(store, spec, folder)
            else:
                store.set_benchmark(described_meta(runs_dir))
            # The registered analysis plan was made before the results: it is kept as it was,
            # never registered anew from runs that have already finished.
            earlier = earlier or _Earlier()
            counts.records_from = earlier.source
            registered = restore(store, folder, earlier=earlier.registration)
            versions = earlier.versions or _versions_of(folder)
            if versions:
                store.set_versions(versions)
            if earlier.hardware:
                store.set_hardware(earlier.hardware)
            if earlier.sequential:
                store.set_sequential(earlier.sequential)
            if earlier.flagged:
                store.set_flagged(earlier.flagged)
            runs = []
            for run_dir in sorted(p for p in runs_dir.iterdir() if (p / CONFIG_FILE).exists()):
                cfg = yaml.safe_load((run_dir / CONFIG_FILE).read_text())
                runs.append((run_dir, Run(run_id=cfg["run_id"], benchmark=cfg["benchmark"], task=cfg["task"],
                                          config=cfg["config"], seed=int(cfg["seed"]),
                                          params=cfg.get("params") or {}, command=cfg["command"])))
            try:
                plan = expand(spec) if spec is not None else []
            except BenchlabError:
                plan = []
            # The runs in the order the sweep wrote them (the spec's), which the tables, results.csv
            # and the summary's lists follow; runs the spec no longer names after them.
            # Seeds --until-decided added are in the plan the ledger recorded, not in the spec's own.
            planned = [r.run_id for r in plan]
            planned += [rid for rid in earlier.plan or [] if rid not in set(planned)]
            position = {rid: i for i, rid in enumerate(earlier.order or planned)}
            runs.sort(key=lambda pair: (position.get(pair[1].run_id, len(position)), pair[0].name))
            store.add_runs([run for _, run in runs])
            if plan:
                # Where several directories share coordinates, the spec's own run is the current one.
                store.register(plan)
            if planned:
                have = {run.run_id for _, run in runs} | {r.run_id for r in plan}
                store.set_plan(rid for rid in planned if rid in have)  # earlier versions' runs stay out
            hide = known_fingerprints(folder)
            for run_dir, run in runs:
                _rebuild_run(store, run_dir, run, primary, metrics, counts, hide,
                             (earlier.attempts or {}).get(run.run_id, []))
        store.as_single_file()  # one self-contained file to rename
    if earlier.source is None:
        counts.unrecovered = [
            "earlier attempts of retried runs (each run keeps its last attempt)",
            "the hosts' hardware", "what changed between versions", "run --until-decided's design and state",
            "the pairs whose every run failed"]
        if registered is None and spec is not None and spec.analysis is not None:
            counts.unrecovered.insert(0, f"the pre-registration (no {REGISTRATION_FILE})")
    return counts


def _replay(store: Store, attempt: AttemptRecord) -> None:
    """Put an earlier attempt back as the ledger held it."""
    attempt_id, _ = store.start_attempt(attempt.run_id, host=attempt.host or "", gpus=attempt.gpus,
                                        node=attempt.node, started=attempt.started)
    store.finish_attempt(attempt_id, attempt.run_id, status=attempt.status, run_status=attempt.status,
                         exit_code=attempt.exit_code, signal=attempt.signal, ended=attempt.ended,
                         failure_class=attempt.failure_class, error=attempt.error, log_tail=attempt.log_tail)
    if attempt.gpu_use is not None:
        store.set_gpu_use(attempt_id, attempt.gpu_use)


def _rebuild_run(store: Store, run_dir: Path, run: Run, primary: str, metrics: list[Metric],
                 counts: Rebuilt, hide: list[Fingerprint], recorded: list[AttemptRecord] | None = None) -> None:
    counts.runs += 1
    prov_path = run_dir / PROVENANCE_FILE
    if not prov_path.exists():
        # Written ahead, or killed before it ended: still to do.
        counts.pending += 1
        return
    # The run folder tells how the last attempt ended; the records, the attempts before it and
    # where the last one ran (its GPUs and their use), which the folder does not keep.
    before, last = (recorded[:-1], recorded[-1]) if recorded else ([], None)
    for attempt in before:
        _replay(store, attempt)
    prov = json.loads(prov_path.read_text())
    started = float(prov.get("started") or time.time())
    attempt_id, _ = store.start_attempt(run.run_id, host=prov.get("host") or "", started=started,
                                        node=prov.get("node"), gpus=last.gpus if last else None)
    use: GpuUse | None = last.gpu_use if last else None
    if use is not None:
        store.set_gpu_use(attempt_id, use)
    ended = float(prov.get("ended") or started)
    tail = triage.log_tail(run_dir / LOG_FILE, hide=hide)
    if prov.get("interrupted"):
        # Stopped by the user (or a lost ledger): still to do, as the sweep had it.
        store.finish_attempt(attempt_id, run.run_id, status=INTERRUPTED, run_status=INTERRUPTED,
                             exit_code=prov.get("exit_code"), signal=prov.get("signal"), ended=ended,
                             failure_class=triage.INTERRUPTED, error="interrupted by the user", log_tail=tail)
        counts.interrupted += 1
        return
    if prov.get("exit_code") == 0 and not prov.get("timed_out"):
        collected = collect_run(run_dir, metrics, run.context())
        failure = collected.failure(primary)
        if failure is None:
            # A completed attempt's error is a note that qualifies it (an lm-eval run cut short).
            note = last.error if last is not None and last.status == COMPLETED else None
            store.finish_attempt(attempt_id, run.run_id, status=COMPLETED, run_status=COMPLETED,
                                 exit_code=0, ended=ended, metrics=collected.finals, series=collected.series,
                                 error=note)
            counts.completed += 1
            return
        verdict = triage.Verdict(*failure)
    else:
        verdict = triage.classify(exit_code=prov.get("exit_code"), signal=prov.get("signal"),
                                  timed_out=bool(prov.get("timed_out")), tail=tail)
    store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                         exit_code=prov.get("exit_code"), signal=prov.get("signal"), ended=ended,
                         failure_class=verdict.failure_class, error=verdict.error, log_tail=tail)
    counts.failed += 1


def _back_up(db: Path) -> Path:
    """Give the ledger at ``db`` a backup name of its own (a hard link: the file is not copied);
    its write-ahead log is folded in first, so the backup is one file."""
    try:
        with Store(db) as old:
            old.checkpoint()
    except BenchlabError:
        pass  # unreadable: kept as it is, write-ahead log included
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in itertools.count(1):
        backup = db.with_name(f"{DB_NAME}.bak-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            os.link(db, backup)  # fails rather than replace an existing backup
        except FileExistsError:
            continue
        break
    wal = db.with_name(DB_NAME + "-wal")
    if wal.exists() and wal.stat().st_size:
        os.rename(wal, backup.with_name(backup.name + "-wal"))
    else:
        wal.unlink(missing_ok=True)
    return backup
