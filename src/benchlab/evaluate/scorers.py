"""Scorers: the verdict on one response to one item.

``Scorers.score(kind, item, response)`` returns a ``SampleScore`` (normalised
answer or None, correct or not, why). Math equivalence goes to the
math-verify worker pool, code to ``harness.py``, which runs the answer's calls in
the sandbox and decides the verdict in this process; the rest is string work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchlab.evaluate.answers import (
    extract_choice,
    extract_code,
    extract_math_answer,
    extract_short_answer,
    normalize_math,
    normalize_text,
)
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.harness import judge
from benchlab.evaluate.instructions import check_all
from benchlab.evaluate.mathpool import MathVerifyPool
from benchlab.evaluate.metrics import SampleScore
from benchlab.evaluate.sandbox import Sandbox
from benchlab.json_types import JsonObject

if TYPE_CHECKING:
    from benchlab.evaluate.judge import Judge

_INTEGER = re.compile(r"^[+-]?\d{1,50}$")


@dataclass
class Scorers:
    """The shared resources scorers need; one per server (or per ``benchlab eval``)."""

    math_pool: MathVerifyPool
    sandbox: Sandbox | None = None
    judge: Judge | None = None

    async def score(
        self,
        kind: str,
        item: JsonObject,
        response: str | None,
        bench: BenchmarkConfig | None = None,
        prompt: str = "",
    ) -> SampleScore:
        """Score ``response`` (None when the model call failed) against ``item`` with scorer ``kind``.

        ``item`` is a dataset item's fields (``Item.fields``).

        ``llm_judge`` also needs the benchmark's config (its ``judge`` section) and the
        ``prompt`` the model was sent.
        """
        if response is None:
            return SampleScore(None, False, "no response from the model")
        if kind == "llm_judge":
            if self.judge is None or bench is None or bench.judge is None:
                return SampleScore(None, False, "no judge configured")
            return await self.judge.score(bench.judge, item, prompt, response)
        return await getattr(self, f"_{kind}")(item, response)

    async def _math(self, item: JsonObject, response: str) -> SampleScore:
        answer = extract_math_answer(response)
        if answer is None:
            return SampleScore(None, False, "no \\boxed{} or 'The answer is'")
        gold = str(item["answer"])
        norm = normalize_math(answer)
        gold_norm = normalize_math(gold)
        if norm == gold_norm:
            return SampleScore(norm, True)
        if _INTEGER.match(norm) and _INTEGER.match(gold_norm):
            # Two integer literals: equal exactly when their values are; no need for sympy.
            return SampleScore(
                norm,
                int(norm) == int(gold_norm),
                "" if int(norm) == int(gold_norm) else "not equal",
            )
        if len(answer) > 1000:
            return SampleScore(norm, False, "answer too long to compare")
        correct, why = await self.math_pool.aequivalent(gold, answer)
        return SampleScore(norm, correct, why)

    async def _exact(self, item: JsonObject, response: str) -> SampleScore:
        answer = extract_short_answer(response)
        if answer is None:
            return SampleScore(None, False, "empty response")
        golds = item["answer"] if isinstance(item["answer"], list) else [item["answer"]]
        norm = normalize_text(answer)
        return SampleScore(norm, norm in {normalize_text(str(g)) for g in golds})

    async def _choice(self, item: JsonObject, response: str) -> SampleScore:
        letter = extract_choice(response)
        if letter is None:
            return SampleScore(None, False, "no choice letter")
        return SampleScore(letter, letter == str(item["answer"]).upper())

    async def _instruction(self, item: JsonObject, response: str) -> SampleScore:
        if not response.strip():
            return SampleScore(None, False, "empty response")
        ok, failed = check_all(response, item["checks"])
        return SampleScore(
            " ".join(response.split()).lower(), ok, "failed: " + ", ".join(failed) if failed else ""
        )

    async def _code(self, item: JsonObject, response: str) -> SampleScore:
        code = extract_code(response)
        if code is None:
            return SampleScore(None, False, "no code block")
        if self.sandbox is None:
            return SampleScore(code.strip(), False, "no sandbox configured")
        entry_point = item.get("entry_point")
        report = await judge(self.sandbox, code, item["tests"], entry_point if isinstance(entry_point, str) else None)
        passed, total = sum(report.passed), len(report.passed)
        return SampleScore(code.strip(), report.all_passed, report.why if not report.all_passed else "",
                           tests_passed=passed, tests_total=total)
