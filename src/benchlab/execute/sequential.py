"""``benchlab run --until-decided``: seeds added only where a comparison with the baseline is open.

This module is beneath the sweep: the design, its replay from the ledger, the runs of each look
and the added runs a later plain sweep keeps (:func:`kept_runs`, which the sweep's opening
calls). What drives one sweep per look is :mod:`benchlab.execute.until_decided`, above the sweep.

The state of the design is never stored: it is replayed from the ledger's finished runs each
time (:func:`replay`). Look ``k`` of a (task, config) is taken once every run of its first
``n_k`` seeds, on both sides, has finished; its decision comes from
:func:`benchlab.stats.sequential.decide_look`. Replaying the same results gives the same
decisions, so a sweep killed at any moment continues, when run again, exactly where it stopped.

The seeds after the spec's are the next integers after its largest seed, in order; a
comparison at look ``k`` uses the first ``n_k`` seeds of that sequence, the same seeds for the
candidate and the baseline (the baseline gets a seed wherever any candidate of the task still
needs it).

Which method decides depends on what is known of the primary metric. With a range (declared
in the spec, per metric or per task, or known, like an accuracy's [0, 1]; see
:mod:`benchlab.stats.ranges`) each pair is decided by betting confidence sequences
(:func:`benchlab.stats.sequential.decide_betting`), whose error rate holds for any distribution
in the range. Without one, by the group-sequential t design, whose guarantee rests on the paired
differences being close to normal: the design says so (``guarantee``), and so does the run.

The error rate ``alpha`` is the familywise one, over every (task, candidate) pair of the sweep:
each pair's boundaries (or its betting threshold ``2 pairs / alpha``) are computed at
``alpha / pairs`` (Bonferroni), so that the intervals of all pairs hold at every look at once
with probability ``1 − alpha``, and the chance that any decision of the sweep is wrong stays at
most ``alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchlab.errors import UserError
from benchlab.json_types import JsonObject
from benchlab.ledger import (
    COMPLETED,
    DB_NAME,
    FAILED,
    SequentialDesignRecord,
    SequentialPairRecord,
    Store,
)
from benchlab.plan import Run, expand
from benchlab.spec import Spec
from benchlab.stats import sequential as seq

#: Why a comparison stopped getting seeds (or that it has not).
BETTER, WORSE, EQUIVALENT, MAX_SEEDS, DEGENERATE, NO_DATA, OPEN = (
    "better", "worse", "equivalent", "max-seeds", "degenerate", "no-data", "open")


@dataclass(frozen=True)
class Design:
    """The planned looks of a sequential sweep and their boundaries."""

    seeds: list[int]  # every seed the design may use, the spec's first
    sizes: list[int]  # paired seeds at each look
    bounds: list[float]  # two-sided z-scale critical values, one per look, at pair_alpha
    alpha: float  # familywise, over every pair
    spending: str
    margin: float | None
    pairs: int = 1  # (task, candidate) comparisons that share alpha
    #: Per task, the width ``b − a`` of the primary metric's range there (betting), or None
    #: (no range known: the group-sequential t design). Empty: every task without a range.
    widths: dict[str, float | None] = field(default_factory=dict)

    @property
    def pair_alpha(self) -> float:
        """Each pair's share of ``alpha`` (Bonferroni): what its boundaries spend."""
        return self.alpha / self.pairs

    def method_of(self, task: str) -> str:
        """:data:`~benchlab.stats.sequential.BETTING` where the task's range is known, else
        :data:`~benchlab.stats.sequential.NORMAL_THEORY`."""
        return seq.BETTING if self.widths.get(task) is not None else seq.NORMAL_THEORY

    @property
    def method(self) -> str:
        """The method of every task, or ``"mixed"`` when some tasks have a range and some not."""
        methods = {self.method_of(t) for t in self.widths} or {seq.NORMAL_THEORY}
        return methods.pop() if len(methods) == 1 else "mixed"

    @property
    def guarantee(self) -> str:
        """What the error guarantee rests on, in words (for the run's output and ``--json``)."""
        if self.method != "mixed":
            return seq.GUARANTEES[self.method]
        unbounded = [t for t in self.widths if self.widths[t] is None]
        return (f"{seq.GUARANTEES[seq.BETTING]}; but task(s) {', '.join(unbounded)} have no range for the "
                f"primary metric and use {seq.GUARANTEES[seq.NORMAL_THEORY]}")

    def record(self) -> SequentialDesignRecord:
        """The design as the ledger and ``--json`` keep it."""
        return SequentialDesignRecord(
            alpha=self.alpha, pairs=self.pairs, pair_alpha=self.pair_alpha, correction="bonferroni",
            spending=self.spending, margin=self.margin, looks=tuple(self.sizes),
            bounds=tuple(round(b, 6) if math.isfinite(b) else None for b in self.bounds),
            method=self.method, guarantee=self.guarantee)

    def to_json(self) -> JsonObject:
        return self.record().to_json()


@dataclass(frozen=True)
class PairState:
    """Where one candidate's comparison with the baseline on one task stands."""

    task: str
    config: str
    seeds: int  # paired seeds of the last look taken (0 before the first)
    wanted: int  # seeds it needs in the plan now: its next look's, or its last look's once stopped
    status: str  # BETTER, WORSE, EQUIVALENT, MAX_SEEDS, DEGENERATE, NO_DATA or OPEN
    mean: float | None = None  # mean paired difference, candidate − baseline, at the last look
    low: float | None = None  # repeated confidence interval at the last look
    high: float | None = None
    failed: int = 0  # seeds of the last look with no value on either side

    @property
    def stopped(self) -> bool:
        return self.status != OPEN

    @property
    def reason(self) -> str:
        """Why it got the seeds it got, in words."""
        return {BETTER: "decided: better than the baseline", WORSE: "decided: worse than the baseline",
                EQUIVALENT: "decided: equivalent to the baseline (within the margin)",
                MAX_SEEDS: "undecided at --max-seeds",
                DEGENERATE: "stopped: paired differences have no spread (identical runs?); no verdict",
                NO_DATA: "stopped: no seed has a value on both sides (failed runs); no verdict",
                OPEN: "open: more seeds running"}[self.status]

    def record(self) -> SequentialPairRecord:
        """The pair's state as the ledger and ``--json`` keep it."""
        return SequentialPairRecord(self.task, self.config, self.seeds, self.status, self.reason, self.mean,
                                    (self.low, self.high), self.failed)

    def to_json(self) -> JsonObject:
        return self.record().to_json()


@dataclass
class SequentialState:
    """Every comparison's state, and how many seeds each (task, config) needs in the plan."""

    pairs: list[PairState]
    wanted: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def open(self) -> list[PairState]:
        return [p for p in self.pairs if not p.stopped]


def make_design(spec: Spec, max_seeds: int | None = None, batch: int | None = None, alpha: float = 0.05,
                spending: str = "obrien-fleming", margin: float | None = None) -> Design:
    """The looks of ``spec`` with ``batch`` seeds added at a time up to ``max_seeds`` (``UserError``
    where that cannot work: no baseline, fewer than 2 seeds, a cap below the spec's seeds, an
    unknown ``spending``, ``alpha`` outside (0, 1), ``batch`` below 1), the same for the CLI and
    a Python caller.
    ``max_seeds`` defaults to 4 × the spec's seeds, ``batch`` to the spec's seeds.

    ``alpha`` is familywise: the boundaries of each of the ``tasks × candidates`` pairs spend
    ``alpha / pairs`` (module docstring)."""
    if spec.baseline is None:
        raise UserError("--until-decided compares every config with the baseline, but the spec names "
                        "none; add `baseline: <config>` to it")
    if len(spec.configs) < 2:
        raise UserError("--until-decided needs a config to compare with the baseline; the spec has one config")
    first = len(spec.seed_list)
    max_seeds = 4 * first if max_seeds is None else max_seeds
    batch = first if batch is None else batch
    if first < 2:
        raise UserError(f"--until-decided needs at least 2 seeds in the spec to estimate a spread, "
                        f"it has {first}")
    if max_seeds < first:
        raise UserError(f"--max-seeds {max_seeds} is below the spec's {first} seeds")
    if margin is not None and not margin > 0:
        raise UserError(f"--margin must be positive, got {margin}")
    if spending not in seq.SPENDINGS:
        raise UserError(f"--spending {spending}: expected one of {', '.join(seq.SPENDINGS)}")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha must be between 0 and 1, got {alpha}")
    if batch < 1:
        raise UserError(f"--batch must be at least 1, got {batch}")
    start = max(spec.seed_list) + 1
    seeds = [*spec.seed_list, *range(start, start + max_seeds - first)]
    sizes = seq.look_sizes(first, batch, max_seeds)
    pairs = len(spec.tasks) * (len(spec.configs) - 1)
    bounds = seq.boundaries(np.asarray(sizes, dtype=float) / max_seeds, alpha / pairs, spending)
    return Design(seeds, sizes, [float(b) for b in bounds], alpha, spending, margin, pairs, primary_widths(spec))


def primary_widths(spec: Spec) -> dict[str, float | None]:
    """Per task, the width of the primary metric's range there: the task's own ``range`` for it,
    else the metric's declared one, else one known from its source (an accuracy), else None."""
    from benchlab.stats.ranges import metric_ranges

    ranges = metric_ranges(spec.model_dump(mode="json", by_alias=True))
    name = spec.metrics.primary.name
    out: dict[str, float | None] = {}
    for task in spec.tasks:
        bounds = ranges.get(f"{task.name}/{name}", ranges.get(name))
        out[task.name] = None if bounds is None else float(bounds[1] - bounds[0])
    return out


def all_runs(spec: Spec, design: Design) -> list[Run]:
    """Every run the design may ask for (each (task, config) over every seed of the design)."""
    return expand(spec.model_copy(update={"seeds": design.seeds}))


def replay(spec: Spec, design: Design, runs: list[Run], statuses: dict[str, str],
           values: dict[str, float]) -> SequentialState:
    """The design's state from finished runs: ``statuses`` and primary-metric ``values`` by run id.

    A completed run without a finite value, and a failed run, count as finished with no value
    (that seed drops out of the pair, and ``failed`` says so).
    """
    index = {s: i for i, s in enumerate(design.seeds)}
    by_pair: dict[tuple[str, str], np.ndarray] = {}
    done: dict[tuple[str, str], np.ndarray] = {}
    for r in runs:
        key = (r.task, r.config)
        if key not in by_pair:
            by_pair[key] = np.full(len(design.seeds), np.nan)
            done[key] = np.zeros(len(design.seeds), dtype=bool)
        status = statuses.get(r.run_id)
        done[key][index[r.seed]] = status in (COMPLETED, FAILED)
        if status == COMPLETED and r.run_id in values:
            by_pair[key][index[r.seed]] = values[r.run_id]
    sign = 1.0 if spec.metrics.primary.goal == "max" else -1.0
    base = spec.baseline
    assert base is not None
    first = design.sizes[0]
    state = SequentialState(pairs=[])
    for task in spec.tasks:
        need_base = first
        for cfg in spec.configs:
            if cfg.name == base:
                continue
            pair = _replay_pair(task.name, cfg.name, by_pair[(task.name, base)], by_pair[(task.name, cfg.name)],
                                done[(task.name, base)] & done[(task.name, cfg.name)], design, sign)
            state.pairs.append(pair)
            state.wanted[(task.name, cfg.name)] = pair.wanted
            if not pair.stopped:
                need_base = max(need_base, pair.wanted)
            else:
                need_base = max(need_base, pair.seeds)
        state.wanted[(task.name, base)] = need_base
    return state


def _replay_pair(task: str, config: str, base: np.ndarray, cand: np.ndarray, done: np.ndarray,
                 design: Design, sign: float) -> PairState:
    last = PairState(task, config, 0, design.sizes[0], OPEN)
    for k, (size, bound) in enumerate(zip(design.sizes, design.bounds, strict=True)):
        if not done[:size].all():
            return PairState(task, config, last.seeds, size, OPEN, last.mean, last.low, last.high, last.failed)
        diffs = sign * (cand[:size] - base[:size])
        magnitude = np.nanmax(np.abs(np.concatenate([base[:size], cand[:size]])), initial=0.0)
        width = design.widths.get(task)
        if width is not None:
            try:
                look = seq.decide_betting(diffs[None, :], width, design.pair_alpha, design.margin,
                                          np.array([magnitude]))
            except ValueError as exc:  # a value outside the declared range voids the guarantee
                raise UserError(f"{task}: {config} vs the baseline: {exc}; fix the spec's range for the "
                                "primary metric") from None
        else:
            look = seq.decide_look(diffs[None, :], bound, design.margin, np.array([magnitude]))
        code = int(look.decision[0])
        # Report the difference in the metric's own direction (candidate − baseline).
        mean, low, high = (sign * float(x) if np.isfinite(x) else None
                           for x in (look.mean[0], look.low[0], look.high[0]))
        if sign < 0 and low is not None and high is not None:
            low, high = high, low
        status = {seq.POSITIVE: BETTER, seq.NEGATIVE: WORSE, seq.EQUIVALENT: EQUIVALENT,
                  seq.DEGENERATE: DEGENERATE}.get(code, OPEN)
        if status == OPEN and int(look.n[0]) == 0:
            status = NO_DATA  # every seed failed on one side: more seeds of it would fail too
        elif status == OPEN and k == len(design.sizes) - 1:
            status = MAX_SEEDS
        failed = size - int(look.n[0])
        last = PairState(task, config, size, size, status, mean, low, high, failed)
        if status != OPEN:
            return last
    return last


def read_state(store: Store, spec: Spec, design: Design, runs: list[Run]) -> SequentialState:
    """:func:`replay` over what the ledger holds now."""
    primary = spec.metrics.primary.name
    wanted = {r.run_id for r in runs}
    values = {rid: v for rid, _t, _c, _s, metric, v in store.metric_rows(current_only=False)
              if metric == primary and rid in wanted and v is not None and math.isfinite(v)}
    return replay(spec, design, runs, store.statuses(), values)


def kept_runs(store: Store, spec: Spec) -> list[Run]:
    """The finished runs a ``--until-decided`` sweep added beyond ``spec``'s seeds, for a plain
    ``benchlab run`` of the same spec to keep in its plan.

    Without them the plain run's plan (the spec's seeds only) would take the extra seeds out of
    the results table, and every number and verdict built on them would silently change. Kept:
    runs of the plan on record whose seed is past the spec's, defined as the spec defines that
    (task, config, seed) now (same run id), and finished (completed or failed, so failures stay
    counted); none when the ledger holds no sequential design.
    """
    if store.sequential() is None:
        return []
    own = set(spec.seed_list)
    planned = {r.run_id: r for r in store.runs() if r.seed not in own and r.status in (COMPLETED, FAILED)}
    if not planned:
        return []
    seeds = sorted({r.seed for r in planned.values()})
    return [r for r in expand(spec.model_copy(update={"seeds": seeds})) if r.run_id in planned]


def plan_runs(spec: Spec, design: Design, runs: list[Run], state: SequentialState | None) -> list[Run]:
    """The runs of the next batch's sweep: the spec's seeds everywhere (before any look: ``state``
    None), then each (task, config) up to the seeds it needs."""
    position = {s: i for i, s in enumerate(design.seeds)}
    first = design.sizes[0]
    if state is None:
        return [r for r in runs if position[r.seed] < first]
    return [r for r in runs if position[r.seed] < state.wanted.get((r.task, r.config), first)]


def next_look(spec: Spec, results_dir: Path | str, design: Design) -> list[Run]:
    """The runs the next look's sweep plans over ``results_dir`` (what ``--dry-run`` lists): the
    spec's seeds before any look, then each (task, config) up to the seeds it needs. Reads the
    ledger, writes nothing."""
    runs = all_runs(spec, design)
    state = None
    if (Path(results_dir) / DB_NAME).exists():
        with Store.open(Path(results_dir)) as store:
            state = read_state(store, spec, design, runs)
    return plan_runs(spec, design, runs, state)


__all__ = ["BETTER", "DEGENERATE", "EQUIVALENT", "MAX_SEEDS", "NO_DATA", "OPEN", "WORSE", "Design", "PairState",
           "SequentialState", "all_runs", "kept_runs", "make_design", "next_look", "plan_runs", "read_state",
           "replay"]
