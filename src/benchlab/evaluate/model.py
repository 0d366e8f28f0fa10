"""Calls to the OpenAI-compatible model endpoint (an SGLang/vLLM router, or anything alike).

``HttpSlots`` bounds the requests in flight across every job: it holds
``concurrency`` httpx clients of one keep-alive connection each, and a request
takes a client for its duration. (One shared client with a pool of 32
connections costs about four times the CPU per request: httpcore rescans its
whole pool on every request.) A request that gets 429, a 5xx, a timeout or a dropped
connection is retried with exponential backoff (honouring ``Retry-After``);
any other 4xx is final.

A reply is read as it streams in and dropped past ``max_reply_bytes``, so an
endpoint answering megabytes costs the server at most that much per request in
flight. A 200 whose body is not a completion (invalid JSON, an event stream
nobody asked for, a choice whose text is not a string, or text with NUL bytes
or lone surrogates) is final too: a ``ModelCallError`` whose ``reason`` names
what was wrong, counted as a model error of the samples that reply answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import random
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

from benchlab.errors import EvaluationError
from benchlab.evaluate.openai_api import ChatMessage, Choice, Completion, CompletionRequest, SamplingFields

# httpcore runs `import sniffio` on every request to learn the async library. Where sniffio
# is not installed that import fails each time, after searching the whole of sys.path: about
# 0.3 ms of CPU per request, as much as the rest of the request. A None entry makes the
# failure immediate (it is the import system's own marker for "known to be missing").
if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]


class ModelCallError(EvaluationError):
    """A model request failed for good. ``status`` is the last HTTP status (None: no answer).

    ``reason`` is a short class of the failure (``HTTP 500``, ``invalid JSON``, ``reply over N
    bytes``, ...), what a job's ``model_error_reasons`` counts.
    """

    def __init__(self, url: str, status: int | None, message: str, reason: str | None = None):
        self.url = url
        self.status = status
        self.reason = reason or (f"HTTP {status}" if status is not None else "no answer")
        super().__init__(message)


DEFAULT_MAX_REPLY_BYTES = 4 * 1024 * 1024


async def read_capped(response: httpx.Response, cap: int) -> tuple[bytearray, bool]:
    """The body of a streamed ``response``, at most ``cap`` bytes, and whether there was more.

    One buffer, never copied whole (``json.loads`` reads a bytearray): a reply costs its size once.
    """
    body = bytearray()
    async for chunk in response.aiter_bytes():
        if len(body) + len(chunk) > cap:
            body += chunk[: cap - len(body)]
            return body, True
        body += chunk
    return body, False


def parse_completion(raw: bytes | bytearray, content_type: str) -> Completion:
    """A 200 reply's body as a completion; ValueError, its message the reason, when it is none."""
    if "text/event-stream" in content_type or raw.lstrip().startswith(b"data:"):
        raise ValueError("an event stream, not the JSON reply asked for")
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise ValueError("invalid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise ValueError("no choices")
    return data  # type: ignore[return-value]  # each choice is checked as its text is read


def _in_order(choices: list[Choice]) -> list[Choice]:
    """The choices by their ``index`` (absent: 0); ValueError for a choice or index of another type."""
    for choice in choices:
        if not isinstance(choice, dict):
            raise ValueError("a choice that is not an object")
        index = choice.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            raise ValueError("a choice index that is not an integer")
    return sorted(choices, key=lambda c: c.get("index", 0))


def choice_text(choice: Choice, api: str) -> str:
    """The text of one choice (None: empty); ValueError, its message the reason, for one that is not plain text."""
    if api == "chat":
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ValueError("a choice without a message")
        text = message.get("content")
    elif "text" not in choice:
        raise ValueError("a choice without text")
    else:
        text = choice["text"]
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"content is a {type(text).__name__}, not a string")
    if "\x00" in text:
        raise ValueError("text with NUL bytes")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text with lone surrogates (not Unicode)") from None
    return text


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one benchmark in one request, OpenAI-style names in ``body``.

    ``top_p`` and ``top_k`` are sent only when set (not None, and ``top_k``
    not -1): a server that refuses fields it does not know (``transformers
    serve`` answers 422 to ``top_k``) then gets only those the request or the
    config named. The temperature is always set by the callers.
    """

    n: int
    temperature: float | None
    top_p: float | None
    top_k: int | None
    max_tokens: int

    def body(self) -> SamplingFields:
        """The sampling fields of a completion request."""
        body: SamplingFields = {"n": self.n}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.top_p is not None:
            body["top_p"] = self.top_p
        body["max_tokens"] = self.max_tokens
        if self.top_k is not None and self.top_k != -1:
            body["top_k"] = self.top_k  # not OpenAI, but SGLang and vLLM read it from the body
        return body


def _error_detail(raw: bytes | bytearray) -> str:
    """What a model server said about a refused request: its error message, or the start of its body."""
    try:
        data = json.loads(raw)
    except ValueError:  # also UnicodeDecodeError
        text = raw[:600].decode("utf-8", "replace").strip()
        return text[:300]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)[:300]
    return str(data)[:300]


class HttpSlots:
    """At most ``size`` requests at once, each on a client of its own with one kept-alive connection."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: asyncio.LifoQueue[httpx.AsyncClient] | None = None
        self._clients: list[httpx.AsyncClient] = []
        self._ssl = (
            ssl.create_default_context()
        )  # loading CA certificates once, not once per client

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client for one request; waits while all ``size`` are busy."""
        if self._free is None:
            self._free = asyncio.LifoQueue()  # LIFO: the warmest connection goes first
        if self._free.empty() and len(self._clients) < self.size:
            client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                trust_env=False,
                verify=self._ssl,
            )
            self._clients.append(client)
        else:
            client = await self._free.get()
        try:
            yield client
        finally:
            self._free.put_nowait(client)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()


class ModelClient:
    """Sends prompts to ``base_url + /v1/...`` and returns the ``n`` completions' texts.

    ``slots`` bounds concurrent requests (share it to bound a whole server);
    ``timeout`` is per request, seconds; ``max_retries`` retries after the first try.
    """

    def __init__(
        self,
        slots: HttpSlots,
        base_url: str,
        model: str,
        *,
        timeout: float = 600.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        headers: dict[str, str] | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        base = base_url.rstrip("/")
        self.base_url = base[: -len("/v1")] if base.endswith("/v1") else base
        self.slots = slots
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = headers or {}
        self.max_reply_bytes = max_reply_bytes
        self.retries = 0

    async def generate(
        self, api: str, prompt: str, sampling: Sampling, system: str | None = None
    ) -> list[str]:
        """The ``sampling.n`` texts the model returns for ``prompt`` via ``chat`` or ``completions``."""
        body: CompletionRequest = {"model": self.model, **sampling.body()}
        if api == "chat":
            url = f"{self.base_url}/v1/chat/completions"
            messages: list[ChatMessage] = [{"role": "system", "content": system}] if system else []
            body["messages"] = [*messages, {"role": "user", "content": prompt}]
        else:
            url = f"{self.base_url}/v1/completions"
            body["prompt"] = prompt
        data = await self._post(url, body)
        try:
            return [choice_text(c, api) for c in _in_order(data["choices"])]
        except ValueError as exc:  # a 200 that is no completion; the message is why
            raise ModelCallError(url, 200, f"the model endpoint answered with {exc}", str(exc)) from None

    async def _post(self, url: str, body: CompletionRequest) -> Completion:
        last = "no attempt"
        status: int | None = None
        reason: str | None = None
        for attempt in range(self.max_retries + 1):
            delay = min(self.backoff * 2**attempt, self.max_backoff) * (0.5 + random.random() / 2)
            try:
                # The whole exchange, not only each read: a reply dripping in a byte at a time ends too.
                async with self.slots.slot() as http, asyncio.timeout(self.timeout):
                    async with http.stream(
                        "POST", url, json=body, headers=self.headers, timeout=self.timeout
                    ) as response:
                        status = response.status_code
                        raw, cut = await read_capped(response, self.max_reply_bytes)
                        content_type = response.headers.get("content-type", "")
                        retry_after = response.headers.get("retry-after", "")
                if status == 200:
                    if cut:
                        reason = f"reply over {self.max_reply_bytes} bytes (model.max_reply_bytes)"
                        raise ModelCallError(url, status, f"the model endpoint answered with a {reason}", reason)
                    try:
                        return parse_completion(raw, content_type)
                    except ValueError as exc:  # a 200 that is no completion; the message is why
                        raise ModelCallError(url, status, f"the model endpoint answered with {exc}", str(exc)) from None
                detail = _error_detail(raw)
                last = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
                reason = f"HTTP {status}"
                if status != 429 and status < 500:
                    raise ModelCallError(url, status, f"the model endpoint refused the request: {last}")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), self.max_backoff)
            except (httpx.TimeoutException, TimeoutError):
                last, status, reason = f"no answer within {self.timeout:g}s", None, "timeout"
            except httpx.TransportError as exc:
                last, status, reason = f"{type(exc).__name__}", None, "connection error"
            if attempt < self.max_retries:
                self.retries += 1
                await asyncio.sleep(delay)
        raise ModelCallError(
            url, status, f"model request failed after {self.max_retries + 1} tries: {last}", reason
        )


# What /v1/models says about a served model that stays put while it is served (not "created",
# which some servers set to the time of the request).
_IDENTITY_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len")


async def served_model_identity(slots: HttpSlots, base_url: str, timeout: float = 10.0) -> str | None:
    """A hash of the models ``base_url`` serves, from its ``GET /v1/models``; None when it does not say.

    Two evaluations count as the same only when this is equal: a different
    checkpoint loaded under another name or path behind the same router is
    another model.
    """
    base = base_url.rstrip("/")
    base = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        async with slots.slot() as http, asyncio.timeout(timeout):
            async with http.stream("GET", f"{base}/v1/models", timeout=timeout) as response:
                raw, cut = await read_capped(response, DEFAULT_MAX_REPLY_BYTES)
        if response.status_code != 200 or cut:
            return None
        entries = json.loads(raw)["data"]
        served = sorted(
            (json.dumps({k: e.get(k) for k in _IDENTITY_FIELDS}, sort_keys=True, default=str) for e in entries),
        )
    except (httpx.HTTPError, TimeoutError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not served:
        return None
    return hashlib.sha256("\n".join(served).encode()).hexdigest()
