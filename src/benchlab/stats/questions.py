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

from benchlab.stats.tolerance import is_negligible

#: What a standard error is taken over, as the report names it.
SE_OVER_QUESTIONS = "over questions"
SE_CLUSTERED = "clustered over questions"
SE_OVER_SEEDS = "over seeds (nested in configs) and questions"
#: The test of :func:`paired_seeds_questions`.
SEEDS_TEST = "seeds (nested) x questions"
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
    df: float | None
    ci_low: float | None
    ci_high: float | None
    se_questions: float | None
    se_clustered: float | None
    n_clusters: int | None
    wilson_low: float | None
    wilson_high: float | None
    split: VarianceSplit | None
    notes: list[str] = field(default_factory=list)
    #: What ``ci_low, ci_high`` is: ``t`` (on ``df``), ``Wilson`` (binary scores, one sample a
    #: question) or ``Wilson, design effect`` (binary and clustered: Wilson on the effective
    #: number of questions ``p(1-p)/se²``).
    ci_method: str = "t"


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
    df: float | None
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    test: str
    correlation: float | None
    better: int | None
    worse: int | None
    mde: float | None
    notes: list[str] = field(default_factory=list)
    #: What ``ci_low, ci_high`` is: ``t`` (on ``df``, the test's own distribution) or
    #: ``Newcombe`` (binary scores, one sample a question: Newcombe's hybrid score interval of a
    #: paired difference of proportions, his method 10). The MDE is taken on the same reference.
    ci_method: str = "t"
    #: The variance of the difference split by source, for the nested seeds x questions test:
    #: ``{"questions": ..., "seeds": ...}`` (variances of the mean difference), else None.
    variance_parts: dict[str, float] | None = None


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


def cr2_clustered(values: np.ndarray, clusters: np.ndarray) -> tuple[float | None, float | None, int]:
    """The mean's cluster-robust standard error with the CR2 small-cluster correction, its
    Bell–McCaffrey degrees of freedom, and the number of clusters.

    CR1 (:func:`clustered_se`, Inspect AI's) is biased down when clusters are few and of unequal
    size: a big cluster's residuals are pulled toward the mean it dominates. CR2 (Bell and
    McCaffrey 2002; Pustejovsky and Tipton 2018) undoes that pull by scaling each cluster's
    residuals with ``(I - H_gg)^{-1/2}``. For a mean (the regression on a constant) that matrix
    has the closed form ``I + (1/sqrt(1 - n_g/n) - 1) J/n_g``, so

    ``V = sum_g (sum_{q in g} e_q)² / (1 - n_g/n) / n²``.

    Its reference is a Student t whose degrees of freedom match the first two moments of ``V``
    under independent errors of one variance: ``df = tr(M)² / tr(M²)`` with
    ``M_gh = (δ_gh n_g - n_g n_h / n) / (n² sqrt((1 - n_g/n)(1 - n_h/n)))``. With equal clusters
    this is ``C/(C-1)``-scaled CR1 on ``C - 1`` degrees of freedom; with one question a cluster
    it is the ordinary ``s/sqrt(n)`` on ``n - 1``. None with fewer than 2 clusters.

    Args:
        values: shape ``(n,)``.
        clusters: shape ``(n,)``, any hashable codes.
    """
    codes, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    c = codes.shape[0]
    if c < 2:
        return None, None, c
    x = np.asarray(values, dtype=float)
    n = x.shape[0]
    sizes = np.bincount(inverse, minlength=c).astype(float)
    sums = np.bincount(inverse, weights=x - x.mean(), minlength=c)
    keep = 1.0 - sizes / n
    v = float(np.sum(sums**2 / keep)) / n**2
    # M = diag(a) - w w' with a_g = n_g / (n² k_g), w_g = n_g / (n^1.5 sqrt(k_g)), k_g = 1 - n_g/n:
    # its traces in closed form, without the C x C matrix (C is the number of questions when
    # each question is its own cluster).
    a = sizes / (n**2 * keep)
    w2 = sizes**2 / (n**3 * keep)
    trace = float(a.sum() - w2.sum())
    trace_sq = float(np.sum(a**2) - 2 * np.sum(a * w2) + w2.sum() ** 2)
    df = trace**2 / trace_sq if trace_sq > 0 else float(c - 1)
    return math.sqrt(v), df, c


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
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
    # At 0 and n successes the end is 0 or 1 exactly; rounding must not put the estimate outside.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def newcombe_paired_interval(both: int, only_candidate: int, only_baseline: int, neither: int,
                              confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval of a paired difference of proportions (his method 10,
    Statistics in Medicine 17:2635, 1998), candidate minus baseline.

    ``p_c = (both + only_candidate)/n`` and ``p_b = (both + only_baseline)/n`` each get a Wilson
    interval ``[l, u]``; the two are combined by "square and add", allowing for their
    correlation ``φ`` (the phi coefficient of the 2x2 table, set to 0 when ``0 <= ad - bc <= n/2``
    and reduced by ``n/2`` above that):

    ``low = d - sqrt((p_c - l_c)² - 2φ(p_c - l_c)(u_b - p_b) + (u_b - p_b)²)``,
    ``high = d + sqrt((u_c - p_c)² - 2φ(u_c - p_c)(p_b - l_b) + (p_b - l_b)²)``.

    It stays inside [-1, 1], is not degenerate when every question has the same outcome, and
    its coverage stays near nominal down to a few tens of questions.
    """
    a, b, c, d = both, only_candidate, only_baseline, neither
    n = a + b + c + d
    if n <= 0:
        raise ValueError("newcombe_paired_interval needs at least one question")
    p_c, p_b = (a + b) / n, (a + c) / n
    l_c, u_c = wilson_interval(a + b, n, confidence)
    l_b, u_b = wilson_interval(a + c, n, confidence)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins > 0:
        cross = a * d - b * c
        if cross > n / 2:
            phi = (cross - n / 2) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    diff = p_c - p_b
    low = diff - math.sqrt(max(0.0, (p_c - l_c) ** 2 - 2 * phi * (p_c - l_c) * (u_b - p_b) + (u_b - p_b) ** 2))
    high = diff + math.sqrt(max(0.0, (u_c - p_c) ** 2 - 2 * phi * (u_c - p_c) * (p_b - l_b) + (p_b - l_b) ** 2))
    return max(-1.0, low), min(1.0, high)


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
    se_c: float | None = None
    df_c: float | None = None
    c: int | None = None
    if clusters is not None:
        se_c, df_c, c = cr2_clustered(means, np.asarray(clusters))
        if se_c is None:
            notes.append("one cluster only: the clustered standard error is undefined; shown over questions")
    se, se_type = se_q, SE_OVER_QUESTIONS
    df: float | None = n - 1 if n >= 2 else None
    if se_c is not None and c is not None:
        se, se_type, df = se_c, f"{SE_CLUSTERED} ({c} clusters)", df_c
    if se is None:
        notes.append("fewer than 2 questions: no standard error")
    lo = hi = None
    method = "t"
    w_lo = w_hi = None
    binary = bool(n) and k == 1 and is_binary(means)
    if binary:
        right = int(round(means.sum()))
        w_lo, w_hi = wilson_interval(right, n, confidence)
        # A proportion's t interval leaves [0, 1] near the edges and is a point at 0 or 1: the
        # Wilson interval is the one shown. Clustered, it is taken on the effective number of
        # questions (Kish's design effect, se over questions² / clustered se²).
        lo, hi, method = w_lo, w_hi, "Wilson"
        if se_c is not None and se_q is not None and se_c > 0 and se_q > 0:
            n_eff = n * (se_q / se_c) ** 2
            lo, hi = wilson_interval(mean * n_eff, n_eff, confidence)
            method = "Wilson, design effect"
        if right in (0, n):
            notes.append(f"every answer is {'right' if right == n else 'wrong'} ({right} of {n}): no spread "
                         f"over questions, so no t interval; the Wilson interval [{lo:.3g}, {hi:.3g}] bounds "
                         "the true rate")
    elif se is not None and df is not None:
        half = float(stdtrit(df, 0.5 + confidence / 2)) * se
        lo, hi = mean - half, mean + half
    return QuestionSummary(n, k, mean, se, se_type, None if df is None else _df_out(df), lo, hi, se_q, se_c, c,
                           w_lo, w_hi, variance_split(scores) if k >= 2 else None, notes, method)


def _df_out(df: float) -> float | int:
    """Degrees of freedom as shown: whole numbers as ints (``n - 1``), Bell–McCaffrey's as floats."""
    return int(df) if float(df).is_integer() else round(float(df), 2)


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


def _t_test(mean: float, se: float | None, df: float | None,
            confidence: float) -> tuple[float | None, float | None, float | None]:
    """The t interval and two-sided p-value; with no spread (``se == 0``) a point interval and
    p None when the mean is not 0: a constant difference is no evidence of size 0 (it would be
    ``p = 0`` exactly), and the caller says so."""
    if se is None or df is None or df <= 0:
        return None, None, None
    half = float(stdtrit(df, 0.5 + confidence / 2)) * se
    if se == 0:
        return mean, mean, (1.0 if mean == 0 else None)
    p = float(2 * stdtr(df, -abs(mean) / se))
    return mean - half, mean + half, p


def minimum_detectable_effect(se: float | None, alpha: float = 0.05, power: float = 0.8,
                              df: float | None = None) -> float | None:
    """The smallest true difference a two-sided test at ``alpha`` finds with probability
    ``power``, given the standard error of the difference: ``(q_{1-α/2} + q_{power}) · se`` with
    ``q`` the quantiles of the test's own reference, Student t on ``df`` degrees of freedom, or
    the normal when ``df`` is None (the score intervals of binary scores). On few degrees of
    freedom the t quantiles are the larger: a normal MDE beside a t interval would promise
    power the test does not have."""
    if se is None:
        return None
    if df is None:
        return float((ndtri(1 - alpha / 2) + ndtri(power)) * se)
    return float((stdtrit(df, 1 - alpha / 2) + stdtrit(df, power)) * se)


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
    has the standard error of ``d`` over questions with a t interval and p-value on ``n - 1``
    degrees of freedom, or, with clusters, the CR2 clustered standard error on Bell–McCaffrey
    degrees of freedom (:func:`cr2_clustered`). Binary scores with one sample per question and
    no clusters take exact McNemar's p-value and Newcombe's interval
    (:func:`newcombe_paired_interval`); where the two disagree on whether 0 is excluded (they
    are different methods) a note says so, and the verdict, which needs both, stays "no
    difference found".
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
    se, se_type = se_over_questions(d), SE_OVER_QUESTIONS
    if se is not None and is_negligible(se, a, b):
        se = 0.0  # a constant difference read back from text has a spread of 1e-17, not 0
    df: float | None = n - 1 if n >= 2 else None
    c = None
    if cl is not None:
        se_c, df_c, c = cr2_clustered(d, cl)
        if se_c is not None:
            se, se_type, df = (0.0 if se == 0 else se_c), f"{SE_CLUSTERED} ({c} clusters)", df_c
        else:
            notes.append("one cluster only: the standard error is over questions")
    lo, hi, p = _t_test(mean_diff, se, df, confidence)
    test = "clustered paired t" if se_type.startswith(SE_CLUSTERED) else "paired t"
    single = np.asarray(baseline).ndim == 1 or (np.asarray(baseline).shape[1] == 1
                                                and np.asarray(candidate).shape[1] == 1)
    # For binary scores with one sample these are McNemar's discordant pairs; otherwise the
    # questions whose mean score went up, and down.
    better, worse = int(np.sum(d > 0)), int(np.sum(d < 0))
    method = "t"
    mde_df = df
    if single and test == "paired t" and n and is_binary(a) and is_binary(b):
        p, test = mcnemar_exact(better, worse), "exact McNemar"
        both = int(np.sum((a == 1) & (b == 1)))
        lo, hi = newcombe_paired_interval(both, better, worse, n - both - better - worse, confidence)
        method, mde_df = "Newcombe", None
        if (p < 1 - confidence) != (lo > 0 or hi < 0):
            notes.append(f"exact McNemar p = {p:.3g} and the Newcombe interval [{lo:.3g}, {hi:.3g}] disagree on "
                         "whether 0 is excluded: they are different methods (an exact test on the "
                         f"{better + worse} discordant questions, a score interval on all {n}); the verdict needs "
                         "both, so it is 'no difference found'")
        if better + worse == 0:
            notes.append(f"both checkpoints answered each of the {n} questions alike: no discordant question; "
                         f"the difference is 0 with the Newcombe interval [{lo:.3g}, {hi:.3g}]")
    elif n >= 2 and se == 0:
        if mean_diff != 0:
            notes.append(f"every question's difference is {mean_diff:.4g}: no spread over questions, so no test "
                         "(a t-test would say p = 0 exactly); the difference is exact on these questions only")
        else:
            notes.append("the two checkpoints scored every question alike: the difference is 0 with no spread")
    corr = None
    if n >= 3 and np.std(a) > 0 and np.std(b) > 0:
        corr = float(np.corrcoef(a, b)[0, 1])
    if n < 2:
        notes.append("fewer than 2 shared questions: no test")
    return PairedQuestions(n, c, 1, float(a.mean()) if n else math.nan, float(b.mean()) if n else math.nan,
                           mean_diff, se, se_type, None if df is None else _df_out(df), lo, hi, p, test, corr,
                           better, worse, minimum_detectable_effect(se, 1 - confidence, power, mde_df), notes,
                           method)


def _two_way(x: np.ndarray) -> tuple[float, float]:
    """Mean squares of one config's ``(seeds, questions)`` array: between seeds
    (``n · var(seed means)``) and the seed x question residual."""
    s, n = x.shape
    seed_means = x.mean(axis=1)
    ms_seed = float(n * np.var(seed_means, ddof=1))
    resid = x - seed_means[:, None] - x.mean(axis=0)[None, :] + x.mean()
    ms_resid = float(np.sum(resid**2) / ((s - 1) * (n - 1)))
    return ms_seed, ms_resid


def paired_seeds_questions(baseline: np.ndarray, candidate: np.ndarray, clusters: np.ndarray | None = None, *,
                           confidence: float = 0.95, power: float = 0.8) -> PairedQuestions:
    """Compare two configs trained with several seeds each, on the same questions.

    Args:
        baseline, candidate: shape ``(S_b, n)`` and ``(S_c, n)``: each training seed's question
            means, questions in the same column order, NaN-free. The numbers of seeds may differ:
            seeds are nested in their config (a seed of one config is not paired with a seed of
            the other), questions are crossed with both.
        clusters: shape ``(n,)`` cluster codes of the questions, or None.

    The design is ``y[c, s, q] = μ_c + a_cs + b_q + g_cq + e_csq``: a seed effect ``a`` (training
    noise) of variance ``σ²_a,c`` in each config, question difficulty ``b`` (shared, so it cancels
    in the difference), a config x question effect ``g`` and seed x question noise ``e``. The
    difference of the two grand means has variance

    ``σ²_a,b/S_b + σ²_a,c/S_c + var(question differences)/n``

    where the last term is the variance over questions of ``d_q = mean_s y_c - mean_s y_b``
    (clustered, CR2, when clusters are given), which already holds the ``e`` noise. Each
    config's seed variance comes from its two-way mean squares, ``(MS_seed - MS_resid)/n``
    (the part of the seed means' spread the questions' noise does not explain), cut at 0. A
    config with one seed borrows the other's seed variance (said in a note); the degrees of
    freedom are Satterthwaite's over the terms. So the test generalises to new training seeds
    and new questions, and when seeds agree it has the power of the question-level test; the
    note gives each part's share.
    """
    a = np.asarray(baseline, dtype=float)
    b = np.asarray(candidate, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected two (n_seeds, n_questions) arrays with one number of questions; "
                         f"got {a.shape}, {b.shape}")
    n = a.shape[1]
    notes: list[str] = []
    d_q = b.mean(axis=0) - a.mean(axis=0)
    mean_diff = float(b.mean() - a.mean())
    se = None
    df: float | None = None
    parts: dict[str, float] | None = None
    c_count = None
    if n < 2 or max(a.shape[0], b.shape[0]) < 2:
        notes.append("fewer than 2 questions, or one seed a config: no seeds x questions test")
    else:
        if clusters is not None:
            se_q, df_q, c_count = cr2_clustered(d_q, np.asarray(clusters))
        else:
            se_q, df_q = None, None
        if se_q is None:
            se_q, df_q = float(np.std(d_q, ddof=1) / math.sqrt(n)), float(n - 1)
        v_q = se_q**2
        terms: list[tuple[float, float]] = [(v_q, float(df_q if df_q is not None else n - 1))]
        seed_var: dict[str, tuple[float, list[tuple[float, float]]]] = {}
        for label, x in (("baseline", a), ("candidate", b)):
            s = x.shape[0]
            if s >= 2:
                ms_seed, ms_resid = _two_way(x)
                comps = [(ms_seed / n, float(s - 1)), (-ms_resid / n, float((s - 1) * (n - 1)))]
                seed_var[label] = (max(0.0, (ms_seed - ms_resid) / n), comps)
        v_seeds = 0.0
        for label, x in (("baseline", a), ("candidate", b)):
            s = x.shape[0]
            own = seed_var.get(label)
            if own is None:
                other = "candidate" if label == "baseline" else "baseline"
                own = seed_var[other]
                notes.append(f"the {label} has one training seed: its seed variance is taken to be the {other}'s")
            if own[0] > 0:
                v_seeds += own[0] / s
                terms += [(v / s, f) for v, f in own[1]]
        v = v_q + v_seeds
        se = math.sqrt(v)
        denom = sum(t * t / f for t, f in terms)
        df = v * v / denom if denom > 0 else float(n - 1)
        parts = {"questions": v_q, "seeds": v_seeds}
        share = 0.0 if v == 0 else v_seeds / v
        notes.append(f"variance of the difference: over seeds {v_seeds:.3g} ({share:.0%}), over questions "
                     f"{v_q:.3g}; {a.shape[0]} and {b.shape[0]} training seeds; Satterthwaite df {df:.3g}")
    lo, hi, p = _t_test(mean_diff, se, df, confidence)
    if se == 0 and mean_diff != 0:
        notes.append("no spread over seeds or questions: no test")
    am, bm = a.mean(axis=0), b.mean(axis=0)
    corr = float(np.corrcoef(am, bm)[0, 1]) if n >= 3 and np.std(am) > 0 and np.std(bm) > 0 else None
    se_type = SE_OVER_SEEDS if c_count is None else f"{SE_OVER_SEEDS}, {c_count} clusters"
    return PairedQuestions(n, c_count, a.shape[0] + b.shape[0], float(a.mean()), float(b.mean()), mean_diff, se,
                           se_type, None if df is None else _df_out(df), lo, hi, p, SEEDS_TEST, corr, None, None,
                           minimum_detectable_effect(se, 1 - confidence, power, df), notes, "t", parts)


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
