"""The long format: one row per value, the one table everything downstream of a run reads.

:func:`benchlab.results.load` returns it and :func:`benchlab.stats.analyze` takes it (as does
``benchlab analyze`` for a CSV of any origin); the report's ``results.csv`` is written in it.
Its columns are named here once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

#: Every column, in the order :func:`benchlab.results.load` gives them. ``step`` is NaN for a
#: run's final value and the step number for a point of a logged curve.
COLUMNS: tuple[str, ...] = ("benchmark", "task", "config", "seed", "metric", "step", "value")

#: What a table handed to the statistics must have ...
REQUIRED_COLUMNS: tuple[str, ...] = ("task", "config", "seed", "value")
#: ... and what it may have: a missing ``metric`` reads as one metric, a missing ``step`` as final values.
OPTIONAL_COLUMNS: tuple[str, ...] = ("metric", "step", "benchmark")

assert set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS) == set(COLUMNS)

#: A published table (the report's ``results.csv``) also lists every planned run that did not
#: complete, so that the table alone accounts for every seed: ``status`` is one of
#: :data:`STATUSES` and ``failure_class`` says why a failed run failed (``benchlab.names.failures``).
STATUS = "status"
FAILURE_CLASS = "failure_class"
COMPLETED, FAILED, MISSING = "completed", "failed", "missing"
STATUSES: tuple[str, ...] = (COMPLETED, FAILED, MISSING)


def with_status(finals: pd.DataFrame, planned: dict[tuple[str, str], list[int]],
                failed: dict[tuple[str, str, int], str | None], metric: str, benchmark: str) -> pd.DataFrame:
    """``finals`` (completed runs' values, long format) with :data:`STATUS` and
    :data:`FAILURE_CLASS` columns, and one row more per planned run without a value: its
    ``metric`` row with an empty value, ``failed`` (with its class) or ``missing`` (not run yet)."""
    import pandas as pd

    out = finals.copy()
    out[STATUS] = COMPLETED
    out[FAILURE_CLASS] = ""
    done = {(str(t), str(c), int(s)) for t, c, s in zip(out["task"].tolist(), out["config"].tolist(),
                                                       out["seed"].tolist(), strict=True)}
    extra = []
    for (task, config), seeds in planned.items():
        for seed in seeds:
            key = (str(task), str(config), int(seed))
            if key in done:
                continue
            is_failed = key in failed
            extra.append({"benchmark": benchmark, "task": task, "config": config, "seed": int(seed),
                          "metric": metric, "step": float("nan"), "value": float("nan"),
                          STATUS: FAILED if is_failed else MISSING,
                          FAILURE_CLASS: (failed.get(key) or "unknown") if is_failed else ""})
    if extra:
        out = pd.concat([out, pd.DataFrame(extra, columns=list(out.columns))], ignore_index=True)
    return out


def split_status(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[tuple[str, str], list[int]] | None,
                                                list[tuple[str, str, int]]]:
    """A published table read back: ``(values, planned, failed)``, the completed runs' rows
    without the status columns, the seeds planned per (task, config), and the failed runs'
    (task, config, seed). A table without a :data:`STATUS` column is returned as it is, with
    ``planned`` None (its seeds are all it says)."""
    if STATUS not in table.columns:
        return table, None, []
    planned: dict[tuple[str, str], list[int]] = {}
    failed: list[tuple[str, str, int]] = []
    for task, config, seed, status in zip(table["task"], table["config"], table["seed"], table[STATUS],
                                          strict=True):
        seeds = planned.setdefault((str(task), str(config)), [])
        if int(seed) not in seeds:
            seeds.append(int(seed))
        if status == FAILED and (str(task), str(config), int(seed)) not in failed:
            failed.append((str(task), str(config), int(seed)))
    values = table[table[STATUS] == COMPLETED].drop(columns=[c for c in (STATUS, FAILURE_CLASS)
                                                             if c in table.columns])
    return values.reset_index(drop=True), planned, failed


#: The samples table: one row per answer an evaluation scored (lm-evaluation-harness
#: ``samples_*.jsonl``, Inspect AI logs, NeMo-Skills outputs, a CSV of these columns). ``seed`` is
#: the run's (training) seed, ``repeat`` the sample or re-run of one question, ``cluster`` the
#: question's group (empty when questions are independent), ``question_hash`` what was asked
#: (the document and the prompt), so that two runs pair on a question only when they asked the same.
SAMPLE_COLUMNS: tuple[str, ...] = ("benchmark", "task", "config", "seed", "repeat", "question", "cluster",
                                   "metric", "value", "question_hash")
#: What a samples CSV must have; the rest default (one seed, one repeat, no cluster, one metric).
SAMPLE_REQUIRED: tuple[str, ...] = ("task", "config", "question", "value")
