"""``benchlab run --until-decided`` driven from Python: one ordinary sweep per look, until no
comparison is open. Above the sweep (it makes each look's :class:`~benchlab.execute.sweep.Sweep`);
what a look plans, and how the state is replayed from the ledger, is
:mod:`benchlab.execute.sequential`'s, beneath it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlab.execute.events import SweepResult
from benchlab.execute.sequential import Design, SequentialState, all_runs, plan_runs, read_state
from benchlab.execute.sweep import Sweep
from benchlab.json_types import JsonObject
from benchlab.ledger import DB_NAME, SequentialRecord, Store
from benchlab.spec import Spec


@dataclass(frozen=True)
class UntilDecidedResult:
    """How :func:`run_until_decided` ended: where every comparison stands after its last look."""

    design: Design
    baseline: str | None
    state: SequentialState | None  # None when no look was taken (the first sweep was stopped)
    exit_code: int  # the worst of the looks' sweeps (0, 1), or the stopped sweep's own
    stopped: bool  # a sweep was asked to stop (a signal): no decision was reached

    def to_json(self) -> JsonObject:
        """The design and each pair's seeds and decision (``run --until-decided --json``)."""
        return {"design": self.design.to_json(), "baseline": self.baseline,
                "pairs": [p.to_json() for p in self.state.pairs] if self.state else []}


#: Runs one look's sweep: given the sweep and the state that asked for its runs (None before the
#: first look), gives back its result. The command line shows progress and handles signals here.
RunLook = Callable[[Sweep, SequentialState | None], SweepResult]


def _run_plainly(sweep: Sweep, state: SequentialState | None) -> SweepResult:
    return sweep.run()


def run_until_decided(spec: Spec, results_dir: Path | str, design: Design, *,
                      run_look: RunLook = _run_plainly, rerun_failed: bool = False,
                      max_failures: int | None = None, **sweep_options: Any) -> UntilDecidedResult:
    """``benchlab run --until-decided`` from Python: one ordinary :class:`~benchlab.execute.sweep.Sweep`
    per look, over the runs the open pairs need, until no open pair can take another look.

    Nothing of the design is stored as state: each look is replayed from the ledger's finished
    runs, so the same call continues after any interruption. After each look the ledger's
    ``sequential`` record says where each comparison stood (``benchlab status`` and the report
    read it, and a later plain sweep keeps the added seeds because of it). ``sweep_options``
    go to every look's ``Sweep`` (``jobs``, ``backend``, ``backend_options``, ``gpus``,
    ``allow_changed``, ``on_event``); ``rerun_failed`` grants a new retry budget at the first
    look only; ``max_failures`` stops after a look that reached it.
    """
    folder = Path(results_dir)
    runs = all_runs(spec, design)
    state = None
    if (folder / DB_NAME).exists():
        with Store.open(folder) as store:
            state = read_state(store, spec, design, runs)
    exit_code = 0
    planned: set[str] = set()
    while True:
        plan = plan_runs(spec, design, runs, state)
        ids = {r.run_id for r in plan}
        if state is not None and ids == planned:
            break  # no open pair can take another look: every one stopped, or its seeds failed
        planned = ids
        sweep = Sweep(spec, folder, rerun_failed=rerun_failed, max_failures=max_failures, runs=plan,
                      **sweep_options)
        rerun_failed = False  # a new retry budget once, not at every look
        result = run_look(sweep, state)
        exit_code = max(exit_code, result.exit_code)
        if result.stopped:
            return UntilDecidedResult(design, spec.baseline, state, result.exit_code, stopped=True)
        with Store.open(folder) as store:
            state = read_state(store, spec, design, runs)
            # For `benchlab status` and the report: where each comparison stood at the last look
            # (derived from the runs, not state the design depends on).
            store.set_sequential(SequentialRecord(design.record(), spec.baseline,
                                                  tuple(p.record() for p in state.pairs)))
        if max_failures is not None and result.failed >= max_failures:
            break
    return UntilDecidedResult(design, spec.baseline, state, exit_code, stopped=False)


__all__ = ["RunLook", "UntilDecidedResult", "run_until_decided"]
