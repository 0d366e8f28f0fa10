"""The question-level statistics of a whole samples table: every (task, config, metric) over
its questions, and every candidate against the baseline, paired over shared questions.

The samples table (columns in :mod:`benchlab.long_format`, ``SAMPLE_COLUMNS``) has one row per
answer: ``task, config, seed, repeat, question, cluster, metric, value``. Each (task, metric)
is laid out once as a dense array ``(configs, seeds, questions, repeats)`` from integer codes,
so that a sweep of millions of answers costs a few array passes; the statistics are the pure
functions of :mod:`benchlab.stats.questions`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlab.json_types import JsonObject
from benchlab.stats.compare import holm, is_significant
from benchlab.stats.questions import (
    EvalPower,
    PairedQuestions,
    QuestionSummary,
    paired_questions,
    paired_seeds_questions,
    question_means,
    questions_for_effect,
    summarize_questions,
)

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class QuestionComparisonRow:
    """One candidate against the baseline on one (task, metric), with its Holm-adjusted p-value
    and verdict (``better``, ``worse``, ``no difference found``, or ``undetermined``)."""

    task: str
    metric: str
    baseline: str
    candidate: str
    result: PairedQuestions
    p_holm: float | None = None
    significant: bool | None = None
    verdict: str = "undetermined"
    #: Questions and samples needed for the effect asked for (``effect=``), else None.
    power: EvalPower | None = None

    def to_json(self) -> JsonObject:
        out = {"task": self.task, "metric": self.metric, "baseline": self.baseline,
               "candidate": self.candidate, **asdict(self.result)}
        out.update(p_holm=self.p_holm, significant=self.significant, verdict=self.verdict)
        if self.power is not None:
            out["power"] = asdict(self.power)
        return _finite(out)


@dataclass
class QuestionSummaryRow:
    """One (task, config, metric) over its questions."""

    task: str
    config: str
    metric: str
    seeds: int
    result: QuestionSummary

    def to_json(self) -> JsonObject:
        return _finite({"task": self.task, "config": self.config, "metric": self.metric,
                        "seeds": self.seeds, **asdict(self.result)})


@dataclass
class QuestionAnalysis:
    """What :func:`analyze_questions` finds; ``to_json`` is what ``--json`` prints."""

    baseline: str | None
    summary: list[QuestionSummaryRow] = field(default_factory=list)
    comparisons: list[QuestionComparisonRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {"level": "questions", "baseline": self.baseline,
                "summary": [r.to_json() for r in self.summary],
                "comparisons": [c.to_json() for c in self.comparisons],
                "warnings": list(self.warnings)}


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        return v
    return {k: fix(v) for k, v in d.items()}


def _codes(column: pd.Series) -> tuple[np.ndarray, list[Any]]:
    """Integer codes of ``column`` in the sorted order of its values (as text), -1 for missing."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        names = [str(c) for c in column.cat.categories]
        order = np.argsort(np.array(names, dtype=object), kind="stable")
        codes = column.cat.codes.to_numpy()
        if np.array_equal(order, np.arange(len(names))):
            return codes, names  # categories already in order: their codes serve as they are
        rank = np.empty(len(names) + 1, np.int64)
        rank[order] = np.arange(len(names))
        rank[-1] = -1  # a missing value's code -1 indexes the last slot
        return rank[codes], [names[k] for k in order]
    if pd.api.types.is_integer_dtype(column.dtype) and len(column):
        # Integer ids (seeds, repeats, numbered questions) are their own codes once shifted to 0.
        v = column.to_numpy()
        low, high = int(v.min()), int(v.max())
        if 0 <= high - low < 1 << 24:
            codes = v if low == 0 and v.dtype == np.int64 else np.subtract(v, low, dtype=np.int64)
            return codes, list(range(low, high + 1))
    codes, uniques = pd.factorize(column.astype(str) if column.dtype == object else column, sort=True)
    return codes.astype(np.int64), [str(u) for u in uniques]


def _names(column: pd.Series) -> list[str]:
    """The distinct values of ``column`` as sorted text (from its categories when it has them)."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        return sorted({str(c) for c in column.cat.categories[np.unique(column.cat.codes[column.cat.codes >= 0])]})
    return sorted({str(v) for v in column.unique()})


def _local(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes renumbered ``0..k-1`` within a part of the table, and the part's original codes.

    Codes are small non-negative integers: a count per code finds those present in one pass,
    without the sort ``np.unique`` would do on millions of rows."""
    present = np.flatnonzero(np.bincount(codes))
    remap = np.zeros(int(present[-1]) + 1, np.int64)
    remap[present] = np.arange(present.size)
    return remap[codes], present


def analyze_questions(table: pd.DataFrame, *, baseline: str | None = None, candidates: list[str] | None = None,
                      metric: str | None = None, goal: str | dict[str, str] = "max", alpha: float = 0.05,
                      power: float = 0.8, effect: float | None = None) -> QuestionAnalysis:
    """Summaries and paired comparisons of a samples table.

    Args:
        table: the samples table; ``seed``, ``repeat``, ``cluster`` and ``metric`` may be
            absent (one seed, one sample, no clusters, one metric).
        baseline: the config the others are compared with (default: the first in sort order).
        candidates: the configs compared with it (default: every other one).
        goal: ``max`` (higher is better) or ``min``, or one per metric.
        effect: a difference to plan for: each comparison then says how many questions (or
            samples per question) detect it with ``power`` at ``alpha``
            (:func:`~benchlab.stats.questions.questions_for_effect`).

    Holm's correction runs over every comparison made (each task, metric and candidate).
    With two or more seeds shared by both configs, the comparison is over seeds and
    questions (:func:`~benchlab.stats.questions.paired_seeds_questions`); otherwise over the
    questions of the one seed they share (the lowest).
    """
    from benchlab.errors import DataError

    missing = [c for c in ("task", "config", "question", "value") if c not in table.columns]
    if missing:
        raise DataError(f"the samples table lacks column(s) {', '.join(missing)}; expected task, config, "
                        "question, value (and optionally benchmark, seed, repeat, cluster, metric)")
    if metric is not None:
        have = _names(table["metric"]) if "metric" in table.columns else ["value"]
        if metric not in have:
            raise DataError(f"no metric {metric!r} in the samples; metrics are {', '.join(have)}")
        if len(have) > 1:
            table = table[table["metric"].astype(str) == metric]
    configs = _names(table["config"])
    if not configs:
        raise DataError("the samples table is empty")
    base = baseline if baseline is not None else configs[0]
    if base not in configs:
        raise DataError(f"no config {base!r} in the samples; configs are {', '.join(configs)}")
    wanted = candidates if candidates is not None else [c for c in configs if c != base]
    unknown = [c for c in wanted if c not in configs]
    if unknown:
        raise DataError(f"no config {', '.join(map(repr, unknown))} in the samples; configs are {', '.join(configs)}")
    out = QuestionAnalysis(baseline=base)
    n = len(table)
    zeros = np.zeros(n, np.int64)
    task, task_names = _codes(table["task"])
    cfg, cfg_names = _codes(table["config"])
    question, _ = _codes(table["question"])
    metric_code, metric_names = _codes(table["metric"]) if "metric" in table.columns else (zeros, ["value"])
    seed, seed_names = _codes(table["seed"]) if "seed" in table.columns else (zeros, [0])
    repeat, _ = _codes(table["repeat"]) if "repeat" in table.columns else (zeros, [0])
    cluster = None
    if "cluster" in table.columns and table["cluster"].notna().any():
        cluster, _ = _codes(table["cluster"])
    for column, codes in (("task", task), ("config", cfg), ("question", question), ("metric", metric_code),
                        ("seed", seed), ("repeat", repeat)):
        if codes.size and codes.min() < 0:
            first = int(np.flatnonzero(codes < 0)[0])
            raise DataError(f"the samples table's row {first + 1} has no {column}")
    values = table["value"].to_numpy(dtype=float)
    # One pass to order the rows by (metric, task); each part is then a slice.
    key = metric_code.astype(np.int64) * len(task_names) + task
    # A stable sort of a 16-bit key is a radix sort in numpy: linear in the rows.
    order = np.argsort(key.astype(np.int16) if key.max() < 2**15 else key, kind="stable")
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    for part_rows in np.split(order, bounds):
        if part_rows.size == 0:
            continue
        m = metric_names[metric_code[part_rows[0]]]
        t = task_names[task[part_rows[0]]]
        part = _Part(cfg[part_rows], seed[part_rows], question[part_rows], repeat[part_rows], values[part_rows],
                     None if cluster is None else cluster[part_rows])
        _analyze_task(out, part, t, m, cfg_names, seed_names, base, wanted, power, 1 - alpha, effect)
    judge(out.comparisons, alpha=alpha, goal=goal)
    return out


def judge(comparisons: list[QuestionComparisonRow], *, alpha: float = 0.05,
          goal: str | dict[str, str] = "max") -> None:
    """Holm's correction over ``comparisons`` together, and each one's verdict (in place)."""
    goals = goal if isinstance(goal, dict) else {}
    for row, p in zip(comparisons, holm([c.result.pvalue for c in comparisons]), strict=True):
        r = row.result
        row.p_holm = p
        row.significant = is_significant(p, r.ci_low, r.ci_high, alpha)
        g = goals.get(row.metric, goal if isinstance(goal, str) else "max")
        if row.significant is None:
            row.verdict = "undetermined"
        elif not row.significant:
            row.verdict = "no difference found"
        else:
            row.verdict = "better" if (r.mean_diff > 0) == (g == "max") else "worse"


@dataclass
class _Part:
    """The rows of one (metric, task) as integer codes, shape ``(rows,)`` each."""

    config: np.ndarray
    seed: np.ndarray
    question: np.ndarray
    repeat: np.ndarray
    value: np.ndarray
    cluster: np.ndarray | None


def _analyze_task(out: QuestionAnalysis, part: _Part, task: str, metric: str, cfg_names: list[str],
                  seed_names: list[Any], base: str, candidates: list[str], power: float, confidence: float,
                  effect: float | None = None) -> None:
    cfg, cfg_present = _local(part.config.astype(np.int64, copy=False))
    seed, seed_present = _local(part.seed)
    q, _ = _local(part.question)
    rep, _ = _local(part.repeat)
    shape = (cfg_present.size, seed_present.size, int(q.max()) + 1, int(rep.max()) + 1)
    cells = np.full(shape, np.nan)
    flat = np.ravel_multi_index((cfg, seed, q, rep), shape)
    if np.bincount(flat, minlength=cells.size).max() > 1:
        out.warnings.append(f"{task} {metric}: several values for one (config, seed, question, repeat); "
                            "the last one kept")
    cells.ravel()[flat] = part.value
    clusters = None
    if part.cluster is not None and (part.cluster >= 0).any():
        # A question's cluster is the same wherever it is asked: take it from any row.
        clusters = np.full(shape[2], -1, np.int64)
        clusters[q] = part.cluster
    means = question_means(cells.reshape(-1, shape[3])).reshape(shape[:3])  # (configs, seeds, questions)
    index = {cfg_names[k]: i for i, k in enumerate(cfg_present)}
    names = [seed_names[k] for k in seed_present]
    for name, i in index.items():
        has = ~np.isnan(means[i])
        seeds_here = np.flatnonzero(has.any(axis=1))
        s0 = seeds_here[0] if seeds_here.size else 0
        answered = has[s0]
        summary = summarize_questions(cells[i, s0][answered], None if clusters is None else clusters[answered],
                                      confidence)
        if seeds_here.size > 1:
            summary.notes.append(f"{seeds_here.size} seeds: the summary shows seed {names[s0]}'s questions; "
                                 "the comparison uses every seed")
        out.summary.append(QuestionSummaryRow(task, name, metric, int(seeds_here.size), summary))
    if base not in index:
        out.warnings.append(f"{task} {metric}: no sample of the baseline {base!r}; not compared")
        return
    b = index[base]
    for cand in candidates:
        if cand not in index:
            out.warnings.append(f"{task} {metric}: no sample of {cand!r}; not compared")
            continue
        c = index[cand]
        has_b, has_c = ~np.isnan(means[b]), ~np.isnan(means[c])
        shared_seeds = np.flatnonzero((has_b & has_c).any(axis=1))
        if shared_seeds.size == 0:
            out.warnings.append(f"{task} {metric}: {base} and {cand} share no (seed, question); not compared")
            continue
        if shared_seeds.size >= 2:
            both = (has_b & has_c)[shared_seeds].all(axis=0)
            result = paired_seeds_questions(means[b][shared_seeds][:, both], means[c][shared_seeds][:, both],
                                            confidence=confidence, power=power)
        else:
            s = shared_seeds[0]
            both = has_b[s] & has_c[s]
            result = paired_questions(cells[b, s][both], cells[c, s][both],
                                      None if clusters is None else clusters[both],
                                      confidence=confidence, power=power)
        dropped = int((has_b.any(axis=0) | has_c.any(axis=0)).sum() - both.sum())
        if dropped:
            result.notes.append(f"{dropped} question(s) not answered by both left out")
        plan = None
        if effect is not None:
            if shared_seeds.size >= 2:
                result.notes.append("questions needed: planned for one seed per config only")
            else:
                plan = questions_for_effect(cells[b, s][both], cells[c, s][both], effect, 1 - confidence, power)
        out.comparisons.append(QuestionComparisonRow(task, metric, base, cand, result, power=plan))
