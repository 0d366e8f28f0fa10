"""``benchlab diff``: two versions of a benchmark, what changed between them and which scores moved.

A side is a results folder, or ``FOLDER@VERSION``: the runs of one recorded benchmark version
in a folder that holds several (a version id or its prefix, as ``versions/`` lists them).

For every (task, config, metric) both sides have, the change ``after - before`` is compared with
:func:`benchlab.stats.compare` (paired by seed where the shared seeds are most of each side's runs,
unpaired on every run otherwise: :func:`benchlab.stats.compare.shared_seeds`), Holm's correction
runs across the comparisons of each metric (one family per metric, as in ``benchlab analyze``),
and the verdict is

- ``regression``: the Holm-adjusted p-value is below alpha and the 95% CI of the change
  excludes 0 on the bad side of the metric's goal;
- ``improvement``: the same on the good side;
- ``no detectable change``: a change the statistics could judge whose CI includes 0 (or whose
  Holm-adjusted p-value is not below alpha);
- ``undetermined``: a change the statistics cannot judge (fewer than two seeds on a side, NaN, or
  too few seeds for the only valid test to reach alpha): a note names why.

A constant shift on every seed (every paired difference the same, the t-test undefined) is decided
by the Wilcoxon signed-rank test (8 of 8 seeds one way: p = 0.0078); identical scores on both sides
are "no detectable change". The verdict is :func:`benchlab.stats.is_significant`'s, as in
``benchlab analyze`` and the report.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlab.benchmark_info import Goal, goal_of
from benchlab.errors import DataError
from benchlab.json_types import JsonObject
from benchlab.results_files import DIFF_FILE, PACKAGES_FILE, VERSIONS_DIR, SavedSpec, version_spec_file
from benchlab.run_files import PROVENANCE_FILE, run_dir_of

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.ledger import VersionRecord

REGRESSION = "regression"
IMPROVEMENT = "improvement"
NO_CHANGE = "no detectable change"
UNDETERMINED = "undetermined"
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, UNDETERMINED)


@dataclass
class Side:
    """One side of a diff: its label, folder, benchmark version (the ledger's record of it, or
    None for a folder from before versions were recorded) and its long-format table."""

    label: str
    folder: Path
    name: str
    goals: dict[str, str]
    spec: JsonObject  # the spec as the ledger stored it (BenchmarkInfo.spec)
    spec_path: str | None
    version: VersionRecord | None
    table: pd.DataFrame
    not_completed: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """The change of one (task, config, metric) from the first side to the second."""

    task: str
    config: str
    metric: str
    goal: str
    paired: bool
    n_before: int
    n_after: int
    mean_before: float
    mean_after: float
    std_before: float | None
    std_after: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    verdict: str
    ratio: float | None
    warnings: list[str] = field(default_factory=list)
    #: The method behind the verdict (:mod:`benchlab.stats.verdict`); None when undetermined.
    decided_by: str | None = None

    @property
    def key(self) -> str:
        return f"{self.task}/{self.config}/{self.metric}"

    @property
    def direction(self) -> str:
        """``worse`` or ``better`` by the metric's goal, as the means moved (``unchanged`` for equal
        means): what ``ratio`` (after / before) hides for a negative score, −406 → −484 being 1.19."""
        moved = self.mean_after - self.mean_before
        if moved == 0 or moved != moved:
            return "unchanged"
        return "better" if (moved > 0) == (self.goal == "max") else "worse"

    @property
    def relative(self) -> float | None:
        """(after − before) / |before|: the change as a fraction of the earlier score's size, its
        sign the change's (None where the earlier mean is 0)."""
        return (self.mean_after - self.mean_before) / abs(self.mean_before) if self.mean_before else None


@dataclass
class VersionDiff:
    """What changed between two sides and how every shared score moved."""

    before: str
    after: str
    code: list[str]
    spec: list[str]
    packages: list[str]
    datasets: list[str]
    changes: list[Change]
    only_before: list[str]
    only_after: list[str]
    alpha: float
    summary: str
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == REGRESSION]

    @property
    def improvements(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == IMPROVEMENT]

    def to_json(self) -> JsonObject:
        """What ``benchlab diff --json`` prints: every field, and the number of changes per verdict."""
        out = asdict(self)
        for change, shown in zip(self.changes, out["changes"], strict=True):
            shown.update(direction=change.direction, relative_change=change.relative)
        out["counts"] = {v: sum(1 for c in self.changes if c.verdict == v) for v in VERDICTS}
        return out


def read_side(text: str | Path) -> Side:
    """The side named by ``FOLDER`` or ``FOLDER@VERSION``."""
    import pandas as pd

    from benchlab.ledger import COMPLETED, Store
    from benchlab.results import find_results, info, load

    raw = str(text)
    folder_text, _, wanted = raw.partition("@") if "@" in raw and not Path(raw).exists() else (raw, "", "")
    folder = find_results(folder_text)
    meta = info(folder)
    with Store.open(folder) as store:
        not_completed = {k: v for k, v in store.counts().items() if k != COMPLETED}
        versions = store.versions()
    if not wanted:
        table = load(folder)
        return Side(raw, folder, meta.name, meta.goal, meta.spec, meta.spec_path,
                    versions[-1] if versions else None, table, not_completed)
    matches = [v for v in versions if v.id.startswith(wanted)]
    if len(matches) != 1:
        listed = ", ".join(f"{v.id} ({v.recorded_at})" for v in versions) or "none recorded"
        what = "matches no" if not matches else "matches several"
        raise DataError(f"{raw}: {wanted!r} {what} benchmark version of {folder}; its versions: {listed}")
    version = matches[0]
    table = load(folder, all_runs=True)
    ids = [rid for rid in table["run_id"].unique() if _run_version(folder, rid) == version.id]
    table = table[table["run_id"].isin(ids)].drop(columns=["run_id", "in_spec"])
    if table.empty:
        raise DataError(f"{raw}: no completed run of version {version.id} in {folder} (a run re-run under a "
                        "later version keeps only its latest result)")
    spec, spec_path = meta.spec, meta.spec_path
    recorded = SavedSpec.read(version_spec_file(folder, version.id))
    if recorded is not None:  # the spec as this version resolved it, not as the ledger last saw it
        spec, spec_path = recorded.spec, recorded.spec_path
    return Side(raw, folder, meta.name, meta.goal, spec, spec_path, version,
                pd.DataFrame(table).reset_index(drop=True), {})


def _run_version(folder: Path, run_id: str) -> str | None:
    try:
        return json.loads((run_dir_of(folder, run_id) / PROVENANCE_FILE).read_text()).get("benchmark_version")
    except (OSError, ValueError):
        return None


def diff_results(before: Side, after: Side, *, metric: str | None = None, summary: str = "final",
                 alpha: float = 0.05, reps: int = 2000, seed: int = 0) -> VersionDiff:
    """Compare two sides (see the module docstring). Statistics come from :mod:`benchlab.stats`."""
    import numpy as np

    from benchlab.stats import compare, holm, is_significant, reduce_runs, validate_table
    from benchlab.stats.analysis import ComparisonRow
    from benchlab.stats.compare import shared_seeds
    from benchlab.stats.ranges import metric_ranges, normal_metrics
    from benchlab.stats.verdict import decide

    runs = []
    notes: list[str] = []
    for side in (before, after):
        table = side.table if metric is None else side.table[side.table["metric"] == metric]
        if table.empty:
            raise DataError(f"{side.label}: no completed run" + (f" with metric {metric!r}" if metric else ""))
        reduced, warnings = reduce_runs(validate_table(table, side.label), summary)  # type: ignore[arg-type]
        notes += [f"{side.label}: {w}" for w in warnings]
        runs.append(reduced)
        for status, n in side.not_completed.items():
            notes.append(f"{side.label}: {n} run(s) {status}, not in the comparison")
    keyed = [{k: dict(zip(g["seed"].tolist(), g["value"].tolist(), strict=True))
              for k, g in r.groupby(["task", "config", "metric"], sort=True)} for r in runs]
    shared = sorted(keyed[0].keys() & keyed[1].keys())
    raw: list[tuple[tuple[str, str, str], Any, dict[int, float], dict[int, float], Goal]] = []
    for i, key in enumerate(shared):
        b, a = keyed[0][key], keyed[1][key]
        goal = goal_of({**before.goals, **after.goals}, key[2])  # the after side's where both name it
        # The same pairing rule as analyze: paired on the shared seeds when they are most of
        # each side's runs, else unpaired on every run.
        paired, common = shared_seeds(sorted(b), sorted(a))
        seeds_b, seeds_a = (common, common) if paired else (sorted(b), sorted(a))
        cmp = compare(np.array([b[s] for s in seeds_b]), np.array([a[s] for s in seeds_a]),
                      paired=paired, goal=goal, reps=reps, seed=seed + i, label="/".join(key))
        raw.append((key, cmp, b, a, goal))
    # One Holm family per metric, as in analyze and the report.
    adjusted: list[float | None] = [None] * len(raw)
    for met in dict.fromkeys(key[2] for key, *_ in raw):
        idx = [i for i, (key, *_) in enumerate(raw) if key[2] == met]
        for i, p in zip(idx, holm([raw[i][1].pvalue for i in idx]), strict=True):
            adjusted[i] = p
    # The same verdict as analyze and the report: the library's is_significant (a constant shift is
    # decided by the rank test; identical scores are no change; too few seeds for any test,
    # undetermined), standing only where a range test confirms it or normality is assumed.
    t_verdicts = [is_significant(p_adj, cmp.diff_ci_low, cmp.diff_ci_high, alpha, cmp.p_floor)
                  for (_, cmp, *_), p_adj in zip(raw, adjusted, strict=True)]
    rows = [ComparisonRow(task=key[0], metric=key[2], baseline=before.label, candidate=f"{key[1]} {after.label}",
                          paired=cmp.paired, n=cmp.n, mean_diff=cmp.mean_diff, t_pvalue=cmp.t_pvalue,
                          wilcoxon_pvalue=cmp.wilcoxon_pvalue, welch_pvalue=cmp.welch_pvalue,
                          mannwhitney_pvalue=cmp.mannwhitney_pvalue, p_holm=p_adj)
            for (key, cmp, *_), p_adj in zip(raw, adjusted, strict=True)]
    sides = []
    for _key, cmp, b, a, _ in raw:
        seeds_b, seeds_a = (sorted(b.keys() & a.keys()),) * 2 if cmp.paired else (sorted(b), sorted(a))
        sides.append((np.array([b[s] for s in seeds_b], dtype=float), np.array([a[s] for s in seeds_a], dtype=float)))
    withheld: list[str] = []
    decided = decide(rows, sides, t_verdicts, {**metric_ranges(before.spec), **metric_ranges(after.spec)},
                     [*normal_metrics(before.spec), *normal_metrics(after.spec)], alpha, withheld)
    changes = []
    for (key, cmp, b, a, goal), p_adj, verdict_of in zip(raw, adjusted, decided, strict=True):
        significant = verdict_of.significant
        verdict = UNDETERMINED if significant is None else NO_CHANGE
        if significant and cmp.mean_diff is not None:
            verdict = IMPROVEMENT if (cmp.mean_diff > 0) == (goal == "max") else REGRESSION
        notes_of = list(cmp.warnings)
        notes_of += [w for w in withheld if w.startswith(f"{key[0]} {key[2]} {key[1]} {after.label} vs ")]
        if cmp.p_floor is not None and cmp.p_floor >= alpha:
            notes_of.append(f"{'/'.join(key)}: with {cmp.n} seeds the {cmp.test} test cannot give a "
                            f"p-value below {alpha:g} (its smallest is {cmp.p_floor:.4g}); too few "
                            "seeds to decide")
        vb, va = np.array(list(b.values())), np.array(list(a.values()))
        mb, ma = float(np.nanmean(vb)), float(np.nanmean(va))
        changes.append(Change(
            key[0], key[1], key[2], goal, cmp.paired, len(b), len(a), mb, ma,
            float(np.nanstd(vb, ddof=1)) if len(vb) > 1 else None,
            float(np.nanstd(va, ddof=1)) if len(va) > 1 else None,
            cmp.mean_diff, cmp.diff_ci_low, cmp.diff_ci_high, cmp.pvalue, p_adj, verdict,
            ma / mb if mb != 0 else None, notes_of, verdict_of.decided_by))
    return VersionDiff(
        before=before.label, after=after.label, code=code_changes(before, after), spec=spec_changes(before, after),
        packages=package_changes(before, after), datasets=dataset_changes(before, after), changes=changes,
        only_before=["/".join(k) for k in sorted(keyed[0].keys() - keyed[1].keys())],
        only_after=["/".join(k) for k in sorted(keyed[1].keys() - keyed[0].keys())],
        alpha=alpha, summary=summary, notes=notes)


# --------------------------------------------------------------------------- what changed

def _git(workdir: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=workdir, capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.decode("utf-8", errors="replace")


def _workdir(side: Side) -> Path | None:
    if not side.spec_path:
        return None
    base = Path(side.spec_path).parent
    wd = Path(side.spec.get("workdir") or ".")
    path = wd if wd.is_absolute() else base / wd
    return path if path.is_dir() else None


def code_changes(before: Side, after: Side) -> list[str]:
    """The commit range (with ``git diff --stat`` where the repository is at hand) and the
    recorded uncommitted diffs."""
    vb, va = before.version, after.version
    cb, ca = (vb.commit if vb else None), (va.commit if va else None)
    out = []
    if not cb or not ca:
        return ["code: not recorded on both sides (not a git repository, or results from before versions)"]
    if cb == ca:
        out.append(f"commit: {ca[:10]} on both sides")
    else:
        out.append(f"commits: {cb[:10]}..{ca[:10]}")
        stat = None
        for side in (after, before):
            wd = _workdir(side)
            if wd is not None:
                stat = _git(wd, "diff", "--stat", cb, ca)
                if stat is not None:
                    break
        if stat is None:
            out.append("git diff --stat: the repository or one of the commits is not at hand")
        else:
            out += ["    " + line for line in stat.rstrip().splitlines()] or ["    (no file differs)"]
    db, da = (vb.diff_sha256 if vb else None), (va.diff_sha256 if va else None)
    if db != da:
        def where(side: Side, v: VersionRecord | None) -> str:
            if v is None or not v.diff_sha256:
                return "none"
            return f"{side.folder / VERSIONS_DIR / v.id / DIFF_FILE} (sha256 {v.diff_sha256[:8]})"
        out.append(f"uncommitted diff: {where(before, vb)} -> {where(after, va)}")
    elif db:
        out.append(f"uncommitted diff: the same on both sides (sha256 {db[:8]})")
    return out


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def spec_changes(before: Side, after: Side) -> list[str]:
    """Params, seeds, tasks, configs, variables and commands that differ, one line each."""
    sb, sa = before.spec, after.spec
    out = []
    for part in ("tasks", "configs"):
        nb = {x["name"]: x for x in sb.get(part, [])}
        na = {x["name"]: x for x in sa.get(part, [])}
        for name in sorted(nb.keys() - na.keys()):
            out.append(f"{part}: {name} removed")
        for name in sorted(na.keys() - nb.keys()):
            out.append(f"{part}: {name} added")
        for name in sorted(nb.keys() & na.keys()):
            fb, fa = _flat({k: v for k, v in nb[name].items() if k != "name"}), \
                _flat({k: v for k, v in na[name].items() if k != "name"})
            for k in sorted(fb.keys() | fa.keys()):
                if fb.get(k) != fa.get(k):
                    out.append(f"{part}.{name}.{k}: {fb.get(k)!r} -> {fa.get(k)!r}")
    for key in ("seeds", "command", "workdir"):
        if sb.get(key) != sa.get(key):
            out.append(f"{key}: {sb.get(key)!r} -> {sa.get(key)!r}")
    fb, fa = _flat(sb.get("variables", {})), _flat(sa.get("variables", {}))
    for k in sorted(fb.keys() | fa.keys()):
        if fb.get(k) != fa.get(k):
            out.append(f"variables.{k}: {fb.get(k)!r} -> {fa.get(k)!r}")
    return out


def _packages(side: Side) -> dict[str, str] | None:
    if not side.version:
        return None
    path = side.folder / VERSIONS_DIR / side.version.id / PACKAGES_FILE
    if not path.exists():
        return None
    out = {}
    for line in path.read_text().split():
        name, _, version = line.partition("==")
        out[name.lower()] = version
    return out


def package_changes(before: Side, after: Side) -> list[str]:
    """Packages whose versions differ between the two sides' interpreters."""
    pb, pa = _packages(before), _packages(after)
    if pb is None or pa is None:
        return ["packages: not recorded on both sides"]
    out = []
    for name in sorted(pb.keys() | pa.keys()):
        if pb.get(name) != pa.get(name):
            out.append(f"{name}: {pb.get(name) or 'absent'} -> {pa.get(name) or 'absent'}")
    return out


def dataset_changes(before: Side, after: Side) -> list[str]:
    """Datasets whose checksums differ, or that one side lists and the other does not."""
    db = {d.name: d for d in (before.version.datasets if before.version else ())}
    da = {d.name: d for d in (after.version.datasets if after.version else ())}
    out = []
    for name in sorted(db.keys() | da.keys()):
        b, a = db.get(name), da.get(name)
        if b is None or a is None:
            out.append(f"{name}: {'absent' if b is None else b.sha256[:12]} -> "
                       f"{'absent' if a is None else a.sha256[:12]}")
        elif b.sha256 != a.sha256:
            out.append(f"{name}: sha256 {b.sha256[:12]} -> {a.sha256[:12]} ({b.bytes} -> {a.bytes} bytes)")
    return out


__all__ = [
    "IMPROVEMENT",
    "NO_CHANGE",
    "UNDETERMINED",
    "REGRESSION",
    "VERDICTS",
    "Change",
    "Side",
    "VersionDiff",
    "code_changes",
    "dataset_changes",
    "diff_results",
    "package_changes",
    "read_side",
    "spec_changes",
]
