"""One evaluation: every item of every asked benchmark, sent to the model, scored, aggregated.

Shared by the server (one call per job) and ``benchlab eval`` (one call per
command). All items of all benchmarks are in flight at once, bounded by the
model client's semaphore, so a slow benchmark never idles the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from benchlab.errors import EvaluationError
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.datasets import Item, load_items
from benchlab.evaluate.metrics import SampleScore, aggregate
from benchlab.evaluate.model import ModelCallError, ModelClient, Sampling
from benchlab.evaluate.openai_api import SamplingFields
from benchlab.evaluate.scorers import Scorers

_NO_CHOICES = ModelCallError("", 200, "the model endpoint answered without choices", "no choices")


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark as asked for: its config and the sampling parameters in effect."""

    name: str
    config: BenchmarkConfig
    sampling: Sampling


class RunSummary(TypedDict):
    """One benchmark's part of an evaluation (``runs`` in the server's answer and the job ledger).

    ``tests_passed``/``tests_run`` only for the ``code`` scorer; ``output_file`` (the per-prompt
    records, ``<benchmark>.jsonl``) only when the evaluation writes an output folder.
    """

    benchmark: str
    scorer: str
    num_prompts: int
    num_evaluated: int
    samples_asked: int
    samples_scored: int
    model_errors: int
    model_error_reasons: dict[str, int]  # samples without a response, by what went wrong
    sampling: SamplingFields
    tests_passed: NotRequired[int]
    tests_run: NotRequired[int]
    output_file: NotRequired[str]


@dataclass
class EvaluationResult:
    """``raw_metrics`` is ``{benchmark: {mode: {metric: value}}}``; ``runs`` one summary per benchmark.

    A sample is scored only when the model answered it: ``samples_scored`` of
    ``samples_asked``, the rest model errors or, when ``partial``, not reached
    before the deadline.
    """

    raw_metrics: dict[str, dict[str, dict[str, float]]]
    runs: list[RunSummary]
    warning: str | None = None
    partial: bool = False  # the deadline stopped it before every prompt finished
    samples_scored: int = 0
    samples_asked: int = 0


@dataclass
class _Outcome:
    item: Item
    responses: list[str]
    scores: list[SampleScore]
    error: str | None = None
    missing: int = 0  # samples asked for that no response came back for: model errors, never scored
    reason: str | None = None  # the class of the last error (ModelCallError.reason)


@dataclass
class _Tally:
    outcomes: list[_Outcome] = field(default_factory=list)
    errors: int = 0
    last_error: str = ""
    reasons: Counter[str] = field(default_factory=Counter)


async def _samples(
    run: BenchmarkRun, item: Item, client: ModelClient
) -> tuple[list[str], ModelCallError | None]:
    """The ``n`` responses to ``item`` (fewer when requests failed) and the last error, if any.

    An endpoint that ignores ``n`` answers with fewer choices: each missing
    sample is asked for again on its own, so that every sample scored is a
    sample the model wrote.
    """
    n = run.sampling.n
    error: ModelCallError | None = None
    try:
        texts = list(await client.generate(run.config.api, item.prompt, run.sampling, run.config.system))[:n]
    except ModelCallError as exc:
        return [], exc
    if 0 < len(texts) < n:
        one = replace(run.sampling, n=1)
        extra = await asyncio.gather(
            *(client.generate(run.config.api, item.prompt, one, run.config.system) for _ in range(n - len(texts))),
            return_exceptions=True,
        )
        for got in extra:
            if isinstance(got, ModelCallError):
                error = got
            elif isinstance(got, BaseException):
                raise got
            elif got:
                texts.append(got[0])
            else:
                error = _NO_CHOICES
    elif not texts:
        error = _NO_CHOICES
    return texts, error


async def _one(run: BenchmarkRun, item: Item, client: ModelClient, scorers: Scorers) -> _Outcome:
    texts, error = await _samples(run, item, client)
    scores = await asyncio.gather(
        *(scorers.score(run.config.scorer, item.fields, t, run.config, item.prompt) for t in texts)
    )
    return _Outcome(item, texts, list(scores), str(error) if error else None, run.sampling.n - len(texts),
                    error.reason if error else None)


def _write_records(out_dir: Path, run: BenchmarkRun, outcomes: list[_Outcome]) -> Path:
    """``<benchmark>.jsonl`` in ``out_dir``: one line per prompt, its responses and verdicts."""
    path = out_dir / f"{run.name}.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for o in outcomes:
            record: dict[str, Any] = {
                "id": o.item.id,
                "responses": o.responses,
                "error": o.error,
                "missing": o.missing,
                "answers": [s.answer for s in o.scores],
                "correct": [s.correct for s in o.scores],
                "detail": [s.detail for s in o.scores],
            }
            if run.config.scorer == "code":
                record["tests_passed"] = [s.tests_passed for s in o.scores]
                record["tests_total"] = [s.tests_total for s in o.scores]
            f.write(json.dumps(record) + "\n")
    return path


def _shortfall(pending: bool, deadline_secs: float | None, scored_all: int, asked_all: int, finished: int,
               prompts: int) -> list[str]:
    """Why fewer samples were scored than asked: the deadline, or the model's missing responses."""
    warnings: list[str] = []
    if pending:
        warnings.append(
            f"server deadline of {deadline_secs:g}s reached: {scored_all} of {asked_all} samples scored, "
            f"{finished} of {prompts} prompts finished"
        )
    elif scored_all < asked_all:
        warnings.append(
            f"{asked_all - scored_all} of {asked_all} samples got no response from the model and are not "
            "scored (model_errors); the metrics cover the other samples"
        )
    return warnings


async def evaluate(
    runs: list[BenchmarkRun],
    client: ModelClient,
    scorers: Scorers,
    *,
    deadline_secs: float | None = None,
    out_dir: Path | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> EvaluationResult:
    """Evaluate ``runs`` against ``client``'s endpoint.

    Past ``deadline_secs`` the items still in flight are cancelled, the result
    is ``partial`` and its metrics cover the finished ones, with a ``warning``
    saying how many samples were scored. A sample the model gave no response to
    is a model error, left out of the metrics, never scored wrong. Raises
    EvaluationError when no sample of a benchmark got a response.
    When ``out_dir`` is given, writes ``<benchmark>.jsonl`` there (responses and verdicts).
    """
    start = time.monotonic()
    tasks: dict[asyncio.Task[_Outcome], str] = {}
    total: dict[str, int] = {}
    for run in runs:
        items = load_items(run.config)
        total[run.name] = len(items)
        log(
            f"{run.name}: {len(items)} prompts x {run.sampling.n} samples ({run.config.scorer} scorer)"
        )
        for item in items:
            tasks[asyncio.ensure_future(_one(run, item, client, scorers))] = run.name
    done, pending = await asyncio.wait(tasks, timeout=deadline_secs)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    tallies = {run.name: _Tally() for run in runs}
    for task in done:
        outcome = task.result()
        tally = tallies[tasks[task]]
        tally.outcomes.append(outcome)
        if outcome.error:
            tally.errors += outcome.missing
            tally.last_error = outcome.error
            if outcome.missing:
                tally.reasons[outcome.reason or "unknown"] += outcome.missing

    raw: dict[str, dict[str, dict[str, float]]] = {}
    summaries = []
    asked_all = scored_all = 0
    for run in runs:
        tally = tallies[run.name]
        tally.outcomes.sort(key=lambda o: o.item.id)
        scored = sum(len(o.scores) for o in tally.outcomes)
        asked = total[run.name] * run.sampling.n
        asked_all, scored_all = asked_all + asked, scored_all + scored
        if tally.outcomes and scored == 0:
            raise EvaluationError(
                f"benchmark {run.name}: every model request failed; last: {tally.last_error}"
            )
        per_prompt = [o.scores for o in tally.outcomes if o.scores]
        raw[run.name] = aggregate(per_prompt, run.sampling.n)
        if run.config.judge is not None and per_prompt:
            from benchlab.evaluate.judge import summarize

            raw[run.name]["judge"] = summarize(run.config.judge, per_prompt)
        summary: RunSummary = {
            "benchmark": run.name,
            "scorer": run.config.scorer,
            "num_prompts": total[run.name],
            "num_evaluated": len(tally.outcomes),
            "samples_asked": asked,
            "samples_scored": scored,
            "model_errors": tally.errors,
            "model_error_reasons": dict(sorted(tally.reasons.items())),
            "sampling": run.sampling.body(),
        }
        if run.config.scorer == "code":
            counted = [s for o in tally.outcomes for s in o.scores if s.tests_total is not None]
            summary["tests_passed"] = sum(s.tests_passed or 0 for s in counted)
            summary["tests_run"] = sum(s.tests_total or 0 for s in counted)
        if out_dir is not None:
            summary["output_file"] = _write_records(out_dir, run, tally.outcomes).name
        summaries.append(summary)
        log(
            f"{run.name}: {len(tally.outcomes)}/{total[run.name]} prompts, {scored}/{asked} samples scored, "
            f"{tally.errors} model errors, metrics {json.dumps(raw[run.name])}"
        )
    finished = sum(len(t.outcomes) for t in tallies.values())
    warnings = _shortfall(bool(pending), deadline_secs, scored_all, asked_all, finished, sum(total.values()))
    for w in warnings:
        log(w)
    if scorers.judge is not None:
        log(f"judge: {scorers.judge.calls} calls paid, {scorers.judge.cached} answered from the cache")
    log(f"done in {time.monotonic() - start:.2f}s")
    return EvaluationResult(raw, summaries, "; ".join(warnings) or None, bool(pending),
                            scored_all, asked_all)
