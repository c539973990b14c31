"""Contract compilation: JSON Schema, provider subsets, plan entries, prompt text.

Golden files: tests/fixtures/validate/golden/<contract>.json hold the plan entry of each
built-in contract; regenerate with HARNESSC_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harnessc.planfile import plain
from jsonschema import Draft7Validator

from harnessc.compiler.contract_schema import (
    PROVIDER_KEEP,
    contract_plan_entry,
    output_json_schema,
    prompt_format,
    provider_schema,
    rule_keywords,
)
from harnessc.compiler.ir import Contract

GOLDEN = Path(__file__).parent / "fixtures" / "validate" / "golden"
UPDATE = os.environ.get("HARNESSC_UPDATE_GOLDEN") == "1"

from harnessc.compiler.contract_schema import load_builtin_contracts  # noqa: E402

BUILTINS = load_builtin_contracts()
ENTRIES = {n: contract_plan_entry(n, c) for n, c in BUILTINS.items()}
WITH_OUTPUT = sorted(n for n, e in ENTRIES.items() if e["output"])


def contract(spec: dict) -> Contract:
    return Contract.model_validate(spec)


def nodes(schema, path="$"):
    """Every schema node with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for k, v in (schema.get("properties") or {}).items():
        yield from nodes(v, f"{path}.properties.{k}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}.items")
    for key in ("anyOf", "allOf"):
        for i, v in enumerate(schema.get(key) or []):
            yield from nodes(v, f"{path}.{key}[{i}]")


# ------------------------------------------------------------------ built-ins


def test_builtin_library_json_is_the_yaml():
    """harnessc reads the library from its JSON copy (a twentieth of the YAML reader's time in
    every lint); the copy holds what the YAML says, as python -m harnessc.compiler.builtin_library
    writes it."""
    from harnessc.compiler import builtin_library
    from harnessc.compiler.load import builtin_contract_data

    copy = builtin_library.copy_data()
    assert copy.pop("note") == builtin_library.NOTE
    assert copy == builtin_library.source_data(), "run: python -m harnessc.compiler.builtin_library"
    assert builtin_library.copy_text() == (Path(builtin_library.__file__).parent / builtin_library.COPY).read_text("utf-8")
    assert builtin_contract_data() == copy["contracts"]


def test_builtin_library_is_complete():
    assert sorted(BUILTINS) == [
        "appointment_booking", "code_change", "compliance_check",
        "lead_qualification", "market_analysis", "research_report",
    ]
    cc = ENTRIES["code_change"]
    assert cc["output"] is None and cc["json_schema"] is None
    assert (cc["on_failure"], cc["max_retries"]) == ("fail", 2)


def test_builtins_follow_the_seed():
    lq = ENTRIES["lead_qualification"]
    assert list(lq["output"]) == ["qualification_score", "bant_assessment", "recommended_action", "confidence"]
    assert lq["json_schema"]["required"] == ["qualification_score", "bant_assessment", "recommended_action"]
    assert lq["constraints"] == {"max_total_tokens": 5000, "max_tool_calls": 5, "timeout": 60, "warn_threshold": 0.8}
    assert (ENTRIES["research_report"]["on_failure"], ENTRIES["research_report"]["max_retries"]) == ("fallback", 1)
    assert ENTRIES["compliance_check"]["on_failure"] == "fail"
    assert ENTRIES["market_analysis"]["constraints"]["max_tool_calls"] == 15


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_builtin_plan_entry_golden(name):
    path = GOLDEN / f"{name}.json"
    got = json.dumps(ENTRIES[name], indent=2, ensure_ascii=False, default=plain) + "\n"
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"regenerate with HARNESSC_UPDATE_GOLDEN=1: {path}"


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_builtin_schema_is_valid_draft7(name):
    Draft7Validator.check_schema(ENTRIES[name]["json_schema"])
    for provider in ("openai", "anthropic"):
        Draft7Validator.check_schema(ENTRIES[name]["provider_schemas"][provider]["schema"])


def test_builtin_datetime_format_kept_for_anthropic_only():
    ps = ENTRIES["appointment_booking"]["provider_schemas"]
    assert ps["anthropic"]["schema"]["properties"]["start_time"]["format"] == "date-time"
    assert "format" not in ps["openai"]["schema"]["properties"]["start_time"]
    assert "format: date-time" in ps["openai"]["schema"]["properties"]["start_time"]["description"]


@pytest.mark.parametrize("name", WITH_OUTPUT)
def test_builtins_are_strict_for_both_providers(name):
    for provider in ("openai", "anthropic"):
        ps = ENTRIES[name]["provider_schemas"][provider]
        assert ps["strict"], ps["moved"]
        check_provider_subset(ps["schema"], provider)


def check_provider_subset(schema: dict, provider: str) -> None:
    for path, node in nodes(schema):
        assert set(node) <= PROVIDER_KEEP[provider], (path, set(node) - PROVIDER_KEEP[provider])
        if node.get("type") == "object" or "object" in (node.get("type") or []):
            assert node["additionalProperties"] is False, path
            if provider == "openai":
                assert node["required"] == list(node["properties"]), path


# ------------------------------------------------------------------ output_json_schema

SPEC = {
    "output": {
        "score": {"type": "int", "description": "0-100", "rules": ["value >= 0", "value <= 100"], "example": 5},
        "name": {"type": "str", "rules": ["len(value) > 0", "len(value) < 10"], "required": False},
        "kind": {"type": "str", "enum": ["a", "b"], "default": "a", "required": False},
        "tags": {"type": "list", "items": "str", "rules": ["len(value) >= 2"]},
        "people": {"type": "list", "items": {"type": "dict", "fields": {"n": {"type": "str"}}}},
        "meta": {"type": "dict", "fields": {"x": {"type": "float", "required": False}}},
        "blob": {"type": "any", "required": False},
        "free": {"type": "dict", "required": False},
        "raw": {"type": "str", "schema": {"pattern": "^[a-z]+$", "maxLength": 3}},
        "flag": {"type": "bool", "rules": ["value == true"]},
    }
}


def test_output_json_schema_shape():
    s = output_json_schema(contract(SPEC).output)
    Draft7Validator.check_schema(s)
    assert s["type"] == "object" and s["additionalProperties"] is False
    assert s["required"] == ["score", "tags", "people", "meta", "raw", "flag"]
    p = s["properties"]
    assert p["score"] == {
        "type": "integer", "description": "0-100", "minimum": 0, "maximum": 100,
        "x-from-rules": ["maximum", "minimum"], "examples": [5],
    }
    assert (p["name"]["minLength"], p["name"]["maxLength"]) == (1, 9)
    assert p["kind"] == {"type": "string", "enum": ["a", "b"], "default": "a"}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 2, "x-from-rules": ["minItems"]}
    assert p["people"]["items"] == {
        "type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"], "additionalProperties": False,
    }
    assert p["meta"]["required"] == []
    assert p["blob"] == {} and p["free"] == {"type": "object"}
    assert p["raw"] == {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}  # escape hatch merged
    assert p["flag"] == {"type": "boolean"}  # not every rule becomes a keyword
    assert list(s) == ["$schema", "type", "properties", "required", "additionalProperties"]


@pytest.mark.parametrize("rule,json_type,want", [
    ("value >= 0", "integer", {"minimum": 0}),
    ("value<=1.5", "number", {"maximum": 1.5}),
    ("value > -2", "number", {"exclusiveMinimum": -2}),
    ("value < 3", "integer", {"exclusiveMaximum": 3}),
    ("value >= 0", "string", {}),
    ("len(value) >= 1", "array", {"minItems": 1}),
    ("len( value ) == 4", "string", {"minLength": 4, "maxLength": 4}),
    ("len(value) < 0", "string", {"maxLength": 0}),
    ("len(value) > 2", "object", {"minProperties": 3}),
    ("len(value) > 2", "integer", {}),
    ("value >= 0 and value <= 5", "integer", {}),
    ("is_email(value)", "string", {"format": "email"}),
    ("is_datetime( value )", "string", {"format": "date-time"}),
    ("is_url(value)", "string", {"format": "uri"}),
    ("is_url(value)", "integer", {}),
    ("is_email(value.x)", "string", {}),
])
def test_rule_keywords(rule, json_type, want):
    assert rule_keywords(rule, json_type) == want


# ------------------------------------------------------------------ provider subsets


def test_openai_subset():
    schema = output_json_schema(contract(SPEC).output)
    sub, moved = provider_schema(schema, "openai")
    p = sub["properties"]
    assert sub["required"] == list(p)  # everything required ...
    assert p["name"]["type"] == ["string", "null"]  # ... optional ones nullable
    assert p["kind"]["enum"] == ["a", "b", None]
    assert p["meta"]["properties"]["x"]["type"] == ["number", "null"]
    assert p["score"] == {"type": "integer", "description": "0-100 (must be >= 0; must be <= 100; example: 5)"}
    assert p["tags"]["description"] == "At least 2 items"
    assert p["raw"]["description"] == "Must match the regular expression ^[a-z]+$; at most 3 characters"
    by = {(m["path"], m["keyword"]): m for m in moved}
    assert by[("$.properties.score", "minimum")] == {
        "path": "$.properties.score", "keyword": "minimum", "value": 0, "provider": "openai",
    }
    assert ("$.properties.kind", "default") in by
    # free-form values make the schema non-strict, and say so
    assert {m["path"] for m in moved if m["keyword"] == "strict"} == {"$.properties.blob", "$.properties.free"}
    assert p["free"]["description"] == "Any JSON object"
    assert sub == provider_schema(schema, "openai")[0]  # deterministic
    assert "x-from-rules" not in json.dumps(sub) and "$schema" not in sub


def test_anthropic_subset():
    schema = output_json_schema(contract(SPEC).output)
    sub, moved = provider_schema(schema, "anthropic")
    p = sub["properties"]
    assert sub["required"] == schema["required"]  # optional stays optional
    assert p["name"]["type"] == "string"
    assert p["tags"] == {"type": "array", "items": {"type": "string"}, "description": "At least 2 items"}
    keywords = {m["keyword"] for m in moved}
    assert {"minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "strict"} <= keywords
    assert all(m["provider"] == "anthropic" for m in moved)


@pytest.mark.parametrize("extra,provider,kept", [
    ({"format": "date-time"}, "anthropic", True),
    ({"format": "date-time"}, "openai", False),
    ({"format": "hex-color"}, "anthropic", False),
    ({"minItems": 1, "type": "array", "items": {}}, "anthropic", True),
    ({"minItems": 1, "type": "array", "items": {}}, "openai", False),
    ({"allOf": [{"type": "string"}]}, "anthropic", True),
    ({"allOf": [{"type": "string"}]}, "openai", False),
    ({"uniqueItems": True}, "anthropic", False),
    ({"title": "T"}, "openai", False),
])
def test_provider_keyword_table(extra, provider, kept):
    schema = {"type": "object", "properties": {"v": {"type": "string", **extra}}, "required": ["v"],
              "additionalProperties": False}
    sub, moved = provider_schema(schema, provider)
    key = next(iter(k for k in extra if k not in ("type", "items")))
    assert (key in sub["properties"]["v"]) == kept
    assert any(m["keyword"] == key for m in moved) != kept


def test_provider_subset_of_nested_escape_hatch():
    spec = {"output": {"v": {"type": "any", "schema": {
        "anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 1}]}}}}
    sub, moved = provider_schema(output_json_schema(contract(spec).output), "openai")
    assert sub["properties"]["v"]["anyOf"] == [
        {"type": "string", "description": "At most 2 characters"},
        {"type": "integer", "description": "Must be >= 1"},
    ]
    assert [m["path"] for m in moved] == ["$.properties.v.anyOf[0]", "$.properties.v.anyOf[1]"]
    assert sub["properties"]["v"] is not None


def test_unknown_provider():
    with pytest.raises(ValueError, match="unknown provider"):
        provider_schema({}, "gemini")


# ------------------------------------------------------------------ plan entry


def test_plan_entry_defaults_and_accept():
    c = contract({
        "accept": ["pytest -q 'tests/a b'", {"id": "lint", "run": ["ruff", "check"], "timeout": "2m"}],
    })
    e = contract_plan_entry("x", c, default_max_retries=4, default_on_failure="partial")
    assert e["accept"] == [
        {"id": "accept-1", "argv": ["pytest", "-q", "tests/a b"], "timeout": None},
        {"id": "lint", "argv": ["ruff", "check"], "timeout": 120},
    ]
    assert (e["on_failure"], e["max_retries"], e["constraints"]) == ("partial", 4, None)
    assert e["output"] is None and e["provider_schemas"] is None
    json.dumps(e, default=plain)  # plain JSON


def test_plan_entry_output_is_plain_json():
    e = contract_plan_entry("x", contract(SPEC))
    assert e["output"]["tags"] == {"type": "list", "description": "", "required": True,
                                   "rules": ["len(value) >= 2"], "items": "str"}
    assert e["output"]["raw"]["schema"] == {"pattern": "^[a-z]+$", "maxLength": 3}
    assert e["provider_schemas"]["openai"]["strict"] is False
    assert json.loads(json.dumps(e, default=plain)) == e


# ------------------------------------------------------------------ prompt text


def test_prompt_format():
    text = prompt_format(ENTRIES["lead_qualification"])
    assert text.startswith("## Required Output Format\n\nYour output must be a JSON object")
    assert "- **qualification_score** (int, REQUIRED): Overall qualification score from 0-100" in text
    assert "  - Rules: value >= 0, value <= 100" in text
    assert "  - Example: 75" in text
    assert "- **confidence** (float, OPTIONAL)" in text
    assert "    - **budget** (dict, REQUIRED): Budget score and notes" in text  # nested, indented
    assert "      - **score** (int, REQUIRED)" in text
    assert '"budget":{"score":80,"notes":"Budget approved"}' in text  # compact JSON example
    assert prompt_format(ENTRIES["code_change"]) == ""


def test_prompt_format_items_enum_and_output_rules():
    e = contract_plan_entry("x", contract({
        "output": {"a": {"type": "list", "items": {"type": "str", "enum": ["x", "y"]}},
                   "b": {"type": "int", "enum": [1, 2], "default": 1}},
        "output_rules": ["output.b > 0"],
    }))
    text = prompt_format(e)
    assert "- **a** (list of str, REQUIRED)\n  - Each item:\n    - Allowed values: \"x\", \"y\"" in text
    assert "  - Allowed values: 1, 2\n  - Default: 1" in text
    assert text.endswith("The whole output must satisfy: output.b > 0")


def test_one_provider_registry_for_compiler_and_runtime() -> None:
    """The IR's providers are the registry's, and plan.json's subsets come from its units."""
    from typing import get_args

    from harnessc import providers
    from harnessc.compiler import ir

    assert set(get_args(ir.Provider)) == set(providers.names())
    assert [p.name for p in providers.with_schema()] == list(ENTRIES["appointment_booking"]["provider_schemas"])
    for unit in providers.with_schema():
        assert PROVIDER_KEEP[unit.name] == unit.schema.keep
