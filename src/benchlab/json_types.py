"""Names for the mappings whose shape benchlab does not decide at the point they cross.

Everything whose fields benchlab decides (a version, a host, a sequential design, a flag, a
provenance record, ...) crosses module boundaries as a typed record. What remains is named here,
so a signature says which kind of mapping it carries:

- a run's configuration, whose names and values are the user's (:data:`ConfigValues`);
- a JSON document whose fields an outside format fixes (an OpenAI-style request or reply,
  lm-evaluation-harness's results file, an OpenAPI or JSON Schema document, a recorded NVML
  answer), or the stored JSON form of a typed record at the one place it is written or read
  (:data:`JsonObject`).

Fields of either are checked where they are read.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A run's configuration or parameters: names and values as the user wrote them (any YAML value).
ConfigValues: TypeAlias = dict[str, Any]

#: A JSON object whose fields an outside format fixes (an HTTP body, a results file, a schema), or
#: the stored form of a typed record: what its ``to_json`` returns and its ``from_json`` reads.
JsonObject: TypeAlias = dict[str, Any]
