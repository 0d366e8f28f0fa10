"""Re-reading run directories: refresh metrics, or rebuild the whole ledger from ``runs/``.

The run directories hold everything needed: ``config.yaml`` (what the run
was), ``provenance.json`` (how its last attempt ended) and the metric files.
The spec the folder was run with is kept in ``benchmark.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from benchlab.collect import collect_run
from benchlab.collect.described import described_meta, described_primary
from benchlab.errors import ResultsNotFound
from benchlab.execute import triage
from benchlab.plan import Run, run_context
from benchlab.spec import Metric, Spec
from benchlab.store import COMPLETED, DB_NAME, FAILED, Store


def _spec_of(folder: Path) -> Spec:
    path = folder / "benchmark.json"
    if not path.exists():
        raise ResultsNotFound(folder, f"{path} is missing: cannot tell which metrics to read")
    data = json.loads(path.read_text())
    return Spec.model_validate(data["spec"])


def _metrics(spec: Spec) -> tuple[str, list[Metric]]:
    return spec.metrics.primary.name, spec.metrics.all


def rebuild_store(folder: Path | str) -> dict[str, int]:
    """Recreate ``benchlab.db`` from ``runs/*``; an existing ledger is renamed to a backup first."""
    from benchlab.execute.sweep import write_benchmark_meta

    folder = Path(folder)
    runs_dir = folder / "runs"
    if not runs_dir.is_dir():
        raise ResultsNotFound(folder, f"{folder}: no runs/ folder to rebuild from")
    # Without the spec, the run directories describe themselves: benchlab's metrics.json (which
    # holds what extractors read) and the metrics each run was judged by, in provenance.json.
    spec = _spec_of(folder) if (folder / "benchmark.json").exists() else None
    primary, metrics = _metrics(spec) if spec is not None else (described_primary(runs_dir), [])
    db = folder / DB_NAME
    if db.exists():
        backup = folder / f"{DB_NAME}.bak-{int(time.time())}"
        db.rename(backup)
        for suffix in ("-wal", "-shm"):
            side = folder / (DB_NAME + suffix)
            if side.exists():
                side.rename(folder / (backup.name + suffix))
    counts = {"runs": 0, "completed": 0, "failed": 0, "pending": 0}
    with Store.create(folder) as store:
        if spec is not None:
            write_benchmark_meta(store, spec, folder)
        else:
            store.set_meta(**described_meta(runs_dir))
        for run_dir in sorted(p for p in runs_dir.iterdir() if (p / "config.yaml").exists()):
            cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
            run = Run(run_id=cfg["run_id"], benchmark=cfg["benchmark"], task=cfg["task"],
                      config=cfg["config"], seed=int(cfg["seed"]), params=cfg.get("params") or {},
                      command=cfg["command"])
            store.register([run])
            counts["runs"] += 1
            prov_path = run_dir / "provenance.json"
            if not prov_path.exists():
                # Written ahead, or killed before it ended: still to do.
                counts["pending"] += 1
                continue
            prov = json.loads(prov_path.read_text())
            started = float(prov.get("started") or time.time())
            attempt_id, _ = store.start_attempt(run.run_id, host=prov.get("host") or "", started=started,
                                                node=prov.get("node"))
            ended = float(prov.get("ended") or started)
            tail = triage.log_tail(run_dir / "train.log")
            if prov.get("exit_code") == 0:
                collected = collect_run(run_dir, metrics, run.context())
                missing = collected.missing(primary)
                if not missing:
                    store.finish_attempt(attempt_id, run.run_id, status=COMPLETED, run_status=COMPLETED,
                                         exit_code=0, ended=ended, metrics=collected.finals,
                                         series=collected.series)
                    counts["completed"] += 1
                    continue
                verdict = triage.Verdict(triage.MISSING_METRIC, missing)
            else:
                verdict = triage.classify(exit_code=prov.get("exit_code"), signal=prov.get("signal"),
                                          timed_out=bool(prov.get("timed_out")), tail=tail)
            store.finish_attempt(attempt_id, run.run_id, status=FAILED, run_status=FAILED,
                                 exit_code=prov.get("exit_code"), signal=prov.get("signal"), ended=ended,
                                 failure_class=verdict.failure_class, error=verdict.error, log_tail=tail)
            counts["failed"] += 1
    return counts


def recollect(folder: Path | str) -> dict[str, int]:
    """Read the metrics of every completed run again (after changing an extractor, say)."""
    folder = Path(folder)
    spec = _spec_of(folder)
    primary, metrics = _metrics(spec)
    counts = {"completed": 0, "failed": 0}
    with Store.open(folder) as store:
        for run in store.runs():
            if run.status != COMPLETED:
                continue
            run_dir = folder / "runs" / run.run_id
            collected = collect_run(run_dir, metrics, run_context(run.task, run.config, run.seed, run.params))
            missing = collected.missing(primary)
            with store.transaction() as c:
                if missing:
                    c.execute("UPDATE runs SET status = ? WHERE run_id = ?", (FAILED, run.run_id))
                    c.execute("UPDATE attempts SET status = ?, failure_class = ?, error = ? WHERE "
                              "attempt_id = (SELECT MAX(attempt_id) FROM attempts WHERE run_id = ?)",
                              (FAILED, triage.MISSING_METRIC, missing, run.run_id))
                    counts["failed"] += 1
                else:
                    store._replace_metrics(c, run.run_id, collected.finals, collected.series)
                    counts["completed"] += 1
    return counts
