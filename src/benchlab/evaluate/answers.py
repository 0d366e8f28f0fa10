"""Pulling the answer out of a model's response, and normalising it for comparison.

Pure string functions: no sympy, no subprocesses. What counts as equivalent
beyond string equality (``1/2`` vs ``0.5``) is the math scorer's business.
"""

from __future__ import annotations

import re
import string

_ANSWER_IS = re.compile(
    r"answer is[:\s]*\$?([^\n$]+?)\$?\s*(?:\.\s*)?$", re.IGNORECASE | re.MULTILINE
)
_ANSWER_COLON = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_FENCE = re.compile(r"```(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_CHOICE_PATTERNS = [
    re.compile(r"answer\s*(?:is|:)\s*\(?\*{0,2}([A-J])\b", re.IGNORECASE),
    re.compile(r"\\boxed\{\s*\(?([A-J])\)?\s*\}"),
    re.compile(r"^\s*\(?([A-J])[).:]?\s*$", re.MULTILINE),
]
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; None if absent."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None  # unbalanced: the response was cut off inside the box


def extract_math_answer(text: str) -> str | None:
    """The last ``\\boxed{}`` content, else what follows the last "The answer is"."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed or None
    found = _ANSWER_IS.findall(text)
    if found:
        return found[-1].strip().rstrip(".").strip() or None
    return None


def normalize_math(answer: str) -> str:
    """Cheap canonical form for the fast path: no spaces, no ``$``, no ``\\left``/``\\right``, no trailing ``.0``."""
    a = answer.strip().strip("$").replace(" ", "").replace("\\!", "").replace("\\,", "")
    a = (
        a.replace("\\left", "")
        .replace("\\right", "")
        .replace("dfrac", "frac")
        .replace("tfrac", "frac")
    )
    a = a.rstrip(".")
    if re.fullmatch(r"-?\d+\.0+", a):
        a = a.split(".")[0]
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+", a):
        a = a.replace(",", "")
    return a


def extract_short_answer(text: str) -> str | None:
    """For exact match: boxed, "The answer is X", "Answer: X", else the last non-empty line."""
    boxed = last_boxed(text)
    if boxed:
        return boxed
    found = _ANSWER_IS.findall(text) or _ANSWER_COLON.findall(text)
    if found:
        return found[-1].strip()
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else None


def normalize_text(answer: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation, no articles, single spaces."""
    a = answer.lower()
    a = "".join(ch for ch in a if ch not in string.punctuation)
    a = _ARTICLES.sub(" ", a)
    return " ".join(a.split())


def extract_choice(text: str) -> str | None:
    """The multiple-choice letter (A-J) the response commits to, upper case; None if it names none."""
    for pattern in _CHOICE_PATTERNS:
        found = pattern.findall(text)
        if found:
            return found[-1].upper()
    return None


def extract_code(text: str) -> str | None:
    """The last fenced Python block; else the whole response if it looks like code; else None."""
    blocks = _FENCE.findall(text)
    if blocks:
        return blocks[-1]
    if re.search(r"^\s*(def|class|import|from)\s", text, re.MULTILINE):
        return text
    return None
