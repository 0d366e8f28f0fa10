"""One evaluation outside the server: what ``benchlab eval`` runs, writing ``metrics.json``.

``metrics.json`` is flat, ``{"<benchmark>/<mode>/<metric>": value}`` (for example
``"arith/pass@1/accuracy": 0.75``), the format of any benchlab run's final
scalars; ``raw_metrics.json`` keeps the nested form the server answers with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from benchlab.evaluate.config import EvalConfig
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.metrics import flatten
from benchlab.evaluate.model import HttpSlots, ModelClient, Sampling
from benchlab.evaluate.runner import BenchmarkRun, EvaluationResult, evaluate
from benchlab.evaluate.sandbox import sandbox_from_settings
from benchlab.evaluate.scorers import Scorers
from benchlab.names.run_files import METRICS_FILE


async def run_once(
    config: EvalConfig,
    benchmarks: list[str],
    model_url: str,
    model: str,
    *,
    out_dir: Path,
    n_samples: int | None = None,
    temperature: float | None = None,
    max_response_len: int | None = None,
    concurrency: int | None = None,
    api_key: str | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> EvaluationResult:
    """Evaluate ``benchmarks`` (names in ``config``) against ``model_url``; write the metrics into ``out_dir``.

    Writes ``metrics.json`` (flat), ``raw_metrics.json`` (nested) and one
    ``<benchmark>.jsonl`` of responses and verdicts per benchmark.
    """
    runs = []
    for name in benchmarks:
        bench = config.benchmarks[name]
        d = bench.defaults
        runs.append(
            BenchmarkRun(
                name,
                bench,
                Sampling(
                    n=n_samples or d.n_samples_per_eval_prompt,
                    # Only what the command line or the config sets is sent (see Sampling).
                    temperature=d.temperature if temperature is None else temperature,
                    top_p=d.top_p if "top_p" in d.model_fields_set else None,
                    top_k=d.top_k if "top_k" in d.model_fields_set else None,
                    max_tokens=max_response_len or d.max_response_len,
                ),
            )
        )
    sandbox = None
    if any(r.config.scorer == "code" for r in runs):
        sandbox = sandbox_from_settings(config.sandbox)
        if sandbox.warning:
            log(f"warning: {sandbox.warning}")
    pool = MathVerifyPool(config.math.workers, config.math.timeout_secs)
    m = config.model
    n = concurrency or m.concurrency
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    slots = HttpSlots(n)
    judge_slots = judge_cache = judge = None
    if config.judge is not None and any(r.config.judge is not None for r in runs):
        from benchlab.evaluate.judge import Judge, JudgeCache, judge_client

        judge_slots = HttpSlots(config.judge.concurrency)
        # In the run folder: re-running the same evaluation there pays for no judge call twice.
        judge_cache = JudgeCache(out_dir / "judge_cache.sqlite")
        judge = Judge(judge_client(config.judge, judge_slots), config.judge, judge_cache)
    try:
        client = ModelClient(
            slots,
            model_url,
            model,
            timeout=m.request_timeout_secs,
            max_retries=m.max_retries,
            backoff=m.backoff_secs,
            max_backoff=m.max_backoff_secs,
            headers=headers,
            max_reply_bytes=m.max_reply_bytes,
        )
        result = await evaluate(runs, client, Scorers(pool, sandbox, judge), out_dir=out_dir, log=log)
    finally:
        await slots.aclose()
        if judge_slots is not None:
            await judge_slots.aclose()
        if judge_cache is not None:
            judge_cache.close()
        pool.close()
    (out_dir / METRICS_FILE).write_text(
        json.dumps(flatten(result.raw_metrics), indent=2, sort_keys=True) + "\n"
    )
    (out_dir / "raw_metrics.json").write_text(json.dumps(result.raw_metrics, indent=2) + "\n")
    return result
