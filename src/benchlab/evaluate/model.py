"""Calls to the OpenAI-compatible model endpoint (an SGLang/vLLM router, or anything alike).

One shared ``httpx.AsyncClient`` and one semaphore bound the requests in flight
across every job. A request that gets 429, a 5xx, a timeout or a dropped
connection is retried with exponential backoff (honouring ``Retry-After``);
any other 4xx is final.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import httpx

from benchlab.errors import EvaluationError


class ModelCallError(EvaluationError):
    """A model request failed for good. ``status`` is the last HTTP status (None: no answer)."""

    def __init__(self, url: str, status: int | None, message: str):
        self.url = url
        self.status = status
        super().__init__(message)


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters of one benchmark in one request, OpenAI-style names in ``body``."""

    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "n": self.n, "temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
        }
        if self.top_k != -1:
            body["top_k"] = self.top_k  # not OpenAI, but SGLang and vLLM read it from the body
        return body


class ModelClient:
    """Sends prompts to ``base_url + /v1/...`` and returns the ``n`` completions' texts.

    ``semaphore`` bounds concurrent requests (share it to bound a whole server);
    ``timeout`` is per request, seconds; ``max_retries`` retries after the first try.
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        model: str,
        semaphore: asyncio.Semaphore,
        *,
        timeout: float = 600.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.base_url = base[: -len("/v1")] if base.endswith("/v1") else base
        self.http = http
        self.model = model
        self.semaphore = semaphore
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = headers or {}
        self.retries = 0

    async def generate(self, api: str, prompt: str, sampling: Sampling, system: str | None = None) -> list[str]:
        """The ``sampling.n`` texts the model returns for ``prompt`` via ``chat`` or ``completions``."""
        body: dict[str, Any] = {"model": self.model, **sampling.body()}
        if api == "chat":
            url = f"{self.base_url}/v1/chat/completions"
            messages = [{"role": "system", "content": system}] if system else []
            body["messages"] = [*messages, {"role": "user", "content": prompt}]
        else:
            url = f"{self.base_url}/v1/completions"
            body["prompt"] = prompt
        data = await self._post(url, body)
        try:
            choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
            if api == "chat":
                return [c["message"]["content"] or "" for c in choices]
            return [c["text"] or "" for c in choices]
        except (KeyError, TypeError, AttributeError):
            raise ModelCallError(url, 200, "the model endpoint answered without choices") from None

    async def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        last = "no attempt"
        status: int | None = None
        for attempt in range(self.max_retries + 1):
            delay = min(self.backoff * 2**attempt, self.max_backoff) * (0.5 + random.random() / 2)
            try:
                async with self.semaphore:
                    response = await self.http.post(url, json=body, headers=self.headers, timeout=self.timeout)
                status = response.status_code
                if status == 200:
                    return response.json()
                last = f"HTTP {status}"
                if status != 429 and status < 500:
                    raise ModelCallError(url, status, f"the model endpoint refused the request: HTTP {status}")
                retry_after = response.headers.get("retry-after", "")
                if retry_after.replace(".", "", 1).isdigit():
                    delay = min(float(retry_after), self.max_backoff)
            except httpx.TimeoutException:
                last, status = f"no answer within {self.timeout:g}s", None
            except httpx.TransportError as exc:
                last, status = f"{type(exc).__name__}", None
            except ValueError:
                last = "the model endpoint answered with invalid JSON"
            if attempt < self.max_retries:
                self.retries += 1
                await asyncio.sleep(delay)
        raise ModelCallError(url, status, f"model request failed after {self.max_retries + 1} tries: {last}")
