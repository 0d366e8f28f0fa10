"""The numbers the report's figures of the primary metric's seeds draw: the CV of the mean vs N,
the performance profiles and the radar of normalised scores.

:class:`PrimaryFigures` is a field of the one analysis
(:attr:`benchlab.stats.results_analysis.ResultsAnalysis.figures`). Its numbers are computed on first
use and kept (``cached_property``): a report drawn without figures, the dashboard, ``analyze`` and
``compare`` never pay for the profiles' bootstrap (200 resamples per config), and the report's
figure workers compute them in parallel, each the one it draws, as they drew them before. The same
inputs and seeds give the same arrays, whichever process computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: Resamples of each config's performance profile band (the stratified bootstrap).
PROFILE_REPS = 200
#: Thresholds τ of a performance profile, over the observed range of the normalised scores.
PROFILE_POINTS = 101


@dataclass(frozen=True)
class ConfigCv:
    """One config's CV of the mean vs N, in percent: ``100 · s / (√N · |x̄|)`` per task."""

    config: str
    #: Shape ``(tasks, N)``: a row per task with two or more values; NaN where undefined.
    percent: np.ndarray
    #: Shape ``(N,)``: the median over tasks (the task's own row with one task).
    line: np.ndarray
    #: Shape ``(N,)`` each: the lowest and highest over tasks; None with one task.
    low: np.ndarray | None = None
    high: np.ndarray | None = None


@dataclass(frozen=True)
class CvCurves:
    """CV of the mean of the primary metric vs the number of seeds N, per config
    (:func:`benchlab.stats.cv_of_mean`, a closed form of each (task, config)'s seeds)."""

    metric: str
    #: Shape ``(N,)``: 1 .. the most seeds any (task, config) has.
    ns: np.ndarray
    configs: tuple[ConfigCv, ...]
    #: Tasks with two or more values of some config.
    n_tasks: int


@dataclass(frozen=True)
class ConfigProfile:
    """One config's performance profile: the fraction of runs (averaged over tasks) whose
    normalised score exceeds each τ, and its 95% stratified-bootstrap band; shape ``(T,)`` each."""

    config: str
    point: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class Profiles:
    """Performance profiles over the tasks every config ran (:func:`benchlab.stats.performance_profile`)."""

    #: Shape ``(T,)``: the thresholds, over the observed scores' range padded by 2%.
    taus: np.ndarray
    configs: tuple[ConfigProfile, ...]
    tasks: tuple[str, ...]
    #: False with one run per (task, config): resampling one run gives no band.
    banded: bool
    #: How the scores were normalised, and which tasks were left out.
    note: str


@dataclass(frozen=True)
class RadarScores:
    """Each config's mean normalised score on each task (the radar figure)."""

    tasks: tuple[str, ...]
    #: ``(config, means)``, ``means`` of shape ``(tasks,)`` (NaN where the config has no run).
    configs: tuple[tuple[str, np.ndarray], ...]
    note: str


@dataclass(frozen=True)
class NormalisedScores:
    """Per-config scores normalised per task, higher is better (:attr:`PrimaryFigures.normalised`)."""

    tasks: tuple[str, ...]
    #: ``{config: array (runs, tasks)}``, NaN-padded where a config has fewer runs on a task.
    scores: Mapping[str, np.ndarray]
    note: str


@dataclass(frozen=True)
class PrimaryFigures:
    """The primary metric's final values as the statistics saw them (failed seeds excluded or
    scored worst), with what orders and normalises them; the figures' numbers as properties,
    computed on first use."""

    metric: str
    #: ``"max"`` or ``"min"``.
    goal: str
    #: The long table of final values the analysis used (every metric; the properties take the primary's).
    used: pd.DataFrame
    #: The spec's order of tasks and configs (others follow, sorted).
    tasks: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    #: ``{task: (low, high)}``: the spec's reference scores.
    references: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    #: Seed of the profiles' bootstrap.
    seed: int = 0

    @cached_property
    def _primary(self) -> pd.DataFrame:
        used = self.used
        return used[((used["metric"] == self.metric) & used["value"].notna()).to_numpy()]

    def config_order(self, present: set[str]) -> list[str]:
        """``present`` in the spec's order, the others after it, sorted."""
        return [c for c in self.configs if c in present] + sorted(present - set(self.configs))

    @cached_property
    def cv(self) -> CvCurves | None:
        """The CV of the mean vs N of each config; None without a (task, config) of two values."""
        from benchlab.stats.seeds import cv_of_mean

        prim = self._primary
        groups = {k: g.to_numpy() for k, g in prim.groupby(["config", "task"], sort=False)["value"]}
        groups = {k: v for k, v in groups.items() if v.shape[0] >= 2}
        if not groups:
            return None
        ns = np.arange(1, max(v.shape[0] for v in groups.values()) + 1)
        out = []
        for cfg in self.config_order({c for c, _ in groups}):
            rows = [cv_of_mean(v, ns=ns)[1] for (c, _), v in groups.items() if c == cfg]
            cv = 100 * np.vstack(rows)
            several = cv.shape[0] > 1
            with np.errstate(invalid="ignore"):
                out.append(ConfigCv(cfg, cv, np.nanmedian(cv, axis=0) if several else cv[0],
                                    np.nanmin(cv, axis=0) if several else None,
                                    np.nanmax(cv, axis=0) if several else None))
        return CvCurves(self.metric, ns, tuple(out), len({t for _, t in groups}))

    @cached_property
    def one_run_each(self) -> bool:
        """Whether no (task, config) has more than one run with a value (single-seed evaluations,
        such as checkpoint evaluations)."""
        prim = self._primary
        return not prim.empty and int(prim.groupby(["task", "config"]).size().max()) <= 1

    @cached_property
    def profile_omitted(self) -> str | None:
        """Why no performance profile is drawn, or None when one is.

        With one run per (task, config) and a task without reference scores, min–max
        normalising that task over the configs puts the best config at exactly 1 and the
        worst at 0: every profile would be a 0/1 step that restates the ranks in the tables.
        """
        if not self.one_run_each:
            return None
        unreferenced = sorted(set(self._primary["task"]) - set(self.references))
        if not unreferenced:
            return None
        return (f"every config has one run per task and {_tasks(unreferenced)} no reference "
                "scores, so normalising over the configs would put the best config at 1 and the "
                "worst at 0 on every such task, and the profile would only restate the ranks in "
                "the tables; give each task `reference: [low, high]` in the spec to draw one")

    @cached_property
    def normalised(self) -> NormalisedScores:
        """Per-config scores normalised per task, higher is better.

        Tasks with a reference pair ``(low, high)`` map low to 0 and high to 1; without references
        every task is normalised by the worst and best run over all configs (``note`` says which).
        Tasks some config has no run on are left out (so every config is profiled over the same
        tasks), as are tasks whose two normalising values are equal; ``note`` names them.
        """
        prim = self._primary
        seen = set(prim["task"].tolist())
        tasks = [t for t in self.tasks if t in seen] + sorted(seen - set(self.tasks))
        configs = self.config_order(set(prim["config"].tolist()))
        groups = {k: g.to_numpy() for k, g in prim.groupby(["task", "config"], sort=False)["value"]}
        used, bounds, referenced, dropped = [], [], 0, []
        for t in tasks:
            if any((t, c) not in groups for c in configs):
                dropped.append(t)
                continue
            if t in self.references:
                lo, hi = self.references[t]
            else:
                vals = prim.loc[prim["task"] == t, "value"]
                lo, hi = (vals.min(), vals.max()) if self.goal == "max" else (vals.max(), vals.min())
            if lo == hi:
                dropped.append(t)
                continue
            used.append(t)
            bounds.append((float(lo), float(hi)))
            referenced += t in self.references
        if referenced == len(used):
            note = "scores are normalised by each task's reference scores (low → 0, high → 1)"
        elif referenced == 0:
            note = ("the spec gives no reference scores, so each task is normalised by its worst (0) "
                    "and best (1) run over all configs")
        else:
            note = ("scores are normalised by reference scores where the spec gives them, otherwise "
                    "by the task's worst (0) and best (1) run over all configs")
        if dropped:
            note += (f"; left out: {', '.join(dropped)} (a config has no run there, or all "
                     "scores are equal)")
        out = {}
        for cfg in configs:
            cols = [groups.get((t, cfg), np.empty(0)) for t in used]
            width = max((c.shape[0] for c in cols), default=0)
            arr = np.full((width, len(used)), np.nan)
            for j, (c, (lo, hi)) in enumerate(zip(cols, bounds, strict=True)):
                arr[: c.shape[0], j] = (c - lo) / (hi - lo)
            out[cfg] = arr
        return NormalisedScores(tuple(used), out, note)

    @cached_property
    def profiles(self) -> Profiles | None:
        """The performance profile of each config with a normalised score (:attr:`normalised`), with
        :data:`PROFILE_REPS` resamples seeded by :attr:`seed`; None where none is drawn
        (:attr:`profile_omitted`, or no task every config ran)."""
        from benchlab.stats.aggregate import performance_profile

        if self.profile_omitted is not None:
            return None
        norm = self.normalised
        scores = {c: s for c, s in norm.scores.items() if s.size}
        if not norm.tasks or not scores:
            return None
        allv = np.concatenate([s[~np.isnan(s)] for s in scores.values()])
        # Over the observed range only: below the worst run every profile is 1, above the best 0.
        worst, best = float(allv.min()), float(allv.max())
        pad = 0.02 * (best - worst) if best > worst else 0.5
        taus = np.linspace(worst - pad, best + pad, PROFILE_POINTS)
        curves = tuple(ConfigProfile(cfg, *performance_profile(s, taus, reps=PROFILE_REPS, seed=self.seed))
                       for cfg, s in scores.items())
        return Profiles(taus, curves, norm.tasks, not self.one_run_each, norm.note)

    @cached_property
    def radar(self) -> RadarScores | None:
        """Each config's mean normalised score per task; None below 3 tasks or 3 configs with
        a score (the scores table then says the same, more plainly)."""
        norm = self.normalised
        if len(norm.tasks) < 3 or sum(1 for s in norm.scores.values() if s.size) < 3:
            return None
        out = []
        for cfg, s in norm.scores.items():
            if not s.size:
                continue
            with np.errstate(invalid="ignore"):
                out.append((cfg, np.array([np.nanmean(s[:, j]) if np.any(~np.isnan(s[:, j])) else np.nan
                                           for j in range(s.shape[1])])))
        return RadarScores(norm.tasks, tuple(out), norm.note)


def _tasks(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{shown} {'has' if len(names) == 1 else 'have'}"


__all__ = ["PROFILE_POINTS", "PROFILE_REPS", "ConfigCv", "ConfigProfile", "CvCurves", "NormalisedScores",
           "PrimaryFigures", "Profiles", "RadarScores"]
