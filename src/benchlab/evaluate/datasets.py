"""Evaluation datasets: JSONL files of items, and the prompt each item becomes.

One JSON object per line. Every item needs an ``id`` (unique in the file) and
the fields its prompt template uses; what else it needs depends on the scorer:

========== ===============================================================
scorer      fields
========== ===============================================================
math        ``answer``: the gold answer (LaTeX or plain)
exact       ``answer``: the gold string (or a list of accepted strings)
choice      ``choices``: list of options; ``answer``: the gold letter (A, B, ...)
code        ``tests``: Python asserts appended to the model's program; optional
            ``entry_point``: the name of the function under test (HumanEval's)
instruction ``checks``: list of ``{type, value?}`` (see ``instructions.CHECKS``)
llm_judge   pairwise: ``baseline``, the answer the model's is compared with;
            single: ``answer``, the gold answer the judge grades against
========== ===============================================================

An optional ``reference`` is a known-good response (the stub model answers
with it); it is never shown to the model under test.
"""

from __future__ import annotations

import hashlib
import json
import keyword
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from benchlab.errors import DataError
from benchlab.evaluate.config import BenchmarkConfig
from benchlab.evaluate.instructions import validate_checks
from benchlab.json_types import JsonObject

_REQUIRED = {
    "math": ("answer",),
    "exact": ("answer",),
    "choice": ("choices", "answer"),
    "code": ("tests",),
    "instruction": ("checks",),
    "llm_judge:pairwise": ("baseline",),
    "llm_judge:single": ("answer",),
}
_env = SandboxedEnvironment(
    undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False
)
_env.filters["letter"] = lambda i: chr(ord("A") + int(i))


@dataclass(frozen=True)
class Item:
    """One dataset item: its id, the prompt it renders to, and all its fields.

    ``fields`` is the item's line of the dataset as written (a JSON object): the dataset's author
    names its fields; a scorer reads those it needs (``answer``, ``choices``, ``tests``, ``checks``,
    ``baseline``), each checked when the dataset loads.
    """

    id: str
    prompt: str
    fields: JsonObject


def _check_item(scorer: str, item: dict[str, Any]) -> str | None:
    missing = [f for f in ("id", *_REQUIRED[scorer]) if f not in item]
    if missing:
        return f"missing field(s) {', '.join(missing)} (scorer {scorer!r} needs id, {', '.join(_REQUIRED[scorer])})"
    if scorer == "choice":
        letters = [chr(ord("A") + i) for i in range(len(item["choices"]))]
        if str(item["answer"]).upper() not in letters:
            return f"answer {item['answer']!r} is not one of the choice letters {letters}"
    if scorer == "instruction":
        return validate_checks(item["checks"])
    if scorer == "code" and "entry_point" in item:
        entry_point = item["entry_point"]
        if not isinstance(entry_point, str) or not entry_point.isidentifier() or keyword.iskeyword(entry_point):
            return f"entry_point {entry_point!r} is not a Python name (the function under test, e.g. 'add')"
    return None


@lru_cache(maxsize=64)
def _load(
    path: Path, mtime: float, scorer: str, prompt: str, system: str | None
) -> tuple[Item, ...]:
    try:
        template = _env.from_string(prompt)
    except jinja2.TemplateSyntaxError as exc:
        raise DataError(f"prompt template: {exc.message} (line {exc.lineno})") from None
    items: list[Item] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}:{lineno}: not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise DataError(
                    f"{path}:{lineno}: expected a JSON object, got {type(data).__name__}"
                )
            problem = _check_item(scorer, data)
            if problem:
                raise DataError(f"{path}:{lineno}: {problem}")
            item_id = str(data["id"])
            if item_id in seen:
                raise DataError(f"{path}:{lineno}: duplicate id {item_id!r}")
            seen.add(item_id)
            try:
                text = template.render(**data)
            except jinja2.UndefinedError as exc:
                raise DataError(
                    f"{path}:{lineno}: the prompt template uses a field the item lacks: {exc.message}"
                ) from None
            items.append(Item(item_id, text, data))
    if not items:
        raise DataError(f"{path}: no items")
    return tuple(items)


def load_items(bench: BenchmarkConfig) -> tuple[Item, ...]:
    """The items of a benchmark with their rendered prompts (cached until the file changes).

    Raises DataError naming the file and line of the first bad item.
    """
    path = Path(bench.dataset)
    scorer = f"llm_judge:{bench.judge.mode}" if bench.judge is not None else bench.scorer
    return _load(path, path.stat().st_mtime, scorer, bench.prompt, bench.system)


def benchmark_digest(bench: BenchmarkConfig) -> str:
    """A hash of what a benchmark evaluates: its items as rendered, and how they are scored.

    Changes when the dataset file's content, the prompt template, the system
    message, the scorer or the judge settings change; not when only the file's
    time stamp does.
    """
    path = Path(bench.dataset)
    settings = bench.model_dump_json(exclude={"dataset", "description", "defaults"})
    return _digest(path, path.stat().st_mtime, settings, bench)


_digests: dict[tuple[Path, float, str], str] = {}


def _digest(path: Path, mtime: float, settings: str, bench: BenchmarkConfig) -> str:
    # Once per version of the file, like load_items.
    key = (path, mtime, settings)
    if key not in _digests:
        h = hashlib.sha256(settings.encode())
        for item in load_items(bench):
            h.update(json.dumps([item.id, item.prompt, item.fields], sort_keys=True, default=str).encode())
        if len(_digests) > 256:
            _digests.clear()
        _digests[key] = h.hexdigest()
    return _digests[key]
