"""What counts as zero: spreads and differences lost in floating-point noise.

A candidate equal to its baseline plus 0.1 on every seed, read back from CSV,
has paired differences whose standard deviation is about 1e-17 rather than 0.
Divided into the mean difference that noise becomes a t statistic of 1e16 and a
p-value of 1e-110. Every test for a zero spread therefore compares with the
magnitude of the data: a spread at or below ``RELATIVE_TOLERANCE · max|x|`` is
treated as exactly zero (and the statistic that would divide by it is null).

The tolerance is the precision of the numbers themselves, 64 units in the last
place (``64 · 2⁻⁵² ≈ 1.4e-14`` relative): adding, subtracting and averaging a few
values, or writing them as text and reading them back, errs by a few units.
A wider rule (it was 1e-12 relative) swallowed real spreads of large values:
scores ``1e12 + N(0, 0.68)`` have a spread of 0.68, 5,000 units of 1.2e-4, and
were called "all equal" where scipy's t-test gives p = 0.0025.
"""

from __future__ import annotations

import numpy as np

RELATIVE_TOLERANCE = 64 * float(np.finfo(float).eps)


def scale(*samples: np.ndarray) -> float:
    """The largest absolute finite value over all ``samples`` (0 when there is none)."""
    tops = [float(np.max(np.abs(s))) for s in map(np.asarray, samples) if s.size]
    return max(tops, default=0.0)


def is_negligible(spread: float, *samples: np.ndarray) -> bool:
    """Whether ``spread`` (a standard deviation, or a difference) is zero up to rounding.

    ``spread <= RELATIVE_TOLERANCE · max|x|`` over every value of ``samples``; an
    exact zero always is.
    """
    return bool(abs(spread) <= RELATIVE_TOLERANCE * scale(*samples))


def negligible_mask(spread: np.ndarray, magnitude: np.ndarray) -> np.ndarray:
    """Vectorised :func:`is_negligible`: ``|spread| <= RELATIVE_TOLERANCE · magnitude``."""
    return np.abs(spread) <= RELATIVE_TOLERANCE * np.asarray(magnitude)


__all__ = ["RELATIVE_TOLERANCE", "is_negligible", "negligible_mask", "scale"]
