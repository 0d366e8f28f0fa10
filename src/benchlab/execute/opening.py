"""Opening a results folder for a sweep: everything checked and recorded before the first launch.

:func:`open_results_folder` is one step with one answer (:class:`OpenedFolder`): the folder is
the spec's (ownership), the plan is entered in the ledger (with the finished seeds an earlier
``run --until-decided`` added), what a sweep that died left behind is recovered, the benchmark's
version is written (refusing a changed dataset or code unless allowed), the pre-registration is
kept, the queue with its retry budgets is built, working directories are checked, and a change
of the code under test since finished runs ran is noted. The sweep then only launches.

The checks a dry run shares (:func:`check_can_run`, :func:`would_run`, :func:`sweep_plan`) live
here too, so that ``benchlab run --dry-run`` refuses what the sweep would, in the same words.
"""

from __future__ import annotations

import gc
import operator
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from benchlab import triage
from benchlab.errors import LedgerError, LedgerLost, UserError
from benchlab.evalrules import refuse_incomplete_checkpoints
from benchlab.execute.proctree import kill_strays, kill_tree
from benchlab.execute.provenance import changed_files, code_state, spec_files
from benchlab.execute.queue import RetryBudget, RunQueue, for_retry
from benchlab.execute.version import (
    BenchmarkChanged,
    BenchmarkVersion,
    changes_since,
    current_version,
    write_version,
)
from benchlab.history import preregistration
from benchlab.ledger import (
    COMPLETED,
    DB_NAME,
    FAILED,
    INTERRUPTED,
    PENDING,
    RUNNING,
    AttemptRecord,
    CodeState,
    HostRecord,
    PlanRecorder,
    Store,
    VersionRecord,
    has_attempts,
    runs_to_do,
)
from benchlab.names.run_files import PROVENANCE_FILE, runs_dir
from benchlab.plan import Run, expand
from benchlab.results import write_benchmark_meta
from benchlab.spec import Spec

# Attribute getters for passes over every run of a plan: map() with them runs at C speed, a tenth
# of a Python loop's time at 100,000 runs.
_WORKDIR, _RUN_ID = attrgetter("workdir"), attrgetter("run_id")


@dataclass(frozen=True)
class Recovered:
    """What a sweep that died left behind, once dealt with."""

    #: (attempt, job id) a cluster scheduler still holds: the backend may re-attach to them.
    held: list[tuple[AttemptRecord, str]]
    #: Devices the killed attempts held: their memory may still be draining.
    gpus: list[int]


@dataclass
class OpenedFolder:
    """A results folder opened for a sweep: every check passed and every record written that
    comes before the first launch (see :func:`open_results_folder`)."""

    #: The sweep's plan: the runs given or the spec's, with the kept until-decided seeds.
    runs: list[Run]
    #: Records the plan in the ledger a step at a time, between the first launches.
    plan: PlanRecorder
    #: The ledger's id of the code under test (each attempt is tagged with it).
    code_id: int
    version_id: str
    recovered: Recovered
    #: The runs to launch, in launch order, and the same runs in plan order (cheaper to scan).
    queue: RunQueue
    todo: list[Run]
    budget: RetryBudget
    #: Runs of the plan already completed (skipped) or failed for good before this sweep.
    skipped: int
    failed: int
    #: What to warn of before the first launch: the code under test changed since finished runs ran.
    warning: str | None


def open_results_folder(store: Store, spec: Spec, results_dir: Path, runs: list[Run], *, code: CodeState,
                        fed: bool = False, keep_until_decided: bool = True, rerun_failed: bool = False,
                        rerun_all: bool = False, allow_changed: bool = False,
                        check_workdirs: bool = True) -> OpenedFolder:
    """Check and record everything that comes before a sweep's first launch, in the ledger
    ``store`` of ``results_dir`` (locked by the caller); raises what the sweep refuses.

    ``runs``: the plan (empty when ``fed``: a feeder hands the runs out as the sweep goes);
    ``keep_until_decided``: the plan is the spec's own, so the finished seeds an earlier
    ``run --until-decided`` added join it; ``check_workdirs``: the runs' working directories must
    exist here (the backend runs them on this machine)."""
    if keep_until_decided and not fed and not rerun_all:
        # Finished, so never to do: they pass no checkpoint check, and the plan keeps them.
        runs = [*runs, *kept_runs(store, spec)]
    check_spec_owns(store, spec, results_dir)
    write_benchmark_meta(store, spec, results_dir)
    if fed:
        # The plan grows as the feeder hands out runs: nothing to record ahead.
        plan = PlanRecorder(store, [])
        plan.done = True
    else:
        # The runs and the plan they make are recorded between the first launches, a step at a
        # time (PlanRecorder): at 100,000 runs recording them first took seconds.
        plan = store.record_plan(runs)
    code_id = store.code_id(code)
    recovered = recover(store)
    # Only the runs that are not pending: a resume of a plan that has just begun reads a few rows.
    statuses = store.statuses(pending=False)
    version_id = record_version(store, spec, code, results_dir, statuses, allow=allow_changed or rerun_all)
    preregistration.register(store, spec, operator.countOf(statuses.values(), COMPLETED))
    found = runs_to_do(runs, statuses, rerun_failed=rerun_failed, rerun_all=rerun_all)
    todo = found.runs
    budget = retry_budget(store, todo, statuses, rerun_failed=rerun_failed, rerun_all=rerun_all)
    queue = RunQueue(todo, store.durations())
    queue.order()
    # The checks over every queued run go through ``todo``, the same runs in plan order: the runs
    # lie in memory in that order (see ``plan.expand``), and a pass in queue order, which a resume
    # groups by (task, config), reads them two to three times slower.
    if check_workdirs:
        missing = missing_workdirs(todo)
        if missing:
            where = f" (workdir of {spec.path})" if spec.path else ""
            raise UserError(f"working directory {missing[0]} does not exist{where}; nothing was run. "
                            "Create it, or fix the spec's `workdir`.")
    return OpenedFolder(
        runs=runs, plan=plan, code_id=code_id, version_id=version_id, recovered=recovered, queue=queue,
        todo=todo, budget=budget, skipped=0 if rerun_all else found.completed,
        failed=0 if rerun_failed or rerun_all else found.failed,
        warning=None if rerun_all else code_changed(store, code, found.completed_ids))


def retry_budget(store: Store, todo: list[Run], statuses: dict[str, str], *, rerun_failed: bool,
                 rerun_all: bool) -> RetryBudget:
    """The retry budgets of the runs ``todo``, from the ledger; an out-of-memory run whose last
    charged failure was that is queued as its retry (``todo`` is changed in place)."""
    if rerun_all:  # every run starts over, with a whole retry budget
        store.new_budget([r.run_id for r in todo])
    elif rerun_failed:  # the user's explicit request for a new retry budget
        store.new_budget([r.run_id for r in todo if statuses.get(r.run_id) == FAILED])
    # Retry budgets are counted from the ledger over each run's whole life, so a resume after
    # a crash continues the budget instead of granting a new one.
    charged = store.charged_failures()
    if charged:  # usually none: the plan's ids are gathered only where some run has failures
        ids = todo_ids(todo)
        charged = {rid: counts for rid, counts in charged.items() if rid in ids}
    budget = RetryBudget(charged)
    for i, r in enumerate(todo if budget.charged else ()):
        if r.run_id in budget.charged and store.last_charged_failure(r.run_id) == triage.OOM:
            todo[i] = for_retry(r, triage.OOM)
    return budget


def recover(store: Store) -> Recovered:
    """Kill what a sweep that died left running; mark its attempts lost.

    Every process of an attempt carries this ledger's key in its environment, and the folder's
    lock is ours, so any process with the key is a leftover, including one launched just before
    a crash whose attempt row was never committed.
    """
    stale = store.attempts(status=RUNNING)
    # Attempts a cluster scheduler holds (a job id, no local process) may still be queued or
    # running there: the backend re-attaches to them instead of launching them again.
    placed = store.placements(a.attempt_id for a in stale)
    held = [(a, placed[a.attempt_id].job_id) for a in stale if a.attempt_id in placed and a.pid is None]
    held_ids = {a.attempt_id for a, _ in held}
    stale = [a for a in stale if a.attempt_id not in held_ids]
    # Their devices hold memory until the driver has cleaned up after the killed processes;
    # the backend must not read that as someone else's work (SweepContext.recovered_gpus).
    gpus = sorted({int(i) for a in stale for i in (a.gpus or "").split(",") if i})
    for attempt in stale:
        if attempt.pid is not None and attempt.pgid is not None:
            kill_tree(attempt.pid, attempt.pgid, attempt.proc_start)
    kill_strays(str(store.path))
    for attempt in stale:
        store.finish_attempt(attempt.attempt_id, attempt.run_id, status=INTERRUPTED,
                             run_status=INTERRUPTED, failure_class=triage.LOST,
                             error="the benchlab process running it died; run again")
    return Recovered(held, gpus)


def check_spec_owns(store: Store, spec: Spec, results_dir: Path) -> None:
    """Refuse a results folder that holds the runs of another spec file (``ResultsOfOtherSpec``).

    A folder belongs to the spec file that first ran into it. A spec file that moved (the recorded
    one no longer exists) takes the folder over; a spec built in memory (no file) is not checked.
    """
    from benchlab.errors import ResultsOfOtherSpec

    recorded = store.benchmark()
    owner = recorded.spec_path if recorded is not None else None
    if spec.path is None or recorded is None or not owner:
        return
    mine = str(spec.path.resolve())
    # A spec promoted from the owner's search (`benchlab search --promote`) continues its benchmark.
    promoted_from = {str((spec.base_dir / c.origin.spec).resolve()) for c in spec.configs if c.origin is not None}
    if owner != mine and Path(owner).exists() and not os.path.samefile(owner, mine) and owner not in promoted_from:
        raise ResultsOfOtherSpec(results_dir, owner, recorded.name, mine, spec.name)


def record_version(store: Store, spec: Spec, code: CodeState, results_dir: Path, statuses: dict[str, str],
                   *, allow: bool) -> str:
    """Write the benchmark version of this sweep and record it in the ledger; return its id.

    Where runs already ran under an earlier version whose datasets or code differ, raise
    :class:`BenchmarkChanged` naming what changed, unless ``allow`` (the change is then recorded
    with the new version)."""
    now = current_version(spec, code, results_dir)
    versions = store.versions()
    changes = _version_changes(spec, versions, now, statuses)
    if changes and not allow:
        raise BenchmarkChanged(results_dir, changes)
    write_version(results_dir, now, spec)
    if not versions or versions[-1].id != now.id:
        versions.append(now.record(changes))
        store.set_versions(versions)
    return now.id


def _version_changes(spec: Spec, versions: list[VersionRecord], now: BenchmarkVersion,
                     statuses: dict[str, str]) -> list[str]:
    """What changed since the last recorded version, where runs already began under it."""
    began = any(s != PENDING for s in statuses.values())
    if not versions or not began:
        return []
    return changes_since(versions[-1], now,
                         lambda since: changed_files(spec.work_path, since, spec_files(spec)))


def kept_runs(store: Store, spec: Spec) -> list[Run]:
    """The finished runs an earlier ``run --until-decided`` added beyond the spec's seeds: a sweep
    of the spec's own runs keeps them in its plan, so that the results table, ``benchlab.load``
    and every verdict still count them (see :func:`benchlab.execute.sequential.kept_runs`)."""
    # Only a ledger an --until-decided run wrote: the sequential module imports the statistics
    # (scipy), half a second before every resume's first launch.
    if store.sequential() is None:
        return []
    from benchlab.execute import sequential

    return sequential.kept_runs(store, spec)


@dataclass(frozen=True)
class SweepPlan:
    """The runs a :class:`Sweep` of a spec over a results folder plans, as it would plan them."""

    runs: list[Run]
    kept: int  # of them, finished runs an earlier ``run --until-decided`` added (see kept_runs)


def ledger_statuses(results_dir: Path) -> dict[str, str]:
    """Every run's state by id in the ledger of ``results_dir`` (none when it has no ledger yet)."""
    if not (results_dir / DB_NAME).exists():
        return {}
    with Store.open(results_dir) as store:
        return store.statuses()


def sweep_plan(spec: Spec, results_dir: Path | str, *, rerun_all: bool = False) -> SweepPlan:
    """The plan of ``Sweep(spec, results_dir).run()``: the spec's runs, and unless ``rerun_all``
    the runs :func:`kept_runs` keeps. Reads the ledger, writes nothing."""
    runs = expand(spec)
    db = Path(results_dir) / DB_NAME
    if rerun_all or not db.exists():
        return SweepPlan(runs, 0)
    with Store.open(Path(results_dir)) as store:
        kept = kept_runs(store, spec)
    return SweepPlan([*runs, *kept], len(kept))


def would_run(spec: Spec, results_dir: Path | str, *, runs: list[Run] | None = None, rerun_failed: bool = False,
              rerun_all: bool = False, allow_changed: bool = False, code: CodeState | None = None) -> list[Run]:
    """The runs ``Sweep(spec, results_dir, runs=runs, ...).run()`` would launch, in plan order,
    refusing what it would refuse (:func:`check_can_run`, a missing or partly written checkpoint)
    in the same words. ``benchlab run --dry-run`` lists them. Writes only the dataset hash cache."""
    check_can_run(spec, results_dir, code=code, allow_changed=allow_changed, rerun_all=rerun_all)
    statuses = ledger_statuses(Path(results_dir))
    planned = runs if runs is not None else sweep_plan(spec, results_dir, rerun_all=rerun_all).runs
    refuse_incomplete_checkpoints(spec, planned, lambda: statuses, rerun_all=rerun_all)
    return runs_to_do(planned, statuses, rerun_failed=rerun_failed, rerun_all=rerun_all).runs


def check_can_run(spec: Spec, results_dir: Path | str, *, code: CodeState | None = None,
                  allow_changed: bool = False, rerun_all: bool = False) -> None:
    """Raise what :meth:`Sweep.run` would refuse before launching anything (writing only the
    dataset hash cache): a
    ledger lost beside finished run directories, a folder of another spec file, a changed
    dataset or code under test (unless allowed). ``benchlab run --dry-run`` asks it."""
    results_dir = Path(results_dir).resolve()
    refuse_without_ledger(results_dir)
    if not (results_dir / DB_NAME).exists():
        return
    with Store.open(results_dir) as store:
        check_spec_owns(store, spec, results_dir)
        if allow_changed or rerun_all:
            return
        code = code if code is not None else code_state(spec.work_path, spec_files(spec))
        now = current_version(spec, code, results_dir)
        changes = _version_changes(spec, store.versions(), now,
                                   store.statuses(pending=False))
    if changes:
        raise BenchmarkChanged(results_dir, changes)


def code_changed(store: Store, now: CodeState, done: list[str]) -> str | None:
    """What to tell before the completed runs ``done`` (ids) are skipped although the code under
    test changed since they ran (None when it did not, or when either side is not in a git
    repository)."""
    if not now.known or not done:
        return None
    before = {s: n for s, n in store.completed_code(done).items() if s.known and not s.same_code(now)}
    if not before:
        return None
    n = sum(before.values())
    then = max(before, key=lambda s: before[s])
    return (f"the code under test changed since {n} of the {len(done)} finished runs ran (they ran "
            f"{then.describe()}{' and others' if len(before) > 1 else ''}; it is now {now.describe()}); "
            "they are kept as done: --rerun-all runs every run again")


def record_hardware(store: Store, host: str, gpus: dict[str, str]) -> None:
    """Note in the ledger what this host is (CPU, cores, GPU models by index), for the report's
    Hardware line; each host that ran a sweep of this folder keeps its own entry."""
    from benchlab.execute.provenance import cpu_model

    hardware = store.hardware()
    known = hardware.get(host) or HostRecord()
    hardware[host] = HostRecord(cpu_model(), os.cpu_count(), {**known.gpus, **gpus})
    store.set_hardware(hardware)


def missing_workdirs(runs: Iterable[Run]) -> list[str]:
    """The working directories of ``runs`` that do not exist on this machine."""
    return sorted(w for w in set(map(_WORKDIR, runs)) if not os.path.isdir(w))


def todo_ids(runs: Iterable[Run]) -> set[str]:
    """The ids of ``runs``, as a set."""
    return set(map(_RUN_ID, runs))


def refuse_without_ledger(results_dir: Path) -> None:
    """Raise ``LedgerLost`` when run directories show finished runs but the ledger is missing or
    holds no attempt: a sweep would run them all again, and the ledger can be rebuilt instead."""
    db = results_dir / DB_NAME
    if db.exists():
        # Read without writing anything; the sweep then says whether the folder is read-only.
        try:
            attempts = has_attempts(db)
        except LedgerError as exc:
            raise LedgerLost(db, f"{db} is unreadable ({exc}); nothing was run. Recreate it from the run "
                                 f"directories with `benchlab collect --rebuild {results_dir}`.") from None
        if attempts:
            return
    folder = runs_dir(results_dir)
    if not folder.is_dir():
        return
    with os.scandir(folder) as entries:
        finished = next((e.name for e in entries if os.path.exists(os.path.join(e.path, PROVENANCE_FILE))),
                        None)
    if finished is None:
        return
    state = "is missing" if not db.exists() else "holds no attempt"
    raise LedgerLost(db, f"{db} {state}, but run directories under {folder} show finished runs "
                         f"(e.g. {finished}); nothing was run, so that they are not run again. Recreate the "
                         f"ledger from them with `benchlab collect --rebuild {results_dir}`, then run again.")


def built_apart_from_collector(build: Callable[[], list[Run]]) -> tuple[list[Run], bool]:
    """``build()`` with the cycle collector off, then every object there is moved to the
    collector's permanent generation (``gc.freeze``) before it is turned back on; whether it was.

    The plan is hundreds of thousands of objects that live as long as the sweep and are in no
    cycle. The collector's passes over them, a tenth of a second each at 100,000 runs, once for
    each of its generations, were a fifth of the time before the first launch and came back while
    the runs went. :meth:`Sweep.run` gives them back to the collector at its end (``gc.unfreeze``).
    Where something else froze objects already (a pre-forking server), the collector is left alone.
    """
    if gc.get_freeze_count():
        return build(), False
    was_on = gc.isenabled()
    gc.disable()
    try:
        runs = build()
        gc.freeze()
    finally:
        if was_on:
            gc.enable()
    return runs, True
