"""``benchlab.run``: the library call behind ``benchlab run``, for notebooks and scripts.

The command line and a Python caller run the same :class:`~benchlab.execute.sweep.Sweep` with the
same defaults (results folder, jobs, backend, report at the end); the CLI only adds its progress
display and turns the outcome into an exit code. What a run of the plan became is read back from
the ledger, so a resumed sweep lists the runs an earlier invocation finished too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlab.execute.base import Backend, BackendOptions
    from benchlab.execute.events import SweepEvent, SweepResult
    from benchlab.execute.sweep import Sweep
    from benchlab.json_types import ConfigValues
    from benchlab.plan import Run
    from benchlab.spec import Spec


@dataclass(frozen=True)
class RunRef:
    """One run of the plan and the state the ledger gives it after the sweep."""

    task: str
    config: str
    seed: int
    run_id: str
    status: str

    @property
    def name(self) -> str:
        """The run's coordinates, as every command prints them: ``task/config/s<seed>``."""
        return f"{self.task}/{self.config}/s{self.seed}"


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did: the results folder and each run of the plan by its state.

    ``completed`` and ``failed`` hold every run of the plan in that state after this call, whether
    this call or an earlier one ran it (``benchlab run`` resumes); ``exit_code`` is the one the
    command would exit with (0 all good, 1 some runs failed, 130 stopped)."""

    folder: Path
    completed: tuple[RunRef, ...]
    failed: tuple[RunRef, ...]
    pending: tuple[RunRef, ...]
    exit_code: int
    stopped: bool
    wall_s: float
    report: Path | None = None
    #: The field's evaluation rules the spec breaks (``evalrules.rule_warnings``, what ``benchlab
    #: validate`` and ``benchlab run`` print, the same text), then what the sweep warned of.
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def __repr__(self) -> str:
        return (f"RunResult(folder={str(self.folder)!r}, completed={len(self.completed)}, "
                f"failed={len(self.failed)}, pending={len(self.pending)}, exit_code={self.exit_code})")

    def _repr_html_(self) -> str:
        """The report's Summary and Results sections, as the report writes them (Jupyter)."""
        from benchlab.report.notebook import results_html

        head = (f"<p><b>{len(self.completed)}</b> completed, <b>{len(self.failed)}</b> failed, "
                f"<b>{len(self.pending)}</b> not run; results in <code>{_escape(str(self.folder))}</code></p>")
        return head + results_html(self.folder)


def _escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def run(
    spec: Spec | Path | str,
    sets: Sequence[str] | ConfigValues | None = None,
    results: Path | str | None = None,
    *,
    jobs: int | None = None,
    backend: str | Backend | None = None,
    backend_options: BackendOptions | None = None,
    gpus: str | None = None,
    rerun_failed: bool = False,
    rerun_all: bool = False,
    max_failures: int | None = None,
    allow_changed: bool = False,
    report: bool = True,
    on_event: Callable[[SweepEvent], None] | None = None,
    on_sweep: Callable[[Sweep], SweepResult] | None = None,
) -> RunResult:
    """Run every (task, config, seed) of ``spec`` not done yet, as ``benchlab run`` does.

    Args:
        spec: a spec file's path, or a :class:`~benchlab.spec.Spec` already loaded.
        sets: spec variable overrides, as ``-s`` takes them (``["lr=0.1"]``) or as a mapping.
        results: the results folder [default: ``results/<benchmark>`` beside the spec file].
        jobs: runs at once [default: CPU cores / CPUs per run].
        backend: ``local``, ``ray``, ``slurm``, ... or a backend object [default: the spec's].
        backend_options: the backend's typed options (``RayOptions``, ``SlurmOptions``, ...).
        gpus: ``auto``, ``none`` or indices such as ``"0,3"``.
        report: write the report into the results folder at the end (as the command does).
        on_event: called with each :class:`~benchlab.execute.events.SweepEvent` (progress).
        on_sweep: runs the sweep it is given and returns its result [default: ``sweep.run()``]; the
            command line uses it to put its signal handlers and progress display around the sweep.

    Raises the errors of :mod:`benchlab.errors` the command turns into exit code 2 (a bad spec,
    a changed benchmark without ``allow_changed``, ...). Failed runs do not raise: they are in
    ``failed``. The evaluation rules the spec breaks are in the result's ``warnings``.
    """
    from benchlab.execute.sweep import Sweep
    from benchlab.spec import load_spec

    loaded = spec if not isinstance(spec, str | Path) else load_spec(
        spec, dict(sets) if isinstance(sets, Mapping) else list(sets or []))
    folder = Path(results) if results is not None else default_results(loaded)
    if gpus is not None:
        from benchlab.execute.placement import parse_gpus

        parse_gpus(gpus)
    sweep = Sweep(loaded, folder, jobs=jobs, rerun_failed=rerun_failed, rerun_all=rerun_all,
                  backend=backend, on_event=on_event, max_failures=max_failures, gpus=gpus,
                  backend_options=backend_options, allow_changed=allow_changed)
    # The plan the sweep runs, expanded once: its warnings before it runs (on_sweep may show them),
    # and the runs the result lists after.
    planned, rules = sweep.planned(), sweep.rule_warnings()
    outcome = on_sweep(sweep) if on_sweep is not None else sweep.run()
    written = None
    if report and outcome.completed + outcome.skipped > 0 and not outcome.stopped:
        from benchlab.report import write_report

        written = write_report(folder).markdown
    return _result(planned, folder, outcome, written, rules)


def default_results(spec: Spec) -> Path:
    """``results/<benchmark>`` in the spec file's folder: one place per spec, whatever the working
    directory (a spec built in memory has no folder: then under the working directory)."""
    base = Path(spec.path).parent if spec.path is not None else Path(".")
    return base / "results" / spec.name


def _result(runs: list[Run], folder: Path, outcome: SweepResult, report: Path | None,
            rules: list[str]) -> RunResult:
    from benchlab.ledger import COMPLETED, DB_NAME, FAILED, PENDING, Store

    statuses: dict[str, str] = {}
    if (folder / DB_NAME).exists():
        with Store.open(folder) as store:
            statuses = store.statuses(ids=[r.run_id for r in runs])
    refs = [RunRef(r.task, r.config, r.seed, r.run_id, statuses.get(r.run_id, PENDING.value)) for r in runs]
    return RunResult(
        folder=folder,
        completed=tuple(r for r in refs if r.status == COMPLETED.value),
        failed=tuple(r for r in refs if r.status == FAILED.value),
        pending=tuple(r for r in refs if r.status not in (COMPLETED.value, FAILED.value)),
        exit_code=outcome.exit_code,
        stopped=outcome.stopped,
        wall_s=outcome.wall_s,
        report=report,
        warnings=(*rules, *outcome.warnings),
    )
