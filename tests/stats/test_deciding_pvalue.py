"""deciding_pvalue gives the p-value and test that compare() decides by, computing that test alone:
the ranks' "tied" (separated_from_best) asks only for it, once per config, task and metric."""

from __future__ import annotations

import numpy as np
import pytest

from benchlab.stats.compare import compare, deciding_pvalue


def _cases() -> list[tuple[str, np.ndarray, np.ndarray, bool]]:
    rng = np.random.default_rng(0)
    cases = []
    for n in (0, 1, 2, 3, 5, 8, 30, 60):
        for paired in (True, False):
            b = rng.normal(1.0, 0.1, n)
            c = rng.normal(1.05, 0.1, n if paired else max(n - 1, 0))
            cases.append((f"normal n={n}", b, c, paired))
            cases.append((f"ties n={n}", np.round(b, 1), np.round(c, 1), paired))
            if n:
                # Every difference the same: the paired t-test is undefined and Wilcoxon decides.
                cases.append((f"constant shift n={n}", b, b + 0.25, paired))
                # Both sides constant: Welch is undefined and Mann-Whitney decides.
                cases.append((f"constant sides n={n}", np.full(n, 2.0), np.full(n, 3.0), paired))
                cases.append((f"identical n={n}", b, b.copy(), paired))
                with_nan = c.copy()
                if with_nan.size:
                    with_nan[0] = np.nan
                cases.append((f"a NaN n={n}", b, with_nan, paired))
                cases.append((f"an infinity n={n}", np.r_[b[:-1], np.inf], b + 0.1, paired))
    return cases


CASES = _cases()


@pytest.mark.parametrize(("name", "baseline", "candidate", "paired"), CASES, ids=[c[0] + (" paired" if c[3] else "")
                                                                                   for c in CASES])
def test_the_deciding_test_and_its_p_value_are_compares(name, baseline, candidate, paired):
    expected = compare(baseline, candidate, paired, reps=0)
    assert deciding_pvalue(baseline, candidate, paired) == (expected.pvalue, expected.test)


def test_the_cases_reach_every_deciding_test():
    tests = {deciding_pvalue(b, c, paired)[1] for _, b, c, paired in CASES}
    assert tests == {"paired t", "Wilcoxon signed-rank", "Welch t", "Mann-Whitney U", None}
