"""Results folders with known numbers for the report tests.

``build_run_world`` runs a real ``benchlab run`` of a throwaway spec whose run
script prints ``score = base + offset[seed]``: every value is fixed by the spec
below, so tests compute expectations by hand from ``OFFSETS`` and ``BASES``.
``build_store_world`` writes a ledger directly through :class:`Store` (for the
goal-min cases, where a real sweep adds nothing).
"""

from __future__ import annotations

import struct
import textwrap
import zlib
from pathlib import Path

import numpy as np

from benchlab.ledger import Store
from benchlab.plan import Run
from benchlab_testing import run_cli

SEEDS = 4
# Per config: the score offset of seeds 0..3. b - a = [0.20, 0.21, 0.20, 0.22] (clearly better);
# c - a = [+0.01, -0.01, +0.01, -0.01] (mean difference 0: no significant difference).
OFFSETS = {
    "a": [0.01, 0.04, 0.02, 0.05],
    "b": [0.21, 0.25, 0.22, 0.27],
    "c": [0.02, 0.03, 0.03, 0.04],
}
BASES = {"t1": 0.5, "t2": 0.5, "t3": 0.3, "t4": 0.5}
TARGETS = {"t1": 0.5, "t2": 0.6, "t3": 0.6, "t4": None}

SCRIPT = """
import json, os, sys
args = dict(a.split("=", 1) for a in sys.argv[1:])
run_dir = os.environ["BENCHLAB_RUN_DIR"]
seed = int(os.environ["BENCHLAB_SEED"])
score = float(args["base"]) + [float(x) for x in args["offs"].split("_")][seed]
with open(os.path.join(run_dir, "metrics.json"), "w") as f:
    json.dump({"score": score, "time": 10.0 + seed}, f)
# Curves on different step grids per seed, so the report must interpolate.
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for i in range(4):
        step = i * (10 + seed)
        f.write(json.dumps({"step": step, "score": score * (i + 1) / 4}) + "\\n")
"""


def spec_text() -> str:
    tasks = "\n".join(
        f"  - name: {t}\n    params: {{base: {b}}}"
        + (f"\n    target: {TARGETS[t]}" if TARGETS[t] is not None else "")
        for t, b in BASES.items()
    )
    configs = "\n".join(
        f"  - name: {c}\n    params: {{offs: '{'_'.join(map(str, o))}'}}"
        for c, o in OFFSETS.items()
    )
    return (
        textwrap.dedent("""
        name: world
        description: Known numbers for the report tests.
        tasks:
        {tasks}
        configs:
        {configs}
        seeds: {seeds}
        command: python run.py base={{base}} offs={{offs}}
        metrics:
          primary: {{name: score, goal: max, assume: normal}}
          secondary: [{{name: time, goal: min}}]
        baseline: a
        """)
        .format(tasks="\n" + tasks, configs="\n" + configs, seeds=SEEDS)
        .replace("tasks:\n\n", "tasks:\n")
        .replace("configs:\n\n", "configs:\n")
        .lstrip()
    )


def build_run_world(root: Path) -> Path:
    """Run the throwaway spec with the real command; returns the results folder."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.py").write_text(SCRIPT)
    (root / "bench.yaml").write_text(spec_text())
    run_cli(
        "run",
        "bench.yaml",
        "--results",
        "out",
        "-j",
        "2",
        "--no-report",
        cwd=root,
        timeout=300,
        check=True,
    )
    return root / "out"


def scores(task: str, config: str) -> list[float]:
    """The scores the run script writes for (task, config), seeds 0..3."""
    return [BASES[task] + o for o in OFFSETS[config]]


def build_store_world(
    folder: Path,
    values: dict[tuple[str, str], list[float | None]],
    *,
    goal: str = "max",
    targets: dict[str, float | None] | None = None,
    references: dict[str, list[float]] | None = None,
    baseline: str | None = None,
    curves: bool = False,
    partial: dict[tuple[str, str], str] | None = None,
    assume: str | None = "normal",
) -> Path:
    """A ledger holding the given final ``score`` per (task, config) over seeds 0..n-1: a value of
    None is a seed that failed; ``partial`` notes (task, config)'s runs as evaluated on part of
    their samples (lm-eval ``--limit``), as collect/lm_eval.py notes them; ``assume`` is the
    primary metric's declared distribution (None: nothing assumed, so t verdicts are withheld)."""
    from benchlab.ledger import PARTIAL_NOTE_PREFIX
    tasks = list(dict.fromkeys(t for t, _ in values))
    configs = list(dict.fromkeys(c for _, c in values))
    with Store.create(folder) as store:
        store._set_meta(
            name="stored",
            description="",
            primary="score",
            goals={"score": goal},
            metrics=["score"],
            baseline=baseline,
            tasks=tasks,
            configs=configs,
            targets=targets or {t: None for t in tasks},
            references=references or {},
            seeds=list(range(max(len(v) for v in values.values()))),
            spec={
                "name": "stored",
                "command": "python run.py",
                "configs": [{"name": c, "params": {}} for c in configs],
                # The report tests read the t verdict's wording; without a range or this
                # assumption it is withheld (tests/report/test_report_verdict_method.py).
                "metrics": {"primary": {"name": "score", "goal": goal, "assume": assume}} if assume else {},
            },
        )
        runs = [
            Run(
                run_id=f"{t}-{c}-{s}",
                benchmark="stored",
                task=t,
                config=c,
                seed=s,
                params={},
                command="python run.py",
            )
            for (t, c), vals in values.items()
            for s in range(len(vals))
        ]
        store.register(runs)
        store.set_plan([r.run_id for r in runs])
        for run in runs:
            value = values[(run.task, run.config)][run.seed]
            attempt, _ = store.start_attempt(run.run_id, host="test")
            if value is None:
                store.finish_attempt(attempt, run.run_id, status="failed", run_status="failed", exit_code=1,
                                     failure_class="crash", error="failed on purpose", log_tail="boom")
                continue
            note = (partial or {}).get((run.task, run.config))
            series = None
            if curves:
                steps = np.array([0.0, 50.0, 100.0])
                series = {"score": (steps, value * steps / 100.0)}
            store.finish_attempt(
                attempt,
                run.run_id,
                status="completed",
                run_status="completed",
                exit_code=0,
                metrics={"score": value},
                series=series,
                error=None if note is None else f"{PARTIAL_NOTE_PREFIX} (--limit): {note}",
            )
            # As a sweep leaves it: each completed run has its folder (the report links it).
            (folder / "runs" / run.run_id).mkdir(parents=True, exist_ok=True)
    return folder


def add_completed_run(folder: Path, task: str, config: str, seed: int, score: float) -> None:
    """A run of ``(task, config, seed)`` completed with ``score`` in ``folder``'s ledger (benchmark
    ``stored``, as :func:`build_store_world` names it), as a sweep records one."""
    run = Run(run_id=f"{task}-{config}-{seed}", benchmark="stored", task=task, config=config, seed=seed, params={},
              command="python run.py")
    with Store.open(folder) as store:
        store.register([run])
        store.add_to_plan([run.run_id])
        attempt, _ = store.start_attempt(run.run_id, host="test")
        store.finish_attempt(attempt, run.run_id, status="completed", run_status="completed", exit_code=0,
                             metrics={"score": score})


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk, after checking the signature and the chunk's CRC."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    (crc,) = struct.unpack(">I", data[29:33])
    assert zlib.crc32(data[12:29]) == crc, f"{path}: corrupt IHDR"
    assert data.rstrip(b"\x00")[-8:-4] == b"IEND", f"{path}: truncated (no IEND chunk)"
    return struct.unpack(">II", data[16:24])
