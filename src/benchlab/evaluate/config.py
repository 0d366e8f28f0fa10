"""The evaluation server's config file: benchmarks, model endpoint settings, limits, sandbox.

A YAML file (see ``data/eval.yaml``, used when no ``--config`` is given)::

    server:    allowlist of router hosts, caps, deadline, state folder, token variable
    model:     model name, concurrency, per-request timeout, retries
    sandbox:   limits of code execution
    math:      math-verify worker processes and their timeout
    judge:     the judge model endpoint of ``llm_judge`` benchmarks: url (on the router
               allowlist), name, concurrency, timeouts, retries, sampling
    benchmarks:
      NAME: {dataset: file.jsonl, scorer: math|exact|choice|code|instruction|llm_judge,
             prompt: Jinja2 template over the item's fields, api: chat|completions,
             defaults: {n_samples_per_eval_prompt, temperature, top_p, top_k, max_response_len},
             judge: {mode: pairwise|single, prompt, system}  (llm_judge only)}

Dataset paths are relative to the config file.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from benchlab.errors import Problem, SpecError

BENCHMARK_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
SCORERS = ("math", "exact", "choice", "code", "instruction", "llm_judge")
DEFAULT_CONFIG = Path(__file__).with_name("data") / "eval.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SamplingDefaults(_Strict):
    """Sampling parameters a request may override, per benchmark."""

    n_samples_per_eval_prompt: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    top_k: int = Field(default=-1, ge=-1)
    max_response_len: int = Field(default=2048, ge=1)


class BenchmarkJudge(_Strict):
    """How an ``llm_judge`` benchmark is judged.

    ``pairwise`` (Arena-Hard style): the judge compares the model's answer with
    the item's ``baseline`` answer, asked twice with the positions swapped.
    ``single`` (HLE style): the judge extracts the response's final answer and
    grades it against the item's ``answer``. ``prompt`` and ``system`` are
    Jinja2 templates over the item's fields plus ``prompt`` (what the model was
    asked) and ``answer_a``/``answer_b`` (pairwise) or ``response`` (single);
    left out, the built-in ones of ``evaluate/judge.py`` are used.
    """

    mode: Literal["pairwise", "single"]
    prompt: str | None = None
    system: str | None = None
    bootstrap_resamples: int = Field(default=1000, ge=100)


class BenchmarkConfig(_Strict):
    """One runnable benchmark: where its items are, how to prompt, how to score."""

    dataset: Path
    scorer: Literal["math", "exact", "choice", "code", "instruction", "llm_judge"]
    prompt: str = "{{ question }}"
    api: Literal["chat", "completions"] = "chat"
    system: str | None = None
    description: str = ""
    defaults: SamplingDefaults = Field(default_factory=lambda: SamplingDefaults())
    judge: BenchmarkJudge | None = None

    @model_validator(mode="after")
    def _judged(self) -> BenchmarkConfig:
        if self.scorer == "llm_judge" and self.judge is None:
            raise ValueError("scorer llm_judge needs a 'judge' section: {mode: pairwise | single}")
        if self.scorer != "llm_judge" and self.judge is not None:
            raise ValueError(f"'judge' is only for scorer llm_judge, not {self.scorer}")
        return self


class ServerSettings(_Strict):
    """Who may call the server, what it may be asked for, and where it keeps state."""

    allowed_router_hosts: list[str] = Field(
        default_factory=lambda: ["127.0.0.0/8", "::1", "localhost"]
    )
    token_env: str = "BENCHLAB_EVAL_TOKEN"
    state_dir: Path = Path("~/.cache/benchlab/eval")
    max_request_bytes: int = Field(default=65536, ge=1024)
    max_benchmarks_per_request: int = Field(default=16, ge=1)
    max_samples_per_prompt: int = Field(default=64, ge=1)
    max_response_len: int = Field(default=32768, ge=1)
    deadline_secs: float = Field(default=3000.0, gt=0)
    max_running_jobs: int = Field(default=8, ge=1)
    # Opt-in: a finished evaluation's result is handed to another request of the same evaluation
    # (same served model, as /v1/models tells it) for this long. Off (0) by default: a model updated
    # in place under the same name looks the same. A retry with the same request_id and body gets its
    # own job's result whatever this says.
    reuse_results_secs: float = Field(default=0.0, ge=0)
    # Connections (see evaluate/guard.py): in total (also kept under the descriptor limit), per
    # client address, and the seconds a connection has to send a request's headers.
    max_connections: int = Field(default=512, ge=1)
    max_connections_per_client: int = Field(default=64, ge=1)
    header_timeout_secs: float = Field(default=10.0, gt=0)
    # Then the request's body, once its headers are in, else 408 and the connection is closed.
    body_timeout_secs: float = Field(default=10.0, gt=0)


class ModelSettings(_Strict):
    """How the server talks to the OpenAI-compatible model endpoint."""

    name: str = "default"
    concurrency: int = Field(default=32, ge=1)
    request_timeout_secs: float = Field(default=600.0, gt=0)
    # 4 tries of 600 s and their backoff fit in the default deadline of 3000 s (see worst_case_secs).
    max_retries: int = Field(default=3, ge=0)
    backoff_secs: float = Field(default=0.5, ge=0)
    max_backoff_secs: float = Field(default=30.0, ge=0)
    # A reply (its body as sent) over this many bytes is a model error of the samples it answered;
    # it is read as it streams in, never held whole.
    max_reply_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)

    def worst_case_secs(self) -> float:
        """The longest one model call can take: every try timing out, with the longest backoff between."""
        waits = sum(min(self.backoff_secs * 2**a, self.max_backoff_secs) for a in range(self.max_retries))
        return self.request_timeout_secs * (self.max_retries + 1) + waits


class JudgeSettings(ModelSettings):
    """The judge model's OpenAI-compatible endpoint, configured like the model's.

    ``url`` must be on ``server.allowed_router_hosts``; an API key, if needed, is
    read from the variable ``api_key_env``. Replies are cached by a hash of their
    inputs in the state folder, so a retried evaluation never pays for a judge
    call twice.
    """

    # Concurrency, timeout, retries and backoff are the model's settings, with the same defaults.
    url: str
    name: str = "judge"
    api_key_env: str | None = None
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int = Field(default=2048, ge=1)


class SandboxSettings(_Strict):
    """Limits of one sandboxed program (seconds, MiB, counts)."""

    # bubblewrap is the only sandbox: "auto" and "bwrap" mean the same (the modes without a PID
    # namespace, "root", "userns" and "none", are refused).
    mode: Literal["auto", "bwrap"] = "auto"
    python: str | None = (
        None  # interpreter of the programs; default: this one, or the system python3 as root
    )
    concurrency: int = Field(default=2, ge=1)
    timeout_secs: float = Field(default=10.0, gt=0)
    cpu_secs: int = Field(default=10, ge=1)
    memory_mb: int = Field(default=1024, ge=64)
    processes: int = Field(default=32, ge=1)
    file_size_mb: int = Field(default=16, ge=1)
    open_files: int = Field(default=64, ge=16)
    tmpfs_mb: int = Field(default=64, ge=1)  # the program's one writable place (/tmp)
    max_files: int = Field(default=1024, ge=8)  # files, folders and hard links it may create there
    output_cap_bytes: int = Field(default=65536, ge=1024)
    # The cgroup under which each program gets a memory-capped one of its own; default: this
    # process's own (as root), or refused with the reason where it may not be written.
    cgroup: str | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: object) -> object:
        if value in ("root", "userns", "none"):
            raise ValueError(
                f"sandbox mode {value!r} is no longer offered (it had no PID namespace or private file "
                "system view); use 'auto' or 'bwrap', which needs bubblewrap installed"
            )
        return value


class MathSettings(_Strict):
    """math-verify worker processes."""

    workers: int = Field(default=2, ge=1)
    timeout_secs: float = Field(default=10.0, gt=0)


class EvalConfig(_Strict):
    """The whole config file."""

    server: ServerSettings = Field(default_factory=lambda: ServerSettings())
    model: ModelSettings = Field(default_factory=lambda: ModelSettings())
    sandbox: SandboxSettings = Field(default_factory=lambda: SandboxSettings())
    math: MathSettings = Field(default_factory=lambda: MathSettings())
    judge: JudgeSettings | None = None
    benchmarks: dict[str, BenchmarkConfig] = Field(default_factory=dict)

    @field_validator("benchmarks")
    @classmethod
    def _names(cls, value: dict[str, BenchmarkConfig]) -> dict[str, BenchmarkConfig]:
        for name in value:
            if not BENCHMARK_NAME.match(name):
                raise ValueError(f"benchmark name {name!r} must match {BENCHMARK_NAME.pattern}")
        return value


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


def _line_of(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*{re.escape(key)}\s*:", line):
            return i
    return None


def load_config(path: Path | str | None = None) -> EvalConfig:
    """Read and validate a config file (the shipped sample when ``path`` is None).

    Dataset paths become absolute (relative ones are taken from the config's
    folder) and must exist; ``state_dir`` gets ``~`` expanded. Raises SpecError
    listing every problem.
    """
    path = Path(path) if path is not None else DEFAULT_CONFIG
    if not path.is_file():
        raise SpecError([Problem(str(path), None, "", "config file not found")])
    text = path.read_text()
    try:
        data: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise SpecError(
            [Problem(str(path), mark.line + 1 if mark else None, "", f"not valid YAML: {exc}")]
        ) from None
    if not isinstance(data, dict):
        raise SpecError([Problem(str(path), None, "", "expected a mapping at the top level")])
    try:
        config = EvalConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"])
            last = next((str(p) for p in reversed(err["loc"]) if isinstance(p, str)), "")
            problems.append(
                Problem(str(path), _line_of(text, last) if last else None, field, err["msg"])
            )
        raise SpecError(problems) from None
    problems = []
    for name, bench in config.benchmarks.items():
        dataset = bench.dataset.expanduser()
        if not dataset.is_absolute():
            dataset = (path.parent / dataset).resolve()
        bench.dataset = dataset
        if not dataset.is_file():
            problems.append(
                Problem(
                    str(path),
                    _line_of(text, name),
                    f"benchmarks.{name}.dataset",
                    f"file not found: {dataset}",
                )
            )
    judged = [name for name, b in config.benchmarks.items() if b.scorer == "llm_judge"]
    if judged and config.judge is None:
        problems.append(Problem(str(path), _line_of(text, judged[0]), f"benchmarks.{judged[0]}.scorer",
                                "llm_judge benchmarks need a top-level 'judge' section with the judge's url"))
    if config.judge is not None and not is_allowed_host(config.judge.url, config.server.allowed_router_hosts):
        problems.append(Problem(
            str(path), _line_of(text, "url"), "judge.url",
            f"{config.judge.url!r} is not an http(s) URL on server.allowed_router_hosts "
            f"({', '.join(config.server.allowed_router_hosts)})",
        ))
    deadline = config.server.deadline_secs
    for section, settings in (("model", config.model), ("judge", config.judge)):
        if settings is not None and settings.worst_case_secs() > deadline:
            # Else a hung endpoint runs into the deadline with retries left, and the job is cut short
            # instead of failing with the endpoint's error.
            problems.append(Problem(
                str(path), _line_of(text, "request_timeout_secs"), f"{section}.request_timeout_secs",
                f"{settings.max_retries + 1} tries of {settings.request_timeout_secs:g}s and their backoff "
                f"take up to {settings.worst_case_secs():g}s, longer than server.deadline_secs "
                f"({deadline:g}s); lower the timeout or max_retries, or raise the deadline",
            ))
    if problems:
        raise SpecError(problems)
    config.server.state_dir = config.server.state_dir.expanduser()
    return config
