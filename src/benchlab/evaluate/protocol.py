"""The wire protocol of the evaluation server: request and response bodies, and their checks.

The request is what slime's evaluation delegate posts; ``resolve_runs`` turns it
into benchmark runs, refusing (``ApiError``, answered as ``{"error": ...}``)
unknown benchmarks, parameters over the server's caps and routers off the
allowlist.
"""

from __future__ import annotations

import hashlib
import json
import shlex

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

from benchlab.errors import EvaluationError
from benchlab.evaluate.config import EvalConfig, SamplingDefaults, is_allowed_host
from benchlab.evaluate.datasets import benchmark_digest
from benchlab.evaluate.jobs import EvaluationIdentity, request_key
from benchlab.evaluate.model import Sampling
from benchlab.evaluate.runner import BenchmarkRun
from benchlab.json_types import JsonObject

NAME_PATTERN = r"^[A-Za-z0-9._-]+$"
# Visible ASCII: an id a client builds from its run name and step, kept as sent.
REQUEST_ID_PATTERN = r"^[!-~]+$"


SAMPLING_FIELDS = ("n_samples_per_eval_prompt", "temperature", "top_p", "top_k", "max_response_len")
# Sent to the model server only when the request or the config sets them. The temperature is
# always sent (0 by default): an evaluation's numbers must not depend on a server's default.
OPTIONAL_SAMPLING = ("top_p", "top_k")


class RequestDefaults(BaseModel):
    """Sampling parameters for every benchmark of a request that leaves them out (NeMo-Skills' ``defaults``)."""

    model_config = ConfigDict(extra="ignore")

    n_samples_per_eval_prompt: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    top_k: int | None = Field(default=None, ge=-1, le=1_000_000)
    max_response_len: int | None = Field(default=None, ge=1)


class BenchmarkRequest(RequestDefaults):
    """One benchmark to run; absent parameters take the request's ``defaults``, then the benchmark's."""

    name: str = Field(pattern=NAME_PATTERN, max_length=128)


class EvaluateRequest(BaseModel):
    """The body slime's delegate client posts (unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    rollout_id: int = Field(ge=-(2**63), le=2**63 - 1)
    router_url: str = Field(min_length=1, max_length=2048)
    benchmarks: list[BenchmarkRequest] = Field(min_length=1)
    defaults: RequestDefaults | None = None
    run_async: bool = Field(default=False, alias="async")
    request_id: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=REQUEST_ID_PATTERN,
        description="The client's id of this request (e.g. its run and step). Sent again with the same body, "
        "it gets the same job: the running one, or the finished result; with another body, 409. "
        "Without it, nothing finished is ever handed out again.",
    )


class ErrorBody(BaseModel):
    """A refusal: one line naming the field or header at fault (``detail`` repeats it, FastAPI's key)."""

    error: str
    detail: str | None = None


class QueuedBody(BaseModel):
    job_id: str
    status: str
    status_url: str
    raw_metrics: dict[str, dict[str, dict[str, float]]] = Field(default_factory=dict)


class JobBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    job_id: str
    status: str
    raw_metrics: dict[str, dict[str, dict[str, float]]] = Field(default_factory=dict)
    error: str | None = None


class HealthBody(TypedDict):
    """The body of ``GET /health``; ``sandbox`` is ``Sandbox.describe()`` (or no sandbox: mode null)."""

    status: str
    sandbox: JsonObject
    auth: bool
    warnings: list[str]


class BenchmarkInfo(TypedDict):
    """One benchmark of ``GET /benchmarks``; ``num_prompts`` is null when its dataset cannot be read."""

    name: str
    scorer: str
    api: str
    num_prompts: int | None
    description: str
    defaults: SamplingDefaults


class BenchmarksBody(TypedDict):
    """The body of ``GET /benchmarks``: the server's benchmarks, by name."""

    benchmarks: list[BenchmarkInfo]


class ApiError(EvaluationError):
    """An error answered as ``{"error": message, "detail": message}`` with ``status``."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(message)


def _within_cap(benchmark: str, parameter: str, value: int, cap: int) -> int:
    """``value`` itself; ApiError (400) when it is over the server's ``cap``."""
    if value > cap:
        raise ApiError(
            400, f"{benchmark}: {parameter} {value} is over the server's cap of {cap}"
        )
    return value


def allowlist_description(allowed: list[str]) -> str:
    """How the OpenAPI schema describes ``router_url``."""
    return (
        "Base URL of the OpenAI-compatible model endpoint (with or without /v1): http(s), no user "
        "or password, and a host on this server's allowlist (server.allowed_router_hosts: "
        f"{', '.join(allowed) or 'none'}; host names match exactly, addresses by network). "
        "Any other host is refused with 403."
    )


def resolve_runs(cfg: EvalConfig, req: EvaluateRequest) -> list[BenchmarkRun]:
    """The benchmarks of ``req`` with the sampling parameters in effect.

    A field a benchmark leaves out takes the request's ``defaults``, then the
    benchmark config's. ApiError for what is not allowed: 400 for what the
    OpenAPI schema already rules out (counts, names, caps), 403 for a
    ``router_url`` off the allowlist, 409 for a benchmark asked for twice.
    """
    if len(req.benchmarks) > cfg.server.max_benchmarks_per_request:
        raise ApiError(
            400, f"at most {cfg.server.max_benchmarks_per_request} benchmarks per request"
        )
    if not is_allowed_host(req.router_url, cfg.server.allowed_router_hosts):
        raise ApiError(
            403,
            "router_url must be an http(s) URL whose host is on the server's allowlist "
            f"(server.allowed_router_hosts: {', '.join(cfg.server.allowed_router_hosts)})",
        )
    names = [b.name for b in req.benchmarks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ApiError(409, f"benchmark(s) asked for more than once: {', '.join(twice)}")
    fallback = req.defaults or RequestDefaults()
    runs = []
    for b in req.benchmarks:
        bench = cfg.benchmarks.get(b.name)
        if bench is None:
            raise ApiError(
                400,
                f"unknown benchmark {b.name!r}; known: {', '.join(sorted(cfg.benchmarks)) or 'none'}",
            )
        chosen = {}
        for name in SAMPLING_FIELDS:
            value = getattr(b, name)
            if value is None:
                value = getattr(fallback, name)
            if value is None and (name in bench.defaults.model_fields_set or name not in OPTIONAL_SAMPLING):
                value = getattr(bench.defaults, name)
            chosen[name] = value  # None: set nowhere, so not sent (the model server's default holds)
        n = _within_cap(
            b.name,
            "n_samples_per_eval_prompt",
            chosen["n_samples_per_eval_prompt"],
            cfg.server.max_samples_per_prompt,
        )
        max_len = _within_cap(
            b.name, "max_response_len", chosen["max_response_len"], cfg.server.max_response_len
        )
        sampling = Sampling(
            n=n,
            temperature=chosen["temperature"],
            top_p=chosen["top_p"],
            top_k=chosen["top_k"],
            max_tokens=max_len,
        )
        runs.append(BenchmarkRun(b.name, bench, sampling))
    return runs


def reproducing_command(model: str, req: EvaluateRequest, runs: list[BenchmarkRun]) -> str:
    """The ``benchlab eval`` command line that runs the same evaluation."""
    parts = [
        "benchlab",
        "eval",
        "--model-url",
        req.router_url,
        "--model",
        model,
        "--benchmarks",
        ",".join(r.name for r in runs),
    ]
    return shlex.join(parts)


def tighten_schema(schema: JsonObject, cfg: EvalConfig) -> JsonObject:
    """The generated OpenAPI ``schema`` with what this server's config allows stated in it.

    The request models are the same for every config; the benchmark names, the
    caps and the allowlist are the config's, so they are written into the
    schema here: clients (and fuzzers) then know every request the server will
    take before sending it.
    """
    components = schema.get("components", {}).get("schemas", {})
    caps = {
        "n_samples_per_eval_prompt": cfg.server.max_samples_per_prompt,
        "max_response_len": cfg.server.max_response_len,
    }
    for model in ("RequestDefaults", "BenchmarkRequest"):
        properties = components.get(model, {}).get("properties", {})
        for name, cap in caps.items():
            for option in properties.get(name, {}).get("anyOf", []):
                if option.get("type") == "integer":
                    option["maximum"] = cap
            if name in properties:
                properties[name]["description"] = f"at most {cap} (server cap)"
    bench = components.get("BenchmarkRequest", {}).get("properties", {}).get("name")
    if bench is not None and cfg.benchmarks:
        bench["enum"] = sorted(cfg.benchmarks)
        bench["description"] = f"a benchmark of this server ({NAME_PATTERN})"
    request = components.get("EvaluateRequest", {}).get("properties", {})
    if "benchmarks" in request:
        request["benchmarks"]["maxItems"] = cfg.server.max_benchmarks_per_request
        request["benchmarks"]["description"] = (
            f"at most {cfg.server.max_benchmarks_per_request} benchmarks, each named once (409 otherwise)"
        )
    if "rollout_id" in request:
        # As integers: the float 9.223372036854776e18 that pydantic writes is 2**63, one past the bound.
        request["rollout_id"].update(minimum=-(2**63), maximum=2**63 - 1)
    if "router_url" in request:
        request["router_url"]["description"] = allowlist_description(cfg.server.allowed_router_hosts)
    return schema


def evaluation_key(req: EvaluateRequest, runs: list[BenchmarkRun], model_name: str) -> str:
    """What makes two requests the same evaluation, apart from the model served (see the docs).

    The rollout id, the router URL, the model name sent to it, and per
    benchmark its name, the sampling parameters in effect and the hash of its
    data and scoring (``benchmark_digest``). Two requests that spell the same
    parameters differently (a request default or the config's) are the same.
    """
    defining: EvaluationIdentity = {
        "rollout_id": req.rollout_id,
        "router_url": req.router_url,
        "model": model_name,
        "benchmarks": [
            {"name": r.name, "sampling": r.sampling.body(), "data": benchmark_digest(r.config)} for r in runs
        ],
    }
    return request_key(defining)


def body_hash(req: EvaluateRequest) -> str:
    """What makes two requests with the same ``request_id`` the same request: a hash of the body as parsed.

    Every field the client sent, as the server read it, except ``async`` (how to answer is no part
    of the request) and the id itself; key order, spacing and number spelling (``1`` or ``1.0``)
    do not count, a field sent or left out does.
    """
    sent = req.model_dump(exclude_none=True, exclude={"run_async", "request_id"})
    return hashlib.sha256(json.dumps(sent, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
