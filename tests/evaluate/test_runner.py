"""Every sample asked for is a sample scored, or a model error: never a wrong answer.

A model server that ignores ``n`` answers one choice per request. The runner
asks for each missing sample on its own; the samples it still cannot get are
model errors, left out of the metrics and counted in the summary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from benchlab.evaluate.config import load_config
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.model import ModelCallError, Sampling
from benchlab.evaluate.runner import BenchmarkRun, evaluate
from benchlab.evaluate.scorers import Scorers
from benchlab.evaluate.stub import respond


@dataclass
class OneChoiceModel:
    """Answers every prompt right, with one choice whatever ``n`` asks; single requests fail when told to."""

    answers: dict[str, str]
    singles_fail: bool = False
    calls: list[int] = field(default_factory=list)

    async def generate(self, api: str, prompt: str, sampling: Sampling, system: str | None = None) -> list[str]:
        self.calls.append(sampling.n)
        if sampling.n == 1 and self.singles_fail:
            raise ModelCallError("http://127.0.0.1:1/v1/chat/completions", 500, "HTTP 500")
        return [self.answers[prompt]]


def _words_run(n: int) -> tuple[BenchmarkRun, dict[str, str]]:
    config = load_config()
    bench = config.benchmarks["words"]
    answers = {item.prompt: respond(bench.scorer, item.fields, "correct") for item in load_items(bench)}
    return BenchmarkRun("words", bench, Sampling(n, 0.7, 1.0, -1, 64)), answers


def _evaluate(run: BenchmarkRun, model: OneChoiceModel):
    pool = MathVerifyPool(workers=1)
    try:
        return asyncio.run(evaluate([run], model, Scorers(pool)))  # type: ignore[arg-type]
    finally:
        pool.close()


def test_samples_a_server_left_out_are_asked_for_one_by_one():
    run, answers = _words_run(4)
    model = OneChoiceModel(answers)
    result = _evaluate(run, model)
    prompts = len(answers)
    # One request of n=4 per prompt, then three of n=1: every sample is the model's.
    assert sorted(model.calls) == [1] * (3 * prompts) + [4] * prompts
    assert result.raw_metrics["words"]["pass@1[avg-of-4]"]["accuracy"] == 1.0
    summary = result.runs[0]
    assert (summary["samples_scored"], summary["samples_asked"], summary["model_errors"]) == (
        4 * prompts, 4 * prompts, 0)
    assert result.warning is None and not result.partial


def test_samples_the_model_never_answered_are_model_errors_not_wrong_answers():
    run, answers = _words_run(4)
    result = _evaluate(run, OneChoiceModel(answers, singles_fail=True))
    prompts = len(answers)
    # The one answer per prompt is right: the accuracy over what was scored is 1, not 1/4.
    assert result.raw_metrics["words"]["pass@1[avg-of-4]"]["accuracy"] == 1.0
    assert result.raw_metrics["words"]["pass@1[avg-of-4]"]["num_entries"] == prompts
    assert "pass@2" not in result.raw_metrics["words"]  # no prompt has two scored samples
    summary = result.runs[0]
    assert (summary["samples_scored"], summary["samples_asked"], summary["model_errors"]) == (
        prompts, 4 * prompts, 3 * prompts)
    assert result.warning is not None and f"{3 * prompts} of {4 * prompts} samples" in result.warning
