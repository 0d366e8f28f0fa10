"""Question-level statistics of evaluations: each question is a draw from the questions that
could have been asked, so standard errors are taken over questions, and two checkpoints that
answered the same questions are compared paired, question by question.

The method follows Miller, "Adding error bars to evals" (2024, arXiv:2411.00640):

- a score is the mean over questions of each question's mean over its samples (the K answers
  drawn for it, or its re-runs); its standard error is the spread of those question means
  over ``sqrt(n)`` (section 2 there);
- questions that come in groups (several questions on one passage, one program) are not
  independent: the clustered standard error sums the deviations within each cluster before
  squaring, with the finite-cluster factor ``C/(C-1)``, and its interval is a Student t on
  ``C - 1`` degrees of freedom, as Inspect AI's ``stderr(cluster=...)`` and ``ci()`` (section 3);
- with K > 1 samples a question's mean varies for two reasons: questions differ in difficulty
  (between-question variance) and answers to one question differ from draw to draw
  (within-question variance); more samples shrink only the second (section 4);
- two checkpoints on the same questions: the mean of the per-question differences, whose
  standard error drops with the correlation of the two checkpoints' question scores (section 5);
- power: the smallest difference a test of this size detects, and the questions or samples
  needed for a given one (section 6).

Everything here is a pure function over numpy arrays. A question's samples are the rows of a
``(n_questions, n_samples)`` array with NaN where a question has fewer samples than the most.
Undefined values are ``None`` with a note, never a crash.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri, stdtr, stdtrit
from scipy.stats import binom

#: What a standard error is taken over, as the report names it.
SE_OVER_QUESTIONS = "over questions"
SE_CLUSTERED = "clustered over questions"
SE_OVER_SEEDS = "over seeds and questions"
SE_OVER_RERUNS = "over re-runs"


@dataclass(frozen=True)
class VarianceSplit:
    """The variance of one sample's score split in two (Miller section 4).

    ``between``: variance of the questions' true mean scores (how much questions differ);
    ``within``: mean variance of a question's samples around its own mean (how much a draw
    differs from the next). ``se_reruns``: the standard error of the score over re-runs on
    these same questions, ``sqrt(mean(s_q^2 / K_q) / n)``: what drawing new answers to the same
    questions would move; it leaves out that other questions could have been asked.
    """

    between: float
    within: float
    samples_per_question: float
    se_reruns: float


@dataclass(frozen=True)
class QuestionSummary:
    """One (config, task, metric) over its questions.

    ``se`` is the standard error shown, of kind ``se_type`` (``over questions`` or
    ``clustered over questions``); ``ci_low, ci_high`` its t interval on ``df`` degrees of
    freedom. ``wilson_low, wilson_high``: the Wilson score interval, for binary scores with one
    sample per question (the better interval for small sets such as a 30-question AIME).
    ``split``: the variance split, when some question has two samples or more.
    """

    n_questions: int
    n_samples: int
    mean: float
    se: float | None
    se_type: str
    df: int | None
    ci_low: float | None
    ci_high: float | None
    se_questions: float | None
    se_clustered: float | None
    n_clusters: int | None
    wilson_low: float | None
    wilson_high: float | None
    split: VarianceSplit | None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PairedQuestions:
    """A candidate against a baseline on the questions both answered (diff = candidate - baseline).

    ``test`` names what ``pvalue`` comes from: ``paired t`` over questions, ``clustered paired
    t``, ``exact McNemar`` (binary scores, one sample per question, no clusters), or ``seeds x
    questions`` (several training seeds). ``better``/``worse``: questions the candidate got
    right and the baseline wrong, and the other way round (for binary scores; otherwise the
    questions whose mean score rose, and fell); ``correlation``:
    Pearson's r of the two checkpoints' question means. ``mde``: the smallest difference this
    comparison detects at its alpha with 80% power.
    """

    n_questions: int
    n_clusters: int | None
    n_seeds: int
    mean_baseline: float
    mean_candidate: float
    mean_diff: float
    se: float | None
    se_type: str
    df: int | None
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    test: str
    correlation: float | None
    better: int | None
    worse: int | None
    mde: float | None
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------- one checkpoint


def question_means(scores: np.ndarray) -> np.ndarray:
    """Each question's mean over its samples.

    Args:
        scores: shape ``(n_questions, n_samples)``, NaN where a question has fewer samples.

    Returns:
        shape ``(n_questions,)``; NaN for a question with no sample.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 1:
        return scores
    if scores.shape[-1] == 1:
        return scores[..., 0]
    if not np.isnan(scores).any():  # every question has every sample: the plain mean
        return scores.mean(axis=-1)
    counts = np.sum(~np.isnan(scores), axis=-1)
    sums = np.nansum(scores, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def se_over_questions(means: np.ndarray) -> float | None:
    """``s / sqrt(n)`` of the question means, ``s`` with ddof 1; None for fewer than 2 questions.

    Args:
        means: shape ``(n_questions,)``.
    """
    n = means.shape[0]
    if n < 2:
        return None
    return float(np.std(means, ddof=1) / math.sqrt(n))


def clustered_se(means: np.ndarray, clusters: np.ndarray) -> tuple[float | None, int]:
    """The cluster-robust standard error of the mean of ``means`` and the number of clusters.

    ``sqrt(C/(C-1) * sum_c (sum_{q in c} (x_q - mean))^2) / n``: the deviations of one
    cluster's questions are summed before squaring, so that questions that move together count
    as one draw. None with fewer than 2 clusters.

    Args:
        means: shape ``(n_questions,)``.
        clusters: shape ``(n_questions,)``, integer codes ``0..C-1`` (any integers will do).
    """
    codes, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    c = codes.shape[0]
    if c < 2:
        return None, c
    dev = means - means.mean()
    sums = np.bincount(inverse, weights=dev, minlength=c)
    return float(math.sqrt(np.sum(sums**2) * c / (c - 1)) / means.shape[0]), c


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n``.

    ``(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``z`` the normal quantile
    at ``1 - α/2``. Unlike ``p ± z·se`` it stays inside [0, 1] and keeps its coverage near 0
    and 1 and for small ``n``.
    """
    if n <= 0:
        raise ValueError("wilson_interval needs n >= 1")
    z = float(ndtri(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def variance_split(scores: np.ndarray) -> VarianceSplit | None:
    """Between- and within-question variance of a ``(n_questions, n_samples)`` array.

    ``within`` is the mean over questions (with 2 samples or more) of each question's sample
    variance (ddof 1); ``between`` is the variance of the question means less the part the
    samples' own noise puts into them, ``var(x̄_q) - mean(s_q^2 / K_q)``, cut at 0. None when
    no question has two samples.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 1 or scores.shape[1] < 2 or scores.shape[0] < 2:
        return None
    means = question_means(scores)
    if not np.isnan(scores).any():
        counts = np.full(scores.shape[0], scores.shape[1])
        many = np.ones(scores.shape[0], bool)
        var_q = scores.var(axis=1, ddof=1)
    else:
        counts = np.sum(~np.isnan(scores), axis=1)
        many = counts >= 2
        if not many.any():
            return None
        dev = np.where(np.isnan(scores), 0.0, scores - means[:, None])
        var_q = np.sum(dev**2, axis=1)[many] / (counts[many] - 1)
    within = float(var_q.mean())
    noise = float(np.mean(var_q / counts[many]))
    observed = float(np.var(means[counts > 0], ddof=1))
    n = int(np.sum(counts > 0))
    # Questions with a single sample add no within-question estimate, but their mean still
    # carries that noise: the mean of s_q^2 / K_q over the questions that have one stands in.
    return VarianceSplit(between=max(0.0, observed - noise), within=within,
                         samples_per_question=float(counts[counts > 0].mean()),
                         se_reruns=math.sqrt(noise / n))


def is_binary(values: np.ndarray) -> bool:
    """Whether every finite value is 0 or 1."""
    finite = values[~np.isnan(values)]
    return bool(finite.size and np.all((finite == 0) | (finite == 1)))


def summarize_questions(scores: np.ndarray, clusters: np.ndarray | None = None,
                        confidence: float = 0.95) -> QuestionSummary:
    """Mean, standard error and intervals of one checkpoint's scores on one task.

    Args:
        scores: shape ``(n_questions, n_samples)`` (or ``(n_questions,)`` for one sample each),
            NaN where a question has fewer samples; questions with no sample are left out.
        clusters: shape ``(n_questions,)``, a cluster code per question, or None.
        confidence: of the intervals.

    The standard error shown is the clustered one when clusters are given (two or more),
    else the one over questions; both are over the question means, so samples of one
    question are never counted as independent questions.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim == 1:
        scores = scores[:, None]
    means = question_means(scores)
    keep = ~np.isnan(means)
    notes: list[str] = []
    if not keep.all():
        notes.append(f"{int((~keep).sum())} question(s) without a score left out")
        scores, means = scores[keep], means[keep]
        clusters = None if clusters is None else np.asarray(clusters)[keep]
    n = int(means.shape[0])
    if scores.shape[1] == 1 or not n:
        k = scores.shape[1] if n else 0
    else:
        k = int(np.max(np.sum(~np.isnan(scores), axis=1)))
    mean = float(means.mean()) if n else math.nan
    se_q = se_over_questions(means)
    se_c, c = (None, None) if clusters is None else clustered_se(means, np.asarray(clusters))
    if clusters is not None and se_c is None:
        notes.append("one cluster only: the clustered standard error is undefined; shown over questions")
    se, se_type, df = se_q, SE_OVER_QUESTIONS, (n - 1 if n >= 2 else None)
    if se_c is not None and c is not None:
        se, se_type, df = se_c, f"{SE_CLUSTERED} ({c} clusters)", c - 1
    if se is None:
        notes.append("fewer than 2 questions: no standard error")
    lo = hi = None
    if se is not None and df is not None:
        half = float(stdtrit(df, 0.5 + confidence / 2)) * se
        lo, hi = mean - half, mean + half
    w_lo = w_hi = None
    if n and k == 1 and is_binary(means):
        w_lo, w_hi = wilson_interval(int(round(means.sum())), n, confidence)
    return QuestionSummary(n, k, mean, se, se_type, df, lo, hi, se_q, se_c, c, w_lo, w_hi,
                           variance_split(scores) if k >= 2 else None, notes)


# ------------------------------------------------------------------------- two checkpoints


def mcnemar_exact(better: int, worse: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts.

    Under "no difference" each discordant question is equally likely to go either way, so
    ``min(b, c)`` is Binomial(b + c, 1/2): ``p = min(1, 2 P(X <= min(b, c)))``; 1 with no
    discordant question.
    """
    m = better + worse
    if m == 0:
        return 1.0
    return float(min(1.0, 2 * binom.cdf(min(better, worse), m, 0.5)))


def _t_test(mean: float, se: float | None, df: int | None,
            confidence: float) -> tuple[float | None, float | None, float | None]:
    if se is None or df is None or df < 1:
        return None, None, None
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    if se == 0:
        return mean, mean, (1.0 if mean == 0 else 0.0)
    p = float(2 * stdtr(df, -abs(mean) / se))
    return mean - half, mean + half, p


def minimum_detectable_effect(se: float | None, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """``(z_{1-α/2} + z_{power}) · se``: the smallest true difference a two-sided test at
    ``alpha`` finds with probability ``power``, given the standard error of the difference."""
    if se is None:
        return None
    return float((ndtri(1 - alpha / 2) + ndtri(power)) * se)


def paired_questions(baseline: np.ndarray, candidate: np.ndarray, clusters: np.ndarray | None = None,
                     *, confidence: float = 0.95, power: float = 0.8) -> PairedQuestions:
    """Compare two checkpoints on the same questions.

    Args:
        baseline, candidate: shape ``(n_questions, n_samples)`` or ``(n_questions,)``, the same
            questions in the same order (NaN for missing samples); a question either side has
            no score for is left out of both.
        clusters: shape ``(n_questions,)`` cluster codes, or None.
        confidence: of the interval; alpha for the MDE is ``1 - confidence``.

    The difference is taken per question, ``d_q = x̄_q(candidate) - x̄_q(baseline)``; its mean
    has the standard error of ``d`` over questions (clustered when clusters are given), with a
    t interval and p-value on ``n - 1`` (``C - 1``) degrees of freedom. Binary scores with one
    sample per question and no clusters take exact McNemar's p-value instead, which is exact
    at any size; the interval stays the t one.
    """
    a = question_means(np.asarray(baseline, dtype=float))
    b = question_means(np.asarray(candidate, dtype=float))
    if a.shape != b.shape:
        raise ValueError(f"baseline and candidate differ in shape: {a.shape} vs {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    notes: list[str] = []
    if not keep.all():
        notes.append(f"{int((~keep).sum())} question(s) scored on one side only left out")
    a, b = a[keep], b[keep]
    cl = None if clusters is None else np.asarray(clusters)[keep]
    n = int(a.shape[0])
    d = b - a
    mean_diff = float(d.mean()) if n else math.nan
    se, se_type, df = se_over_questions(d), SE_OVER_QUESTIONS, (n - 1 if n >= 2 else None)
    c = None
    if cl is not None:
        se_c, c = clustered_se(d, cl)
        if se_c is not None:
            se, se_type, df = se_c, f"{SE_CLUSTERED} ({c} clusters)", c - 1
        else:
            notes.append("one cluster only: the standard error is over questions")
    lo, hi, p = _t_test(mean_diff, se, df, confidence)
    test = "clustered paired t" if se_type.startswith(SE_CLUSTERED) else "paired t"
    single = np.asarray(baseline).ndim == 1 or (np.asarray(baseline).shape[1] == 1
                                                and np.asarray(candidate).shape[1] == 1)
    # For binary scores with one sample these are McNemar's discordant pairs; otherwise the
    # questions whose mean score went up, and down.
    better, worse = int(np.sum(d > 0)), int(np.sum(d < 0))
    if single and test == "paired t" and is_binary(a) and is_binary(b):
        p, test = mcnemar_exact(better, worse), "exact McNemar"
    corr = None
    if n >= 3 and np.std(a) > 0 and np.std(b) > 0:
        corr = float(np.corrcoef(a, b)[0, 1])
    if n < 2:
        notes.append("fewer than 2 shared questions: no test")
    return PairedQuestions(n, c, 1, float(a.mean()) if n else math.nan, float(b.mean()) if n else math.nan,
                           mean_diff, se, se_type, df, lo, hi, p, test, corr, better, worse,
                           minimum_detectable_effect(se, 1 - confidence, power), notes)


def paired_seeds_questions(baseline: np.ndarray, candidate: np.ndarray, *, confidence: float = 0.95,
                           power: float = 0.8) -> PairedQuestions:
    """Compare two configs trained with several seeds each, on the same questions.

    Args:
        baseline, candidate: shape ``(n_seeds, n_questions)``: each seed's question means
            (seeds paired by row, questions by column), NaN-free.

    Seeds are the top level and questions are crossed with them: the difference
    ``D[s, q]`` varies with the seed (training noise) and with the question (which questions
    were asked). Its mean's variance is taken two-way, as a cluster-robust variance with two
    crossed clusterings: ``var(seed means)/S + var(question means)/n - var(D)/(S·n)`` (the last
    term is counted in both of the first two); when that is below the larger of the first two
    terms it is raised to it. The t interval has ``min(S, n) - 1`` degrees of freedom.
    """
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"expected two (n_seeds, n_questions) arrays of one shape; got {a.shape}, {b.shape}")
    s, n = a.shape
    d = b - a
    notes: list[str] = []
    if s < 2 or n < 2:
        se = None
        df = None
        notes.append("fewer than 2 seeds or questions: no test")
    else:
        v_seed = float(np.var(d.mean(axis=1), ddof=1) / s)
        v_q = float(np.var(d.mean(axis=0), ddof=1) / n)
        v_cell = float(np.var(d, ddof=1) / (s * n))
        v = max(v_seed + v_q - v_cell, v_seed, v_q)
        se, df = math.sqrt(v), min(s, n) - 1
    mean_diff = float(d.mean())
    lo, hi, p = _t_test(mean_diff, se, df, confidence)
    am, bm = a.mean(axis=0), b.mean(axis=0)
    corr = float(np.corrcoef(am, bm)[0, 1]) if n >= 3 and np.std(am) > 0 and np.std(bm) > 0 else None
    return PairedQuestions(n, None, s, float(a.mean()), float(b.mean()), mean_diff, se, SE_OVER_SEEDS, df,
                           lo, hi, p, "seeds x questions", corr, None, None,
                           minimum_detectable_effect(se, 1 - confidence, power), notes)


# ------------------------------------------------------------------------- how many questions


@dataclass(frozen=True)
class EvalPower:
    """How many questions or samples a comparison needs for a difference of ``effect``.

    ``questions``: questions needed at the current samples per question (None when the
    pilot's difference has no spread); ``samples``: samples per question needed at the
    current number of questions, or None when no number of samples is enough (the
    between-question part alone is too large: add questions).
    """

    effect: float
    mde: float | None
    questions: int | None
    samples: int | None
    #: Why ``samples`` is None: ``"one sample per question"`` (no within-question variance to
    #: split off) or ``"add questions"`` (the between-question part alone is too large).
    samples_note: str | None = None


def questions_for_effect(baseline: np.ndarray, candidate: np.ndarray, effect: float,
                         alpha: float = 0.05, power: float = 0.8) -> EvalPower:
    """Questions (or samples per question) needed to detect ``effect`` in a paired comparison.

    Args:
        baseline, candidate: shape ``(n_questions, n_samples)``, a pilot of the comparison.
        effect: the difference to detect, in the metric's units (> 0).

    With ``z = z_{1-α/2} + z_{power}`` the test needs ``se ≤ effect / z``. The paired
    difference's variance over questions is ``(σ²_between + σ²_within / K) / n`` (its
    variance split): the questions needed are ``n · (se / (effect / z))²`` at the current K,
    and the samples needed are ``K ≥ σ²_within / (n (effect/z)² - σ²_between)`` when that
    denominator is positive.
    """
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None]
    if effect <= 0:
        raise ValueError("effect must be > 0")
    z = float(ndtri(1 - alpha / 2) + ndtri(power))
    target = effect / z
    d_means = question_means(b) - question_means(a)
    keep = ~np.isnan(d_means)
    d_means = d_means[keep]
    n = int(d_means.shape[0])
    se = se_over_questions(d_means)
    mde = minimum_detectable_effect(se, alpha, power)
    questions = None if se is None or se == 0 else int(math.ceil(n * (se / target) ** 2))
    samples = None
    note = None
    sa, sb = variance_split(a[keep]), variance_split(b[keep])
    if sa is None or sb is None:
        note = "one sample per question"
    elif se is not None:
        # Samples of the two checkpoints are drawn independently: their within-question
        # variances add; what remains of the difference's variance is between questions.
        within = sa.within + sb.within
        k = (sa.samples_per_question + sb.samples_per_question) / 2
        between = max(0.0, se**2 * n - within / k)
        room = n * target**2 - between
        samples = int(math.ceil(within / room)) if room > 0 else None
        note = None if samples is not None else "add questions"
    return EvalPower(effect, mde, questions, samples, note)
