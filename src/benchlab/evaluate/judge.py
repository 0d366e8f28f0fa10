"""LLM-judge scoring: pairwise against a baseline (Arena-Hard style) and single-answer grading (HLE style).

``Judge`` sends the rendered judge prompt to the judge endpoint (a
``ModelClient`` of its own, on the router allowlist) and turns the reply into
a ``SampleScore``:

- ``pairwise``: the model's answer and the item's ``baseline`` are shown to the
  judge twice, once in each position, so that a judge that prefers whatever
  comes first scores 0.5, not a win. Each game ends with one verdict label,
  ``[[A>>B]]``, ``[[A>B]]``, ``[[A=B]]``, ``[[B>A]]`` or ``[[B>>A]]``; from the
  model's side a better verdict is a win (1), a tie 0.5, a worse one a loss (0).
  The sample's score is the mean over its well-formed games. A reply with no
  label, or with conflicting labels, is a malformed game: counted as such,
  never scored (so never a win).
- ``single``: the judge extracts the response's final answer and says whether
  it matches the gold ``answer`` (``correct: yes|no``). A reply without that
  line is malformed and counts as not correct.

Replies are cached by a hash of everything that defines the call (judge model,
system and user message, temperature, max tokens), so a retried evaluation
never pays for a judge call twice. ``summarize`` gives the benchmark's
``judge`` metrics: win rate with a percentile bootstrap CI over prompts
(pairwise), wins, ties, losses, malformed replies and judge calls.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from benchlab.errors import DataError
from benchlab.evaluate.config import BenchmarkJudge, JudgeSettings
from benchlab.evaluate.metrics import SampleScore
from benchlab.evaluate.model import HttpSlots, ModelCallError, ModelClient, Sampling
from benchlab.json_types import JsonObject

PAIRWISE_PROMPT = """\
Two AI assistants answered the same user request. Decide which answer serves the user better: \
correct, helpful, relevant, clear. Neither the order of the answers nor their length is a reason \
to prefer one.

<question>
{{ prompt }}
</question>

<answer_a>
{{ answer_a }}
</answer_a>

<answer_b>
{{ answer_b }}
</answer_b>

Give your reasons in a few sentences, then end with exactly one label: [[A>>B]] (A much better), \
[[A>B]] (A better), [[A=B]] (as good as each other), [[B>A]] (B better) or [[B>>A]] (B much better)."""

SINGLE_PROMPT = """\
Grade a response against the correct answer. Only the final answer the response commits to \
counts; the reasoning before it does not.

<question>
{{ prompt }}
</question>

<response>
{{ response }}
</response>

<correct_answer>
{{ answer }}
</correct_answer>

Reply in exactly this form:
extracted_final_answer: <the response's final answer, or None if it gives none>
reasoning: <a sentence or two comparing it with the correct answer>
correct: <yes or no>"""

_LABEL = re.compile(r"\[\[\s*(A>>B|A>B|A=B|B>A|B>>A)\s*\]\]")
# The model's score when it sits in position A; in position B the label is read mirrored.
_SCORE_AS_A = {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0}
_MIRROR = {"A>>B": "B>>A", "A>B": "B>A", "A=B": "A=B", "B>A": "A>B", "B>>A": "A>>B"}
_CORRECT = re.compile(r"^\W*correct\W*:\W*(yes|no)\b", re.IGNORECASE | re.MULTILINE)
_EXTRACTED = re.compile(r"^\W*extracted_final_answer\W*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)

_env = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)


@functools.lru_cache(maxsize=64)
def _template(text: str) -> jinja2.Template:
    # Compiling costs far more than rendering: once per template, not once per judge call.
    return _env.from_string(text)


def parse_verdict(reply: str) -> str | None:
    """The one verdict label of a pairwise reply, or None (no label, or labels that disagree)."""
    labels = {m.group(1) for m in _LABEL.finditer(reply)}
    return labels.pop() if len(labels) == 1 else None


def parse_grade(reply: str) -> tuple[bool, str | None] | None:
    """``(correct, extracted answer or None)`` of a single-answer reply; None when it has no verdict."""
    verdicts = {m.group(1).lower() for m in _CORRECT.finditer(reply)}
    if len(verdicts) != 1:
        return None
    extracted = _EXTRACTED.search(reply)
    answer = extracted.group(1) if extracted else None
    if answer is not None and answer.strip().lower() in ("", "none", "n/a"):
        answer = None
    return verdicts.pop() == "yes", answer


def judge_client(settings: JudgeSettings, slots: HttpSlots) -> ModelClient:
    """A client of the judge endpoint, with its API key (from ``settings.api_key_env``) if one is set."""
    import os

    key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    return ModelClient(
        slots,
        settings.url,
        settings.name,
        timeout=settings.request_timeout_secs,
        max_retries=settings.max_retries,
        backoff=settings.backoff_secs,
        max_backoff=settings.max_backoff_secs,
        headers={"Authorization": f"Bearer {key}"} if key else None,
        max_reply_bytes=settings.max_reply_bytes,
    )


class JudgeCache:
    """Judge replies by input hash, in a SQLite file (WAL); thread-safe, shared by every job of a server."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # A cache: losing the last replies to a power cut costs a re-ask, so no fsync per reply.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, reply))

    def close(self) -> None:
        with self._lock:
            self._db.close()


class Judge:
    """Asks the judge endpoint and scores one response; ``calls`` counts the replies paid for."""

    def __init__(self, client: ModelClient, settings: JudgeSettings, cache: JudgeCache | None = None) -> None:
        self.client = client
        self.settings = settings
        self.cache = cache
        self.calls = 0
        self.cached = 0
        self._inflight: dict[str, asyncio.Future[str | None]] = {}

    def _key(self, system: str | None, prompt: str) -> str:
        defining = [self.settings.name, system, prompt, self.settings.temperature, self.settings.max_tokens]
        return hashlib.sha256(json.dumps(defining).encode()).hexdigest()

    async def ask(self, system: str | None, prompt: str) -> str | None:
        """The judge's reply (from the cache when this exact call was made before); None when the call failed."""
        key = self._key(system, prompt)
        if self.cache is not None:
            stored = self.cache.get(key)
            if stored is not None:
                self.cached += 1
                return stored
        if key in self._inflight:  # the same call in flight (both games identical, or a joined retry)
            self.cached += 1
            return await asyncio.shield(self._inflight[key])
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            sampling = Sampling(1, self.settings.temperature, None, None, self.settings.max_tokens)
            try:
                texts = await self.client.generate("chat", prompt, sampling, system)
                reply: str | None = texts[0] if texts else ""
            except ModelCallError:
                reply = None
            self.calls += 1
            if reply is not None and self.cache is not None:
                self.cache.put(key, reply)
            future.set_result(reply)
            return reply
        except asyncio.CancelledError:
            future.cancel()  # past the deadline: whoever joined this call is cancelled with it
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a joined waiter re-raises it, nobody else needs to
            raise
        finally:
            del self._inflight[key]

    async def score(self, config: BenchmarkJudge, item: JsonObject, prompt: str, response: str) -> SampleScore:
        """Judge ``response`` to ``item`` (whose rendered model prompt is ``prompt``) as ``config.mode`` says."""
        if config.mode == "pairwise":
            return await self._pairwise(config, item, prompt, response)
        return await self._single(config, item, prompt, response)

    def _render(self, template: str, fields: dict[str, Any]) -> str:
        try:
            return _template(template).render(**fields)
        except jinja2.TemplateError as exc:
            raise DataError(f"judge prompt template: {exc}") from None

    async def _pairwise(self, config: BenchmarkJudge, item: JsonObject, prompt: str, response: str) -> SampleScore:
        baseline = str(item["baseline"])
        template = config.prompt or PAIRWISE_PROMPT
        system = self._render(config.system, item) if config.system else None
        games = [  # (model in position A?, rendered prompt)
            (False, self._render(template, {**item, "prompt": prompt, "answer_a": baseline, "answer_b": response})),
            (True, self._render(template, {**item, "prompt": prompt, "answer_a": response, "answer_b": baseline})),
        ]
        replies = await asyncio.gather(*(self.ask(system, text) for _, text in games))
        scores, labels, malformed = [], [], 0
        for (model_first, _), reply in zip(games, replies, strict=True):
            label = parse_verdict(reply) if reply is not None else None
            if label is None:
                malformed += 1
                labels.append("?")
                continue
            ours = label if model_first else _MIRROR[label]  # the label as if the model were A
            labels.append(ours)
            scores.append(_SCORE_AS_A[ours])
        if not scores:
            return SampleScore(None, False, "judge replies malformed: " + " / ".join(labels),
                               score=None, malformed=malformed, verdicts=tuple(labels))
        value = sum(scores) / len(scores)
        return SampleScore(f"{value:g}", value > 0.5, "model vs baseline: " + " / ".join(labels),
                           score=value, malformed=malformed, verdicts=tuple(labels))

    async def _single(self, config: BenchmarkJudge, item: JsonObject, prompt: str, response: str) -> SampleScore:
        fields = {**item, "prompt": prompt, "response": response}
        system = self._render(config.system, fields) if config.system else None
        reply = await self.ask(system, self._render(config.prompt or SINGLE_PROMPT, fields))
        grade = parse_grade(reply) if reply is not None else None
        if grade is None:
            why = "judge call failed" if reply is None else "judge reply malformed (no 'correct: yes|no')"
            return SampleScore(None, False, why, score=None, malformed=1)
        correct, answer = grade
        return SampleScore(answer, correct, "judged correct" if correct else "judged wrong",
                           score=1.0 if correct else 0.0)


def _bootstrap_ci(values: Sequence[float], resamples: int, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile bootstrap CI of the mean of ``values``; None with fewer than two values."""
    if len(values) < 2:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def summarize(config: BenchmarkJudge, per_prompt: Sequence[Sequence[SampleScore]]) -> dict[str, float]:
    """The benchmark's ``judge`` metrics from its prompts' sample scores.

    Pairwise: ``win_rate`` (mean over prompts of the mean score of their
    well-formed games), ``win_rate_ci_low`` / ``_high`` (95% percentile
    bootstrap over prompts; absent below two prompts), games won, tied and lost
    from the model's side and ``malformed`` replies. Single: ``accuracy`` over
    samples (malformed ones are not correct) and ``malformed``.
    """
    samples = [s for p in per_prompt for s in p]
    malformed = float(sum(s.malformed for s in samples))
    out: dict[str, float] = {"malformed": malformed}
    if config.mode == "single":
        out["accuracy"] = sum(s.correct for s in samples) / len(samples) if samples else 0.0
        out["num_entries"] = float(len(per_prompt))
        return out
    prompt_means = []
    for p in per_prompt:
        scored = [s.score for s in p if s.score is not None]
        if scored:
            prompt_means.append(sum(scored) / len(scored))
    out["num_entries"] = float(len(prompt_means))
    if prompt_means:
        out["win_rate"] = sum(prompt_means) / len(prompt_means)
        ci = _bootstrap_ci(prompt_means, config.bootstrap_resamples)
        if ci is not None:
            out["win_rate_ci_low"], out["win_rate_ci_high"] = ci
    games = [label for s in samples for label in s.verdicts]
    out["wins"] = float(sum(g in ("A>>B", "A>B") for g in games))
    out["ties"] = float(sum(g == "A=B" for g in games))
    out["losses"] = float(sum(g in ("B>A", "B>>A") for g in games))
    return out
