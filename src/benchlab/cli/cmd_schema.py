"""`benchlab schema`: the spec's JSON Schema."""

from __future__ import annotations

from benchlab.cli.app import app, print_json


@app.command()
def schema() -> None:
    """Print the JSON Schema of a spec file (for editors: yaml-language-server, VS Code)."""
    from benchlab.spec import json_schema

    print_json(json_schema())
