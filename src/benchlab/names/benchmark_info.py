"""What a results folder knows about its benchmark: one record, written and read by the store.

``benchlab run`` (and ``collect --rebuild``) writes it from the spec with
:meth:`Store.set_benchmark <benchlab.ledger.Store.set_benchmark>`; everything downstream
(``benchlab.results.info``, the report, ``analyze``) reads it back with
:meth:`Store.benchmark <benchlab.ledger.Store.benchmark>`. The ledger keeps it as one
``meta`` row per field, so a ledger written before a field existed still reads, with that
field's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from benchlab.errors import BadArgument
from benchlab.json_types import ConfigValues, JsonObject

if TYPE_CHECKING:
    from benchlab.spec import Spec

# The ledger's key of each field whose key differs from the field's name.
_KEYS = {"goal": "goals"}

Goal = Literal["max", "min"]


def goal_of(goal: str | Mapping[str, str], metric: str) -> Goal:
    """The goal of ``metric``, from one goal for every metric or a ``metric -> goal`` mapping.

    A metric the mapping does not name is ``"max"``, as a spec's metric is unless it says
    otherwise (a record written before goals were kept names none). Raises
    :class:`~benchlab.errors.BadArgument` for a goal other than ``"max"`` or ``"min"``.
    """
    g = goal.get(metric, "max") if isinstance(goal, Mapping) else goal
    if g == "max":
        return "max"
    if g == "min":
        return "min"
    raise BadArgument("goal", g, ("max", "min"), what=f"goal of metric {metric!r}")


@dataclass
class BenchmarkInfo:
    """The benchmark a results folder holds (from the spec it was last run with)."""

    name: str
    primary: str
    goal: dict[str, str]  # metric -> "max" or "min"
    baseline: str | None
    configs: list[str]
    tasks: list[str]
    targets: dict[str, float | None] = field(default_factory=dict)
    references: dict[str, tuple[float, float]] = field(default_factory=dict)
    description: str = ""
    seeds: list[int] = field(default_factory=list)
    spec: JsonObject = field(default_factory=dict)  # the spec as JSON (``model_dump``)
    spec_path: str | None = None
    overrides: ConfigValues = field(default_factory=dict)  # ``-s key=value`` of the run
    metrics: list[str] = field(default_factory=list)  # every metric of the spec, primary first

    @property
    def primary_goal(self) -> Goal:
        """The primary metric's goal (``"max"`` where the record names none)."""
        return goal_of(self.goal, self.primary)

    def metric_goal(self, metric: str) -> Goal:
        """``metric``'s goal (``"max"`` for a metric the record names no goal for)."""
        return goal_of(self.goal, metric)

    @classmethod
    def from_spec(cls, spec: Spec) -> BenchmarkInfo:
        """The record of a validated spec."""
        path = str(spec.path.resolve()) if spec.path else None
        return cls(
            name=spec.name, primary=spec.metrics.primary.name,
            goal={m.name: m.goal for m in spec.metrics.all}, baseline=spec.baseline,
            configs=[c.name for c in spec.configs], tasks=[t.name for t in spec.tasks],
            targets={t.name: t.target for t in spec.tasks},
            references={t.name: (t.reference.low, t.reference.high) for t in spec.tasks if t.reference},
            description=spec.description, seeds=list(spec.seed_list),
            spec=spec.model_dump(mode="json", by_alias=True, exclude_none=True),
            spec_path=path, overrides=dict(spec.overrides),
            metrics=[m.name for m in spec.metrics.all],
        )

    def to_meta(self) -> JsonObject:
        """The ledger's ``meta`` rows: ``{key: JSON-able value}``."""
        out = {_KEYS.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}
        out["references"] = {t: [lo, hi] for t, (lo, hi) in self.references.items()}
        return out

    @classmethod
    def from_meta(cls, meta: JsonObject) -> BenchmarkInfo | None:
        """The record in a ledger's ``meta`` rows; None when no benchmark was written yet."""
        if "name" not in meta or "primary" not in meta:
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = _KEYS.get(f.name, f.name)
            if key in meta:
                values[f.name] = meta[key]
        values.setdefault("goal", {})
        values.setdefault("baseline", None)
        values.setdefault("configs", [])
        values.setdefault("tasks", [])
        values["references"] = {
            k: (float(v[0]), float(v[1])) for k, v in (values.get("references") or {}).items()
        }
        return cls(**values)


__all__ = ["BenchmarkInfo", "Goal", "goal_of"]
