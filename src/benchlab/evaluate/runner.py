"""One evaluation: every item of every asked benchmark, sent to the model, scored, aggregated.

Shared by the server (one call per job) and ``benchlab eval`` (one call per
command). All items of all benchmarks are in flight at once, bounded by the
model client's semaphore, so a slow benchmark never idles the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlab.errors import EvaluationError
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.datasets import Item, load_items
from benchlab.evaluate.metrics import SampleScore, aggregate
from benchlab.evaluate.model import ModelCallError, ModelClient, Sampling
from benchlab.evaluate.scorers import Scorers


@dataclass(frozen=True)
class BenchmarkRun:
    """One benchmark as asked for: its config and the sampling parameters in effect."""

    name: str
    config: BenchmarkConfig
    sampling: Sampling


@dataclass
class EvaluationResult:
    """``raw_metrics`` is ``{benchmark: {mode: {metric: value}}}``; ``runs`` one summary per benchmark."""

    raw_metrics: dict[str, dict[str, dict[str, float]]]
    runs: list[dict[str, Any]]
    warning: str | None = None


@dataclass
class _Outcome:
    item: Item
    responses: list[str | None]
    scores: list[SampleScore]
    error: str | None = None


@dataclass
class _Tally:
    outcomes: list[_Outcome] = field(default_factory=list)
    errors: int = 0
    last_error: str = ""


async def _one(run: BenchmarkRun, item: Item, client: ModelClient, scorers: Scorers) -> _Outcome:
    n = run.sampling.n
    error = None
    try:
        texts: list[str | None] = list(
            await client.generate(run.config.api, item.prompt, run.sampling, run.config.system)
        )
    except ModelCallError as exc:
        texts, error = [None] * n, str(exc)
    texts = (texts + [None] * n)[:n]  # an endpoint that ignores n still gets n verdicts
    scores = await asyncio.gather(
        *(scorers.score(run.config.scorer, item.fields, t, run.config, item.prompt) for t in texts)
    )
    return _Outcome(item, texts, list(scores), error)


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

    Past ``deadline_secs`` the items still in flight are cancelled and the
    metrics cover the finished ones, with a ``warning`` saying how many.
    Raises EvaluationError when every model request of a benchmark failed.
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
            tally.errors += 1
            tally.last_error = outcome.error

    raw: dict[str, dict[str, dict[str, float]]] = {}
    summaries = []
    for run in runs:
        tally = tallies[run.name]
        tally.outcomes.sort(key=lambda o: o.item.id)
        if tally.outcomes and tally.errors == len(tally.outcomes):
            raise EvaluationError(
                f"benchmark {run.name}: every model request failed; last: {tally.last_error}"
            )
        raw[run.name] = aggregate([o.scores for o in tally.outcomes])
        if run.config.judge is not None and tally.outcomes:
            from benchlab.evaluate.judge import summarize

            raw[run.name]["judge"] = summarize(run.config.judge, [o.scores for o in tally.outcomes])
        summary = {
            "benchmark": run.name,
            "scorer": run.config.scorer,
            "num_prompts": total[run.name],
            "num_evaluated": len(tally.outcomes),
            "model_errors": tally.errors,
            "sampling": run.sampling.body(),
        }
        if out_dir is not None:
            path = out_dir / f"{run.name}.jsonl"
            with path.open("w", encoding="utf-8") as f:
                for o in tally.outcomes:
                    f.write(
                        json.dumps(
                            {
                                "id": o.item.id,
                                "responses": o.responses,
                                "error": o.error,
                                "answers": [s.answer for s in o.scores],
                                "correct": [s.correct for s in o.scores],
                                "detail": [s.detail for s in o.scores],
                            }
                        )
                        + "\n"
                    )
            summary["output_file"] = path.name
        summaries.append(summary)
        log(
            f"{run.name}: {len(tally.outcomes)}/{total[run.name]} prompts, {tally.errors} model errors, "
            f"metrics {json.dumps(raw[run.name])}"
        )
    warning = None
    if pending:
        finished = sum(len(t.outcomes) for t in tallies.values())
        warning = (
            f"server deadline of {deadline_secs:g}s reached: metrics cover {finished} of "
            f"{sum(total.values())} prompts"
        )
        log(warning)
    if scorers.judge is not None:
        log(f"judge: {scorers.judge.calls} calls paid, {scorers.judge.cached} answered from the cache")
    log(f"done in {time.monotonic() - start:.2f}s")
    return EvaluationResult(raw, summaries, warning)
