"""The benchmark spec: a ``benchlab.yaml`` read into a validated :class:`Spec`.

``load_spec(path)`` (or ``parse_spec(text)``) reads a spec file, fills in its variables and
``-s`` overrides, and validates it, reporting every problem at once with file, line and field.
The package's parts:

- :mod:`benchlab.spec.models`: the typed models (``Spec``, ``Task``, ``Config``, ``Metrics``, ...);
- :mod:`benchlab.spec.load`: reading and validating, the JSON Schema of a spec file;
- :mod:`benchlab.spec.yaml_reader`: YAML text to plain data with the line of every key, within limits;
- :mod:`benchlab.spec.checks`: the checks across fields that the schema cannot express;
- :mod:`benchlab.spec.search`: the ``search`` section (what ``benchlab search`` tunes);
- :mod:`benchlab.spec.quoting`: how a value becomes words of a run's command.
"""

from typing import TYPE_CHECKING

from benchlab.names.exports import export_lazily

if TYPE_CHECKING:
    from benchlab.spec.load import json_schema, load_spec, parse_spec
    from benchlab.spec.models import (
        DEFAULT_RETRY_ON,
        Analysis,
        Config,
        Dataset,
        Metric,
        Metrics,
        MetricSource,
        Origin,
        PlannedComparison,
        Reference,
        Resources,
        Slurm,
        SourceOptions,
        Spec,
        Task,
        parse_duration,
    )

# Nothing imported until asked for (:func:`benchlab.names.exports.export_lazily`): a reader of
# the checks' names (the report's leaderboard) or of quoting does not load pydantic's models.
_WHERE = {
    "json_schema": "benchlab.spec.load",
    "load_spec": "benchlab.spec.load",
    "parse_spec": "benchlab.spec.load",
    "DEFAULT_RETRY_ON": "benchlab.spec.models",
    "Analysis": "benchlab.spec.models",
    "Config": "benchlab.spec.models",
    "Dataset": "benchlab.spec.models",
    "Metric": "benchlab.spec.models",
    "Metrics": "benchlab.spec.models",
    "MetricSource": "benchlab.spec.models",
    "Origin": "benchlab.spec.models",
    "PlannedComparison": "benchlab.spec.models",
    "Reference": "benchlab.spec.models",
    "Resources": "benchlab.spec.models",
    "Slurm": "benchlab.spec.models",
    "SourceOptions": "benchlab.spec.models",
    "Spec": "benchlab.spec.models",
    "Task": "benchlab.spec.models",
    "parse_duration": "benchlab.spec.models",
}
export_lazily(__name__, _WHERE)

__all__ = [
    "DEFAULT_RETRY_ON",
    "Analysis",
    "Config",
    "Dataset",
    "Metric",
    "MetricSource",
    "SourceOptions",
    "Metrics",
    "Origin",
    "PlannedComparison",
    "Reference",
    "Resources",
    "Slurm",
    "Spec",
    "Task",
    "json_schema",
    "load_spec",
    "parse_duration",
    "parse_spec",
]
