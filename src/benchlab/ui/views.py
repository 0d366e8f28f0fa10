"""What each page of the dashboard shows, read from a results folder (never written).

The numbers of the results table, the comparisons and the leaderboard are ``benchlab report``'s:
those it kept in the results folder while they are current, else made again by the same functions
on the same results table (:func:`report_numbers`), and are shown as the report prints them; this
module only adds what a live page needs: run
states, progress, failures as they happen, curves of runs still running, a run's files.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from markupsafe import Markup

from benchlab.collect.files import read_metrics_jsonl
from benchlab.execute.liveness import as_seen, sweep_liveness
from benchlab.execute.status import FolderStatus
from benchlab.execute.status import status as folder_status
from benchlab.json_types import ConfigValues, JsonObject
from benchlab.ledger import COMPLETED, FAILED, INTERRUPTED, PENDING, RUNNING, AttemptRecord, Store
from benchlab.names.run_files import CONFIG_FILE, LOG_FILE, METRICS_FILE, PROVENANCE_FILE, SERIES_FILE, run_dir_of
from benchlab.triage import group_failures
from benchlab.ui.library import Benchmark, NotFound, tail
from benchlab.ui.tables import CURVES_MODULES, load_modules

#: Log lines shown under a failure group, and on a run's page.
FAILURE_TAIL_LINES = 10
LOG_TAIL_LINES = 200
#: Seed lines drawn per config on a curve (the band is over all of them).
MAX_SEED_LINES = 20
#: Seeds of a (task, config) shown one by one in the grid; past that, counts by state.
SEEDS_SHOWN = 24


@dataclass
class Overview:
    """A benchmark's line on the first page: the status model's summary
    (:func:`benchlab.execute.status.status`, the one ``benchlab status`` prints)."""

    key: str
    name: str
    description: str
    counts: dict[str, int]
    total: int
    state: str  # running | done | failed runs | stopped | empty
    eta_s: float | None
    last_activity: float | None
    gpu: str | None
    #: How the page's runs are shown (a gone sweep's "running" as interrupted); not for templates.
    status: FolderStatus | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> int:
        return self.counts.get(COMPLETED, 0) + self.counts.get(FAILED, 0)

    @property
    def progress(self) -> float:
        return self.finished / self.total if self.total else 0.0


def overview(bench: Benchmark) -> Overview:
    """State, progress, ETA, last activity and GPU use of one benchmark."""
    st = folder_status(bench.folder, detail=False, read_only=True)
    uses = st.gpu_uses
    sampled = [u for u in uses if u is not None and u.util_mean is not None]
    gpu = None
    if uses:
        gpu = f"{len(uses)} runs on GPUs"
        if sampled:
            mean = sum(u.util_mean or 0.0 for u in sampled) / len(sampled)
            peak = max((u.mem_peak_mib or 0) for u in sampled)
            gpu += f", mean utilisation {mean:.0f}%, peak memory {peak / 1024:.1f} GiB"
    return Overview(bench.key, st.name, st.description, st.counts,
                    st.total, st.state, st.eta_s, st.last_activity, gpu, st)


# ---------------------------------------------------------------------------- a benchmark


@dataclass
class Cell:
    """The seeds of one (task, config): ``(seed, state, run_id)`` each."""

    seeds: list[tuple[int, str, str]] = field(default_factory=list)

    def counts(self) -> list[tuple[str, int]]:
        """Seeds per state, in the order the grid shows them."""
        order = (COMPLETED, RUNNING, FAILED, INTERRUPTED, PENDING)
        n: dict[str, int] = {s: 0 for s in order}
        for _, st, _ in self.seeds:
            n[st] = n.get(st, 0) + 1
        return [(s, k) for s, k in n.items() if k]


@dataclass
class FailureView:
    failure_class: str
    error: str
    runs: list[tuple[str, str]]  # (run name, run id)
    tail: str


@dataclass
class BenchmarkView:
    overview: Overview
    tasks: list[str]
    configs: list[str]
    grid: dict[tuple[str, str], Cell]
    failures: list[FailureView]
    curves: list[tuple[str, str]]  # (task, metric) with a logged curve


def benchmark_view(bench: Benchmark) -> BenchmarkView:
    """What the page of one benchmark shows but the report's numbers (:func:`report_numbers`,
    fetched apart: at 10,000 runs they take seconds, the rest milliseconds)."""
    over = overview(bench)
    grid: dict[tuple[str, str], Cell] = defaultdict(Cell)
    with Store.open(bench.folder, read_only=True) as store:
        info = store.benchmark()
        names: dict[str, str] = {}
        assert over.status is not None
        seen = over.status.seen  # the overview's verdict on the sweep, so the grid agrees with its counts
        for rid, name, task, config, seed, status in store.run_states():
            grid[(task, config)].seeds.append((int(seed), seen(status), rid))
            names[rid] = name
        failed = {rid for cell in grid.values() for _, st, rid in cell.seeds if st == FAILED}
        last: dict[str, AttemptRecord] = {}
        if failed:
            for a in store.attempts(status=FAILED):
                if a.run_id in failed:
                    last[a.run_id] = a
        curves = sorted((t, m) for t, m in store.curve_names())
    known_tasks, known_configs = (info.tasks, info.configs) if info is not None else ([], [])
    tasks = list(known_tasks) + sorted({t for t, _ in grid} - set(known_tasks))
    configs = list(known_configs) + sorted({c for _, c in grid} - set(known_configs))
    failures = [
        FailureView(g.failure_class, g.error, [(names.get(a.run_id, a.run_id), a.run_id) for a in g.attempts],
                    "\n".join((g.attempts[0].log_tail or "").splitlines()[-FAILURE_TAIL_LINES:]))
        for g in group_failures(last.values())
    ]
    return BenchmarkView(over, tasks, configs, dict(grid), failures, curves)


# ---------------------------------------------------------------------------- curves


def _finite(a: np.ndarray) -> list[float | None]:
    return [None if not math.isfinite(v) else float(v) for v in a.tolist()]


def _times(steps: np.ndarray, started: float | None, ended: float | None) -> list[float | None] | None:
    """Seconds since the run started at each step, the steps spread evenly over the attempt."""
    if started is None or ended is None or steps.shape[0] == 0:
        return None
    span = float(steps[-1] - steps[0])
    if span <= 0:
        return [float(ended - started)] * steps.shape[0]
    return _finite((steps - steps[0]) / span * (ended - started))


@dataclass(frozen=True)
class SeedCurve:
    """One seed's line on a curve: its steps ``x``, estimated seconds since its start ``t``
    (None where its times are not known) and values ``y``; non-finite points are None."""

    seed: int
    run_id: str
    state: str  # completed | running
    x: list[float | None]
    t: list[float | None] | None
    y: list[float | None]

    def to_json(self) -> JsonObject:
        return {"seed": self.seed, "run_id": self.run_id, "state": self.state, "x": self.x, "t": self.t,
                "y": self.y}


@dataclass(frozen=True)
class ConfigCurves:
    """A config's curves on one (task, metric): the mean and 95% band over its ``n`` completed
    seeds on the aligned steps ``x`` (empty while none has completed), and each seed's line."""

    name: str
    color: str
    n: int
    x: list[float | None]
    t: list[float | None] | None
    mean: list[float | None]
    low: list[float | None]
    high: list[float | None]
    seeds: list[SeedCurve]

    def to_json(self) -> JsonObject:
        return {"name": self.name, "color": self.color, "n": self.n, "x": self.x, "t": self.t,
                "mean": self.mean, "low": self.low, "high": self.high, "seeds": [s.to_json() for s in self.seeds]}


@dataclass(frozen=True)
class Curves:
    """What ``/b/KEY/curves.json`` serves for one (task, metric): the configs in the report's
    order and colours; ``goal`` is the metric's (``max``/``min``) or None when not recorded."""

    task: str
    metric: str
    goal: str | None
    configs: list[ConfigCurves]

    def to_json(self) -> JsonObject:
        """The page's JSON; its keys are what the dashboard's script reads."""
        return {"task": self.task, "metric": self.metric, "goal": self.goal,
                "configs": [c.to_json() for c in self.configs]}


def curves_data(bench: Benchmark, task: str, metric: str) -> Curves:
    """One (task, metric)'s curves: per config its mean and 95% band over the completed seeds
    (:func:`benchlab.stats.curves.curve_set`: the report's alignment and band), and each seed
    as a line, the running ones read from their ``metrics.jsonl`` as they grow.

    Wall time is estimated: a run's logged steps spread evenly between its start and its end
    (or its last write, while it runs), since ``metrics.jsonl`` records no clock.
    """
    load_modules(CURVES_MODULES)
    from benchlab.stats.curves import curve_set

    with Store.open(bench.folder, read_only=True) as store:
        info = store.benchmark()
        runs = {}
        for r in store.run_states(task):
            runs[(r.config, int(r.seed))] = (r.run_id, r.status)
        timing: dict[str, tuple[float, float | None]] = {}
        for times in store.attempt_times(task):
            timing[times.run_id] = (times.started, times.ended)
        # Only this (task, metric)'s curves: the ledger holds every run's (1,000,000 points at 10,000 runs).
        stored: list[tuple[str, int, np.ndarray, np.ndarray]] = list(store.completed_series(task, metric))
    aligned = curve_set(metric, task, stored)
    sets = [aligned] if aligned is not None else []
    # Per config: (n, x, t, mean, low, high) of the completed seeds, and every seed's line.
    bands: dict[str, tuple[int, list[float | None], list[float | None] | None, list[float | None],
                           list[float | None], list[float | None]]] = {}
    lines_of: dict[str, list[SeedCurve]] = defaultdict(list)
    order = list(info.configs) if info is not None else []
    if sets:
        cs = sets[0]
        for config, values in cs.values.items():
            band = cs.bands[config]
            mean, low, high = band.mean, band.low, band.high
            seeds = cs.seeds[config]
            lines = lines_of[config]
            for i, seed in enumerate(seeds[:MAX_SEED_LINES]):
                rid = runs.get((config, seed), ("", ""))[0]
                started, ended = timing.get(rid, (None, None))
                lines.append(SeedCurve(seed, rid, COMPLETED, _finite(cs.grid), _times(cs.grid, started, ended),
                                       _finite(values[i])))
            ts = [ln.t for ln in lines if ln.t is not None]
            mean_t = _finite(np.mean(np.array(ts, dtype=float), axis=0)) if ts else None
            bands[config] = (int(values.shape[0]), _finite(cs.grid), mean_t, _finite(mean), _finite(low),
                             _finite(high))
    for (config, seed), (rid, status) in runs.items():
        if status != RUNNING:
            continue
        path = run_dir_of(bench.folder, rid) / SERIES_FILE
        try:
            series = read_metrics_jsonl(path)
        except (OSError, ValueError):
            continue
        if metric not in series:
            continue
        steps, vals = series[metric]
        started = timing.get(rid, (None, None))[0]
        try:
            last_write = path.stat().st_mtime
        except OSError:
            last_write = None
        bands.setdefault(config, (0, [], None, [], [], []))
        lines_of[config].append(SeedCurve(seed, rid, RUNNING, _finite(np.asarray(steps)),
                                          _times(np.asarray(steps, dtype=float), started, last_write),
                                          _finite(np.asarray(vals))))
    ordered = [c for c in order if c in bands] + sorted(set(bands) - set(order))
    from benchlab.report.style import style  # loaded above (load_modules)

    # The report's colours, given in the same order as its curve plots give them (config order).
    goal = info.metric_goal(metric) if info is not None and metric in info.goal else None
    return Curves(task, metric, goal, [
        ConfigCurves(c, style(i)["color"], *bands[c], lines_of[c]) for i, c in enumerate(ordered)])


# ---------------------------------------------------------------------------- a run


@dataclass
class RunView:
    run_id: str
    name: str
    task: str
    config: str
    seed: int
    status: str
    params: ConfigValues
    command: str
    attempts: list[AttemptRecord]
    metrics: dict[str, float | None]
    series: dict[str, tuple[int, float | None]]  # metric -> (points, last value)
    config_text: str
    provenance: JsonObject | None  # provenance.json as written, shown key by key (older layouts too)
    files: list[str]
    log: str


def run_view(bench: Benchmark, run_dir: Path, run_id: str) -> RunView:
    """A run's config, provenance, metrics, attempts and the tail of its log."""
    with Store.open(bench.folder, read_only=True) as store:
        record = store.run_record(run_id)
        if record is None:
            raise NotFound(run_id)
        attempts = store.attempts(run_id=run_id)
        metrics = store.metrics_of_run(run_id)
        series_rows = store.series_of_run(run_id)
    series: dict[str, tuple[int, float | None]] = {}
    for metric, steps, v in series_rows:
        series[metric] = (int(steps.shape[0]), float(v[-1]) if v.size else None)
    if not metrics and (run_dir / METRICS_FILE).is_file():
        try:  # a run still running, or failed: what it wrote so far
            raw = json.loads((run_dir / METRICS_FILE).read_text())
            metrics = {k: v for k, v in raw.items() if isinstance(v, int | float)} if isinstance(raw, dict) else {}
        except (OSError, ValueError):
            pass
    if not series and (run_dir / SERIES_FILE).is_file():
        try:
            for m, (_s, v) in read_metrics_jsonl(run_dir / SERIES_FILE).items():
                series[m] = (int(len(v)), float(v[-1]) if len(v) else None)
        except (OSError, ValueError):
            pass
    provenance = None
    try:
        provenance = json.loads((run_dir / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        pass
    try:
        config_text = (run_dir / CONFIG_FILE).read_text(errors="replace")
    except OSError:
        config_text = ""
    files = sorted(p.name for p in run_dir.iterdir() if p.is_file()) if run_dir.is_dir() else []
    status = as_seen(record.status, sweep_liveness(bench.folder))  # as the benchmark page shows it
    return RunView(run_id, record.name, record.task, record.config, int(record.seed), status, record.params,
                   record.command, attempts,
                   metrics, series, config_text, provenance, files,
                   tail(run_dir / LOG_FILE, LOG_TAIL_LINES))


def cell_html(text: str) -> Markup:
    """A cell of the report's Markdown tables as HTML: escaped, with its line breaks kept."""
    return Markup(html.escape(html.unescape(text)).replace("&lt;br&gt;", "<br>").replace("\\|", "|"))
