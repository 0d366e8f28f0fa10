"""``from: {lm_eval: FOLDER}``: the folder lm-evaluation-harness wrote (its ``--output_path``).

``task`` and ``key`` (``exact_match,strict-match``) pick the value from the newest
``results_*.json`` under it; without them every ``task/metric,filter`` of the file is read and
the metric's name (``gsm8k/exact_match,strict-match``, or ``exact_match,strict-match`` for the
run's task) picks its value. Collecting a run reads the file whole either way
(:mod:`benchlab.collect.lm_eval`: standard errors, partial tasks, provenance).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator

from benchlab.collect.extractors import Extractor, Series, SharedOptions
from benchlab.collect.lm_eval import flatten, newest_results, pick_key, read_results


class LmEvalOptions(SharedOptions):
    """An ``lm_eval`` source: the folder, and ``task`` with ``key``, or neither."""

    lm_eval: str
    described = "lm-eval's results file"

    @model_validator(mode="after")
    def _task_and_key_together(self) -> LmEvalOptions:
        if bool(self.task) != bool(self.key):
            raise ValueError("an 'lm_eval' source needs both 'task' (e.g. gsm8k) and 'key' "
                             "(e.g. 'exact_match,strict-match'), or neither: then every metric of the "
                             "results file is read and the metric's name picks its value")
        return self


def extract_lm_eval(run_dir: Path, source: LmEvalOptions) -> tuple[float, Series | None]:
    """One value (``task``'s ``key``); collecting a run reads the whole file instead
    (``collect_run``), this serves callers that want the value alone."""
    assert source.task and source.key
    found = flatten(read_results(newest_results(run_dir / source.lm_eval)))
    return pick_key(found, source.task, source.key)[0], None


EXTRACTOR = Extractor("lm_eval", LmEvalOptions, extract_lm_eval)
