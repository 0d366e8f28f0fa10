"""The wire protocol of the evaluation server: request and response bodies, and their checks.

The request is what slime's evaluation delegate posts; ``resolve_runs`` turns it
into benchmark runs, refusing (``ApiError``, answered as ``{"error": ...}``)
unknown benchmarks, parameters over the server's caps and routers off the
allowlist.
"""

from __future__ import annotations

import ipaddress
import shlex
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from benchlab.evaluate.config import EvalConfig
from benchlab.evaluate.model import Sampling
from benchlab.evaluate.runner import BenchmarkRun

NAME_PATTERN = r"^[A-Za-z0-9._-]+$"


class BenchmarkRequest(BaseModel):
    """One benchmark to run; absent parameters take the benchmark's defaults."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(pattern=NAME_PATTERN, max_length=128)
    n_samples_per_eval_prompt: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    top_k: int | None = Field(default=None, ge=-1, le=1_000_000)
    max_response_len: int | None = Field(default=None, ge=1)


class EvaluateRequest(BaseModel):
    """The body slime's delegate client posts (``defaults`` and unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    rollout_id: int = Field(ge=-(2**63), le=2**63 - 1)
    router_url: str = Field(min_length=1, max_length=2048)
    benchmarks: list[BenchmarkRequest] = Field(min_length=1)
    run_async: bool = Field(default=False, alias="async")


class ErrorBody(BaseModel):
    error: str


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


class ApiError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message


def is_allowed_host(url: str, allowed: list[str]) -> bool:
    """Whether ``url`` is http(s) to a host on the allowlist (names exact, addresses by network)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in allowed:
        if address is None:
            if host.lower() == entry.lower():
                return True
            continue
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def _within_cap(benchmark: str, parameter: str, value: int, cap: int) -> int:
    """``value`` itself; ApiError (400) when it is over the server's ``cap``."""
    if value > cap:
        raise ApiError(
            400, f"{benchmark}: {parameter} {value} is over the server's cap of {cap}"
        )
    return value


def resolve_runs(cfg: EvalConfig, req: EvaluateRequest) -> list[BenchmarkRun]:
    """The benchmarks of ``req`` with the sampling parameters in effect; ApiError (400) for what is not allowed."""
    if len(req.benchmarks) > cfg.server.max_benchmarks_per_request:
        raise ApiError(
            400, f"at most {cfg.server.max_benchmarks_per_request} benchmarks per request"
        )
    if not is_allowed_host(req.router_url, cfg.server.allowed_router_hosts):
        raise ApiError(
            400,
            "router_url must be an http(s) URL whose host is on the server's allowlist "
            f"(server.allowed_router_hosts: {', '.join(cfg.server.allowed_router_hosts)})",
        )
    names = [b.name for b in req.benchmarks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ApiError(400, f"benchmark(s) asked for more than once: {', '.join(twice)}")
    runs = []
    for b in req.benchmarks:
        bench = cfg.benchmarks.get(b.name)
        if bench is None:
            raise ApiError(
                400,
                f"unknown benchmark {b.name!r}; known: {', '.join(sorted(cfg.benchmarks)) or 'none'}",
            )
        d = bench.defaults
        n = _within_cap(
            b.name,
            "n_samples_per_eval_prompt",
            b.n_samples_per_eval_prompt or d.n_samples_per_eval_prompt,
            cfg.server.max_samples_per_prompt,
        )
        max_len = _within_cap(
            b.name,
            "max_response_len",
            b.max_response_len or d.max_response_len,
            cfg.server.max_response_len,
        )
        sampling = Sampling(
            n=n,
            temperature=d.temperature if b.temperature is None else b.temperature,
            top_p=d.top_p if b.top_p is None else b.top_p,
            top_k=d.top_k if b.top_k is None else b.top_k,
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
