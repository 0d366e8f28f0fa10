"""False positives, power and coverage of the question-level statistics, by seeded simulation.

The tables of docs/evaluation-statistics.md ("What the defaults hold") and the pilot-power figure
of docs/statistics.md come from this script; each rate carries its Monte Carlo standard error.

- the clustered paired test with few clusters of unequal size (lognormal sizes, a cluster effect
  of intraclass correlation 0.2 or 0.5, no true difference): CR1 on C - 1 degrees of freedom
  (Inspect AI's, shown before) against CR2 on Bell-McCaffrey degrees of freedom (the default);
- one checkpoint's accuracy on 30 binary questions: the exact coverage of the t interval and of
  the Wilson interval (the default), and how often the t interval leaves [0, 1];
- a paired difference of two checkpoints on 30 binary questions: coverage of the t interval and
  of Newcombe's interval (the default);
- two configs trained with 2-3 seeds each on 200 questions: false positives and power (a gain of
  0.3 logits, about 7 points at 50%) of the former crossed two-way test and of the nested
  seeds x questions test (the default);
- `benchlab power` from a 5-pair pilot (true d_z 0.42): how often the seeds it answers give power
  below 0.5.

    python bench/question_coverage.py [--sims 4000] [--seed 0]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats
from scipy.special import expit, logit

from benchlab.stats.questions import (
    clustered_se,
    paired_questions,
    paired_seeds_questions,
    summarize_questions,
)
from benchlab.stats.seeds import effect_from_pilot, effect_interval, paired_power, seeds_for_power


def _rate(hits: int, n: int) -> str:
    p = hits / n
    return f"{100 * p:.1f} ± {100 * math.sqrt(max(p * (1 - p), 1e-12) / n):.1f}"


def clustered(sims: int, rng: np.random.Generator) -> list[str]:
    lines = ["| clusters | ICC | CR1, t(C−1) (before) | CR2, Bell–McCaffrey t (default) |", "|---:|---:|---:|---:|"]
    for c in (6, 8, 12):
        for icc in (0.2, 0.5):
            old = new = 0
            for _ in range(sims):
                sizes = np.maximum(1, np.round(rng.lognormal(1.5, 1.0, c))).astype(int)
                cl = np.repeat(np.arange(c), sizes)
                d = rng.normal(0, math.sqrt(icc), c)[cl] + rng.normal(0, math.sqrt(1 - icc), cl.size)
                se1, _ = clustered_se(d, cl)
                old += 2 * stats.t.sf(abs(d.mean()) / se1, c - 1) < 0.05
                p = paired_questions(np.zeros_like(d), d, cl).pvalue
                new += p is not None and p < 0.05
            lines.append(f"| {c} | {icc} | {_rate(old, sims)} | {_rate(new, sims)} |")
    return lines


def one_accuracy() -> list[str]:
    lines = ["| true accuracy | t interval covers | t interval leaves [0, 1] | Wilson covers (default) |",
             "|---:|---:|---:|---:|"]
    n = 30
    for p in (0.5, 0.8, 0.9, 0.95, 0.97, 0.99):
        t_cov = t_out = w_cov = 0.0
        for k in range(n + 1):
            w = stats.binom.pmf(k, n, p)
            s = summarize_questions(np.array([1.0] * k + [0.0] * (n - k)))
            w_cov += w * (s.ci_low <= p <= s.ci_high)
            se = s.se or 0.0
            lo, hi = (s.mean, s.mean) if se == 0 else stats.t.interval(0.95, n - 1, loc=s.mean, scale=se)
            t_cov += w * (lo <= p <= hi)
            t_out += w * (lo < 0 or hi > 1)
        lines.append(f"| {p} | {100 * t_cov:.1f} | {100 * t_out:.1f} | {100 * w_cov:.1f} |")
    return lines


def paired_binary(sims: int, rng: np.random.Generator) -> list[str]:
    lines = ["| baseline accuracy | agreement | true diff | t interval covers | Newcombe covers (default) |",
             "|---:|---:|---:|---:|---:|"]
    for p_base, agree in ((0.5, 0.8), (0.7, 0.85), (0.9, 0.9), (0.95, 0.95)):
        true = p_base * agree + (1 - p_base) * (1 - agree) - p_base
        t_cov = n_cov = 0
        for _ in range(sims):
            base = rng.random(30) < p_base
            cand = np.where(rng.random(30) < agree, base, ~base)
            d = cand.astype(float) - base.astype(float)
            se = d.std(ddof=1) / math.sqrt(30)
            lo, hi = (d.mean(), d.mean()) if se == 0 else stats.t.interval(0.95, 29, loc=d.mean(), scale=se)
            t_cov += lo <= true <= hi
            r = paired_questions(base.astype(float), cand.astype(float))
            n_cov += r.ci_low <= true <= r.ci_high
        lines.append(f"| {p_base} | {agree} | {true:+.3f} | {_rate(t_cov, sims)} | {_rate(n_cov, sims)} |")
    return lines


def _former_two_way_p(base: np.ndarray, cand: np.ndarray) -> float:
    s, n = base.shape
    d = cand - base
    v_seed, v_q = d.mean(axis=1).var(ddof=1) / s, d.mean(axis=0).var(ddof=1) / n
    v = max(v_seed + v_q - d.var(ddof=1) / (s * n), v_seed, v_q)
    return float(2 * stats.t.sf(abs(d.mean()) / math.sqrt(v), min(s, n) - 1))


def nested(sims: int, rng: np.random.Generator) -> list[str]:
    lines = ["| seeds (baseline, candidate) | seed sd (logit) | former two-way: false pos. | power | "
             "nested (default): false pos. | power |", "|---|---:|---:|---:|---:|---:|"]
    n = 200
    for seeds in ((2, 2), (3, 3), (2, 3)):
        for sd in (0.0, 0.1, 0.3):
            fo = po = fn = pn = 0
            for _ in range(sims):
                diff = rng.normal(0, 1.5, n)

                def trained(k: int, shift: float, diff: np.ndarray = diff, sd: float = sd) -> np.ndarray:
                    a = rng.normal(0, sd, (k, 1))
                    return (rng.random((k, n)) < expit(logit(0.5) + shift + diff[None, :] + a)).astype(float)

                base, null, gain = trained(seeds[0], 0.0), trained(seeds[1], 0.0), trained(seeds[1], 0.3)
                if seeds[0] == seeds[1]:
                    fo += _former_two_way_p(base, null) < 0.05
                    po += _former_two_way_p(base, gain) < 0.05
                fn += paired_seeds_questions(base, null).pvalue < 0.05
                pn += paired_seeds_questions(base, gain).pvalue < 0.05
            former = (f"{_rate(fo, sims)} | {_rate(po, sims)}" if seeds[0] == seeds[1]
                      else "— (not compared) | —")
            lines.append(f"| {seeds} | {sd} | {former} | {_rate(fn, sims)} | {_rate(pn, sims)} |")
    return lines


def pilot_power(sims: int, rng: np.random.Generator) -> list[str]:
    point_low = sized = conservative_low = 0
    for _ in range(sims):
        b = rng.normal(0, 1, 5)
        c = b + rng.normal(0.42, 1, 5)
        d = effect_from_pilot(b, c)
        if d is None:
            continue
        n = seeds_for_power(d)
        if n is not None:
            point_low += paired_power(max(n, 2), 0.42) < 0.5
        lo, hi = effect_interval(d, 5)
        if lo > 0 or hi < 0:
            n_c = seeds_for_power(min(abs(lo), abs(hi)))
            if n_c is not None:
                sized += 1
                conservative_low += paired_power(max(n_c, 2), 0.42) < 0.5
    return ["| answer | pilots it sized | power below 0.5 |", "|---|---:|---:|",
            f"| point estimate (`seeds`) | {sims} of {sims} | {_rate(point_low, sims)} |",
            f"| interval's end nearest 0 (`seeds_conservative`) | {sized} of {sims} | "
            f"{_rate(conservative_low, sized)} of those sized ({_rate(conservative_low, sims)} of all pilots) |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    sections = [
        (f"Clustered paired test, no true difference, few unequal clusters ({args.sims} trials a row, "
         "α = 5%): false positives %", clustered(args.sims, rng)),
        ("One accuracy on 30 binary questions, exact coverage of the 95% interval %", one_accuracy()),
        (f"Paired difference on 30 binary questions, coverage of the 95% interval % ({args.sims} trials a row)",
         paired_binary(args.sims, rng)),
        (f"Two configs, 2-3 training seeds each, 200 binary questions ({max(args.sims // 10, 100)} trials a "
         "row, α = 5%): false positives and power % for a gain of 0.3 logits", nested(max(args.sims // 10, 100), rng)),
        (f"`benchlab power` from a 5-pair pilot, true d_z 0.42 ({args.sims} pilots)", pilot_power(args.sims, rng)),
    ]
    for title, lines in sections:
        print(f"**{title}**\n")
        print("\n".join(lines))
        print()


if __name__ == "__main__":
    main()
