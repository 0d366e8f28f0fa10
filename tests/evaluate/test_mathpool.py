import asyncio
import time

import pytest

from benchlab.evaluate.mathpool import MathVerifyPool


@pytest.fixture(scope="module")
def pool():
    p = MathVerifyPool(workers=1, timeout=3)
    yield p
    p.close()


@pytest.mark.parametrize(
    ("gold", "pred", "equal"),
    [
        ("\\frac{1}{2}", "0.5", True),
        ("x+1", "1+x", True),
        ("42", "42.0", True),
        ("3", "4", False),
        ("\\sqrt{4}", "2", True),
        ("10", "\\text{ten apples}", False),
    ],
)
def test_math_verify_equivalence(pool, gold, pred, equal):
    assert pool.equivalent(gold, pred)[0] is equal


@pytest.mark.slow
def test_a_hanging_comparison_is_killed_and_the_pool_keeps_working(pool):
    # sympy evaluates the power tower and never returns; the worker is killed at the timeout.
    start = time.monotonic()
    ok, why = pool.equivalent("5", "9^{9^{9^{9}}}")
    assert not ok and "no verdict" in why
    assert time.monotonic() - start < 10
    assert pool.timeouts >= 1
    assert asyncio.run(pool.aequivalent("\\frac{3}{4}", "0.75")) == (True, "")
