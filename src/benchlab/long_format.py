"""The long format: one row per value, the one table everything downstream of a run reads.

:func:`benchlab.results.load` returns it and :func:`benchlab.stats.analyze` takes it (as does
``benchlab analyze`` for a CSV of any origin); the report's ``results.csv`` is written in it.
Its columns are named here once.
"""

from __future__ import annotations

#: Every column, in the order :func:`benchlab.results.load` gives them. ``step`` is NaN for a
#: run's final value and the step number for a point of a logged curve.
COLUMNS: tuple[str, ...] = ("benchmark", "task", "config", "seed", "metric", "step", "value")

#: What a table handed to the statistics must have ...
REQUIRED_COLUMNS: tuple[str, ...] = ("task", "config", "seed", "value")
#: ... and what it may have: a missing ``metric`` reads as one metric, a missing ``step`` as final values.
OPTIONAL_COLUMNS: tuple[str, ...] = ("metric", "step", "benchmark")

assert set(REQUIRED_COLUMNS) | set(OPTIONAL_COLUMNS) == set(COLUMNS)

#: The samples table: one row per answer an evaluation scored (lm-evaluation-harness
#: ``samples_*.jsonl``, Inspect AI logs, NeMo-Skills outputs, a CSV of these columns). ``seed`` is
#: the run's (training) seed, ``repeat`` the sample or re-run of one question, ``cluster`` the
#: question's group (empty when questions are independent), ``question_hash`` what was asked
#: (the document and the prompt), so that two runs pair on a question only when they asked the same.
SAMPLE_COLUMNS: tuple[str, ...] = ("benchmark", "task", "config", "seed", "repeat", "question", "cluster",
                                   "metric", "value", "question_hash")
#: What a samples CSV must have; the rest default (one seed, one repeat, no cluster, one metric).
SAMPLE_REQUIRED: tuple[str, ...] = ("task", "config", "question", "value")
