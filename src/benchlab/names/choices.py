"""The named choices of the statistics, as enums the CLI offers and the library checks.

Kept apart from :mod:`benchlab.stats` (and free of numpy) so that the CLI can declare
its options with them without importing the statistics at start-up. The library's
tuples of valid values (:data:`benchlab.stats.METHODS`, ...) are read from here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

#: Bootstrap resamples of a report's statistics (``benchlab report --reps``), here so that the
#: dashboard can tell a report computed with the defaults without loading the statistics.
DEFAULT_REPS: Final = 2_000


class GoalChoice(StrEnum):
    """Whether higher (``max``) or lower (``min``) values of a metric are better."""

    MAX = "max"
    MIN = "min"


class MethodChoice(StrEnum):
    """Bootstrap interval of a mean (:data:`benchlab.stats.METHODS`)."""

    STUDENTIZED = "studentized"
    PERCENTILE = "percentile"
    BCA = "bca"


class SummaryChoice(StrEnum):
    """How a learning curve becomes one number (:data:`benchlab.stats.SUMMARIES`)."""

    FINAL = "final"
    AUC = "auc"
    MAX = "max"
    SLOPE = "slope"


class AlignChoice(StrEnum):
    """Curves summarised on each run's own curve or on the common step range."""

    COMMON = "common"
    OWN = "own"


class NormalizeChoice(StrEnum):
    """Scores of tasks without reference scores: raw, or min–max over the configs compared."""

    NONE = "none"
    OBSERVED = "observed"


class FailedAsChoice(StrEnum):
    """Failed seeds left out (``exclude``) or scored as the worst value (``worst``)."""

    EXCLUDE = "exclude"
    WORST = "worst"


__all__ = ["DEFAULT_REPS", "AlignChoice", "FailedAsChoice", "GoalChoice", "MethodChoice", "NormalizeChoice",
           "SummaryChoice"]


class LevelChoice(StrEnum):
    """What a comparison pairs: runs by seed, answers by question, or the first that decides."""

    AUTO = "auto"
    SEEDS = "seeds"
    QUESTIONS = "questions"
