"""Evaluate checkpoints as they appear: each new complete checkpoint folder becomes a config.

A trainer writes ``DIR/step-1000/``, ``DIR/step-2000/``, ... ; ``benchlab watch DIR
--spec eval.yaml`` turns each into a config cloned from the spec's first config
(its template), with the parameter ``checkpoint`` set to the folder's path and
the folder's name as the config's name, and runs the spec's tasks on it. Runs of
checkpoints already evaluated are skipped, as in any re-run.

A checkpoint is complete when its marker file exists (``--marker``), or, without
a marker, when its weights are there and consistent, and none of its files has
changed size or modification time for ``settle`` seconds. Weights are there and
consistent when the folder holds weight files (``*.safetensors``, ``*.bin``,
``*.pt``, ``*.pth``, ``*.ckpt``, ``*.gguf``) or an index of them, every shard
an index (``model.safetensors.index.json``) names exists, and every
safetensors file is as long as its own header says. A folder of a config and a
tokenizer whose weights are still to come is never evaluated.

A checkpoint whose evaluation failed is evaluated again once its files change
(the trainer rewrote it); one that succeeded is never evaluated again.

:class:`CheckpointWatch` is the whole loop (``benchlab watch`` parses its flags, calls it and
prints the :class:`WatchEvent` objects it reports): look, evaluate what is due in a sweep, write the
report, wait, until told to stop.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from benchlab.errors import Problem, SpecError, UserError
from benchlab.spec import Config, Spec

if TYPE_CHECKING:
    from benchlab.execute.events import SweepEvent, SweepResult
    from benchlab.execute.sweep import Sweep

_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")
# Each file's relative path, size and modification time.
Signature = tuple[tuple[str, int, int], ...]


def config_name(folder: Path) -> str:
    """A config name from a checkpoint folder's name (characters a name may not hold become '-')."""
    name = _SAFE.sub("-", folder.name).strip("-.")
    return name or "checkpoint"


def _signature(folder: Path) -> Signature:
    sig = []
    for path in sorted(folder.rglob("*")):
        try:
            st = path.stat()
        except OSError:
            continue
        if path.is_file():
            sig.append((str(path.relative_to(folder)), st.st_size, st.st_mtime_ns))
    return tuple(sig)


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")
# A safetensors header is JSON of a few KiB per tensor; more than this is not a header.
_MAX_HEADER = 100 * 2**20


def _safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file is not whole ('' never): shorter or longer than its header says."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            length = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 < length <= _MAX_HEADER:
                return f"{path.name}: no complete header yet"
            header = json.loads(f.read(length))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return f"{path.name}: no complete header yet"
    expected = 8 + length + int(end)
    if size != expected:
        return f"{path.name}: {size} of the {expected} bytes its header names"
    return None


def weights_problem(folder: Path) -> str | None:
    """Why ``folder``'s weights are not complete and consistent (None when they are)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    indexes = [p for p in files if p.name.endswith(".index.json")]
    weights = [p for p in files if p.suffix in WEIGHT_SUFFIXES]
    if not weights and not indexes:
        return "no weights yet"
    for index in indexes:
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return f"{index.name}: not a complete index yet"
        missing = [s for s in shards if not (index.parent / s).is_file()]
        if missing:
            return f"{index.name} names {len(missing)} shard(s) not there yet: {', '.join(missing[:3])}"
    for path in weights:
        if path.suffix == ".safetensors":
            problem = _safetensors_problem(path)
            if problem:
                return problem
    return None


@dataclass
class CheckpointWatcher:
    """Finds checkpoint folders under ``root`` that are complete, and decides which to evaluate."""

    root: Path
    marker: str | None = None
    settle: float = 30.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[Path, tuple[Signature, float]] = field(default_factory=dict)
    #: Why each incomplete folder is not complete, as of the last look.
    waiting: dict[Path, str] = field(default_factory=dict)
    # folder -> (its signature when it was evaluated, whether that evaluation failed)
    _evaluated: dict[Path, tuple[Signature, bool]] = field(default_factory=dict)
    _pending: dict[Path, Signature] = field(default_factory=dict)

    @property
    def rule(self) -> str:
        """When a folder counts as complete, in words."""
        if self.marker:
            return f"complete when {self.marker} appears"
        return f"complete when its weights are whole and unchanged for {self.settle:g}s"

    def complete(self) -> list[Path]:
        """Every complete checkpoint folder now, oldest name first (natural order of step numbers)."""
        if not self.root.is_dir():
            raise UserError(f"{self.root}: no such folder to watch")
        done = []
        self.waiting = {}
        now = self.clock()
        for folder in sorted((p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")),
                             key=_natural):
            if self.marker is not None:
                if (folder / self.marker).exists():
                    done.append(folder)
                else:
                    self.waiting[folder] = f"no {self.marker} yet"
                continue
            problem = weights_problem(folder)
            if problem:
                self.waiting[folder] = problem
                self._seen.pop(folder, None)
                continue
            sig = _signature(folder)
            previous = self._seen.get(folder)
            if previous is None or previous[0] != sig:
                self._seen[folder] = (sig, now)
                if self.settle > 0:
                    self.waiting[folder] = f"files changed in the last {self.settle:g}s"
                    continue
            if now - self._seen[folder][1] >= self.settle:
                done.append(folder)
            else:
                self.waiting[folder] = f"files changed in the last {self.settle:g}s"
        return done

    def due(self, complete: list[Path]) -> list[Path]:
        """Of the ``complete`` folders, those to evaluate now: never evaluated, or failed and changed since."""
        due = []
        for folder in complete:
            before = self._evaluated.get(folder)
            now = _signature(folder)
            if before is None or (before[1] and before[0] != now):
                due.append(folder)
                # What is evaluated is the folder as it is now: a change during the evaluation
                # is a change after it.
                self._pending[folder] = now
        return due

    def record(self, folder: Path, failed: bool) -> None:
        """``folder``, as :meth:`due` found it, was evaluated; ``failed`` when any of its runs failed."""
        evaluated = self._pending.pop(folder) if folder in self._pending else _signature(folder)
        self._evaluated[folder] = (evaluated, failed)


def failed_checkpoints(checkpoints: list[Path], failed_runs: list[str]) -> set[Path]:
    """The folders of ``checkpoints`` with a failed run, from run names ``task/config/sN``."""
    names = checkpoint_names(checkpoints)
    failed_configs = {name.rsplit("/", 2)[-2] for name in failed_runs if name.count("/") >= 2}
    return {folder for folder in checkpoints if names[folder] in failed_configs}


def checkpoint_names(checkpoints: list[Path]) -> dict[Path, str]:
    """Each folder's config name, made unique in order (a clash gets '_' appended)."""
    names: dict[Path, str] = {}
    taken: set[str] = set()
    for folder in checkpoints:
        name = config_name(folder)
        while name in taken:
            name += "_"
        taken.add(name)
        names[folder] = name
    return names


def _natural(path: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name)]


def spec_for_checkpoints(spec: Spec, checkpoints: list[Path], only: set[Path] | None = None) -> Spec:
    """The spec with one config per checkpoint, cloned from its first config (only those of
    ``only`` when given, named as among all ``checkpoints``)."""
    template = spec.configs[0]
    if "checkpoint" not in template.params:
        where = str(spec.path) if spec.path else "<spec>"
        raise SpecError([Problem(where, None, "configs[0].params",
                                 "benchlab watch needs a 'checkpoint' param on the first config "
                                 "(the template); each checkpoint folder fills it in")])
    configs: list[Config] = []
    for folder, name in checkpoint_names(checkpoints).items():
        if only is not None and folder not in only:
            continue
        # A copy of the template, so that what it sets (command, resources) stays set.
        configs.append(template.model_copy(update={
            "name": name, "params": {**template.params, "checkpoint": str(folder.resolve())},
            "description": f"checkpoint {folder}",
        }))
    baseline = configs[0].name if configs else None
    clone = spec.model_copy(update={"configs": configs, "baseline": baseline})
    clone.path, clone.overrides = spec.path, spec.overrides
    return clone


class WatchEventKind(StrEnum):
    """The kinds of :class:`WatchEvent`."""

    #: ``checkpoints`` holds one folder that is not complete yet; ``why`` says why. Told once
    #: per reason: a folder still waiting for the same reason is not told again.
    WAITING = "waiting"
    #: ``checkpoints`` are complete and were never evaluated: a sweep evaluates them next.
    NEW = "new"
    #: ``checkpoints`` failed their evaluation and changed since: their failed runs run again.
    AGAIN = "again"
    #: The report of the results folder was written to ``report`` (its Markdown file).
    REPORT = "report"


@dataclass(frozen=True)
class WatchEvent:
    """Something a :class:`CheckpointWatch` did or found (see :class:`WatchEventKind`)."""

    kind: WatchEventKind
    checkpoints: tuple[Path, ...] = ()
    why: str = ""
    report: Path | None = None


@dataclass(frozen=True)
class WatchResult:
    """How a watch ended: the checkpoints it evaluated, and the exit code of the command:
    130 when it was stopped, else the worst of its sweeps' codes, and 1 when a run failed."""

    evaluated: tuple[Path, ...]
    exit_code: int
    stopped: bool


def _run(sweep: Sweep) -> SweepResult:
    return sweep.run()


class CheckpointWatch:
    """Evaluate the complete checkpoints under ``directory`` on ``spec``'s tasks, as they appear.

    Each look (every ``interval`` seconds) finds the complete folders (``marker``/``settle``: see
    :class:`CheckpointWatcher`); when some are due, a checkpoint rewritten since its evaluation
    failed has its failed runs run again first, on a spec of those checkpoints alone; then one
    sweep of the whole spec, one config per complete checkpoint, runs what is not done yet
    (recorded last, so that the report covers every checkpoint), and the report is written when
    any run is done. ``jobs`` goes to each :class:`~benchlab.execute.sweep.Sweep`, whose events
    go to ``on_sweep_event``; ``run_sweep`` runs each sweep (the command line shows its progress
    around it) and returns its result. :meth:`run` returns after one look with ``once``, after
    ``max_checkpoints`` were evaluated, or once :meth:`request_stop` was called (from a signal
    handler, say), which also stops the sweep under way. Raises :class:`SpecError` at once when
    the spec's first config, the template, has no ``checkpoint`` param.
    """

    def __init__(self, spec: Spec, directory: Path, results: Path, *, marker: str | None = None,
                 settle: float = 30.0, interval: float = 10.0, jobs: int | None = None, once: bool = False,
                 max_checkpoints: int | None = None, on_event: Callable[[WatchEvent], None] | None = None,
                 on_sweep_event: Callable[[SweepEvent], None] | None = None,
                 run_sweep: Callable[[Sweep], SweepResult] = _run,
                 write_report: Callable[[Path], Path] | None = None):
        """``write_report`` writes the report of a results folder and returns its Markdown file
        [default: :func:`benchlab.report.write_report`'s]."""
        spec_for_checkpoints(spec, [])  # checks the template before waiting for anything
        self.spec = spec
        self.results = results
        self.watcher = CheckpointWatcher(directory, marker=marker, settle=settle)
        self.interval = interval
        self.jobs = jobs
        self.once = once
        self.max_checkpoints = max_checkpoints
        self.on_event = on_event or (lambda event: None)
        self.on_sweep_event = on_sweep_event
        self.run_sweep = run_sweep
        self.write_report = write_report or _write_report
        self._stop = threading.Event()
        self._current: Sweep | None = None

    def request_stop(self) -> None:
        """Stop at once: the sweep under way stops cleanly, and no look follows (safe from a
        signal handler)."""
        self._stop.set()
        if self._current is not None:
            self._current.request_stop()

    def run(self) -> WatchResult:
        """Look, evaluate what is due, wait; until told to stop (see the class)."""
        evaluated: set[Path] = set()
        waiting: dict[Path, str] = {}
        code = 0
        while not self._stop.is_set():
            ready = self.watcher.complete()
            due = self.watcher.due(ready)
            for ckpt, why in self.watcher.waiting.items():
                if waiting.get(ckpt) != why:
                    self.on_event(WatchEvent(WatchEventKind.WAITING, (ckpt,), why))
            waiting = dict(self.watcher.waiting)
            if due:
                sweep_code = self._evaluate(ready, due, evaluated)
                if sweep_code is None:
                    return WatchResult(tuple(sorted(evaluated, key=_natural)), 130, True)
                code = max(code, sweep_code)
            if self.once or (self.max_checkpoints is not None and len(evaluated) >= self.max_checkpoints):
                break
            self._stop.wait(self.interval)
        stopped = self._stop.is_set()
        return WatchResult(tuple(sorted(evaluated, key=_natural)), 130 if stopped and code == 0 else code,
                           stopped)

    def _evaluate(self, ready: list[Path], due: list[Path], evaluated: set[Path]) -> int | None:
        """Evaluate the ``due`` checkpoints among the ``ready`` ones; the exit code, None when stopped."""
        from benchlab.execute.sweep import Sweep

        again = [p for p in due if p in evaluated]
        fresh = [p for p in due if p not in evaluated]
        if fresh:
            self.on_event(WatchEvent(WatchEventKind.NEW, tuple(fresh)))
        if again:
            self.on_event(WatchEvent(WatchEventKind.AGAIN, tuple(again)))
        sweeps = [(spec_for_checkpoints(self.spec, ready, only=set(again)), True)] if again else []
        sweeps.append((spec_for_checkpoints(self.spec, ready), False))
        failed_runs: list[str] = []
        for run_spec, rerun_failed in sweeps:
            # The watcher has judged these checkpoints whole by its own rule (a marker, say).
            sweep = Sweep(run_spec, self.results, jobs=self.jobs, on_event=self.on_sweep_event,
                          rerun_failed=rerun_failed, check_checkpoints=False)
            self._current = sweep
            if self._stop.is_set():  # asked to stop before this sweep could hear it
                sweep.request_stop()
            try:
                result = self.run_sweep(sweep)
            finally:
                self._current = None
            if result.stopped:
                return None
            failed_runs += result.failed_runs
        failed = failed_checkpoints(ready, failed_runs)
        for ckpt in due:
            self.watcher.record(ckpt, ckpt in failed)
        evaluated.update(due)
        if result.completed + result.skipped:
            self.on_event(WatchEvent(WatchEventKind.REPORT, report=self.write_report(self.results)))
        return max(result.exit_code, 1 if failed_runs else 0)


def _write_report(folder: Path) -> Path:
    # Imported here: the report loads pandas and matplotlib, which watching alone does not need.
    from benchlab.report import write_report

    return write_report(folder).markdown
