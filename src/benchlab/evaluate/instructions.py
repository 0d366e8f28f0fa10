"""Verifiable instruction checks: constraints a program can decide (word counts, case, JSON, ...).

A dataset item lists its checks as ``{"type": ..., **arguments}``; a response
follows the instructions when every check holds (the strict, prompt-level reading).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from benchlab.json_types import JsonObject


def _words(text: str) -> list[str]:
    return re.findall(r"\b\w+\b", text)


def _json_body(text: str) -> str:
    stripped = text.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*\n(.*?)\n?```", stripped, re.DOTALL)
    return fenced.group(1) if fenced else stripped


def _is_json(text: str) -> bool:
    try:
        json.loads(_json_body(text))
    except ValueError:
        return False
    return True


CHECKS: dict[str, Callable[..., bool]] = {
    "max_words": lambda text, value: len(_words(text)) <= int(value),
    "min_words": lambda text, value: len(_words(text)) >= int(value),
    "lowercase": lambda text: text == text.lower(),
    "uppercase": lambda text: text == text.upper(),
    "no_commas": lambda text: "," not in text,
    "json": _is_json,
    "contains": lambda text, value: str(value).lower() in text.lower(),
    "not_contains": lambda text, value: str(value).lower() not in text.lower(),
    "ends_with": lambda text, value: text.strip().endswith(str(value)),
    "starts_with": lambda text, value: text.strip().startswith(str(value)),
    "num_paragraphs": lambda text, value: (
        len([p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]) == int(value)
    ),
    "num_bullets": lambda text, value: (
        len(re.findall(r"^\s*[*-]\s", text, re.MULTILINE)) == int(value)
    ),
}


def check_all(text: str, checks: list[JsonObject]) -> tuple[bool, list[str]]:
    """Whether ``text`` satisfies every check; also the types of the checks that failed.

    ``checks`` are a dataset item's ``{"type": ..., **arguments}`` objects, as the dataset wrote them.

    An unknown check type raises ValueError (a dataset error, found when the dataset loads).
    """
    failed = []
    for check in checks:
        args = {k: v for k, v in check.items() if k != "type"}
        if not CHECKS[check["type"]](text, **args):
            failed.append(check["type"])
    return not failed, failed


def validate_checks(checks: Any) -> str | None:
    """None when ``checks`` is a list of known checks with the arguments they need; else what is wrong."""
    if not isinstance(checks, list) or not checks:
        return "'checks' must be a non-empty list of {type: ..., ...} objects"
    for i, check in enumerate(checks):
        if not isinstance(check, dict) or check.get("type") not in CHECKS:
            return f"checks[{i}]: unknown check {check!r}; known: {', '.join(sorted(CHECKS))}"
        needs_value = CHECKS[check["type"]].__code__.co_argcount > 1
        if needs_value != ("value" in check):
            return f"checks[{i}] ({check['type']}): " + (
                "needs a 'value'" if needs_value else "takes no 'value'"
            )
    return None
