"""A stand-in for an OpenAI-compatible model server, for tests, demos and the throughput bench.

It knows the datasets of an evaluation config and answers each prompt the
way a model would, deterministically: for item ``id`` and sample ``i`` a seeded
hash decides whether the sample is right, wrong or holds no answer
(``plan``), and the response is shaped for the benchmark's scorer. Latency and
429/500 failures can be injected. ``GET /stats`` counts the requests served.

It is also a deterministic judge for ``llm_judge`` benchmarks. A prompt that
is no dataset item but holds ``<answer_a>``/``<answer_b>`` (the built-in
pairwise judge prompt) gets a verdict label from the two answers' quality: an
item's ``reference`` answer beats its ``baseline``, which beats anything else.
One with ``<response>``/``<correct_answer>`` (the built-in single-answer
prompt) gets ``extracted_final_answer``/``correct: yes|no`` from comparing the
response's last ``Answer:`` with the gold. ``judge_bias`` makes it always
prefer the first answer (a position-biased judge); ``judge_malformed_rate``
makes that fraction of its replies (chosen by a hash of the prompt) carry no
verdict. ``GET /stats`` counts judge requests apart.

Run it alone with ``python -m benchlab.evaluate.stub --port 8000 [--config eval.yaml]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

from benchlab.names.extras import exit_missing

try:
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
except ModuleNotFoundError as exc:  # run as `python -m benchlab.evaluate.stub` without the extra
    exit_missing(exc, "the stub model server", main=__name__ == "__main__")

from benchlab.evaluate.config import EvalConfig, load_config
from benchlab.evaluate.datasets import load_items
from benchlab.evaluate.openai_api import Choice, Completion, CompletionRequest, ModelList
from benchlab.json_types import JsonObject

# The ``object`` of an OpenAI response, and the prefix of its ``id``.
_ID_PREFIX = {"chat.completion": "chatcmpl", "text_completion": "cmpl"}


@dataclass
class StubSettings:
    """How the stub behaves: fractions of right and unanswered samples, latency (s), failure rates."""

    seed: int = 0
    p_correct: float = 0.7
    p_no_answer: float = 0.1
    latency_secs: float = 0.0
    rate_429: float = 0.0
    rate_500: float = 0.0
    # Per model name (a checkpoint), its own fraction of right samples; others use p_correct.
    model_p_correct: dict[str, float] = field(default_factory=dict)
    judge_bias: bool = False
    judge_malformed_rate: float = 0.0
    # Answer one choice whatever ``n`` asks for, as ``transformers serve`` does.
    ignore_n: bool = False
    # Refuse (HTTP 422) a body with a field OpenAI's API does not have, as ``transformers serve`` does.
    strict_fields: bool = False


@dataclass
class StubStats:
    requests: int = 0
    judge_requests: int = 0
    judge_malformed: int = 0
    failures_injected: int = 0
    by_prompt: dict[str, int] = field(default_factory=dict)
    # Every distinct set of sampling parameters received, as sorted JSON.
    sampling: set[str] = field(default_factory=set)
    samples_sent: dict[str, int] = field(default_factory=dict)


class StatsBody(TypedDict):
    """The body of the stub's ``GET /stats``: requests served, and every distinct set of sampling fields."""

    requests: int
    judge_requests: int
    judge_malformed: int
    failures_injected: int
    sampling: list[CompletionRequest]
    distinct_prompts: int


_OPENAI_FIELDS = {"model", "messages", "prompt", "n", "temperature", "top_p", "max_tokens", "stream", "stop",
                  "seed", "logprobs", "presence_penalty", "frequency_penalty", "user"}


def plan(seed: int, item_id: str, sample: int, p_correct: float, p_no_answer: float) -> str:
    """``correct``, ``none`` or ``wrong`` for sample ``sample`` of item ``item_id`` (seeded hash)."""
    digest = hashlib.sha256(f"{seed}:{item_id}:{sample}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < p_correct:
        return "correct"
    if u < p_correct + p_no_answer:
        return "none"
    return "wrong"


def respond(scorer: str, item: JsonObject, verdict: str) -> str:
    """The response text for ``item`` (a dataset item's fields) under ``scorer`` that is ``verdict``
    (correct / wrong / none)."""
    if verdict == "none":
        return "I am not sure how to solve this."
    if scorer == "llm_judge" and "baseline" in item:
        if verdict == "correct":
            return str(item.get("reference", "A careful and complete answer."))
        return "I am not able to help with that."
    if scorer == "llm_judge":
        gold = str(item.get("answer", ""))
        return f"Thinking it over.\nAnswer: {gold if verdict == 'correct' else 'something else'}"
    if "reference" in item and verdict == "correct":
        ref = str(item["reference"])
        return f"```python\n{ref}\n```" if scorer == "code" else ref
    answer = str(item.get("answer", ""))
    if scorer == "math":
        wrong = str(int(answer) + 1) if answer.lstrip("-").isdigit() else f"{answer}+1"
        shown = answer if verdict == "correct" else wrong
        return f"Working through it step by step.\n\nThe final result is $\\boxed{{{shown}}}$."
    if scorer == "exact":
        gold = item["answer"][0] if isinstance(item["answer"], list) else answer
        return f"The answer is {gold if verdict == 'correct' else 'something else entirely'}."
    if scorer == "choice":
        letters = [chr(ord("A") + i) for i in range(len(item["choices"]))]
        gold = answer.upper()
        wrong = letters[(letters.index(gold) + 1) % len(letters)]
        return f"Considering each option.\nAnswer: {gold if verdict == 'correct' else wrong}"
    if scorer == "code":
        return "```python\ndef unrelated():\n    return None\n```"
    return "Sorry, I Will Not Do That, Friend!"


_TAG = {name: re.compile(rf"<{name}>\n?(.*?)\n?</{name}>", re.DOTALL)
        for name in ("answer_a", "answer_b", "response", "correct_answer")}
_LABELS = {2: "A>>B", 1: "A>B", 0: "A=B", -1: "B>A", -2: "B>>A"}


def _norm(text: str) -> str:
    return " ".join(text.lower().strip().rstrip(".").split())


_MALFORMED = "Both have their merits; it is hard to say."


def judge_reply(prompt: str, quality: dict[str, int], settings: StubSettings) -> str | None:
    """What the stub says as a judge of ``prompt``; None when it is no judge prompt.

    ``quality`` ranks known answers (reference 2, baseline 1; anything else 0).
    """
    found = {name: tag.search(prompt) for name, tag in _TAG.items()}
    pairwise = found["answer_a"] is not None and found["answer_b"] is not None
    single = found["response"] is not None and found["correct_answer"] is not None
    if not (pairwise or single):
        return None
    digest = hashlib.sha256(f"{settings.seed}:judge:{prompt}".encode()).digest()
    if int.from_bytes(digest[:8], "big") / 2**64 < settings.judge_malformed_rate:
        return _MALFORMED
    if pairwise:
        a, b = (quality.get(found[k].group(1).strip(), 0) for k in ("answer_a", "answer_b"))  # type: ignore[union-attr]
        label = "A>B" if settings.judge_bias else _LABELS[max(-2, min(2, a - b))]
        return f"Comparing the two answers on correctness and helpfulness.\n\nMy final verdict: [[{label}]]"
    response = found["response"].group(1)  # type: ignore[union-attr]
    gold = found["correct_answer"].group(1)  # type: ignore[union-attr]
    answers = re.findall(r"Answer:\s*(.+)", response)
    extracted = answers[-1].strip() if answers else "None"
    correct = bool(answers) and _norm(extracted) == _norm(gold)
    return (f"extracted_final_answer: {extracted}\nreasoning: compared with the correct answer.\n"
            f"correct: {'yes' if correct else 'no'}")


class _StubModel:
    """The stub's answers: scripted per dataset item, with the failures and latency ``settings`` asks for."""

    def __init__(self, config: EvalConfig, settings: StubSettings, model: str | None) -> None:
        self.settings = settings
        self.model = model
        self.lookup: dict[str, tuple[str, JsonObject]] = {}
        self.quality: dict[str, int] = {}
        for bench in config.benchmarks.values():
            for item in load_items(bench):
                self.lookup[item.prompt] = (bench.scorer, item.fields)
                if bench.scorer == "llm_judge" and "baseline" in item.fields:
                    self.quality[str(item.fields["baseline"]).strip()] = 1
                    self.quality[respond("llm_judge", item.fields, "correct").strip()] = 2
        self.stats = StubStats()
        self.rng = random.Random(settings.seed)

    def texts(self, prompt: str, body: CompletionRequest) -> list[str]:
        n = int(body.get("n", 1))
        keys = ("model", "n", "temperature", "top_p", "top_k", "max_tokens")
        self.stats.sampling.add(json.dumps({k: v for k, v in body.items() if k in keys}, sort_keys=True))
        self.stats.by_prompt[prompt] = self.stats.by_prompt.get(prompt, 0) + 1
        found = self.lookup.get(prompt)
        if found is None:
            verdict = judge_reply(prompt, self.quality, self.settings)
            if verdict is not None:
                self.stats.judge_requests += 1
                self.stats.judge_malformed += verdict == _MALFORMED
                return [verdict] * n
            return ["I do not know."] * n
        scorer, item = found
        if self.settings.ignore_n:
            n = 1
        # Ignoring n, the sample index goes on across the requests for one prompt: the client's
        # requests for the missing samples get the answers one request of n would have held.
        first = self.stats.samples_sent.get(prompt, 0) if self.settings.ignore_n else 0
        if self.settings.ignore_n:
            self.stats.samples_sent[prompt] = first + n
        return [
            respond(
                scorer,
                item,
                plan(self.settings.seed, str(item["id"]), first + i,
                     self.settings.model_p_correct.get(str(body.get("model")), self.settings.p_correct),
                     self.settings.p_no_answer),
            )
            for i in range(n)
        ]

    async def gate(self) -> JSONResponse | None:
        self.stats.requests += 1
        if self.settings.latency_secs:
            await asyncio.sleep(self.settings.latency_secs)
        u = self.rng.random()
        if u < self.settings.rate_429:
            self.stats.failures_injected += 1
            return JSONResponse(
                {"error": {"message": "rate limited"}},
                status_code=429,
                headers={"retry-after": "0"},
            )
        if u < self.settings.rate_429 + self.settings.rate_500:
            self.stats.failures_injected += 1
            return JSONResponse({"error": {"message": "injected failure"}}, status_code=500)
        return None

    def reply(self, kind: str, body: CompletionRequest, choices: list[Choice]) -> JSONResponse:
        # JSONResponse directly: FastAPI's encoder walk would cost the stub more CPU than the request itself.
        completion: Completion = {
            "id": f"{_ID_PREFIX[kind]}-{self.stats.requests}",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", self.model or "stub"),
            "choices": choices,
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        return JSONResponse(completion)

    def unexpected(self, body: CompletionRequest) -> JSONResponse | None:
        extra = set(body) - _OPENAI_FIELDS
        if self.settings.strict_fields and extra:
            return JSONResponse({"error": {"message": f"Unexpected fields {extra}"}}, status_code=422)
        return None


def create_stub_app(
    config: EvalConfig, settings: StubSettings | None = None, *, model: str | None = None
) -> FastAPI:
    """The stub server for the benchmarks of ``config``."""
    stub = _StubModel(config, settings or StubSettings(), model)
    app = FastAPI(title="benchlab stub model")
    app.state.stats = stub.stats
    app.state.settings = stub.settings

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        failure = await stub.gate()
        if failure:
            return failure
        body: CompletionRequest = await request.json()
        refused = stub.unexpected(body)
        if refused:
            return refused
        messages = [m for m in body.get("messages", []) if m.get("role") == "user"]
        prompt = messages[-1]["content"] if messages else ""
        outs = stub.texts(prompt, body)
        return stub.reply(
            "chat.completion",
            body,
            [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                for i, t in enumerate(outs)
            ],
        )

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        failure = await stub.gate()
        if failure:
            return failure
        body: CompletionRequest = await request.json()
        refused = stub.unexpected(body)
        if refused:
            return refused
        outs = stub.texts(str(body.get("prompt", "")), body)
        return stub.reply(
            "text_completion",
            body,
            [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(outs)],
        )

    @app.get("/v1/models")
    async def models() -> ModelList:
        return {"object": "list", "data": [{"id": stub.model or "stub", "object": "model"}]}

    # Documented but not validated: validation would turn a sampling field sent as 0 into 0.0.
    @app.get("/stats", response_model=None, responses={200: {"model": StatsBody}})
    async def get_stats() -> StatsBody:
        return {
            "requests": stub.stats.requests,
            "judge_requests": stub.stats.judge_requests,
            "judge_malformed": stub.stats.judge_malformed,
            "failures_injected": stub.stats.failures_injected,
            "sampling": [json.loads(x) for x in sorted(stub.stats.sampling)],
            "distinct_prompts": len(stub.stats.by_prompt),
        }

    return app


def main(argv: list[str] | None = None) -> None:
    """Serve the stub on 127.0.0.1."""
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        exit_missing(exc, "the stub model server", main=True)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--config", default=None, help="evaluation config whose datasets the stub knows"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--p-correct", type=float, default=0.7)
    parser.add_argument("--p-no-answer", type=float, default=0.1)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--rate-500", type=float, default=0.0)
    parser.add_argument("--judge-bias", action="store_true", help="as a judge, always prefer answer A")
    parser.add_argument("--judge-malformed-rate", type=float, default=0.0,
                        help="fraction of judge replies without a verdict")
    parser.add_argument("--ignore-n", action="store_true", help="answer one choice whatever n asks for")
    parser.add_argument("--model", action="append", default=[], metavar="NAME=P",
                        help="a model name (checkpoint) answering right with probability P (repeatable)")
    args = parser.parse_args(argv)
    models = {}
    for entry in args.model:
        name, _, prob = entry.partition("=")
        models[name] = float(prob)
    settings = StubSettings(
        args.seed, args.p_correct, args.p_no_answer, args.latency, args.rate_429, args.rate_500,
        model_p_correct=models, judge_bias=args.judge_bias, judge_malformed_rate=args.judge_malformed_rate,
        ignore_n=args.ignore_n,
    )
    app = create_stub_app(load_config(args.config), settings)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
