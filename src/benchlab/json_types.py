"""Names for the two kinds of mapping whose shape benchlab does not own.

Everything whose fields benchlab decides (a version, a host, a sequential design, a flag,
a provenance record, ...) crosses module boundaries as a typed record. Two kinds of value
cannot: a run's configuration, whose names and values are the user's, and a document whose
fields an outside protocol fixes (an OpenAI-style request or reply, lm-evaluation-harness's
results file, an OpenAPI or JSON Schema document, a recorded NVML answer). These aliases name
which of the two a mapping is, so a signature says what it carries; fields are checked where
they are read.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A run's configuration or parameters: names and values as the user wrote them (any YAML value).
ConfigValues: TypeAlias = dict[str, Any]

#: A JSON object whose fields an outside format fixes: an HTTP body, a results file, a schema.
JsonObject: TypeAlias = dict[str, Any]
