"""The Optuna side of a search: its study, stored in the results folder, and its samplers and pruners.

Where the study lives: ``results/<spec>/search/<name>/study.journal``, an Optuna
``JournalStorage`` over an append-only file of JSON lines (``AppendJournal``, built in
``_journal_class``). Why this one:

- it survives ``kill -9``: every change is one ``write()`` to a file opened with
  ``O_APPEND``, in the page cache as soon as the call returns, so a killed search loses at most
  a torn last line, which the next open cuts off; nothing is half-applied;
- it leaves no lock behind: Optuna's own file backend guards each write with a lock file that a
  killed process leaves in place (the next search waits out its grace period), and its SQLite
  (RDB) storage pays a synchronous commit per change, 8–20 ms here for each intermediate
  value a pruner is fed, hundreds per trial. One search at a time holds the study, by the
  ``flock`` of ``STUDY_LOCK`` (released by the kernel when its holder dies), so the file
  needs no lock of its own.
- like the ledger in WAL mode with ``synchronous=NORMAL``, only a crash of the machine itself
  (not of the process) can lose the last changes.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.errors import SearchError
from benchlab.json_types import JsonObject
from benchlab.names.extras import missing_extra

if TYPE_CHECKING:
    import optuna
    from optuna.distributions import BaseDistribution

    from benchlab.spec import Spec
    from benchlab.spec.search import Search

JOURNAL_FILE = "study.journal"
STUDY_LOCK = ".study.lock"
#: What a trial records about itself (Optuna user attributes).
RUNS_ATTR, FAILURE_ATTR, RETRY_OF_ATTR = "benchlab_runs", "benchlab_failure", "benchlab_retry_of"
SECTION_ATTR = "benchlab_search"


def import_optuna() -> Any:
    """Optuna, or the one-line hint that installs it."""
    try:
        import optuna
    except ImportError:
        raise missing_extra("optuna", "benchlab search") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the CLI says what happened, not Optuna's log
    return optuna


@functools.cache
def _journal_class() -> type:
    """``AppendJournal``, made on first use so that importing this module does not import Optuna."""
    from optuna.storages.journal import BaseJournalBackend

    class AppendJournal(BaseJournalBackend):
        """An Optuna journal backend over one append-only file (see the module's docstring)."""

        def __init__(self, path: Path, writable: bool = True) -> None:
            self.path = path
            self._logs: list[JsonObject] = []
            data = path.read_bytes() if path.exists() else b""
            end = data.rfind(b"\n") + 1
            for line in data[:end].splitlines():
                if line.strip():
                    self._logs.append(json.loads(line))
            self._fd = -1
            if not writable:
                return  # a reader (a report while the search runs): a torn last line is being written
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if end != len(data):
                os.ftruncate(self._fd, end)  # a torn last line: the write it began never returned

        def read_logs(self, log_number_from: int) -> Any:
            yield from self._logs[log_number_from:]

        def append_logs(self, logs: list[JsonObject]) -> None:
            # Optuna's journal operations: their fields are Optuna's, written as Optuna gives them.
            if self._fd < 0:
                raise OSError(f"{self.path} is open for reading only")
            data = b"".join(json.dumps(entry, separators=(",", ":")).encode() + b"\n" for entry in logs)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            self._logs.extend(logs)

        def close(self) -> None:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    return AppendJournal


def journal_storage(folder: Path, writable: bool = True) -> Any:
    """The study's storage in ``folder`` (an Optuna ``JournalStorage``); only the holder of
    ``STUDY_LOCK`` opens it ``writable``."""
    optuna = import_optuna()
    if writable:
        folder.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(_journal_class()(folder / JOURNAL_FILE, writable))


def read_study(folder: Path) -> optuna.Study:
    """The study kept in ``folder``, for reading (a report, a promotion), while a search may run."""
    optuna = import_optuna()
    if not (folder / JOURNAL_FILE).exists():
        raise SearchError(folder.name, f"{folder} holds no search study yet: run `benchlab search SPEC` first")
    storage = journal_storage(folder, writable=False)
    names = [s.study_name for s in storage.get_all_studies()]
    if len(names) != 1:
        raise SearchError(folder.name, f"{folder / JOURNAL_FILE} holds {len(names)} studies; expected one")
    return optuna.load_study(study_name=names[0], storage=storage)


def distributions(search: Search) -> dict[str, BaseDistribution]:
    """Each param's Optuna distribution."""
    optuna = import_optuna()
    d = optuna.distributions
    out: dict[str, BaseDistribution] = {}
    for name, space in search.space.items():
        if space.uniform is not None:
            out[name] = d.FloatDistribution(space.uniform[0], space.uniform[1])
        elif space.log_uniform is not None:
            out[name] = d.FloatDistribution(space.log_uniform[0], space.log_uniform[1], log=True)
        elif space.int_range is not None:
            out[name] = d.IntDistribution(space.int_range[0], space.int_range[1])
        else:
            assert space.choice is not None
            out[name] = d.CategoricalDistribution(space.choice)
    return out


def grid_size(search: Search) -> int | None:
    """How many points the grid sampler has (None: the space is not a grid)."""
    size = 1
    for space in search.space.values():
        values = space.grid_values()
        if values is None:
            return None
        size *= len(values)
    return size


def sampler_seed(search: Search, trials_before: int) -> int | None:
    """The seed the sampler starts from when the study already holds ``trials_before`` trials.

    A seeded sampler started again from its seed draws its first points again: a resumed
    search would ask for the params of the trials it began with (TPE's start-up trials are
    random ones). The seed of a resumed search is drawn from the spec's seed and the trials so
    far, so that each continuation is repeatable and none repeats an earlier one; a new study
    starts from the spec's seed itself."""
    seed = search.sampler_seed
    if seed is None or trials_before == 0:
        return seed
    import numpy as np

    return int(np.random.SeedSequence([seed, trials_before]).generate_state(1)[0])


def make_sampler(search: Search, trials_before: int = 0) -> Any:
    optuna = import_optuna()
    seed = sampler_seed(search, trials_before)
    if search.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if search.sampler == "grid":
        # The grid skips the points its study already holds: its own seed orders the rest.
        seed = search.sampler_seed
        space = {name: s.grid_values() for name, s in search.space.items()}

        class _Grid(optuna.samplers.GridSampler):  # type: ignore[misc, name-defined]
            # Optuna's grid stops `study.optimize` once every point was tried, which ask-and-tell
            # refuses (RuntimeError); the search stops by its budget, at most the grid's size.
            def after_trial(self, *args: Any) -> None:
                pass

        return _Grid(space, seed=seed)
    try:
        import cmaes  # noqa: F401 - Optuna's CMA-ES sampler imports it on first use
    except ImportError:
        raise missing_extra("cmaes", "the cmaes sampler", "search") from None
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def make_pruner(search: Search) -> Any:
    optuna = import_optuna()
    pruner = search.pruner
    if pruner.name == "median":
        # The first trials have nothing to be compared with: a few run to the end first.
        startup = pruner.startup_trials
        if startup is None:
            startup = min(5, max(1, search.trial_budget // 4))
        return optuna.pruners.MedianPruner(n_startup_trials=startup, n_warmup_steps=pruner.warmup_steps or 0)
    if pruner.name == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=pruner.min_steps if pruner.min_steps is not None else "auto",
            reduction_factor=pruner.reduction_factor if pruner.reduction_factor is not None else 4)
    return optuna.pruners.NopPruner()


def goal_of(spec: Spec) -> str:
    """The search metric's goal: the search section's, else the spec's for that metric, else max."""
    assert spec.search is not None
    if spec.search.metric.goal is not None:
        return spec.search.metric.goal
    named = next((m for m in spec.metrics.all if m.name == spec.search.metric.name), None)
    return named.goal if named is not None else "max"


def study_name(spec: Spec) -> str:
    assert spec.search is not None
    return f"{spec.name}:{spec.search.name}"


SUMMARY_ATTR = "benchlab_summary"


def section_key(search: Search) -> str:
    """What must stay the same for a study to continue: the space, metric, sampler, pruner,
    base config, tasks and seeds (the budget may grow or shrink)."""
    dump = search.model_dump(mode="json", by_alias=True, exclude={"budget"})
    dump["metric"].pop("reason", None)
    dump["metric"].pop("summary", None)  # checked on its own, with its own message
    return json.dumps(dump, sort_keys=True)


def open_study(spec: Spec, folder: Path, summary: str) -> optuna.Study:
    """The spec's study in ``folder``, created on first use; a study made by a different search
    section is refused (its trials would mix two questions)."""
    optuna = import_optuna()
    assert spec.search is not None
    search = spec.search
    storage = journal_storage(folder)
    name = study_name(spec)
    direction = "maximize" if goal_of(spec) == "max" else "minimize"
    study = optuna.create_study(storage=storage, study_name=name, direction=direction,
                                sampler=make_sampler(search), pruner=make_pruner(search), load_if_exists=True)
    key = section_key(search)
    recorded = study.user_attrs.get(SECTION_ATTR)
    if recorded is None:
        study.set_user_attr(SECTION_ATTR, key)
    elif recorded != key:
        raise SearchError(name, f"the study {name} in {folder} was made by another search section of the spec "
                                "(space, metric, sampler, pruner, base config, tasks or seeds differ); give the new "
                                "search its own `search.name`, or remove that folder to start over")
    _record_optuna(study, optuna.__version__, sampler_seed(search, 0))
    told = study.user_attrs.get(SUMMARY_ATTR)
    if told is None:
        study.set_user_attr(SUMMARY_ATTR, summary)
    elif told != summary:
        raise SearchError(name, f"the study {name} values its trials by the {told} of {search.metric.name}; "
                                f"--summary {summary} would mix two measures: keep --summary {told}, or give the "
                                "search its own `search.name`")
    if study.direction.name.lower() != direction:
        raise SearchError(name, f"the study {name} in {folder} {study.direction.name.lower()}s; the spec now asks "
                                f"to {direction}: give the search its own `search.name`")
    before = len(study.get_trials(deepcopy=False))
    if before:
        study.sampler = make_sampler(search, before)  # a continuation: not the first points again
    return study


OPTUNA_ATTR = "benchlab_optuna"


def sampler_settings(sampler: Any, seed: int | None = None) -> JsonObject:
    """The sampler's class and the settings it runs with, as its constructor names them (Optuna
    keeps most as ``_<name>``; one it keeps in another form is left out, and ``seed``, which
    Optuna keeps only as a random state, is the one benchlab gave it); a default that a new
    Optuna release changes shows here."""
    import inspect

    missing = object()
    settings: JsonObject = {"seed": seed}
    init = type(sampler).__init__
    for name in inspect.signature(init).parameters:
        if name in ("self", "seed", "args", "kwargs"):
            continue
        value = getattr(sampler, f"_{name}", getattr(sampler, name, missing))
        if value is missing:
            continue
        if isinstance(value, bool | int | float | str) or value is None:
            settings[name] = value
        else:
            settings[name] = type(value).__name__
    return {"sampler": type(sampler).__name__, "settings": settings}


def _record_optuna(study: optuna.Study, version: str, seed: int | None) -> None:
    """Keep, in the study, every Optuna version that ran it and the sampler settings of each:
    Optuna's defaults change between releases (version 5 changed the default sampler)."""
    recorded = list(study.user_attrs.get(OPTUNA_ATTR) or [])
    effective = {"version": version, **sampler_settings(study.sampler, seed)}
    if not recorded or recorded[-1] != effective:
        study.set_user_attr(OPTUNA_ATTR, [*recorded, effective])


def counted(study: optuna.Study) -> int:
    """Trials that count against the budget: completed and pruned ones."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def recover(study: optuna.Study) -> list[int]:
    """Fail the trials a search that died left running, with the reason, and ask each again
    (same params, queued first); returns their numbers.

    The new trial is queued before the old one is failed and names it (``benchlab_retry_of``),
    so that a crash between the two steps neither loses the re-ask nor makes it twice.
    """
    optuna = import_optuna()
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    queued = {t.user_attrs.get(RETRY_OF_ATTR) for t in trials}
    lost = [t for t in trials if t.state == TrialState.RUNNING]
    for t in lost:
        if t.number not in queued:
            study.enqueue_trial(t.params, user_attrs={RETRY_OF_ATTR: t.number}, skip_if_exists=False)
        # Optuna has no public handle on a trial by number but the one it hands out; the trial's
        # storage id is what Trial() takes.
        optuna.trial.Trial(study, t._trial_id).set_user_attr(
            FAILURE_ATTR, "the search running it stopped before it finished (killed); asked again")
        study.tell(t.number, state=TrialState.FAIL)
    return [t.number for t in lost]
