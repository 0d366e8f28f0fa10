"""The question-level statistics of a whole samples table: every (task, config, metric) over
its questions, and every candidate against the baseline, paired over shared questions.

The samples table (columns in :mod:`benchlab.names.long_format`, ``SAMPLE_COLUMNS``) has one row per
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
from benchlab.names.benchmark_info import goal_of
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
    #: Which side answered only part of the task's questions (an evaluation cut short, such as
    #: lm-eval's ``--limit``), as ``"<config>: 10 of 30 questions"``; None when both are whole.
    partial: str | None = None
    #: The Holm family this row's ``p_holm`` was adjusted in: ``metric <name>, m = <size>``.
    family: str | None = None

    def to_json(self) -> JsonObject:
        out = {"task": self.task, "metric": self.metric, "baseline": self.baseline,
               "candidate": self.candidate, **asdict(self.result)}
        out.update(p_holm=self.p_holm, holm_family=self.family, significant=self.significant,
                   verdict=self.verdict, partial=self.partial)
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
    #: ``"10 of 30 questions"`` when this config answered only part of the task's questions
    #: (the others' union): an evaluation cut short, such as lm-eval's ``--limit``.
    partial: str | None = None

    def to_json(self) -> JsonObject:
        return _finite({"task": self.task, "config": self.config, "metric": self.metric,
                        "seeds": self.seeds, "partial": self.partial, **asdict(self.result)})


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

    Holm's correction runs over every comparison of one metric (each task and candidate; one
    family per metric, :func:`judge`). With two or more training seeds on either side the
    comparison is over seeds (nested in their config, numbers may differ) and questions
    (:func:`~benchlab.stats.questions.paired_seeds_questions`); otherwise over the questions
    of the one checkpoint each side has. Questions without a cluster id are clusters of their
    own (with a warning); a (config, seed, question, repeat) recorded twice is averaged.
    """
    from benchlab.errors import DataError

    missing = [c for c in ("task", "config", "question", "value") if c not in table.columns]
    if missing:
        raise DataError(f"the samples table lacks column(s) {', '.join(missing)}; expected task, config, "
                        "question, value (and optionally benchmark, seed, repeat, cluster, metric)")
    if metric is not None:
        have = _names(table["metric"]) if "metric" in table.columns else ["value"]
        metric = resolve_metric(metric, have)
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
        cluster, cluster_names = _codes(table["cluster"])
        # An empty id ("" or spaces) names no group: it is missing, like a null.
        blank = np.array([str(c).strip() == "" for c in cluster_names] + [True])
        cluster = np.where(blank[cluster], -1, cluster)
        if (cluster < 0).all():
            cluster = None
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


def compare_questions(table: pd.DataFrame, *, baseline: str | None = None, candidates: list[str] | None = None,
                      metric: str | None = None, goal: str | dict[str, str] = "max", alpha: float = 0.05,
                      effect: float | None = None) -> QuestionAnalysis:
    """:func:`analyze_questions` of the whole table, then the comparisons of ``candidates`` only.

    Every candidate is compared, so that Holm's family is the one ``analyze`` and the report use
    (every task and candidate of the metric); the result keeps the ones asked for.

    Raises:
        DataError: ``effect`` is not above 0, or a candidate is not a config of the table (the
            message lists them).
    """
    from benchlab.errors import DataError

    if effect is not None and effect <= 0:
        raise DataError(f"--effect: expected a difference > 0 in the metric's units, got {effect}")
    result = analyze_questions(table, baseline=baseline, candidates=None, metric=metric, goal=goal, alpha=alpha,
                               effect=effect)
    if candidates is not None:
        have = sorted({r.config for r in result.summary})
        unknown = [c for c in candidates if c not in have]
        if unknown:
            raise DataError(f"no config {', '.join(map(repr, unknown))} in the samples; configs are "
                            f"{', '.join(have)}")
        result.comparisons = [c for c in result.comparisons if c.candidate in candidates]
    return result


def resolve_metric(metric: str, have: list[str]) -> str:
    """The samples' name of a metric a spec or a user names: itself, or the one harness name
    ``<metric>,<filter>`` it stands for (lm-eval records ``acc`` as ``acc,none``). Several
    filters of one metric (``exact_match,strict-match`` and ``exact_match,flexible-extract``)
    are refused with the names to choose from, not picked silently."""
    from benchlab.errors import DataError

    if metric in have:
        return metric
    filtered = [h for h in have if h.split(",", 1)[0] == metric and "," in h]
    if len(filtered) == 1:
        return filtered[0]
    if filtered:
        raise DataError(f"metric {metric!r} is recorded under {len(filtered)} filters ({', '.join(filtered)}); "
                        "name one of them")
    raise DataError(f"no metric {metric!r} in the samples; metrics are {', '.join(have)}")


def judge(comparisons: list[QuestionComparisonRow], *, alpha: float = 0.05,
          goal: str | dict[str, str] = "max") -> None:
    """Holm's correction and each comparison's verdict (in place).

    One Holm family per metric, as at the seed level (:mod:`benchlab.stats.table`): every task
    and candidate compared on that metric. A secondary metric logged beside the primary one
    never weakens the primary's verdicts, and ``compare``, ``analyze`` and the report, given the
    same comparisons, give the same adjusted p-values."""
    adjusted: list[float | None] = [None] * len(comparisons)
    for met in dict.fromkeys(c.metric for c in comparisons):
        idx = [i for i, c in enumerate(comparisons) if c.metric == met]
        m = sum(1 for i in idx if comparisons[i].result.pvalue is not None)
        for i, p in zip(idx, holm([comparisons[i].result.pvalue for i in idx]), strict=True):
            adjusted[i] = p
            comparisons[i].family = f"metric {met}, m = {m}"
    for row, p in zip(comparisons, adjusted, strict=True):
        r = row.result
        row.p_holm = p
        row.significant = is_significant(p, r.ci_low, r.ci_high, alpha)
        g = goal_of(goal, row.metric)
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


def _question_clusters(out: QuestionAnalysis, part: _Part, q: np.ndarray, n_questions: int, task: str,
                       metric: str) -> np.ndarray | None:
    """Each question's cluster code, shape ``(n_questions,)``, or None without clusters; a question
    with no cluster id is a cluster of its own, with a warning."""
    if part.cluster is None or not (part.cluster >= 0).any():
        return None
    # A question's cluster is the same wherever it is asked: take it from any row that has one.
    clusters = np.full(n_questions, -1, np.int64)
    has = part.cluster >= 0
    clusters[q[has]] = part.cluster[has]
    lone = clusters < 0
    if lone.any():
        clusters[lone] = clusters.max() + 1 + np.arange(int(lone.sum()))
        out.warnings.append(f"{task} {metric}: {int(lone.sum())} question(s) have no cluster id; each is "
                            "counted as a cluster of its own (pooling them into one cluster would make one "
                            "large false group)")
    return clusters


def _config_summary(cells: np.ndarray, has: np.ndarray, seeds_here: np.ndarray, names: list[object],
                    clusters: np.ndarray | None, confidence: float) -> QuestionSummary:
    """One config's summary over its questions: ``cells`` (seeds, questions, repeats), ``has`` which
    (seed, question) has a score, ``seeds_here`` the seeds with any."""
    if seeds_here.size > 1:
        # Every seed's samples of a question are that question's samples: the mean is then the
        # mean over seeds (each seed answering every question), never one seed's alone, which
        # an export would publish as the config's score.
        answered = has.any(axis=0)
        pooled = np.transpose(cells[seeds_here], (1, 0, 2)).reshape(cells.shape[1], -1)
        summary = summarize_questions(pooled[answered], None if clusters is None else clusters[answered],
                                      confidence)
        summary.notes.append(f"{seeds_here.size} seeds (" + ", ".join(str(names[k]) for k in seeds_here)
                             + "): each question's samples over the seeds averaged first; the standard "
                             "error is over questions (the comparison's nested test adds the seeds' variance)")
        return summary
    s0 = seeds_here[0] if seeds_here.size else 0
    answered = has[s0]
    return summarize_questions(cells[s0][answered], None if clusters is None else clusters[answered], confidence)


def _analyze_task(out: QuestionAnalysis, part: _Part, task: str, metric: str, cfg_names: list[str],
                  seed_names: list[Any], base: str, candidates: list[str], power: float, confidence: float,
                  effect: float | None = None) -> None:
    cfg, cfg_present = _local(part.config.astype(np.int64, copy=False))
    seed, seed_present = _local(part.seed)
    q, _ = _local(part.question)
    rep, _ = _local(part.repeat)
    shape = (cfg_present.size, seed_present.size, int(q.max()) + 1, int(rep.max()) + 1)
    flat = np.ravel_multi_index((cfg, seed, q, rep), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape)))
    with np.errstate(invalid="ignore", divide="ignore"):
        cells = (np.bincount(flat, weights=part.value, minlength=counts.size) / counts).reshape(shape)
    if counts.max() > 1:
        # The mean of the copies, whatever order the rows came in (keeping the last one made the
        # score depend on how the files were read).
        out.warnings.append(f"{task} {metric}: {int((counts > 1).sum())} (config, seed, question, repeat) "
                            "recorded more than once; their mean is used")
    clusters = _question_clusters(out, part, q, shape[2], task, metric)
    means = question_means(cells.reshape(-1, shape[3])).reshape(shape[:3])  # (configs, seeds, questions)
    index = {cfg_names[k]: i for i, k in enumerate(cfg_present)}
    names = [seed_names[k] for k in seed_present]
    asked = (~np.isnan(means)).any(axis=(0, 1))
    n_asked = int(asked.sum())
    partial: dict[str, str] = {}
    for name, i in index.items():
        has = ~np.isnan(means[i])
        seeds_here = np.flatnonzero(has.any(axis=1))
        summary = _config_summary(cells[i], has, seeds_here, names, clusters, confidence)
        n_here = int(has.any(axis=0).sum())
        if n_here < n_asked:
            partial[name] = f"{n_here} of {n_asked} questions"
        out.summary.append(QuestionSummaryRow(task, name, metric, int(seeds_here.size), summary,
                                              partial.get(name)))
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
        seeds_b = np.flatnonzero(has_b.any(axis=1))
        seeds_c = np.flatnonzero(has_c.any(axis=1))
        shared_seeds = np.flatnonzero((has_b & has_c).any(axis=1))
        if max(seeds_b.size, seeds_c.size) >= 2:
            # Seeds are nested in their config: every seed of each side, on the questions every
            # one of them answered.
            both = has_b[seeds_b].all(axis=0) & has_c[seeds_c].all(axis=0)
            if both.sum() < 2:
                out.warnings.append(f"{task} {metric}: {base} and {cand} have fewer than 2 questions every seed "
                                    "answered; not compared")
                continue
            result = paired_seeds_questions(means[b][seeds_b][:, both], means[c][seeds_c][:, both],
                                            None if clusters is None else clusters[both],
                                            confidence=confidence, power=power)
        elif shared_seeds.size:
            s = shared_seeds[0]
            both = has_b[s] & has_c[s]
            result = paired_questions(cells[b, s][both], cells[c, s][both],
                                      None if clusters is None else clusters[both],
                                      confidence=confidence, power=power)
        else:
            # One seed each, under different seed ids: the two checkpoints still answered the
            # same questions.
            sb, sc = seeds_b[0], seeds_c[0]
            both = has_b[sb] & has_c[sc]
            result = paired_questions(cells[b, sb][both], cells[c, sc][both],
                                      None if clusters is None else clusters[both],
                                      confidence=confidence, power=power)
        dropped = int((has_b.any(axis=0) | has_c.any(axis=0)).sum() - both.sum())
        if dropped:
            result.notes.append(f"{dropped} question(s) not answered by both left out")
        cut = "; ".join(f"{k}: {partial[k]}" for k in (base, cand) if k in partial) or None
        if cut is not None:
            result.notes.append(f"partial evaluation ({cut}): the comparison covers only the questions both "
                                "answered, not the whole task")
        plan = None
        if effect is not None:
            if max(seeds_b.size, seeds_c.size) >= 2:
                result.notes.append("questions needed: planned for one seed per config only")
            else:
                sb = shared_seeds[0] if shared_seeds.size else seeds_b[0]
                sc = shared_seeds[0] if shared_seeds.size else seeds_c[0]
                plan = questions_for_effect(cells[b, sb][both], cells[c, sc][both], effect, 1 - confidence, power)
        out.comparisons.append(QuestionComparisonRow(task, metric, base, cand, result, power=plan, partial=cut))
