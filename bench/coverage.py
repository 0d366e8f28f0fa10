"""Coverage of benchlab's intervals, and false positives of its verdict, on field-like data.

Seeded simulation: for each distribution, sample size and interval, draw many samples with a
known true value, compute the interval as benchlab does, and count how often it contains the
truth. Prints one Markdown table per family with the Monte Carlo standard error of each figure
(√(p(1-p)/trials)); docs/statistics.md keeps the output of the full run.

Distributions (one value per seed):

- ``normal``: N(0.6, 0.2);
- ``lognormal``: exp(N(0, 0.75)), strongly right-skewed (skewness ≈ 2.9);
- ``bimodal``: "some seeds collapse": with probability 0.2 a seed collapses to N(0.1, 0.05),
  otherwise N(0.8, 0.05) (an RL return where a fifth of the seeds never learn).

    python bench/coverage.py              # the full study: 2,000 trials, 1,000 resamples (a few minutes)
    python bench/coverage.py --fast       # a reduced run (what tests/stats/test_coverage_study.py runs)
    python bench/coverage.py --only field # only the field's fixed-seed verdict table
    python bench/coverage.py --only small-n  # t, bootstrap-t and percentile at 4-10 seeds
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from benchlab.stats import aggregate_many, compare, holm, is_significant, studentized_mean_ci
from benchlab.stats.bootstrap import BOOTSTRAP_T_MIN_N, bootstrap_mean_diff_ci
from benchlab.stats.compare import diff_t_interval
from benchlab.stats.describe import t_interval

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.normal(0.6, 0.2, shape)


def _lognormal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.exp(rng.normal(0.0, 0.75, shape))


def _bimodal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    collapsed = rng.random(shape) < 0.2
    return np.where(collapsed, rng.normal(0.1, 0.05, shape), rng.normal(0.8, 0.05, shape))


DISTRIBUTIONS: dict[str, Sampler] = {"normal": _normal, "lognormal": _lognormal, "bimodal": _bimodal}
MEANS = {"normal": 0.6, "lognormal": float(np.exp(0.75**2 / 2)), "bimodal": 0.2 * 0.1 + 0.8 * 0.8}


def _iqm_truth(name: str) -> float:
    """The population interquartile mean, from 4 million draws (Monte Carlo error < 1e-3)."""
    x = DISTRIBUTIONS[name](np.random.default_rng(12345), (4_000_000,))
    return float(sps.trim_mean(x, 0.25))


def _cover(low: np.ndarray, high: np.ndarray, truth: float) -> tuple[float, int]:
    """Share of intervals containing ``truth`` (a null interval counts as a miss), and how many
    were null."""
    ok = np.isfinite(low) & np.isfinite(high)
    return float(np.mean(ok & (low <= truth) & (truth <= high))), int(np.sum(~ok))


def _fmt(p: float, nulls: int, trials: int) -> str:
    if nulls == trials:
        return "not shown"
    se = np.sqrt(max(p * (1 - p), 1e-12) / trials)
    cell = f"{100 * p:.1f} ± {100 * se:.1f}"
    return cell + (f" ({nulls} null)" if nulls else "")


def mean_intervals(trials: int, reps: int, sizes: list[int], seed: int) -> dict[tuple[str, str, int], str]:
    out = {}
    for name, draw in DISTRIBUTIONS.items():
        for n in sizes:
            rng = np.random.default_rng([seed, n, len(name)])
            x = draw(rng, (trials, n))
            truth = MEANS[name]
            out[(name, "Student t (`ci`)", n)] = _fmt(*_cover(*t_interval(x), truth), trials)
            if n >= BOOTSTRAP_T_MIN_N:  # not shown below (small_n_intervals says why)
                low, high = studentized_mean_ci(x, reps, seed=seed + n)
                p, nulls = _cover(low, high, truth)
                out[(name, "bootstrap-t (`boot_ci`)", n)] = _fmt(p, nulls, trials)
    return out


def difference_intervals(trials: int, reps: int, sizes: list[int], seed: int
                         ) -> dict[tuple[str, str, int], str]:
    """Paired: both configs from the distribution, the candidate 0.1 better, paired by seed
    (the differences have the distribution's shape twice over). Unpaired: the same, independent."""
    out = {}
    for name, draw in DISTRIBUTIONS.items():
        for n in sizes:
            rng = np.random.default_rng([seed, n, len(name), 7])
            b, c = draw(rng, (trials, n)), draw(rng, (trials, n)) + 0.1
            d = c - b
            out[(name, "paired t (`diff_ci`, paired)", n)] = _fmt(*_cover(*t_interval(d), 0.1), trials)
            welch = np.array([diff_t_interval(b[i], c[i], paired=False) for i in range(trials)])
            out[(name, "Welch t (`diff_ci`, unpaired)", n)] = _fmt(
                *_cover(welch[:, 0], welch[:, 1], 0.1), trials)
            if n >= BOOTSTRAP_T_MIN_N:  # not shown below (small_n_intervals says why)
                low, high = studentized_mean_ci(d, reps, seed=seed + n)
                out[(name, "bootstrap-t of d (`diff_boot_ci`, paired)", n)] = _fmt(
                    *_cover(low, high, 0.1), trials)
                # The two-sample bootstrap-t runs one comparison at a time: a quarter of the trials.
                k = max(trials // 4, 50)
                boot = np.array([bootstrap_mean_diff_ci(b[i], c[i], False, reps // 2, seed=i)
                                 for i in range(k)], dtype=float)
                out[(name, "two-sample bootstrap-t (`diff_boot_ci`, unpaired)", n)] = _fmt(
                    *_cover(boot[:, 0], boot[:, 1], 0.1), k)
    return out


def aggregate_intervals(trials: int, reps: int, layouts: list[tuple[int, int]], seed: int
                        ) -> dict[tuple[str, str, str], str]:
    """The across-task mean and IQM of ``tasks`` tasks of ``runs`` runs each, every task from
    the same distribution (so the truth is the distribution's mean, and its IQM)."""
    out = {}
    for name, draw in DISTRIBUTIONS.items():
        iqm_truth = _iqm_truth(name)
        for tasks, runs in layouts:
            rng = np.random.default_rng([seed, tasks, runs, len(name)])
            tables = list(draw(rng, (trials, runs, tasks)))
            # Each table its own resamples (shared draws would correlate the trials).
            results = [aggregate_many([t], reps, seed=seed + i)[0] for i, t in enumerate(tables)]
            layout = f"{tasks} × {runs}"
            for agg, truth in (("mean", MEANS[name]), ("iqm", iqm_truth)):
                low = np.array([r[agg][1] for r in results])
                high = np.array([r[agg][2] for r in results])
                width = np.mean(high - low)
                cell = _fmt(*_cover(low, high, truth), trials)
                out[(name, agg, layout)] = cell + (" (zero width)" if width == 0 else "")
    return out


def false_positives(trials: int, sizes: list[int], seed: int) -> dict[tuple[str, int], str]:
    """The ``significant`` verdict under the null: the baseline N(m, 0.2) and a candidate of the
    same mean m but the named shape, paired by seed (alone in its Holm family)."""
    out = {}
    for name, draw in DISTRIBUTIONS.items():
        for n in sizes:
            rng = np.random.default_rng([seed, n, len(name), 11])
            c = draw(rng, (trials, n))
            b = rng.normal(MEANS[name], 0.2 * MEANS[name] / 0.6, (trials, n))
            hits = 0
            for i in range(trials):
                r = compare(b[i], c[i], paired=True, reps=0)
                (p,) = holm([r.pvalue])
                hits += bool(is_significant(p, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor))
            out[(name, n)] = _fmt(hits / trials, 0, trials)
    return out


def _field_cases() -> dict[str, tuple[Callable[[np.random.Generator, tuple[int, int], float], tuple[np.ndarray,
                                                                                                    np.ndarray]],
                                       float | None]]:
    """The fixed-seed cases of the field: ``{name: (draw(rng, shape, effect) -> (baseline, candidate), range
    width or None)}``. ``effect`` is the candidate's true gain (0: the null, same mean)."""
    collapsing_mean = 0.2 * 0.1 + 0.8 * 0.8
    lognormal_mean = 0.2 * float(np.exp(0.75**2 / 2))

    def normal(rng: np.random.Generator, shape: tuple[int, int], effect: float) -> tuple[np.ndarray, np.ndarray]:
        return (np.clip(rng.normal(0.5, 0.1, shape), 0, 1), np.clip(rng.normal(0.5 + effect, 0.1, shape), 0, 1))

    def heavy(rng: np.random.Generator, shape: tuple[int, int], effect: float) -> tuple[np.ndarray, np.ndarray]:
        return 0.5 + 0.1 * rng.standard_t(3, shape), 0.5 + effect + 0.1 * rng.standard_t(3, shape)

    def collapsing(rng: np.random.Generator, shape: tuple[int, int], effect: float) -> tuple[np.ndarray, np.ndarray]:
        # Collapses (N(0.1, 0.03)) one seed in five, else N(0.8, 0.03); cut at [0, 1] (a 0.0003% change of mean).
        down = rng.random(shape) < 0.2
        cand = np.clip(np.where(down, rng.normal(0.1, 0.03, shape), rng.normal(0.8, 0.03, shape)), 0, 1)
        return np.clip(rng.normal(collapsing_mean - effect, 0.02, shape), 0, 1), cand

    def lognormal(rng: np.random.Generator, shape: tuple[int, int], effect: float) -> tuple[np.ndarray, np.ndarray]:
        return rng.normal(lognormal_mean - effect, 0.02, shape), 0.2 * np.exp(rng.normal(0.0, 0.75, shape))

    return {"normal, both sides N(0.5, 0.1)": (normal, 1.0),
            "heavy-tailed, both sides 0.5 + 0.1·t₃": (heavy, None),
            "stable baseline N(m, 0.02) vs collapsing candidate": (collapsing, 1.0),
            "stable baseline N(m, 0.02) vs lognormal candidate": (lognormal, None)}


def _fixed_n_betting_pvalue(diffs: np.ndarray, width: float, alpha: float = 0.05) -> np.ndarray:
    """The alternative range test measured against the default one: the same capital process with bets
    tuned to a fixed number of seeds, ``λ_i = √(2 log(2/α) / (n σ̂²_{i−1}))`` (Waudby-Smith & Ramdas 2024,
    their fixed-n choice), truncated as the default's. Rows are comparisons."""
    from benchlab.stats.sequential import _MOST_BET, _log_capital, rescale

    y = rescale(diffs, width)
    n = y.shape[1]
    count = np.arange(1, n + 1) + 1.0
    mu = (0.5 + np.cumsum(y, axis=1)) / count
    var = (0.25 + np.cumsum((y - mu) ** 2, axis=1)) / count
    before = np.concatenate([np.full((y.shape[0], 1), 0.25), var[:, :-1]], axis=1)
    lam = np.minimum(np.sqrt(2.0 * np.log(2.0 / alpha) / (n * before)), _MOST_BET)
    top = np.maximum(_log_capital(y, lam, 0.5, +1)[:, -1], _log_capital(y, lam, 0.5, -1)[:, -1])
    return np.minimum(1.0, 2.0 * np.exp(-top))


def _hoeffding_pvalue(diffs: np.ndarray, width: float) -> np.ndarray:
    """Hoeffding's two-sided p-value for differences in ``[−width, width]``: ``2 exp(−n d̄² / (2 width²))``."""
    n = diffs.shape[1]
    return np.minimum(1.0, 2.0 * np.exp(-n * diffs.mean(axis=1) ** 2 / (2.0 * width**2)))


def field_verdicts(trials: int, sizes: list[int], seed: int, effects: tuple[float, ...] = (0.1, 0.3)
                   ) -> dict[tuple[str, str, int], str]:
    """On the field's cases, the share of comparisons called significant under the null (false
    positives) and at a true gain of each of ``effects`` (power), by:

    - the default verdict (:func:`benchlab.stats.verdict.decide`: the t verdict where a betting test
      valid in the metric's range confirms it; withheld without a range);
    - the t verdict alone (paired t, Holm, the t interval excluding 0): the default before, and what
      ``assume: normal`` accepts;
    - the two range tests considered besides the default one (bets tuned to a fixed n; Hoeffding).

    Each comparison is alone in its Holm family.
    """
    from benchlab.stats.analysis import ComparisonRow
    from benchlab.stats.verdict import decide

    out = {}
    for name, (draw, width) in _field_cases().items():
        ranges = {"value": (0.0, width)} if width is not None else {}
        for n in sizes:
            for gain in (0.0, *effects):
                kind = "false positives" if gain == 0 else f"power, gain {gain:g}"
                rng = np.random.default_rng([seed, n, len(name), int(gain * 100)])
                b, c = draw(rng, (trials, n), gain)
                verdict = t_only = 0
                for i in range(trials):
                    r = compare(b[i], c[i], paired=True, reps=0)
                    (p,) = holm([r.pvalue])
                    t_sig = is_significant(p, r.diff_ci_low, r.diff_ci_high, 0.05, r.p_floor)
                    t_only += bool(t_sig)
                    row = ComparisonRow(task="t", metric="value", baseline="b", candidate="c", paired=True, n=n,
                                        mean_diff=r.mean_diff, t_pvalue=r.t_pvalue,
                                        wilcoxon_pvalue=r.wilcoxon_pvalue, p_holm=p)
                    (decided,) = decide([row], [(b[i], c[i])], [t_sig], ranges, (), 0.05, [])
                    verdict += bool(decided.significant)
                out[(name, f"default verdict: {kind}", n)] = _fmt(verdict / trials, 0, trials)
                out[(name, f"t verdict alone (assume: normal): {kind}", n)] = _fmt(t_only / trials, 0, trials)
                if width is not None:
                    d = c - b
                    out[(name, f"range test, bets tuned to n: {kind}", n)] = _fmt(
                        float(np.mean(_fixed_n_betting_pvalue(d, width) < 0.05)), 0, trials)
                    out[(name, f"range test, Hoeffding: {kind}", n)] = _fmt(
                        float(np.mean(_hoeffding_pvalue(d, width) < 0.05)), 0, trials)
    return out


FIELD_TITLE = ("The field's fixed-seed cases, paired, α = 5%: share of comparisons called significant (null: "
               "same mean; power: the candidate better by the gain, in the metric's units: a tenth and 0.3 of "
               "the range [0, 1] where there is one)")
def _t3(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return 0.5 + 0.1 * rng.standard_t(3, shape)


def small_n_intervals(trials: int, reps: int, sizes: list[int]) -> dict[tuple[str, str, int], str]:
    """Coverage and width of the t, bootstrap-t and percentile intervals at few seeds, on the mean
    (one sample) and the paired difference (``c - b``, both sides of the distribution, c 0.1 better).

    A cell is ``coverage ± MC SE · far · width``: *far* is the share of intervals with an end more
    than one sample range (max − min) beyond the data, where an interval says nothing about the
    sample; *width* the median width in sample ranges (its 95th percentile in brackets). What
    decides the smallest n at which benchlab shows the bootstrap-t
    (:data:`benchlab.stats.bootstrap.BOOTSTRAP_T_MIN_N`)."""
    cases: dict[str, tuple[Sampler, float]] = {
        "normal": (_normal, MEANS["normal"]), "lognormal": (_lognormal, MEANS["lognormal"]),
        "collapsing (bimodal)": (_bimodal, MEANS["bimodal"]), "t₃": (_t3, 0.5)}
    out = {}
    for stat in ("mean", "paired difference"):
        for name, (draw, mean) in cases.items():
            for n in sizes:
                # The seeds of the figures in docs/statistics.md.
                rng = np.random.default_rng([n, len(name.split(" ")[0]), stat != "mean"])
                if stat == "mean":
                    x, truth = draw(rng, (trials, n)), mean
                else:
                    x, truth = draw(rng, (trials, n)) + 0.1 - draw(rng, (trials, n)), 0.1
                boot_means = x[:, rng.integers(0, n, (reps, n))].mean(axis=-1)
                intervals = {"Student t": t_interval(x),
                             "bootstrap-t": studentized_mean_ci(x, reps, seed=n),
                             "percentile bootstrap": tuple(np.percentile(boot_means, [2.5, 97.5], axis=1))}
                lo, hi = x.min(axis=1), x.max(axis=1)
                spread = hi - lo
                for method, (a, b) in intervals.items():
                    a, b = np.asarray(a), np.asarray(b)
                    p = float(np.mean((a <= truth) & (truth <= b)))
                    far = float(np.mean((a < lo - spread) | (b > hi + spread)))
                    width = (b - a) / spread
                    out[(f"{name}, {stat}", method, n)] = (
                        f"{_fmt(p, 0, trials)} · {100 * far:.1f}% · {np.median(width):.2f} "
                        f"({np.quantile(width, 0.95):.2f})")
    return out


def _table(title: str, cells: dict, cols: list) -> str:
    rows = list(dict.fromkeys(k[:2] for k in cells))
    lines = [f"**{title}**", "", "| distribution | interval | " + " | ".join(map(str, cols)) + " |",
             "|---|---|" + "---|" * len(cols)]
    for row in rows:
        lines.append(f"| {row[0]} | {row[1]} | "
                     + " | ".join(cells.get((*row, c), "—") for c in cols) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2_000)
    parser.add_argument("--reps", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--fast", action="store_true", help="400 trials, 400 resamples, fewer sizes")
    parser.add_argument("--only", choices=["field", "small-n"], help="print only this table")
    args = parser.parse_args(argv)
    trials, reps = (400, 400) if args.fast else (args.trials, args.reps)
    sizes = [5, 10] if args.fast else [3, 5, 10, 30]
    start = time.perf_counter()
    if args.only == "small-n":
        small = [4, 5, 6, 8, 10]
        print(f"# {trials} trials per cell, {reps} resamples per interval; coverage in % ± Monte Carlo "
              "standard error · share of intervals reaching more than one sample range beyond the data · "
              "median width in sample ranges (95th percentile)\n")
        print(_table("95% intervals at few seeds", small_n_intervals(trials, reps, small), small))
        return
    if args.only == "field":
        print(f"# {trials} trials per cell, seed {args.seed}; % ± Monte Carlo standard error\n")
        print(_table(FIELD_TITLE, field_verdicts(trials, sizes, args.seed), sizes))
        return
    print(f"# {trials} trials per cell, {reps} resamples per interval, seed {args.seed}; "
          "coverage in % ± Monte Carlo standard error\n")
    print(_table("95% intervals of one (task, config) mean", mean_intervals(trials, reps, sizes, args.seed),
                 sizes))
    print(_table("95% intervals of the difference of means", difference_intervals(
        trials, reps, sizes, args.seed), sizes))
    layouts = ([(1, 2), (2, 2), (5, 3), (5, 5)] if args.fast
               else [(1, 2), (1, 3), (2, 2), (5, 1), (5, 2), (5, 3), (1, 5), (5, 5), (5, 10)])
    agg = aggregate_intervals(max(trials // 4, 100), reps, layouts, args.seed)
    print(_table("95% across-task intervals (tasks × runs per task; benchlab's default method)", agg,
                 [f"{t} × {r}" for t, r in layouts]))
    fp = false_positives(trials, sizes, args.seed)
    lines = ["**False positives of the t verdict (what `assume: normal` accepts; α = 5%), candidate of the named "
             "shape against a normal baseline of the same mean, paired**", "",
             "| candidate's distribution | " + " | ".join(f"n = {n}" for n in sizes) + " |",
             "|---|" + "---|" * len(sizes)]
    for name in DISTRIBUTIONS:
        lines.append(f"| {name} | " + " | ".join(fp[(name, n)] for n in sizes) + " |")
    print("\n".join(lines) + "\n")
    if not args.fast:  # the reduced run checks the intervals; this table is --only field's
        print(_table(FIELD_TITLE, field_verdicts(trials, sizes, args.seed), sizes))
    print(f"# {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
