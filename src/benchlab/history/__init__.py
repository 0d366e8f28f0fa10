"""A benchmark's life across versions: what changed between two of them and which scores moved
(:mod:`~benchlab.history.diff`), the pre-registered analysis plan
(:mod:`~benchlab.preregistration`), and publishing a results folder
(:mod:`~benchlab.history.export`)."""

from benchlab.history.diff import Change, Side, VersionDiff, diff_results, diff_versions, read_side

__all__ = ["Change", "Side", "VersionDiff", "diff_results", "diff_versions", "read_side"]
