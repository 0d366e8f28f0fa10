"""Reading finished runs' folders again with the spec as it is now.

A metric named wrong in the spec, or an extractor's pattern that missed, fails
every run as ``missing-metric`` although the runs themselves finished and wrote
what they had. Fixing the spec and reading the folders again makes them
completed without training anything again: ``benchlab collect --failed``.
Plain ``benchlab collect`` reads the completed runs again (after an extractor
changed, say), and demotes those whose primary metric is now missing.

Only runs whose last attempt exited 0 are read: a run that crashed has nothing
to read. The attempt keeps its failure class, so the ledger still says how it
ended at the time, and its error says when and why it became completed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from benchlab.collect import collect_run
from benchlab.collect.files import RECORDED_BY_BENCHLAB, write_extracted_metrics
from benchlab.errors import DataError
from benchlab.ledger import COMPLETED, FAILED, ResultsLock, Store
from benchlab.names.benchmark_info import BenchmarkInfo
from benchlab.names.results_files import SavedSpec, benchmark_file
from benchlab.names.run_files import PROVENANCE_FILE, run_dir_of
from benchlab.plan import expand
from benchlab.spec import Spec


@dataclass
class Reread:
    """What reading the run folders again changed, by run name."""

    completed: list[str] = field(default_factory=list)  # failed before, completed now
    still_failing: dict[str, str] = field(default_factory=dict)  # run name -> why it still fails
    refreshed: int = 0  # completed runs whose metrics were read again
    demoted: dict[str, str] = field(default_factory=dict)  # completed before, now failing: why
    crashed: int = 0  # failed runs that did not exit 0: nothing to read
    not_in_spec: int = 0  # runs of the ledger that the spec no longer names


def reread_runs(folder: Path | str, spec: Spec, *, failed: bool) -> Reread:
    """Read the metrics of ``folder``'s runs again with ``spec``'s metrics and extractors.

    With ``failed``, the runs that failed for a missing metric are read; otherwise the
    completed ones. The ledger's metric definitions (primary, goals) become ``spec``'s.
    """
    folder = Path(folder)
    primary = spec.metrics.primary.name
    planned = {r.run_id: r for r in expand(spec)}
    out = Reread()
    judged_by = {"primary": primary, "goals": {m.name: m.goal for m in spec.metrics.all}}
    wanted = FAILED if failed else COMPLETED
    with ResultsLock(folder), Store.open(folder) as store:
        last = {a.run_id: a for a in store.attempts()}
        for record in store.runs():
            if record.status != wanted:
                continue
            run = planned.get(record.run_id)
            if run is None:
                out.not_in_spec += 1
                continue
            attempt = last.get(record.run_id)
            if attempt is None or attempt.exit_code != 0:
                out.crashed += 1
                continue
            run_dir = run_dir_of(folder, record.run_id)
            ours = _benchlab_wrote_metrics_json(run_dir)
            collected = collect_run(run_dir, spec.metrics.all, run.context(), metrics_json=not ours)
            failure = collected.failure(primary)
            with store.transaction():
                if failure is not None:
                    cls, missing = failure
                    if failed:
                        out.still_failing[record.name] = missing
                    else:
                        out.demoted[record.name] = missing
                    store.reread_failed(record.run_id, attempt.attempt_id, failure_class=cls,
                                        error=missing, demote_run=not failed)
                    continue
                if failed:
                    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
                    note = (f"completed by `benchlab collect --failed` at {stamp}: its folder read again "
                            f"with the spec's metrics (at its end: {attempt.error})")
                    store.reread_completed(record.run_id, attempt.attempt_id, note)
                    out.completed.append(record.name)
                else:
                    out.refreshed += 1
                store.replace_metrics(record.run_id, collected.finals, collected.series)
            updates: dict[str, object] = {"metrics": judged_by}
            if write_extracted_metrics(run_dir, collected.finals, collected.extracted, replace=ours):
                updates["metrics_json"] = RECORDED_BY_BENCHLAB
            _update_provenance(run_dir, updates)
        _adopt_metrics(store, folder, spec)
    return out


def _benchlab_wrote_metrics_json(run_dir: Path) -> bool:
    """Whether the run folder's ``metrics.json`` is benchlab's copy of extracted metrics."""
    try:
        prov = json.loads((run_dir / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(prov, dict) and prov.get("metrics_json") == RECORDED_BY_BENCHLAB


def _update_provenance(run_dir: Path, updates: dict[str, object]) -> None:
    path = run_dir / PROVENANCE_FILE
    try:
        prov = json.loads(path.read_text())
    except (OSError, ValueError):
        prov = {}
    if not isinstance(prov, dict):
        prov = {}
    prov.update(updates)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(prov, indent=1, default=str))
    tmp.replace(path)


def _adopt_metrics(store: Store, folder: Path, spec: Spec) -> None:
    """The ledger's and ``benchmark.json``'s metric definitions become ``spec``'s: its metrics
    are what the ledger now holds. What the spec says of anything else is left to `benchlab run`."""
    new = BenchmarkInfo.from_spec(spec)
    metrics = new.spec["metrics"]
    base = store.benchmark() or new
    store.set_benchmark(replace(base, primary=new.primary, goal=new.goal, metrics=new.metrics,
                                spec={**base.spec, "metrics": metrics}))
    path = benchmark_file(folder)
    try:
        saved = SavedSpec.read(path)
    except (OSError, DataError):
        return  # the ledger holds the metrics now; a copy that cannot be read is left as it is
    if saved is not None:
        replace(saved, spec={**saved.spec, "metrics": metrics}).write(path)
