"""The pre-registered analysis plan: the spec's ``analysis:`` section, hashed into the ledger at the
first run, and what the report says about it.

"Decide on metrics and thresholds before seeing results": the plan (primary metric and its
summary, alpha, test, the comparisons of interest and ``min_effect``, the smallest difference
that matters) is recorded with its SHA-256 and the time the first sweep saw it. The report then
states "analysis as pre-registered (hash …, registered at …)", or lists each deviation from it,
and judges the planned comparisons with the registered settings. With ``min_effect`` each
comparison also says whether its effect is practically meaningful:

- ``meaningful``: the 95% CI of the change lies entirely beyond ``min_effect`` (better or worse);
- ``practically equivalent``: the CI lies entirely within ``±min_effect``;
- ``undecided``: the CI straddles ``min_effect`` (or ``-min_effect``), or has zero width (every
  seed gave the same difference: zero observed spread is not certainty about the next seed).

The interval is the same one the significance uses: with ``m`` planned comparisons, the t interval
at confidence ``1 − alpha/m`` (Bonferroni-adjusted, named in the report), and a comparison is
significant when its Holm-adjusted p is below ``alpha`` *and* that interval excludes 0. So a
"meaningful" change is always significant, and "not significant" never stands beside a
"meaningful degradation" from a narrower, unadjusted interval.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchlab.json_types import JsonObject
from benchlab.ledger import REGISTRATION_KEY, AnalysisPlan, Registration
from benchlab.names.benchmark_info import BenchmarkInfo, goal_of
from benchlab.names.results_files import REGISTRATION_FILE

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pandas as pd

    from benchlab.ledger import Store
    from benchlab.spec import Spec
    from benchlab.stats.curves import Summary

#: The registration's key in the ledger (read and written through ``Store.registration``).
META_KEY = REGISTRATION_KEY
#: The p-value of :class:`benchlab.stats.Comparison` each ``analysis.test`` uses.
TESTS = {"t": ("t_pvalue", "welch_pvalue"), "welch": ("welch_pvalue", "welch_pvalue"),
         "wilcoxon": ("wilcoxon_pvalue", "mannwhitney_pvalue"),
         "mannwhitney": ("mannwhitney_pvalue", "mannwhitney_pvalue")}
TEST_NAMES = {"t": "t-test (paired where seeds match, Welch otherwise)", "welch": "Welch t-test",
              "wilcoxon": "Wilcoxon signed-rank (Mann-Whitney U where unpaired)", "mannwhitney": "Mann-Whitney U"}


def plan_of(spec: Spec | BenchmarkInfo) -> AnalysisPlan | None:
    """The analysis plan of a spec (a validated :class:`~benchlab.spec.Spec`, or the benchmark
    record the ledger keeps of the spec it was last run with), with its defaults filled in;
    None when the spec has no ``analysis:``."""
    if isinstance(spec, BenchmarkInfo):
        # The report reads the spec as the ledger keeps it, without loading the spec's models.
        return _plan_of_dump(spec.spec)
    analysis = spec.analysis
    if analysis is None:
        return None
    return AnalysisPlan(
        metric=analysis.metric or spec.metrics.primary.name, summary=analysis.summary, alpha=analysis.alpha,
        test=analysis.test, comparisons=tuple((c.baseline, c.candidate) for c in analysis.comparisons)
        or (((spec.baseline, "*"),) if spec.baseline else ()),
        min_effect=analysis.min_effect)


def _plan_of_dump(spec_dump: dict[str, Any]) -> AnalysisPlan | None:
    analysis = spec_dump.get("analysis")
    if analysis is None:
        return None
    primary = spec_dump.get("metrics", {}).get("primary", {})
    primary_name = primary.get("name") if isinstance(primary, dict) else primary
    return AnalysisPlan(
        metric=analysis.get("metric") or primary_name or "", summary=analysis.get("summary", "final"),
        alpha=analysis.get("alpha", 0.05), test=analysis.get("test", "t"),
        comparisons=tuple((c["baseline"], c["candidate"]) for c in analysis.get("comparisons", []))
        or (((spec_dump["baseline"], "*"),) if spec_dump.get("baseline") else ()),
        min_effect=analysis.get("min_effect"))


def _config_names(spec: Spec | BenchmarkInfo) -> list[str]:
    if isinstance(spec, BenchmarkInfo):
        return [c["name"] for c in spec.spec.get("configs", [])]
    return [c.name for c in spec.configs]


def plan_hash(plan: AnalysisPlan) -> str:
    """SHA-256 of the plan's canonical JSON (:meth:`AnalysisPlan.to_json`, keys sorted, Python's
    default separators)."""
    return hashlib.sha256(json.dumps(plan.to_json(), sort_keys=True).encode()).hexdigest()


def register(store: Store, spec: Spec, completed_runs: int, *, now: datetime | None = None) -> Registration | None:
    """Record the spec's plan in the ledger if none is registered yet; return the registration."""
    registered = store.registration()
    if registered is not None:
        return registered
    plan = plan_of(spec)
    if plan is None:
        return None
    record = Registration(
        hash=plan_hash(plan), registered_at=(now or datetime.now(UTC)).isoformat(timespec="seconds"), plan=plan,
        configs=tuple(c.name for c in spec.configs), tasks=tuple(t.name for t in spec.tasks),
        completed_before=completed_runs)
    store.set_registration(record)
    # Also a file beside the ledger: a ledger rebuilt from the run directories
    # (`benchlab collect --rebuild`) takes the registration back from it, unchanged.
    _write_record(Path(store.path).parent / REGISTRATION_FILE, record)
    return record


def _write_record(path: Path, record: Registration) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=1, sort_keys=True))
    os.replace(tmp, path)


def restore(store: Store, folder: Path, *, earlier: Registration | None = None) -> Registration | None:
    """Put the registration back into a rebuilt ledger: the one the old ledger held (``earlier``),
    else the one in ``folder``'s registration file; return it (None when there was none, or the
    file cannot be read as one)."""
    record = earlier
    path = Path(folder) / REGISTRATION_FILE
    if record is None and path.exists():
        try:
            record = Registration.from_json(json.loads(path.read_text()))
        except (ValueError, TypeError):
            record = None
    if record is not None:
        store.set_registration(record)
        if not path.exists():
            _write_record(path, record)
    return record


class DeviationKind(Enum):
    """The ways an analysis can differ from its registered plan."""

    PLAN_REMOVED = "plan removed"
    SETTING_CHANGED = "setting changed"
    COMPARISON_ADDED = "comparison added"
    COMPARISON_DROPPED = "comparison dropped"
    CONFIGS_ADDED = "configs added"


@dataclass(frozen=True)
class Deviation:
    """One way the analysis now differs from the registered plan; ``str()`` is the report's phrase."""

    kind: DeviationKind
    #: The setting that changed (``metric``, ``summary``, ``alpha``, ``test``, ``min_effect``).
    setting: str = ""
    registered: str | float | None = None
    now: str | float | None = None
    #: ``(baseline, candidate)`` of a comparison added or dropped.
    comparison: tuple[str, str] | None = None
    #: The configs added after results existed.
    configs: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.kind is DeviationKind.PLAN_REMOVED:
            return "the spec no longer has an analysis section (the registered plan is used)"
        if self.kind is DeviationKind.SETTING_CHANGED:
            return f"{self.setting} changed: {self.registered} registered, {self.now} now"
        if self.kind is DeviationKind.CONFIGS_ADDED:
            return (f"config(s) added after results existed: {', '.join(self.configs)} (their comparisons are "
                    "exploratory, apart from the registered ones)")
        baseline, candidate = self.comparison or ("", "")
        verb = "added" if self.kind is DeviationKind.COMPARISON_ADDED else "dropped"
        return f"comparison {verb}: {candidate} vs {baseline}"


def deviations(registered: Registration, spec: Spec | BenchmarkInfo) -> list[Deviation]:
    """Each way the analysis of ``spec`` (as :func:`plan_of` takes it) differs from the
    registered plan."""
    now = plan_of(spec)
    if now is None:
        return [Deviation(DeviationKind.PLAN_REMOVED)]
    then = registered.plan
    out = [Deviation(DeviationKind.SETTING_CHANGED, key, getattr(then, key), getattr(now, key))
           for key in ("metric", "summary", "alpha", "test", "min_effect") if getattr(then, key) != getattr(now, key)]
    before, after = set(then.comparisons), set(now.comparisons)
    out += [Deviation(DeviationKind.COMPARISON_ADDED, comparison=c) for c in sorted(after - before)]
    out += [Deviation(DeviationKind.COMPARISON_DROPPED, comparison=c) for c in sorted(before - after)]
    added = tuple(c for c in _config_names(spec) if c not in registered.configs)
    if added:
        out.append(Deviation(DeviationKind.CONFIGS_ADDED, configs=added))
    return out


@dataclass(frozen=True)
class PlannedResult:
    """A planned comparison judged with the registered settings."""

    task: str
    baseline: str
    candidate: str
    metric: str
    paired: bool
    n: int
    diff: float | None
    ci_low: float | None
    ci_high: float | None  # the interval the significance and the practical verdict use (ci_method)
    p_value: float | None
    p_holm: float | None
    significant: bool | None
    practical: str | None  # None without min_effect
    warnings: list[str] = field(default_factory=list)
    # Not in the registered family (a config, task or comparison added later): Holm-corrected
    # among the exploratory comparisons only, never changing a registered verdict.
    exploratory: bool = False
    #: Which interval ``ci_low``/``ci_high`` is: the t interval at ``1 − alpha/m`` for ``m``
    #: comparisons in its Holm family (Bonferroni-adjusted).
    ci_method: str | None = None

    def to_json(self) -> JsonObject:
        """The result as a JSON object, one key per field."""
        return asdict(self)


def practical_verdict(ci_low: float | None, ci_high: float | None, min_effect: float, goal: str) -> str:
    """``meaningful improvement``/``meaningful degradation``, ``practically equivalent`` or
    ``undecided`` (see the module docstring); the CI is of ``candidate - baseline``."""
    if ci_low is None or ci_high is None:
        return "undecided (no interval)"
    if ci_low == ci_high:
        # A zero-width interval (every seed the same difference) is no evidence of equivalence.
        return "undecided (zero-width interval: no observed spread, which is not certainty)"
    lo, hi = (ci_low, ci_high) if goal == "max" else (-ci_high, -ci_low)
    if lo > min_effect:
        return f"meaningful improvement (CI beyond +{min_effect:g})"
    if hi < -min_effect:
        return f"meaningful degradation (CI beyond -{min_effect:g})"
    if -min_effect < lo and hi < min_effect:
        return f"practically equivalent (CI within ±{min_effect:g})"
    return f"undecided (CI straddles ±{min_effect:g})"


def judge(finals: pd.DataFrame, plan: AnalysisPlan, goals: dict[str, str], configs: list[str],
          *, registered: Registration | None = None, now: AnalysisPlan | None = None,
          reps: int = 2000, seed: int = 0) -> list[PlannedResult]:
    """The planned comparisons on a long-format table, with the plan's metric, summary, test and
    alpha. Statistics come from :mod:`benchlab.stats`.

    The registered family is fixed at registration: ``plan``'s comparisons over the configs and
    tasks the ``registered`` record names (``configs``, the spec's configs now, when there is no
    record), Holm-corrected across them alone. Comparisons that appear later (``now``, the plan
    as the spec has it now, over the configs and tasks of today) come after them, marked
    ``exploratory``, Holm-corrected among themselves: adding a config never moves a registered
    p-value."""
    import numpy as np

    from benchlab.stats import compare, holm, is_significant, reduce_runs, validate_table
    from benchlab.stats.compare import shared_seeds

    table = finals[finals["metric"] == plan.metric]
    if table.empty:
        return []
    # An unknown summary (a hand-edited registration) is refused by reduce_runs with the valid ones.
    runs, _ = reduce_runs(validate_table(table, "results"), cast("Summary", plan.summary))
    by = {k: dict(zip(g["seed"].tolist(), g["value"].tolist(), strict=True))
          for k, g in runs.groupby(["task", "config"], sort=True)}
    goal = goal_of(goals, plan.metric)
    tasks = sorted({t for t, _ in by})

    def family(comparisons: Sequence[tuple[str, str]], names: list[str],
               among: list[str]) -> list[tuple[str, str, str]]:
        pairs: list[tuple[str, str]] = []
        for b, c in comparisons:
            pairs += [(b, x) for x in names if x != b] if c == "*" else [(b, c)]
        return [(task, b, c) for task in among for b, c in dict.fromkeys(pairs)]

    registered_tasks = registered.tasks if registered is not None else None
    fixed = family(plan.comparisons, list((registered.configs if registered is not None else ()) or configs),
                   [t for t in tasks if registered_tasks is None or t in registered_tasks])
    later = [x for x in family((now or plan).comparisons, configs, tasks) if x not in set(fixed)]

    def judged(triples: list[tuple[str, str, str]], exploratory: bool) -> list[PlannedResult]:
        raw = []
        for task, b, c in triples:
            base, cand = by.get((task, b)), by.get((task, c))
            if not base or not cand:
                continue
            paired, common = shared_seeds(sorted(base), sorted(cand))
            xb = np.array([base[s] for s in common] if paired else list(base.values()))
            xc = np.array([cand[s] for s in common] if paired else list(cand.values()))
            cmp = compare(xb, xc, paired, goal, reps, 0.95, "studentized", seed,  # type: ignore[arg-type]
                          f"{task} {plan.metric} {c} vs {b}")
            field_paired, field_unpaired = TESTS[plan.test]
            raw.append((task, b, c, cmp, getattr(cmp, field_paired if paired else field_unpaired)))
            xs[(task, b, c)] = (xb, xc)
        adjusted = holm([p for *_, p in raw])
        m = max(sum(p is not None for *_, p in raw), 1)
        level = 1 - plan.alpha / m
        method = (f"t interval at {100 * level:.4g}% (1 − alpha/{m}: Bonferroni-adjusted over the {m} comparisons "
                  "of its family)" if m > 1 else f"t interval at {100 * level:.4g}%")
        out = []
        for (task, b, c, cmp, p), p_adj in zip(raw, adjusted, strict=True):
            low, high = _adjusted_interval(cmp, xs[(task, b, c)], level)
            out.append(PlannedResult(
                task, b, c, plan.metric, cmp.paired, cmp.n, cmp.mean_diff, low, high, p, p_adj,
                is_significant(p_adj, low, high, plan.alpha, cmp.p_floor),
                None if plan.min_effect is None else practical_verdict(low, high, plan.min_effect, goal),
                list(cmp.warnings), exploratory, method if low is not None else None))
        return out

    xs: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}

    return judged(fixed, False) + judged(later, True)


def _adjusted_interval(cmp: Any, values: tuple[Any, Any], level: float) -> tuple[float | None, float | None]:
    """The comparison's t interval at ``level`` (the same method as its ``diff_ci``), null where that
    one is null (no spread, too few seeds), the point ``[0, 0]`` where both sides are the same."""
    from benchlab.stats.compare import diff_t_interval

    if cmp.diff_ci_low is None or cmp.diff_ci_high is None:
        return None, None
    if cmp.diff_ci_low == cmp.diff_ci_high:
        return cmp.diff_ci_low, cmp.diff_ci_high
    xb, xc = values
    import numpy as np

    if cmp.paired:  # the pairs compare() kept: NaN and infinite values dropped
        keep = np.isfinite(xb) & np.isfinite(xc)
        xb, xc = xb[keep], xc[keep]
    else:
        xb, xc = xb[np.isfinite(xb)], xc[np.isfinite(xc)]
    return diff_t_interval(xb, xc, cmp.paired, level)


def _g(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def statement(registered: Registration | None, spec: Spec | BenchmarkInfo, results: list[PlannedResult]) -> str:
    """The report's "Analysis plan" section (Markdown), or "" when there is no plan; ``spec`` is
    the spec now (as :func:`plan_of` takes it)."""
    if registered is None:
        return ""
    plan = registered.plan
    head = f"(hash {registered.hash[:12]}, registered at {registered.registered_at})"
    lines = []
    found = deviations(registered, spec)
    late = registered.completed_before
    if not found and not late:
        lines.append(f"Analysis as pre-registered {head}.")
    else:
        lines.append(f"Analysis **deviates** from the pre-registered plan {head}:")
        lines.append("")
        if late:
            lines.append(f"- registered after {late} run(s) had completed: not a pre-registration")
        lines += [f"- {d}" for d in found]
    lines += ["", f"Registered plan: metric {plan.metric} ({plan.summary} value per run), "
              f"{TEST_NAMES.get(plan.test, plan.test)}, alpha {plan.alpha:g} after Holm's correction "
              "across the planned comparisons"
              + (f", min_effect {plan.min_effect:g} (the smallest difference that matters)."
                 if plan.min_effect is not None else ".")]
    has_min = plan.min_effect is not None

    def table(rows: list[PlannedResult]) -> list[str]:
        named = next((r.ci_method for r in rows if r.ci_method), None)
        out = ["", *([f"Interval: {named}; the verdicts beside it use it.", ""] if named else []),
               "| task | comparison | change (CI) | p (Holm) | significant |"
               + (" practically |" if has_min else ""),
               "|---|---|---|---:|---|" + ("---|" if has_min else "")]
        for r in rows:
            ci = "—" if r.ci_low is None else f"{r.diff:+.3g} [{r.ci_low:+.3g}, {r.ci_high:+.3g}]"
            sig = {True: "yes", False: "no", None: "undetermined"}[r.significant]
            out.append(f"| {r.task} | {r.candidate} vs {r.baseline} | {ci} | {_g(r.p_holm)} | {sig} |"
                       + (f" {r.practical} |" if has_min else ""))
        return out

    planned = [r for r in results if not r.exploratory]
    exploratory = [r for r in results if r.exploratory]
    if planned:
        lines += table(planned)
    if exploratory:
        lines += ["", "Exploratory (not pre-registered: added after the registration; Holm's correction across "
                      "these alone, so they never change a registered verdict):", *table(exploratory)]
    return "\n".join(lines)


__all__ = ["META_KEY", "REGISTRATION_FILE", "AnalysisPlan", "Deviation", "DeviationKind", "PlannedResult",
           "Registration", "deviations", "judge", "plan_hash", "plan_of",
           "practical_verdict", "register", "restore", "statement"]
