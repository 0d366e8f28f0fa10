"""Across-task aggregates, after Agarwal et al. (2021),
"Deep Reinforcement Learning at the Edge of the Statistical Precipice".

Scores are arrays of shape ``(runs, tasks)``, normalised so that 0 is a task's
``low`` reference and 1 its ``high`` reference (higher is better after
normalisation, whatever the metric's goal). A task with fewer runs than the
others is padded with NaN at the end of its column; every aggregate here
ignores the padding. Confidence intervals come from the stratified bootstrap
(runs resampled within each task) of :func:`benchlab.stats.bootstrap.stratified_bootstrap`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from scipy.special import ndtr, stdtrit

from benchlab.stats.bootstrap import (
    BOOTSTRAP_T_MIN_N,
    STUDENTIZED_MIN_N,
    SeedLike,
    _order_statistics,
    _percentile_bounds,
    stratified_bootstrap,
    studentized_mean_ci,
)
from benchlab.stats.threads import one_blas_thread
from benchlab.stats.tolerance import negligible_mask

AGGREGATES = ("iqm", "median", "mean", "optimality_gap")


def normalize(scores: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``(score - low) / (high - low)`` per task.

    Args:
        scores: shape ``(runs, tasks)``.
        low, high: shape ``(tasks,)``; the scores normalised to 0 and 1. For a metric
            to minimise give ``low`` the worse (larger) reference, so that a higher
            normalised score is better; ``high == low`` is an error.
    """
    low = np.asarray(low, dtype=float)
    high = np.asarray(high, dtype=float)
    if np.any(high == low):
        raise ValueError("a task's high and low references are equal; cannot normalise")
    return (np.asarray(scores, dtype=float) - low) / (high - low)


def _flat(scores: np.ndarray) -> np.ndarray:
    return scores.reshape(*scores.shape[:-2], -1)


def task_weights(counts: np.ndarray) -> tuple[np.ndarray, int]:
    """Integer weights that give every task the same total weight, whatever its run count.

    A run of task ``t`` counts ``L / n_t`` times, ``L`` the least common multiple of the
    run counts ``n_t``: as if every task's runs were repeated to ``L`` runs. A task whose
    seeds failed then weighs as much as one whose seeds all completed: pooled with equal
    weight per run, the surviving runs of the other tasks would outvote it (a config that
    fails most seeds of its hard task would look better than one that completes them).

    Args:
        counts: runs per task, shape ``(tasks,)``; a task with no run gets weight 0.

    Returns:
        ``(weights, total)``: shape ``(tasks,)`` int64, and the total weight ``tasks' · L``
        over the tasks with a run.
    """
    n = np.asarray(counts, dtype=np.int64)
    have = n > 0
    if not have.any():
        return np.zeros(n.shape, dtype=np.int64), 0
    lcm = int(np.lcm.reduce(n[have]))
    if lcm * int(have.sum()) >= 2**53:
        raise ValueError(f"run counts {sorted(set(n[have].tolist()))} have too large a common "
                         "multiple to weight tasks equally")
    weights = np.where(have, lcm // np.maximum(n, 1), 0)
    total = lcm * int(have.sum())
    return weights, total


def trim_fraction(runs: int, tasks: int) -> float:
    """The share of the weight the IQM cuts from each end of a ``runs x tasks`` table:
    ``⌊runs·tasks/4⌋ / (runs·tasks)``, what ``scipy.stats.trim_mean(·, 0.25)`` cuts from the
    full table (rliable's IQM). It depends on the table's shape, not on how many of its seeds
    completed: a failed seed, excluded or scored as the worst, leaves the share the same, so
    scoring it as the worst never raises the IQM."""
    n = runs * tasks
    return (n // 4) / n if n else 0.25


def _weighted_trimmed_mean(values: np.ndarray, weights: np.ndarray, total: int,
                           fraction: float = 0.25) -> float:
    """Trimmed mean of ``values`` each repeated ``weights`` times: ``fraction · total`` of the
    ``total`` repeated values cut from each end (a fractional value where it falls inside
    one; ``scipy.stats.trim_mean(·, 0.25)`` of the repeated values when that is ``⌊total/4⌋``)."""
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cut: float = fraction * total
    if abs(cut - round(cut)) < 1e-9:
        cut = round(cut)
    end = np.cumsum(w)
    kept = np.clip(end, cut, total - cut) - np.clip(end - w, cut, total - cut)
    if total - 2 * cut <= 0:
        return float("nan")
    return float(np.sum(kept * v) / (total - 2 * cut))


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean over all runs of all tasks: the mean of the middle 50%, with
    every task weighing the same.

    Like ``scipy.stats.trim_mean(x, 0.25)`` (rliable's IQM) on a full table: of the ``N``
    values, ``⌊N/4⌋`` are cut from each end. When tasks have different numbers of runs (NaN
    padding: failed or missing seeds) each task's runs are repeated to a common count first
    (:func:`task_weights`), so that a task never weighs less because runs were lost, and the
    same share of the weight is cut, :func:`trim_fraction` of the table's shape (fractionally
    where it falls inside a value): the share never depends on how many seeds completed, so a
    failed seed scored as the worst never raises the IQM above its value with the seed
    excluded.
    ``scores``: shape ``(..., runs, tasks)``; returns shape ``(...)``.
    """
    arr = np.asarray(scores, dtype=float)
    flat = _flat(arr)
    nan = np.isnan(flat)
    if not nan.any():
        # A partition around both cut points is O(N), unlike a full sort.
        n = flat.shape[-1]
        cut = n // 4
        if n - 2 * cut <= 0:
            return np.full(flat.shape[:-1], np.nan)
        middle = np.partition(flat, (cut, n - cut - 1), axis=-1)[..., cut : n - cut]
        return middle.mean(axis=-1)
    tables = arr.reshape(-1, *arr.shape[-2:])
    out = np.empty(tables.shape[0])
    for i, table in enumerate(tables):
        valid = ~np.isnan(table)
        weights, total = task_weights(valid.sum(axis=0))
        w = np.broadcast_to(weights, table.shape)[valid]
        out[i] = (_weighted_trimmed_mean(table[valid], w, total, trim_fraction(*table.shape))
                  if total else np.nan)
    return out.reshape(arr.shape[:-2])


def _task_means(scores: np.ndarray) -> np.ndarray:
    s = np.asarray(scores, dtype=float)
    valid = ~np.isnan(s)
    if valid.all():
        return s.mean(axis=-2)
    return np.sum(np.where(valid, s, 0.0), axis=-2) / np.sum(valid, axis=-2)


def mean_of_means(scores: np.ndarray) -> np.ndarray:
    """Mean over tasks of each task's mean score. ``(..., runs, tasks) -> (...)``."""
    return np.mean(_task_means(scores), axis=-1)


def median_of_means(scores: np.ndarray) -> np.ndarray:
    """Median over tasks of each task's mean score. ``(..., runs, tasks) -> (...)``."""
    return np.median(_task_means(scores), axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """``gamma - mean(min(score, gamma))``, the mean taken per task and then over tasks
    (every task weighs the same, whatever its run count); lower is better.

    ``scores``: shape ``(..., runs, tasks)``; returns shape ``(...)``.
    """
    s = np.asarray(scores, dtype=float)
    valid = ~np.isnan(s)
    if valid.all():
        flat = _flat(s)
        return gamma - np.minimum(flat, gamma).mean(axis=-1)
    clipped = np.where(valid, np.minimum(s, gamma), 0.0)
    per_task = np.sum(clipped, axis=-2) / np.sum(valid, axis=-2)
    return gamma - np.mean(per_task, axis=-1)


_FUNCS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "iqm": iqm,
    "median": median_of_means,
    "mean": mean_of_means,
    "optimality_gap": optimality_gap,
}


# Resamples per chunk are sized so a chunk's arrays stay in cache (measured: chunks
# of ~32k values run 1.3x faster than ~64k and 2.7x faster than ~256k).
_CACHE_ELEMENTS = 1 << 15
# Largest count array over all tables of one chunk (int32: 16 MiB).
_MANY_ELEMENTS = 1 << 22


class _Resampler:
    """Stratified resamples of one or more ``(runs, tasks)`` score tables of the same
    shape and NaN padding, reduced to draw counts.

    A resample is a multiset of the original runs, so its sorted values are the sorted
    originals each repeated as often as drawn: the IQM needs no sort per resample, only
    each original value's share of the sorted positions ``[⌊N/4⌋, N - ⌊N/4⌋)``.

    The draws are the same for every table (they say which run of which task is drawn,
    whatever its value), so they are made and counted once per chunk, in *slot* space
    (slot ``r * tasks + t`` is run ``r`` of task ``t``); each table then only reorders
    the counts into its own sorted order. Layout and memory are chosen for speed, as
    measured: counts are held as ``(k, slots)``, so that the running sums over sorted
    positions run along the last, contiguous axis (numpy 2.4: 4.6 times faster than
    along a middle axis), and work arrays are allocated once per chunk size and reused.
    """

    def __init__(self, tables: list[np.ndarray]):
        first = tables[0]
        runs, tasks = first.shape
        valid = ~np.isnan(first)  # (runs, tasks), the same for every table
        self.runs, self.tasks, self.configs = runs, tasks, len(tables)
        self.n_task = valid.sum(axis=0)
        self.total = int(self.n_task.sum())
        # One extra slot stands for padding: it is counted but belongs to no table's order.
        self.pad_slot = runs * tasks
        flat_valid = np.flatnonzero(valid.ravel())
        by_slot = np.stack([np.where(valid, t, 0.0).ravel() for t in tables])  # (C, slots)
        order = np.stack([flat_valid[np.argsort(v[flat_valid], kind="stable")] for v in by_slot])
        self.order = order.astype(np.intp)  # (C, N): slot at each sorted position
        self.sorted_values = np.take_along_axis(by_slot, order, axis=1)  # (C, N)
        self.value_steps = self.sorted_values - np.concatenate(
            [self.sorted_values[:, 1:], np.zeros((self.configs, 1))], axis=1)
        # Task means from slot counts: value / n_task on the slot's task, 0 on padding.
        self.mean_weights = (by_slot / np.tile(np.maximum(self.n_task, 1), runs)).reshape(
            self.configs, runs, tasks)
        self.by_slot = by_slot
        self.scale = np.maximum(self.n_task, 1).astype(float)  # (tasks,)
        # Every task weighs the same in the IQM and the optimality gap: with unequal run
        # counts a drawn run of task t counts L / n_t times (task_weights).
        weights, self.weight_total = task_weights(self.n_task)
        self.equal_counts = bool(np.all(self.n_task == self.n_task[0]))
        self.fraction = trim_fraction(runs, tasks)
        wide = self.weight_total >= 2**31
        self.sorted_weights = weights[self.order % tasks].astype(np.int64 if wide else np.int32)
        present = max(int(np.sum(self.n_task > 0)), 1)
        self.gap_weights = 1.0 / (np.tile(self.scale, runs) * present)  # (slots,)
        self.task_index = np.arange(tasks, dtype=np.int32)
        self.padding = ~valid[:, None, :]  # (runs, 1, tasks)
        self.full = bool(valid.all())
        #: Added to each resample's task means before their median is taken (C, tasks);
        #: zero unless :func:`median_shrinkage` is asked for.
        self.median_shift = np.zeros((self.configs, tasks))
        self._work: dict[int, dict[str, np.ndarray]] = {}

    def _buffers(self, k: int) -> dict[str, np.ndarray]:
        if k not in self._work:
            shape = (self.runs, k, self.tasks)
            self._work[k] = {
                "u": np.empty(shape),
                "slots": np.empty(shape, dtype=np.int32),
                "cells": np.empty(shape, dtype=np.int32),
                "counts": np.empty((k, self.pad_slot + 1), dtype=np.int32),
                "sorted": np.empty((k, self.configs, self.total), dtype=np.int32),
                "rep": (np.arange(k, dtype=np.int32) * np.int32(self.pad_slot + 1))[None, :, None],
            }
        return self._work[k]

    def draw(self, k: int, rng: np.random.Generator) -> np.ndarray:
        """``k`` stratified resamples as slots: shape ``(runs, k, tasks)``.

        ``slots[i, j, t] = r * tasks + t`` says that the ``i``-th draw of task ``t`` in
        resample ``j`` is run ``r``; padding positions hold the padding slot.
        """
        w = self._buffers(k)
        u, slots = w["u"], w["slots"]
        rng.random(out=u)
        np.multiply(u, self.scale, out=u)
        slots[...] = u  # truncation: a uniform run index within each task
        slots *= self.tasks
        slots += self.task_index
        if not self.full:
            np.copyto(slots, self.pad_slot, where=self.padding)
        return slots

    def reduce(self, slots: np.ndarray, gamma: float = 1.0) -> np.ndarray:
        """The four aggregates of each table over the resamples ``slots`` (from
        :meth:`draw`): shape ``(C, k, 4)``."""
        k = slots.shape[1]
        w = self._buffers(k)
        # Cell of (resample j, slot s) in the (k, slots + 1) counts: j*(slots + 1) + s.
        cells = np.add(slots, w["rep"], out=w["cells"])
        counts = w["counts"]
        counts.fill(0)
        np.add.at(counts.reshape(-1), cells.reshape(-1), np.int32(1))
        by_slot = counts[:, : self.pad_slot]  # (k, slots); the padding column dropped

        # Task means and optimality gap need no order: weights per slot.
        # optimize=True: einsum then hands the task means to a matrix product, 2x faster
        # here than its own loop (measured); the IQM's is faster without.
        task_means = np.einsum("krt,crt->ckt", by_slot.reshape(k, self.runs, self.tasks),
                               self.mean_weights, optimize=True)  # (C, k, tasks)
        total = self.total if self.equal_counts else self.weight_total
        cut_exact = self.fraction * total
        cut: float = round(cut_exact)
        clipped = np.minimum(self.by_slot, gamma) * self.gap_weights
        gap = gamma - clipped @ by_slot.T
        # mode="clip": every index is in range, and numpy's bounds-checked take runs
        # several times slower (measured, numpy 2.4).
        ordered = np.take(by_slot, self.order, axis=1, out=w["sorted"], mode="clip")  # (k, C, N)
        # Value n fills sorted positions [E_{n-1}, E_n) of the resample (E = running count),
        # of which clip(E_n) - clip(E_{n-1}) fall in the middle [cut, total - cut) when
        # clip bounds to that range. Summing by parts turns the IQM's
        # sum_n (clip(E_n) - clip(E_{n-1})) v_n into sum_n clip(E_n) (v_n - v_{n+1}) - cut v_0,
        # with v_N = 0: one clipped running count and one dot product per resample.
        # int32 counts: half the memory traffic of float64, and faster running sums.
        if not self.equal_counts:
            if self.sorted_weights.dtype == np.int32:
                ordered *= self.sorted_weights
            else:
                ordered = ordered * self.sorted_weights
        end = np.cumsum(ordered, axis=2, out=ordered)
        if abs(cut_exact - cut) > 1e-9:
            # A share of the weight that falls inside a value (unequal run counts): float ends.
            end = end.astype(np.float64)
            cut = cut_exact
        np.clip(end, cut, total - cut, out=end)  # one pass, not two
        iqm_ = np.einsum("kcn,cn->ck", end, self.value_steps, dtype=np.float64)
        iqm_ -= cut * self.sorted_values[:, :1]
        iqm_ /= total - 2 * cut
        # One selection (numpy's partition with two kth is several times slower); for an
        # even count the lower middle value is the largest left of it.
        middle = self.tasks // 2
        parted = np.partition(task_means + self.median_shift[:, None, :], middle, axis=2)
        median = parted[..., middle]
        if self.tasks % 2 == 0:
            median = (median + parted[..., :middle].max(axis=2)) / 2
        return np.stack([iqm_, median, task_means.mean(axis=2), gap], axis=2)


AggregateMethod = Literal["expanded", "percentile"]

#: The least runs of a single task for an across-task interval (its bootstrap-t and Yuen
#: intervals covered 94.8% and 93.5% at 5 runs, 91% for the IQM at 4: bench/coverage.py).
SINGLE_TASK_MIN_RUNS = 5
#: Several tasks: the expanded percentile interval is shown when every task has at least
#: AGGREGATE_MIN_RUNS runs, or at least AGGREGATE_LOW_RUNS runs and AGGREGATE_MIN_DF degrees of
#: freedom Σ(n_t - 1) in all. Measured on normal scores (bench/coverage.py, mean / IQM):
#: 2 tasks × 4 runs 92.9 / 94.9%, 3 × 4 92.8 / 93.8%, 2 × 5 92.9 / 95.2%, 4 × 3 94.6 / 93.9%,
#: 5 × 3 96.0 / 96.4% (± 0.7–0.9, so within Monte Carlo error of 93% or above); below it
#: 3 × 3 90.2%, 10 × 2 91.0%, 5 × 2 87.4%, 2 × 2 64.4%, 1 × 3 78.0%, and one run per task
#: has no spread at all.
AGGREGATE_MIN_RUNS = 4
AGGREGATE_LOW_RUNS = 3
AGGREGATE_MIN_DF = 8


def interval_shortfall(counts: np.ndarray) -> str | None:
    """Why no across-task interval is shown for tasks with these run counts, or None.

    With 1–3 runs per task the stratified bootstrap can only reshuffle a handful of runs: its
    "95%" intervals came out near [min, max] of the runs and covered 52% (1 task × 2 runs), 78%
    (1 × 3) and 64% (2 × 2), and zero width with one run per task. No method benchlab has covers
    95% there, so none is shown.

    Args:
        counts: runs per task, shape ``(tasks,)``.
    """
    n = np.asarray(counts, dtype=int)
    if n.size == 0:
        return None
    if n.size == 1:
        if n[0] < SINGLE_TASK_MIN_RUNS:
            return (f"one task of {n[0]} run(s): no interval covers 95% below "
                    f"{SINGLE_TASK_MIN_RUNS} runs (docs/statistics.md, coverage study)")
        return None
    df = int(np.sum(n - 1))
    if n.min() >= AGGREGATE_MIN_RUNS or (n.min() >= AGGREGATE_LOW_RUNS and df >= AGGREGATE_MIN_DF):
        return None
    runs = f"{n.min()}" if n.min() == n.max() else f"{n.min()} to {n.max()}"
    return (f"{n.size} tasks of {runs} runs ({df} degrees of freedom): the stratified bootstrap "
            f"covers 95% only from {AGGREGATE_MIN_RUNS} runs on every task, or "
            f"{AGGREGATE_LOW_RUNS} runs and {AGGREGATE_MIN_DF} degrees of freedom in all "
            "(docs/statistics.md, coverage study); no interval")


def expanded_confidence(counts: np.ndarray, confidence: float = 0.95) -> float:
    """The percentile level that makes a stratified bootstrap interval honest at small n.

    A bootstrap resample of ``n`` runs has a variance ``(n-1)/n`` times too small, and
    a normal quantile ignores that the spread is estimated; both narrow a percentile
    interval (88% instead of 95% for 5 tasks × 5 runs). The expanded percentile
    interval (Hesterberg 2015) takes the percentiles at ``α'/2 = Φ(-√r · t_{1-α/2, ν})``
    with ``ν = Σ(n_t - 1)`` and ``r = Σ 1/n_t / Σ (n_t - 1)/n_t²`` (``n/(n-1)`` when
    every task has ``n`` runs).

    Args:
        counts: runs per task, shape ``(tasks,)``, each ``>= 2``.

    Returns:
        The confidence to pass to the percentile interval (``confidence`` itself when a
        task has fewer than 2 runs).
    """
    n = np.asarray(counts, dtype=float)
    if n.size == 0 or np.any(n < 2):
        return confidence
    ratio = float(np.sum(1 / n) / np.sum((n - 1) / n**2))
    df = float(np.sum(n - 1))
    z = np.sqrt(ratio) * float(stdtrit(df, 0.5 + confidence / 2))
    return float(1 - 2 * ndtr(-z))


def aggregate(
    scores: np.ndarray,
    reps: int = 10_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
    method: AggregateMethod = "expanded",
) -> dict[str, tuple[float, float, float]]:
    """IQM, median, mean and optimality gap with stratified-bootstrap CIs.

    The four share one set of resamples (runs drawn with replacement within each
    task, independently per task), held as draw counts rather than resampled arrays.

    Args:
        scores: normalised scores, shape ``(runs, tasks)`` (NaN padding allowed).
        reps: bootstrap resamples.
        confidence: coverage of the intervals.
        seed: seed of the numpy Generator.
        method: ``"expanded"`` percentile interval (default; see
            :func:`expanded_confidence`; with a single task of at least 4 runs the
            mean's and median's interval is that task's bootstrap-t one) or the plain
            ``"percentile"`` interval, as rliable computes it.

    Returns:
        ``{name: (value, ci_low, ci_high)}`` for the names in :data:`AGGREGATES`; with
        ``"expanded"`` the bounds are NaN where :func:`interval_shortfall` says no interval
        covers 95% (too few runs per task), and where every resample gives the same value
        (zero observed spread: the runs of each task are equal, which is not certainty).
    """
    return aggregate_many([scores], reps, confidence, seed, method)[0]


@one_blas_thread
def aggregate_many(
    tables: list[np.ndarray],
    reps: int = 10_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
    method: AggregateMethod = "expanded",
) -> list[dict[str, tuple[float, float, float]]]:
    """:func:`aggregate` of several configs' score tables at once, on shared resamples.

    The tables must have the same shape and the same NaN padding (the same runs per
    task); each gets exactly what :func:`aggregate` with this ``seed`` gives it alone,
    since a resample says which runs are drawn, not what their values are. Drawing
    and counting once for all tables is what makes this faster than one call each.

    Args:
        tables: ``C`` arrays of shape ``(runs, tasks)``.
        reps, confidence, seed, method: as in :func:`aggregate`.

    Returns:
        One ``{name: (value, ci_low, ci_high)}`` per table, in order.
    """
    if method not in ("expanded", "percentile"):
        raise ValueError(f"method must be 'expanded' or 'percentile', got {method!r}")
    arrays = [np.asarray(t, dtype=float) for t in tables]
    mask = np.isnan(arrays[0])
    if any(a.shape != mask.shape or not np.array_equal(np.isnan(a), mask) for a in arrays):
        raise ValueError("aggregate_many needs tables of the same shape and NaN padding")
    points = [np.array([_FUNCS[name](a) for name in AGGREGATES]) for a in arrays]
    if reps < 0:
        raise ValueError(f"reps must be 0 (no intervals) or more, got {reps}")
    if reps == 0:  # asked for the point values alone (as --reps 0 does for a diff)
        return [{name: (float(points[c][i]), float("nan"), float("nan")) for i, name in enumerate(AGGREGATES)}
                for c in range(len(arrays))]
    rng = np.random.default_rng(seed)
    # Equal chunks reuse one set of work arrays; the few surplus resamples of the
    # last chunk (fewer than the number of chunks) are drawn and dropped.
    # Many tables at once would make a cache-sized chunk's per-table arrays huge: cap them.
    per_chunk = min(_CACHE_ELEMENTS // max(mask.size, 1),
                    _MANY_ELEMENTS // max(mask.size * len(arrays), 1))
    n_chunks = -(-reps // max(1, per_chunk))
    chunk = -(-reps // n_chunks)
    resampler = _Resampler(arrays)
    if method == "expanded":
        resampler.median_shift = np.stack([median_shrinkage(a) for a in arrays])
    parts = [resampler.reduce(resampler.draw(chunk, rng)) for _ in range(n_chunks)]
    dist = np.concatenate(parts, axis=1)[:, :reps]  # (C, reps, 4)
    level = (expanded_confidence(np.sum(~mask, axis=0), confidence)
             if method == "expanded" else confidence)
    low, high = _percentile_bounds(dist, level, axis=1)  # (C, 4) each
    if method == "expanded" and mask.shape[1] == 1:
        _single_task_intervals(arrays, mask, low, high, reps, confidence, rng)
        _single_task_iqm_intervals(arrays, mask, low, high, reps, confidence, rng)
    if method == "expanded" and interval_shortfall(np.sum(~mask, axis=0)) is not None:
        low[:], high[:] = np.nan, np.nan
    if method == "expanded":
        # Every resample giving one value means the runs did not vary (each task's runs equal
        # up to rounding): that is zero observed spread, not certainty, so no interval.
        flat = negligible_mask(high - low, np.maximum(np.abs(low), np.abs(high)))
        low[flat], high[flat] = np.nan, np.nan
    return [
        {name: (float(points[c][i]), float(low[c, i]), float(high[c, i]))
         for i, name in enumerate(AGGREGATES)}
        for c in range(len(arrays))
    ]


def _single_task_intervals(arrays: list[np.ndarray], mask: np.ndarray, low: np.ndarray,
                           high: np.ndarray, reps: int, confidence: float,
                           rng: np.random.Generator, gamma: float = 1.0) -> None:
    """With one task the mean and the median over tasks are that task's mean: give them
    the bootstrap-t (studentized) interval, as the task's ``boot_ci`` does (from 8 runs); and
    the optimality gap, ``gamma`` minus the mean of the scores clipped at ``gamma``, the
    same interval of that mean (the expanded percentile one covered 91.5% at n = 5).

    The expanded percentile interval of one task's mean covers about 91% at n = 5
    (measured, tests/stats/test_coverage.py); the bootstrap-t covers 95%. Fewer than
    :data:`STUDENTIZED_MIN_N` runs, or zero variance, keep the expanded percentile one. Below
    :data:`~benchlab.stats.bootstrap.BOOTSTRAP_T_MIN_N` runs the bootstrap-t runs far past the
    data (a collapsed seed of five gave [-4874, -31] for returns in [-500, -77]): the Student t
    interval of the mean is used instead, as the task's ``ci`` (it covered 95-97% on normal and
    t3 values at 4-10 runs, docs/statistics.md).
    """
    values = np.stack([a[~mask[:, 0], 0] for a in arrays])  # (C, n): same runs in every table
    n = values.shape[1]
    if n < STUDENTIZED_MIN_N:
        return
    # The optimality gap is gamma minus the mean of the scores clipped at gamma: gamma
    # minus the interval of that mean (its ends swapped).
    clipped = np.minimum(values, gamma)
    both = np.concatenate([values, clipped])
    stream = int(rng.integers(2**63 - 1))  # drawn either way: later draws do not depend on n
    if n < BOOTSTRAP_T_MIN_N:
        half = float(stdtrit(n - 1, 0.5 + confidence / 2)) * both.std(axis=1, ddof=1) / np.sqrt(n)
        t_low, t_high = both.mean(axis=1) - half, both.mean(axis=1) + half
    else:
        t_low, t_high = studentized_mean_ci(both, reps, confidence, stream)
    ok = np.isfinite(t_low) & np.isfinite(t_high) & (both.std(axis=1) > 0)
    c = values.shape[0]
    for name in ("median", "mean"):
        i = AGGREGATES.index(name)
        low[ok[:c], i], high[ok[:c], i] = t_low[:c][ok[:c]], t_high[:c][ok[:c]]
    i = AGGREGATES.index("optimality_gap")
    gap_ok = ok[c:]
    low[gap_ok, i] = gamma - t_high[c:][gap_ok]
    high[gap_ok, i] = gamma - t_low[c:][gap_ok]


def median_shrinkage(scores: np.ndarray) -> np.ndarray:
    """How far to move each task's mean toward their median before bootstrapping the median.

    The median over tasks of the task means is not a smooth statistic: when the tasks'
    true means are close, which task is the middle one changes from resample to resample,
    and resampling around the *observed* task means, which noise spreads apart, gives a
    bootstrap distribution about 1.3 times too wide (the interval covered 97–99% on 5
    tasks of equal means). So the observed means are shrunk toward their median by the
    share of their spread that noise explains, the method-of-moments (James–Stein) factor
    ``B = min(1, (T - 1) · v̄ / Σ(m_t - m̄)²)``, with ``v̄`` the mean squared standard error
    of the task means: ``B`` is near 1 when the tasks differ by no more than noise, and near
    0 when they are far apart (the bootstrap is then right as it is). The median itself
    is unchanged: the shift keeps the tasks' order and moves the middle one by nothing.

    Args:
        scores: shape ``(runs, tasks)``, NaN padding allowed.

    Returns:
        The shift of each task's mean, shape ``(tasks,)``: ``-B · (m_t - median)``; zeros
        with fewer than 3 tasks (the median of two is their mean), or when a task has
        fewer than 2 runs (no standard error to compare with).
    """
    s = np.asarray(scores, dtype=float)
    tasks = s.shape[1]
    valid = ~np.isnan(s)
    counts = valid.sum(axis=0)
    if tasks < 3 or np.any(counts < 2):
        return np.zeros(tasks)
    means = _task_means(s)
    var_of_mean = np.nanvar(s, axis=0, ddof=1) / counts
    spread = float(np.sum((means - means.mean()) ** 2))
    noise = (tasks - 1) * float(var_of_mean.mean())
    shrink = 1.0 if spread <= noise else noise / spread
    return -shrink * (means - np.median(means))


def _single_task_iqm_intervals(arrays: list[np.ndarray], mask: np.ndarray, low: np.ndarray,
                               high: np.ndarray, reps: int, confidence: float,
                               rng: np.random.Generator) -> None:
    """With one task the IQM is that task's trimmed mean (``g = ⌊n/4⌋`` values cut from each
    end); its interval is studentized by the Tukey–McLaughlin standard error
    ``s_w / ((1 - 2g/n) √n)``, ``s_w`` the standard deviation (ddof = 1) of the sample
    winsorized at the cut (Wilcox 2012, §4.4):

    - from 8 runs (``g >= 2``), the bootstrap-t: ``t* = (IQM* - IQM) / se*`` over resamples;
    - below, Yuen's interval ``IQM ± t_{1-α/2, n-2g-1} · se`` (Yuen 1974): with ``g = 1``,
      one resample in twelve has ``s_w* = 0`` (its three middle values equal), which leaves
      the bootstrap-t without tails.

    The expanded percentile interval covered 92–94% at n = 5 (one task); these cover
    93.5% (n = 5) to 95.5% (tests/stats/test_coverage.py). Fewer than 4 runs, or
    ``s_w = 0``, keep the expanded percentile interval.
    """
    values = np.stack([a[~mask[:, 0], 0] for a in arrays])  # (C, n): same runs in every table
    n = values.shape[1]
    if n < 4:
        return
    cut = n // 4
    est, se = _trimmed_mean_and_se(values, cut)
    q = float(stdtrit(n - 2 * cut - 1, 0.5 + confidence / 2))
    lo, hi = est - q * se, est + q * se
    if cut >= 2:
        t = np.empty((values.shape[0], reps))
        step = max(1, _CACHE_ELEMENTS * 8 // values.size)  # resamples per chunk: ~2 MiB arrays
        for start in range(0, reps, step):
            m = min(step, reps - start)
            t_est, t_se = _trimmed_mean_and_se(values[:, rng.integers(0, n, size=(m, n))], cut)
            with np.errstate(divide="ignore", invalid="ignore"):
                t[:, start:start + m] = (t_est - est[:, None]) / t_se
        t[np.isnan(t)] = 0.0  # 0/0: a resample equal to the sample's trimmed mean
        q_low, q_high = _order_statistics(t, confidence)
        with np.errstate(invalid="ignore"):
            b_lo, b_hi = est - q_high * se, est - q_low * se
        boot = np.isfinite(b_lo) & np.isfinite(b_hi)
        lo[boot], hi[boot] = b_lo[boot], b_hi[boot]
    ok = se > 0
    i = AGGREGATES.index("iqm")
    low[ok, i], high[ok, i] = lo[ok], hi[ok]


def _trimmed_mean_and_se(x: np.ndarray, cut: int) -> tuple[np.ndarray, np.ndarray]:
    """Trimmed mean (``cut`` values off each end) and its Tukey–McLaughlin standard
    error, along the last axis."""
    n = x.shape[-1]
    xs = np.sort(x, axis=-1)
    est = xs[..., cut:n - cut].mean(axis=-1)
    w = np.clip(xs, xs[..., cut:cut + 1], xs[..., n - cut - 1:n - cut])
    sw = w.std(axis=-1, ddof=1)
    return est, sw / ((1 - 2 * cut / n) * np.sqrt(n))


def performance_profile(
    scores: np.ndarray,
    taus: np.ndarray,
    reps: int = 2_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score distribution: the fraction of runs with a score above each threshold ``tau``.

    The fraction is taken per task and averaged over tasks (with equal runs per
    task, the fraction of all runs).

    Args:
        scores: shape ``(runs, tasks)``.
        taus: shape ``(T,)``.
        reps, confidence, seed: the stratified bootstrap bands.

    Returns:
        ``(profile, low, high)``, each of shape ``(T,)``.
    """
    taus = np.asarray(taus, dtype=float)
    increasing = taus.ndim == 1 and bool(np.all(taus[1:] > taus[:-1]))

    def profile(s: np.ndarray) -> np.ndarray:
        valid = ~np.isnan(s)
        if increasing:
            above = _count_above(s, valid, taus)
        else:
            above = ((s[..., None] > taus) & valid[..., None]).sum(axis=-3)  # (..., runs, tasks, T)
        per_task = above / valid.sum(axis=-2)[..., None]
        return per_task.mean(axis=-2)

    point = profile(np.asarray(scores, dtype=float)[None])[0]
    dist = stratified_bootstrap(scores, profile, reps, seed)
    low, high = _percentile_bounds(dist, confidence, axis=0)
    return point, low, high


def _count_above(s: np.ndarray, valid: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """How many valid values of each task exceed each of the increasing ``taus``: ``s`` and
    ``valid`` of shape ``(..., runs, tasks)``, ``taus`` ``(T,)``; int64 ``(..., tasks, T)``.

    A value exceeds ``taus[j]`` exactly for the ``j`` below its place among the taus (its
    ``searchsorted``), so a histogram of the places, summed from the top, counts them: the
    counts of comparing every value with every tau, at ``(runs·tasks)`` cost, not ``·T``
    (measured: ``performance_profile`` of 100 runs × 10 tasks, 200 resamples, 101 taus, 36 ms
    with the comparisons and 20 ms so).
    """
    *lead, runs, tasks = s.shape
    n_taus = taus.shape[0]
    rows = int(np.prod(lead, dtype=np.int64))
    place = np.where(valid, np.searchsorted(taus, np.where(valid, s, -np.inf), side="left"), 0)
    row = (np.arange(rows)[:, None, None] * tasks + np.arange(tasks)[None, None, :]) * (n_taus + 1)
    hist = np.bincount((row + place.reshape(rows, runs, tasks)).ravel(), minlength=rows * tasks * (n_taus + 1))
    from_top = np.cumsum(hist.reshape(rows, tasks, n_taus + 1)[..., ::-1], axis=-1)[..., ::-1]
    return np.ascontiguousarray(from_top[..., 1:]).reshape(*lead, tasks, n_taus)


def _poi_per_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``P(X > Y) + ½P(X = Y)`` per task: ``(..., nx, tasks), (..., ny, tasks) -> (..., tasks)``."""
    xv, yv = x[..., :, None, :], y[..., None, :, :]
    valid = ~(np.isnan(xv) | np.isnan(yv))
    wins = ((xv > yv) + 0.5 * (xv == yv)) * valid
    return wins.sum(axis=(-3, -2)) / valid.sum(axis=(-3, -2))


def average_probability_of_improvement(
    x: np.ndarray,
    y: np.ndarray,
    reps: int = 2_000,
    confidence: float = 0.95,
    seed: SeedLike = 0,
) -> tuple[float, float, float]:
    """Average over tasks of ``P(X > Y) + ½P(X = Y)`` (X's runs vs Y's runs of a task).

    Args:
        x: scores of config X, shape ``(runs_x, tasks)``.
        y: scores of config Y, shape ``(runs_y, tasks)``, same tasks in the same order.
        reps, confidence, seed: the CI, resampling the runs of X and of Y
            independently within each task.

    Returns:
        ``(value, ci_low, ci_high)``.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    point = float(_poi_per_task(x, y).mean())
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63 - 1, size=2)
    # Same count of resamples for both, independent streams: a joint resample of (X, Y).
    bx = _stratified_samples(x, reps, int(seeds[0]))
    by = _stratified_samples(y, reps, int(seeds[1]))
    dist = _poi_per_task(bx, by).mean(axis=-1)
    low, high = _percentile_bounds(dist, confidence, axis=0)
    return point, float(low), float(high)


def _stratified_samples(scores: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """Stratified resamples themselves: shape ``(reps, runs, tasks)``."""
    return stratified_bootstrap(scores, lambda s: s, reps, seed)


__all__ = [
    "AGGREGATES",
    "aggregate",
    "aggregate_many",
    "average_probability_of_improvement",
    "expanded_confidence",
    "interval_shortfall",
    "iqm",
    "mean_of_means",
    "task_weights",
    "median_shrinkage",
    "median_of_means",
    "normalize",
    "optimality_gap",
    "performance_profile",
]
