"""Reading what runs wrote back: a finished run's metrics (:mod:`~benchlab.collect.run_metrics`),
the extractors of other tools' files (:mod:`~benchlab.collect.extractors`), per-question records
(:mod:`~benchlab.collect.samples`), and a results folder rebuilt from its run directories
(:mod:`~benchlab.collect.rebuild`).

Nothing is imported until asked for (:func:`benchlab.names.exports.export_lazily`): reading the
per-question records needs neither the spec's models nor the extractors.
"""

from typing import TYPE_CHECKING

from benchlab.names.exports import export_lazily

if TYPE_CHECKING:
    from benchlab.collect.extractors import ExtractFailed
    from benchlab.collect.run_metrics import Collected, collect_run

_WHERE = {"Collected": "benchlab.collect.run_metrics", "ExtractFailed": "benchlab.collect.extractors",
                         "collect_run": "benchlab.collect.run_metrics"}
export_lazily(__name__, _WHERE)

__all__ = ["Collected", "ExtractFailed", "collect_run"]
