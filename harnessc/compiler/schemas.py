"""JSON Schemas for contracts.yaml and harness.yaml, generated from the IR models.

The committed copies live in harnessc/schemas/ (package data, read by lint; the top-level
schemas/ is a link to it, for editors); tests/test_schemas.py fails when they drift.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_FILES = ("contracts.schema.json", "harness.schema.json")


def _draft07(schema: dict) -> dict:
    """pydantic writes $defs and 2020-12 idioms; editors and check-jsonschema read draft-07 best."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "$ref" and isinstance(v, str):
                    out[k] = v.replace("#/$defs/", "#/definitions/")
                elif k == "$defs":
                    continue
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    defs = schema.get("$defs", {})
    body = walk(schema)
    if defs:
        body["definitions"] = {k: walk(v) for k, v in sorted(defs.items())}
    return {"$schema": "http://json-schema.org/draft-07/schema#", **body}


def _describe_enums(node: Any) -> None:
    """Every enum documents its values in its description."""
    if isinstance(node, dict):
        if "enum" in node and "description" not in node:
            node["description"] = "One of: " + ", ".join(str(v) for v in node["enum"]) + "."
        for v in node.values():
            _describe_enums(v)
    elif isinstance(node, list):
        for v in node:
            _describe_enums(v)


def generate() -> dict[str, dict]:
    from .ir import ContractsFile, HarnessConfig

    out = {}
    for name, model, desc in (
        ("contracts.schema.json", ContractsFile, "contracts.yaml: what each task's output must be and how it is verified."),
        ("harness.schema.json", HarnessConfig, "harness.yaml: agents, routing, budgets and defaults for harnessc."),
    ):
        schema = _draft07(model.model_json_schema(by_alias=True, mode="validation"))
        schema["description"] = desc
        _describe_enums(schema)
        out[name] = schema
    return out


def dump(schema: dict) -> str:
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"
