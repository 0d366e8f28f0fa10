"""The bootstrap's matrix products on one BLAS thread (benchlab.stats.threads)."""

from __future__ import annotations

import numpy as np
import pytest

from benchlab.stats.bootstrap import studentized_mean_ci
from benchlab.stats.threads import one_blas_thread

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


def test_a_wrapped_call_runs_on_one_blas_thread_and_the_setting_comes_back_after_an_error():
    if not _blas_threads():
        pytest.skip("numpy loaded no BLAS library threadpoolctl knows")
    seen: list[list[int]] = []

    @one_blas_thread
    def inner() -> None:
        seen.append(_blas_threads())

    @one_blas_thread
    def outer(fail: bool) -> None:
        inner()  # nested: still one thread, and the outer call restores
        seen.append(_blas_threads())
        if fail:
            raise ValueError("boom")

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        outer(False)
        with pytest.raises(ValueError):
            outer(True)
        after = _blas_threads()
    assert all(threads == [1] * len(before) for threads in seen) and len(seen) == 4
    assert after == before == [2] * len(before)


def test_the_interval_is_the_same_to_the_last_bit_on_one_thread_or_several():
    x = np.random.default_rng(5).normal(size=(40, 30))
    low, high = studentized_mean_ci(x, 2_000, 0.95, 3)
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        # The same products computed by a caller already on one thread, unwrapped.
        low1, high1 = studentized_mean_ci.__wrapped__(x, 2_000, 0.95, 3)  # type: ignore[attr-defined]
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        low2, high2 = studentized_mean_ci.__wrapped__(x, 2_000, 0.95, 3)  # type: ignore[attr-defined]
    assert low.tobytes() == low1.tobytes() == low2.tobytes()
    assert high.tobytes() == high1.tobytes() == high2.tobytes()
