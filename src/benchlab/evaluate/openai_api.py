"""The fields of the OpenAI-compatible API that benchlab sends and reads, as ``TypedDict``s.

The model client (``model.py``) posts these bodies to a model endpoint and
reads its replies; the stub model server (``stub.py``) answers them. OpenAI's
API fixes the names; these types list only the fields benchlab touches, so a
body may carry more (a server's own extensions) and still be read. Sampling
fields are optional: a request sends only those the benchmark sets.

``typing_extensions.TypedDict``: pydantic (and so FastAPI) reads a
``TypedDict`` only from there before Python 3.12.
"""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict


class SamplingFields(TypedDict, total=False):
    """The sampling parameters of a completion request (``top_k`` is SGLang's and vLLM's, not OpenAI's)."""

    n: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int


class ChatMessage(TypedDict):
    """One message of a chat: ``system``, ``user`` or ``assistant`` and its text."""

    role: str
    content: str


class CompletionRequest(SamplingFields, total=False):
    """The body of ``POST /v1/chat/completions`` (``messages``) or ``POST /v1/completions`` (``prompt``)."""

    model: str
    messages: list[ChatMessage]
    prompt: str


class Choice(TypedDict):
    """One of the ``n`` answers of a reply: ``message`` for a chat, ``text`` for a completion."""

    index: int
    finish_reason: str
    message: NotRequired[ChatMessage]
    text: NotRequired[str]


class Usage(TypedDict):
    """Token counts of a reply."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class Completion(TypedDict):
    """A reply to a completion request; ``object`` is ``chat.completion`` or ``text_completion``."""

    id: str
    object: str
    created: int
    model: str
    choices: list[Choice]
    usage: NotRequired[Usage]


class ModelCard(TypedDict):
    """One model a server serves, as ``GET /v1/models`` lists it."""

    id: str
    object: str


class ModelList(TypedDict):
    """The body of ``GET /v1/models``."""

    object: str
    data: list[ModelCard]
