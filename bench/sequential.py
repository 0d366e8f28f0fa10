"""Familywise error and power of ``run --until-decided``, by seeded simulation.

Each path is one sweep: ``pairs`` candidates, each compared with its own baseline (independent
pairs, the hardest case for a Bonferroni split), looks at 5, 10, 15 and 20 paired seeds, α = 0.05
familywise, so each pair decides at α / pairs. A path is wrong when any of its null pairs is
decided better or worse. Both methods run on the same paths:

- ``betting``: benchlab's method for a metric with a range (every value here lies in [0, 1]);
- ``normal-theory``: the group-sequential t design (O'Brien–Fleming spending), what benchlab
  uses for a metric without a range, and what it used for every metric before.

Nulls (candidate and baseline of the same mean, every value in [0, 1]):

- ``normal``: both N(0.5, 0.15) cut at [0, 1] (symmetric: the mean stays 0.5);
- ``lognormal``: candidate 0.2·exp(N(0, 0.75)) cut at 1 (skewed), baseline stable
  N(m, 0.02) with m the candidate's exact mean;
- ``bimodal``: candidate's seeds collapse with probability 0.2 (N(0.1, 0.03), else N(0.8, 0.03),
  cut at [0, 1]), baseline stable N(m, 0.02) of the same exact mean.

Power: baseline N(0.5, 0.05), candidate 0.5 + effect + N(0, 0.05) (paired noise), one pair,
looks at 5..40 seeds.

    python bench/sequential.py                 # 20,000 paths per cell (what docs/statistics.md shows)
    python bench/sequential.py --paths 2000    # a quick run
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from benchlab.stats.sequential import NEGATIVE, POSITIVE, boundaries, run_betting_design, run_design

ALPHA = 0.05
SIZES = [5, 10, 15, 20]


def _clipped_normal_mean(mu: float, sd: float, low: float = 0.0, high: float = 1.0) -> float:
    """E[min(max(X, low), high)] for X ~ N(mu, sd²)."""
    a, b = (low - mu) / sd, (high - mu) / sd
    return float(low * sps.norm.cdf(a) + high * sps.norm.sf(b) + mu * (sps.norm.cdf(b) - sps.norm.cdf(a))
                 + sd * (sps.norm.pdf(a) - sps.norm.pdf(b)))


def _lognormal_cut_mean(scale: float = 0.2, sigma: float = 0.75) -> float:
    """E[min(scale·exp(N(0, σ²)), 1)]: E[Y; Y < 1] + P(Y ≥ 1)."""
    c = np.log(1.0 / scale)
    return float(scale * np.exp(sigma**2 / 2) * sps.norm.cdf((c - sigma**2) / sigma) + sps.norm.sf(c / sigma))


BIMODAL_MEAN = 0.2 * _clipped_normal_mean(0.1, 0.03) + 0.8 * _clipped_normal_mean(0.8, 0.03)
LOGNORMAL_MEAN = _lognormal_cut_mean()

Pair = Callable[[np.random.Generator, tuple[int, int]], tuple[np.ndarray, np.ndarray]]


def _normal(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return np.clip(rng.normal(0.5, 0.15, shape), 0, 1), np.clip(rng.normal(0.5, 0.15, shape), 0, 1)


def _lognormal(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    cand = np.minimum(0.2 * np.exp(rng.normal(0.0, 0.75, shape)), 1.0)
    return np.clip(rng.normal(LOGNORMAL_MEAN, 0.02, shape), 0, 1), cand


def _bimodal(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    collapsed = rng.random(shape) < 0.2
    cand = np.clip(np.where(collapsed, rng.normal(0.1, 0.03, shape), rng.normal(0.8, 0.03, shape)), 0, 1)
    return np.clip(rng.normal(BIMODAL_MEAN, 0.02, shape), 0, 1), cand


NULLS: dict[str, Pair] = {"normal": _normal, "lognormal": _lognormal, "bimodal (collapsing seeds)": _bimodal}


def familywise(paths: int, pair_counts: list[int], seed: int) -> dict[tuple[str, str, int], tuple[float, float]]:
    """``{(null, method, pairs): (rate, Monte Carlo SE)}`` of paths with any wrong decision."""
    out = {}
    for name, draw in NULLS.items():
        for m in pair_counts:
            rng = np.random.default_rng([seed, m, len(name)])
            bounds = boundaries(np.array(SIZES) / SIZES[-1], ALPHA / m)
            wrong = {"betting": np.zeros(paths, bool), "normal-theory": np.zeros(paths, bool)}
            for _ in range(m):
                base, cand = draw(rng, (paths, SIZES[-1]))
                d = cand - base
                decided, _ = run_betting_design(d, SIZES, 1.0, ALPHA / m)
                wrong["betting"] |= np.isin(decided, (POSITIVE, NEGATIVE))
                decided, _ = run_design(d, SIZES, bounds)
                wrong["normal-theory"] |= np.isin(decided, (POSITIVE, NEGATIVE))
            for method, hit in wrong.items():
                p = float(hit.mean())
                out[(name, method, m)] = (p, float(np.sqrt(max(p * (1 - p), 1e-12) / paths)))
    return out


def power(paths: int, effects: list[float], seed: int) -> dict[tuple[str, float], tuple[float, float]]:
    """``{(method, effect): (share decided better, mean seeds used)}``, one pair, looks at 5..40."""
    sizes = [5, 10, 15, 20, 30, 40]
    bounds = boundaries(np.array(sizes) / sizes[-1], ALPHA)
    out = {}
    for effect in effects:
        rng = np.random.default_rng([seed, int(effect * 1000)])
        base = rng.normal(0.5, 0.05, (paths, sizes[-1]))
        cand = base + effect + rng.normal(0.0, 0.05, (paths, sizes[-1]))
        d = np.clip(cand, 0, 1) - np.clip(base, 0, 1)
        for method, (decided, used) in (("betting", run_betting_design(d, sizes, 1.0, ALPHA)),
                                        ("normal-theory", run_design(d, sizes, bounds))):
            out[(method, effect)] = (float(np.mean(decided == POSITIVE)), float(used.mean()))
    return out


def _cell(rate: float, se: float, paths: int) -> str:
    # No hit at all: the Monte Carlo SE formula gives 0; the rule of three bounds the rate instead.
    return f"{100 * rate:.2f} ± {100 * se:.2f}" if rate > 0 else f"0 (95% upper bound {300 / paths:.3f})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=20_000, help="simulated sweeps per cell")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    pair_counts = [1, 2, 5, 10, 20]
    print(f"# {args.paths} paths per cell, seed {args.seed}; looks at {', '.join(map(str, SIZES))} seeds, "
          f"α = {ALPHA} familywise (Bonferroni); % ± Monte Carlo SE\n")
    fw = familywise(args.paths, pair_counts, args.seed)
    print("**Familywise false decisions (any null pair decided better or worse)**\n")
    print("| null | method | " + " | ".join(f"{m} pair{'s' if m > 1 else ''}" for m in pair_counts) + " |")
    print("|---|---|" + "---|" * len(pair_counts))
    for name in NULLS:
        for method in ("betting", "normal-theory"):
            cells = [_cell(*fw[(name, method, m)], args.paths) for m in pair_counts]
            print(f"| {name} | {method} | " + " | ".join(cells) + " |")
    effects = [0.1, 0.2, 0.3, 0.5]
    pw = power(max(args.paths // 4, 1000), effects, args.seed)
    print("\n**Power (one pair, effect in [0, 1] units, sd of each side 0.05; looks at 5, 10, 15, 20, 30, 40)**\n")
    print("| method | " + " | ".join(f"effect {e:g}" for e in effects) + " |")
    print("|---|" + "---|" * len(effects))
    for method in ("betting", "normal-theory"):
        print(f"| {method} | " + " | ".join(f"{100 * pw[(method, e)][0]:.1f}%, {pw[(method, e)][1]:.1f} seeds"
                                            for e in effects) + " |")
    print(f"\n# {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
