"""``benchlab search``: Optuna tunes a config on a validation metric, on seeds of its own, with
its trials kept apart from the benchmark; the winner is promoted into a new spec.

- ``driver``: the trials as ordinary runs of the sweep, ask/tell, pruning from live curves;
- ``study``: the Optuna study in the results folder, samplers, pruners, crash recovery;
- ``live``: reading a running trial's curve as it grows;
- ``promote``: the spec with the best trial's params as a new config;
- ``summary``: what a study holds, for the report and the command line.
"""

from __future__ import annotations

from benchlab.search.driver import SearchResult, SearchRun, TrialEvent, search_folder

__all__ = ["SearchResult", "SearchRun", "TrialEvent", "search_folder"]
