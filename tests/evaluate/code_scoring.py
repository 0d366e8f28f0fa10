"""Scoring code answers through the real scorer and sandbox, as the code-verdict tests all do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.sandbox import Sandbox, SandboxLimits
from benchlab.evaluate.scorers import Scorers


@contextmanager
def code_scorers(limits: SandboxLimits) -> Iterator[Scorers]:
    """A scorer with a sandbox of two slots. Its slots belong to the event loop of the first
    ``asyncio.run`` that uses them: one per ``score_all`` call, so one scorer per call site."""
    pool = MathVerifyPool(workers=1)
    try:
        yield Scorers(pool, Sandbox(limits, concurrency=2))
    finally:
        pool.close()


def score_all(scorers: Scorers, cases: Sequence[tuple[str | dict, str]]) -> list:
    """Each (tests or item, answer) scored as the service scores a ``code`` sample, all at once."""
    async def run() -> list:
        return list(await asyncio.gather(*(
            scorers.score("code", item if isinstance(item, dict) else {"tests": item}, f"```python\n{answer}```")
            for item, answer in cases)))
    return asyncio.run(run())
