"""Aggregate per-sample scores into the metrics a trainer reads: pass@1[avg-of-k], majority@k, pass@k.

The layout is ``{mode: {metric: value}}`` per benchmark, the shape NeMo-Skills'
servers answer with and slime's delegate client flattens:

- ``pass@1[avg-of-k]``: the fraction of correct samples, averaged over prompts.
- ``majority@k``: per prompt, the most frequent extracted answer (ties go to the
  answer seen first) decides; no answer at all counts as wrong.
- ``pass@j``: the unbiased estimator 1 - C(n-c, j) / C(n, j) of "at least one of j
  samples is correct" (Chen et al., 2021), for j = 2, 4, 8, ... and j = k.

With one sample per prompt there is only ``pass@1``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb


@dataclass(frozen=True)
class SampleScore:
    """The verdict on one sampled response.

    ``answer`` is the normalised extracted answer (``None`` when the response
    holds none); ``correct`` is the scorer's verdict; ``detail`` says why, for logs.
    Judge scorers also give ``score`` (pairwise: the sample's mean game score in
    [0, 1]; None when no judge reply was well-formed), ``malformed`` (judge
    replies without a verdict) and ``verdicts`` (each game's label from the
    model's side, ``?`` for a malformed one). The code scorer gives
    ``tests_passed`` of ``tests_total`` (tests that ran to their end and passed).
    """

    answer: str | None
    correct: bool
    detail: str = ""
    score: float | None = None
    malformed: int = 0
    verdicts: tuple[str, ...] = ()
    tests_passed: int | None = None
    tests_total: int | None = None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` are correct.

    1 - C(n-c, k) / C(n, k): the probability that a random subset of k of the n
    samples holds at least one correct one. Requires 1 <= k <= n and 0 <= c <= n.
    """
    if not (1 <= k <= n) or not (0 <= c <= n):
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def majority_answer(scores: Sequence[SampleScore]) -> SampleScore | None:
    """The first sample whose answer is the most frequent one, or None when no sample answered."""
    answered = [s for s in scores if s.answer is not None]
    if not answered:
        return None
    counts = Counter(s.answer for s in answered)
    top = max(counts.values())
    # Counter preserves first-seen order, so ties go to the answer seen first.
    winner = next(a for a, c in counts.items() if c == top)
    return next(s for s in answered if s.answer == winner)


def _pass_ks(k: int) -> list[int]:
    ks, j = [], 2
    while j < k:
        ks.append(j)
        j *= 2
    return ks + [k]


def aggregate(per_prompt: Sequence[Sequence[SampleScore]], k: int | None = None) -> dict[str, dict[str, float]]:
    """Metrics of one benchmark from the scores of its prompts.

    ``per_prompt`` has one entry per evaluated prompt, each the scores of the
    samples the model answered: ``k`` were asked for (the longest entry when
    None), a prompt may have fewer when some got no response. Those are model
    errors, not wrong answers: each prompt's accuracy is over its own scored
    samples, majority votes over them, and ``pass@j`` counts the prompts with at
    least ``j`` scored samples. Returns ``{mode: {metric: value}}`` with
    accuracies and ``no_answer`` as fractions in [0, 1] and ``num_entries`` the
    number of prompts counted. An empty input gives ``{}``.
    """
    if not per_prompt:
        return {}
    if any(len(p) == 0 for p in per_prompt):
        raise ValueError("every prompt needs at least one sample score")
    k = k if k is not None else max(len(p) for p in per_prompt)
    m = len(per_prompt)
    sizes = [len(p) for p in per_prompt]
    counts = [sum(s.correct for s in p) for p in per_prompt]
    unanswered = [sum(s.answer is None for s in p) for p in per_prompt]
    avg = {
        "accuracy": sum(c / n for c, n in zip(counts, sizes, strict=True)) / m,
        "no_answer": sum(u / n for u, n in zip(unanswered, sizes, strict=True)) / m,
        "num_entries": float(m),
    }
    if k == 1:
        return {"pass@1": avg}
    out: dict[str, dict[str, float]] = {f"pass@1[avg-of-{k}]": avg}
    votes = [majority_answer(p) for p in per_prompt]
    out[f"majority@{k}"] = {
        "accuracy": sum(v is not None and v.correct for v in votes) / m,
        "no_answer": sum(v is None for v in votes) / m,
        "num_entries": float(m),
    }
    for j in _pass_ks(k):
        eligible = [i for i in range(m) if sizes[i] >= j]
        if not eligible:
            continue
        out[f"pass@{j}"] = {
            "accuracy": sum(pass_at_k(sizes[i], counts[i], j) for i in eligible) / len(eligible),
            "no_answer": sum(unanswered[i] == sizes[i] for i in eligible) / len(eligible),
            "num_entries": float(len(eligible)),
        }
    return out


def flatten(raw_metrics: dict[str, dict[str, dict[str, float]]]) -> dict[str, float]:
    """``{benchmark: {mode: {metric: v}}}`` -> ``{"benchmark/mode/metric": v}`` (numbers only)."""
    flat: dict[str, float] = {}
    for bench, modes in raw_metrics.items():
        for mode, metrics in modes.items():
            for name, value in metrics.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    flat[f"{bench}/{mode}/{name}"] = float(value)
    return flat
