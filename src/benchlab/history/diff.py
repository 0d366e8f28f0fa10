"""``benchlab diff``: two versions of a benchmark, what changed between them and which scores moved.

A side is a results folder, or ``FOLDER@VERSION``: the runs of one recorded benchmark version
in a folder that holds several (a version id or its prefix, as ``versions/`` lists them).

This module reads the two sides (their tables, specs, recorded versions and, between two folders,
their per-question records) and says what changed between them: code, spec, packages and datasets.
Which scores moved is :func:`benchlab.stats.versions.analyze_versions`' answer (pairing, Holm's
correction and the verdicts are decided there, as ``benchlab analyze`` decides them); a
:class:`VersionDiff` holds both, and :mod:`~benchlab.history.diff_text` renders it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from benchlab.errors import DataError
from benchlab.json_types import JsonObject
from benchlab.names.results_files import DIFF_FILE, PACKAGES_FILE, VERSIONS_DIR, SavedSpec, version_spec_file
from benchlab.names.run_files import PROVENANCE_FILE, run_dir_of
from benchlab.stats.curves import SUMMARIES
from benchlab.stats.versions import (
    IMPROVEMENT,
    NO_CHANGE,
    REGRESSION,
    UNDETERMINED,
    VersionAnalysis,
    VersionChange,
    VersionQuestions,
    VersionRuns,
    analyze_versions,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlab.ledger import VersionRecord
    from benchlab.stats.curves import Summary

#: A score's change, and its verdicts, as :mod:`benchlab.stats.versions` names them.
Change = VersionChange
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
    #: Named as ``FOLDER@VERSION`` (one recorded version of a folder), not as a whole folder.
    at_version: bool = False

    def runs(self) -> VersionRuns:
        """What the analysis of two versions takes of this side."""
        return VersionRuns(self.label, self.table, self.goals, self.spec, self.not_completed)


@dataclass(frozen=True)
class VersionDiff:
    """What changed between two sides (one line per item) and the analysis of how every shared
    score moved."""

    code: list[str]
    spec: list[str]
    packages: list[str]
    datasets: list[str]
    analysis: VersionAnalysis

    def to_json(self) -> JsonObject:
        """What ``benchlab diff --json`` prints: every field, the number of changes per verdict, and
        the question level's comparisons where there is one."""
        a = self.analysis
        changes = []
        for change in a.changes:
            shown = asdict(change)
            shown["warnings"] = list(change.warnings)
            shown.update(direction=change.direction, relative_change=change.relative)
            changes.append(shown)
        out: JsonObject = {
            "before": a.before, "after": a.after, "code": self.code, "spec": self.spec, "packages": self.packages,
            "datasets": self.datasets, "changes": changes, "only_before": list(a.only_before),
            "only_after": list(a.only_after), "alpha": a.alpha, "summary": a.summary, "notes": list(a.notes),
            "counts": a.counts}
        if a.questions is not None:
            out["questions"] = a.questions.to_json()["comparisons"]
        return out


def read_side(text: str | Path) -> Side:
    """The side named by ``FOLDER`` or ``FOLDER@VERSION``."""
    import pandas as pd

    from benchlab.ledger import COMPLETED, Store
    from benchlab.results import find_results, info, load

    raw = str(text)
    at_version = "@" in raw and not Path(raw).exists()
    folder_text, _, wanted = raw.partition("@") if at_version else (raw, "", "")
    folder = find_results(folder_text)
    meta = info(folder)
    with Store.open(folder) as store:
        not_completed = {k: v for k, v in store.counts().items() if k != COMPLETED}
        versions = store.versions()
    if not wanted:
        table = load(folder)
        return Side(raw, folder, meta.name, meta.goal, meta.spec, meta.spec_path,
                    versions[-1] if versions else None, table, not_completed, at_version)
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
                pd.DataFrame(table).reset_index(drop=True), {}, at_version)


def _run_version(folder: Path, run_id: str) -> str | None:
    try:
        return json.loads((run_dir_of(folder, run_id) / PROVENANCE_FILE).read_text()).get("benchmark_version")
    except (OSError, ValueError):
        return None


def diff_results(before: Side, after: Side, *, metric: str | None = None, summary: Summary = "final",
                 alpha: float = 0.05, reps: int = 2000, seed: int = 0,
                 questions: VersionQuestions | None = None) -> VersionDiff:
    """What changed between two sides and the analysis of their scores
    (:func:`benchlab.stats.versions.analyze_versions`, with the per-question records ``questions``)."""
    analysis = analyze_versions(before.runs(), after.runs(), questions=questions, metric=metric, summary=summary,
                                alpha=alpha, reps=reps, seed=seed)
    return VersionDiff(code=code_changes(before, after), spec=spec_changes(before, after),
                       packages=package_changes(before, after), datasets=dataset_changes(before, after),
                       analysis=analysis)


def diff_versions(before: str | Path, after: str | Path, *, metric: str | None = None, summary: str = "final",
                  alpha: float = 0.05, reps: int = 2000, seed: int = 0) -> VersionDiff:
    """``benchlab diff BEFORE AFTER``: each side read (a folder, or ``FOLDER@VERSION``), and, between
    two folders whose runs kept per-question records, the question level too.

    Raises:
        ResultsNotFound: a side names no results folder.
        DataError: a side names no version of its folder or has no completed run, or ``summary`` is
            not one of :data:`benchlab.stats.SUMMARIES`.
    """
    from benchlab.history.diff_questions import question_records

    if summary not in SUMMARIES:
        raise DataError(f"--summary must be one of {', '.join(SUMMARIES)}; got {summary!r}")
    side_before, side_after = read_side(before), read_side(after)
    records = None
    # A run directory keeps its latest run's records: the question level compares two folders as
    # they are, not a FOLDER@VERSION whose runs were re-run since.
    if not (side_before.at_version or side_after.at_version):
        records = question_records(side_before.folder, side_after.folder)
    return diff_results(side_before, side_after, metric=metric, summary=cast("Summary", summary), alpha=alpha,
                        reps=reps, seed=seed, questions=records)


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
    "diff_versions",
    "package_changes",
    "read_side",
    "spec_changes",
]
