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

from benchlab.stats.compare import holm, is_significant
from benchlab.stats.questions import (
    PairedQuestions,
    QuestionSummary,
    paired_questions,
    paired_seeds_questions,
    question_means,
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

    def to_json(self) -> dict[str, Any]:
        out = {"task": self.task, "metric": self.metric, "baseline": self.baseline,
               "candidate": self.candidate, **asdict(self.result)}
        out.update(p_holm=self.p_holm, significant=self.significant, verdict=self.verdict)
        return _finite(out)


@dataclass
class QuestionSummaryRow:
    """One (task, config, metric) over its questions."""

    task: str
    config: str
    metric: str
    seeds: int
    result: QuestionSummary

    def to_json(self) -> dict[str, Any]:
        return _finite({"task": self.task, "config": self.config, "metric": self.metric,
                        "seeds": self.seeds, **asdict(self.result)})


@dataclass
class QuestionAnalysis:
    """What :func:`analyze_questions` finds; ``to_json`` is what ``--json`` prints."""

    baseline: str | None
    summary: list[QuestionSummaryRow] = field(default_factory=list)
    comparisons: list[QuestionComparisonRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
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
    import pandas as pd

    codes, uniques = pd.factorize(column, sort=True)
    return codes.astype(np.int64), list(uniques)


def analyze_questions(table: pd.DataFrame, *, baseline: str | None = None, candidates: list[str] | None = None,
                      metric: str | None = None, goal: str | dict[str, str] = "max", alpha: float = 0.05,
                      power: float = 0.8) -> QuestionAnalysis:
    """Summaries and paired comparisons of a samples table.

    Args:
        table: the samples table; ``seed``, ``repeat``, ``cluster`` and ``metric`` may be
            absent (one seed, one sample, no clusters, one metric).
        baseline: the config the others are compared with (default: the first in sort order).
        candidates: the configs compared with it (default: every other one).
        goal: ``max`` (higher is better) or ``min``, or one per metric.

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
        if "metric" not in table.columns or not (table["metric"].astype(str) == metric).any():
            have = sorted(set(table["metric"].astype(str))) if "metric" in table.columns else ["value"]
            raise DataError(f"no metric {metric!r} in the samples; metrics are {', '.join(have)}")
        table = table[table["metric"].astype(str) == metric]
    configs = sorted(set(table["config"].astype(str)))
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
    metrics = table["metric"].astype(str) if "metric" in table.columns else None
    groups = [("value", table)] if metrics is None else [(m, table[metrics == m]) for m in sorted(set(metrics))]
    for m, part in groups:
        for task, sub in part.groupby(part["task"].astype(str), sort=True):
            _analyze_task(out, sub, str(task), m, base, wanted, power, 1 - alpha)
    goals = goal if isinstance(goal, dict) else {}
    for row, p in zip(out.comparisons, holm([c.result.pvalue for c in out.comparisons]), strict=True):
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
    return out


def _analyze_task(out: QuestionAnalysis, sub: pd.DataFrame, task: str, metric: str, base: str,
                  candidates: list[str], power: float, confidence: float) -> None:
    cfg, cfg_names = _codes(sub["config"].astype(str))
    q, _ = _codes(sub["question"].astype(str))
    seed, seed_names = _codes(sub["seed"]) if "seed" in sub.columns else (np.zeros(len(sub), np.int64), [0])
    rep, _ = _codes(sub["repeat"]) if "repeat" in sub.columns else (np.zeros(len(sub), np.int64), [0])
    shape = (len(cfg_names), len(seed_names), int(q.max()) + 1, int(rep.max()) + 1)
    cells = np.full(shape, np.nan)
    flat = np.ravel_multi_index((cfg, seed, q, rep), shape)
    if np.unique(flat).shape[0] != flat.shape[0]:
        out.warnings.append(f"{task} {metric}: several values for one (config, seed, question, repeat); "
                            "the last one kept")
    cells.ravel()[flat] = sub["value"].to_numpy(dtype=float)
    clusters = None
    if "cluster" in sub.columns and sub["cluster"].notna().any():
        # A question's cluster is the same wherever it is asked: take it from any row.
        labels = np.full(shape[2], -1, np.int64)
        cl, _ = _codes(sub["cluster"].astype(str))
        labels[q] = cl
        clusters = labels
    means = question_means(cells.reshape(-1, shape[3])).reshape(shape[:3])  # (configs, seeds, questions)
    index = {name: i for i, name in enumerate(cfg_names)}
    for name, i in index.items():
        has = ~np.isnan(means[i])
        seeds_here = np.flatnonzero(has.any(axis=1))
        s0 = seeds_here[0] if seeds_here.size else 0
        answered = has[s0]
        summary = summarize_questions(cells[i, s0][answered], None if clusters is None else clusters[answered],
                                      confidence)
        if seeds_here.size > 1:
            summary.notes.append(f"{seeds_here.size} seeds: the summary shows seed {seed_names[s0]}'s questions; "
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
        out.comparisons.append(QuestionComparisonRow(task, metric, base, cand, result))
