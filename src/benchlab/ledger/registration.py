"""The pre-registered analysis plan as the ledger keeps it: plain records, no database.

:mod:`benchlab.preregistration` decides what is registered and what the report says of it;
these records are the layout of its ``meta`` row (and of ``preregistration.json`` beside the
ledger). The JSON keys are the ledger's file format: a registration written by any earlier
benchlab reads into them, and one written now reads in an earlier benchlab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchlab.json_types import JsonObject


def _strings(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"pre-registration: {what} should be a list of names, got {value!r}")
    return tuple(value)


def _field(data: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in data:
        raise ValueError(f"pre-registration: {what} has no {key!r} (keys: {', '.join(sorted(data)) or 'none'})")
    return data[key]


@dataclass(frozen=True)
class AnalysisPlan:
    """The spec's ``analysis:`` section with its defaults filled in: what the report judges with.

    ``comparisons`` are ``(baseline, candidate)`` pairs; a candidate ``"*"`` stands for every
    config but the baseline."""

    metric: str
    summary: str = "final"  # final, auc, max or slope of the learning curve
    alpha: float = 0.05
    test: str = "t"  # a key of benchlab.preregistration.TESTS
    comparisons: tuple[tuple[str, str], ...] = ()
    min_effect: float | None = None  # the smallest difference that matters, in the metric's units

    def to_json(self) -> JsonObject:
        """The plan's JSON, keys in the order the ledger has always stored them (its hash is
        taken over this, with sorted keys)."""
        return {"metric": self.metric, "summary": self.summary, "alpha": self.alpha, "test": self.test,
                "comparisons": [[b, c] for b, c in self.comparisons], "min_effect": self.min_effect}

    @classmethod
    def from_json(cls, data: JsonObject) -> AnalysisPlan:
        """The plan of :meth:`to_json`'s JSON; ``ValueError`` names a missing or malformed field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"pre-registration: the plan should be an object, got {data!r}")
        pairs = []
        for pair in data.get("comparisons", []):
            names = _strings(pair, "a comparison")
            if len(names) != 2:
                raise ValueError(f"pre-registration: a comparison should be [baseline, candidate], got {pair!r}")
            pairs.append((names[0], names[1]))
        return cls(metric=_field(data, "metric", "the plan"), summary=data.get("summary", "final"),
                   alpha=data.get("alpha", 0.05), test=data.get("test", "t"), comparisons=tuple(pairs),
                   min_effect=data.get("min_effect"))


@dataclass(frozen=True)
class Registration:
    """A registered plan: its SHA-256, when the first sweep saw it, and the configs and tasks the
    spec had then (the registered family of comparisons is fixed over them)."""

    hash: str
    registered_at: str  # ISO 8601 in UTC, to the second, as written at registration
    plan: AnalysisPlan
    configs: tuple[str, ...]
    #: None for a registration made before the tasks were recorded: every task is registered.
    tasks: tuple[str, ...] | None = None
    #: The runs already completed when the plan was registered (more than 0: no pre-registration).
    completed_before: int = 0

    def to_json(self) -> JsonObject:
        """The registration's JSON, keys in the order the ledger has always stored them."""
        out: JsonObject = {"hash": self.hash, "registered_at": self.registered_at, "plan": self.plan.to_json(),
                           "configs": list(self.configs)}
        if self.tasks is not None:
            out["tasks"] = list(self.tasks)
        out["completed_before"] = self.completed_before
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> Registration:
        """The registration of :meth:`to_json`'s JSON (an earlier one without ``tasks`` too);
        ``ValueError`` names a missing or malformed field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"pre-registration: expected an object, got {data!r}")
        tasks = data.get("tasks")
        return cls(hash=_field(data, "hash", "the registration"),
                   registered_at=_field(data, "registered_at", "the registration"),
                   plan=AnalysisPlan.from_json(_field(data, "plan", "the registration")),
                   configs=_strings(data.get("configs") or [], "configs"),
                   tasks=None if tasks is None else _strings(tasks, "tasks"),
                   completed_before=int(data.get("completed_before", 0)))

