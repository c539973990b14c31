"""Compile contracts into JSON Schema, provider subsets, plan.json entries and prompt text.

Three products per contract:

* ``output_json_schema``: the full draft-07 schema the local validator enforces. Simple
  rules are also written as schema keywords (``value >= 0`` -> ``minimum: 0``,
  ``len(value) >= 1`` -> ``minItems: 1``/``minLength: 1``, ``is_datetime(value)`` ->
  ``format: date-time``) so that providers able to
  enforce them during decoding do; the keywords so derived are listed under the vendor key
  ``x-from-rules`` and the local validator reports the rule, not the keyword, for them.
* ``provider_schema``: the structured-output subset one provider accepts.
* ``contract_plan_entry``: the plain-JSON entry of plan.json (the runtime needs no IR).

Provider subsets: each provider's JSON-Schema subset (what it keeps, what is moved into the
description and listed in plan.json, strict or not) is declared in its unit of the provider
registry, harnessc/providers/ (see providers/subset.py for the rules).
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from .. import providers as _providers
from ..argv import split_command
from ..providers.subset import compact, is_strict  # noqa: F401  (is_strict: re-exported)
from .load import builtin_contract_data

if TYPE_CHECKING:  # the pydantic IR and plan.json's records: imported where built (lint stays light)
    from collections.abc import Iterator

    from .. import planfile
    from .ir import AcceptCommand, Contract, Deliverable

DRAFT07 = "http://json-schema.org/draft-07/schema#"

JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "dict": "object",
}

# ------------------------------------------------------------------ rules -> keywords

_NUM = r"-?\d+(?:\.\d+)?"
_VALUE_CMP = re.compile(rf"^\s*value\s*(>=|<=|>|<)\s*({_NUM})\s*$")
_LEN_CMP = re.compile(r"^\s*len\(\s*value\s*\)\s*(>=|<=|>|<|==)\s*(\d+)\s*$")
_FORMAT_RULE = re.compile(r"^\s*(is_datetime|is_email|is_url)\(\s*value\s*\)\s*$")
_FORMATS = {"is_datetime": "date-time", "is_email": "email", "is_url": "uri"}
_NUMERIC_KEYWORD = {">=": "minimum", "<=": "maximum", ">": "exclusiveMinimum", "<": "exclusiveMaximum"}
_LEN_KEYWORDS = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def rule_keywords(rule: str, json_type: str | None) -> dict[str, Any]:
    """JSON Schema keywords equivalent to one simple rule, or {} when there is none."""
    m = _VALUE_CMP.match(rule)
    if m and json_type in ("integer", "number"):
        return {_NUMERIC_KEYWORD[m.group(1)]: _number(m.group(2))}
    m = _FORMAT_RULE.match(rule)
    if m and json_type == "string":
        return {"format": _FORMATS[m.group(1)]}
    m = _LEN_CMP.match(rule)
    if m and json_type in _LEN_KEYWORDS:
        low, high = _LEN_KEYWORDS[json_type]
        op, n = m.group(1), int(m.group(2))
        return {
            ">=": {low: n},
            ">": {low: n + 1},
            "<=": {high: n},
            "<": {high: max(n - 1, 0)},
            "==": {low: n, high: n},
        }[op]
    return {}


# ------------------------------------------------------------------ full JSON Schema


def _dump(d: Deliverable | dict) -> dict:
    """A deliverable as a plain dict (the plan.json form), whatever was passed."""
    if hasattr(d, "model_dump"):
        return d.model_dump(mode="json", by_alias=True, exclude_none=True)
    if hasattr(d, "raw"):  # a lint-time view over the YAML data
        return d.raw()
    return d


def deliverable_schema(d: Deliverable | dict) -> dict:
    """The draft-07 schema of one deliverable (works on the IR model or its plain dict)."""
    d = _dump(d)
    typ = d.get("type", "any")
    out: dict[str, Any] = {}
    json_type = JSON_TYPES.get(typ)
    if json_type:
        out["type"] = json_type
    if d.get("description"):
        out["description"] = d["description"]
    if d.get("enum") is not None:
        out["enum"] = list(d["enum"])
    if typ == "list" and d.get("items") is not None:
        items = d["items"]
        out["items"] = deliverable_schema({"type": items} if isinstance(items, str) else items)
    if typ == "dict" and d.get("fields"):
        out.update(_object_schema(d["fields"]))
    # Simple rules become keywords (see module docstring); a later rule wins on conflict.
    derived: dict[str, Any] = {}
    for rule in d.get("rules") or []:
        derived.update(rule_keywords(rule, json_type))
    out.update(derived)
    if derived:
        out["x-from-rules"] = sorted(derived)
    if "default" in d:
        out["default"] = d["default"]
    if "example" in d:
        out["examples"] = [d["example"]]
    if d.get("schema"):
        out.update(copy.deepcopy(d["schema"]))  # the escape hatch overrides what we generated
    return out


# Draft-07 keywords whose values are schemas, mappings of schemas, or lists of schemas.
_SUBSCHEMA = ("items", "additionalItems", "additionalProperties", "contains", "propertyNames", "not",
              "if", "then", "else")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "definitions", "$defs", "dependencies")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "items")


def subschemas(schema: Any, loc: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """(location, schema) of `schema` and every schema inside it (not enum or const values).

    The YAML depth limit bounds this walk.
    """
    if not isinstance(schema, dict):
        return
    yield loc, schema
    for key, value in schema.items():
        if key in _SUBSCHEMA:
            yield from subschemas(value, loc + (key,))
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from subschemas(sub, loc + (key, name))
        if key in _SUBSCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                yield from subschemas(sub, loc + (key, i))


def schema_refs(schema: Any, loc: tuple = ()) -> Iterator[tuple]:
    """Where a user's `schema:` uses `$ref` (the path of each `$ref` key).

    Lint refuses them all: a remote ref would be fetched, `#` alone recurses for ever, and a
    local `#/...` means another place once the schema is merged into the contract's output
    schema.
    """
    return (where + ("$ref",) for where, s in subschemas(schema, loc) if "$ref" in s)


def schema_patterns(schema: Any, loc: tuple = ()) -> Iterator[tuple[tuple, str, bool]]:
    """(location, regex, is a key) of every `pattern` and `patternProperties` key in a schema."""
    for where, s in subschemas(schema, loc):
        if isinstance(s.get("pattern"), str):
            yield where + ("pattern",), s["pattern"], False
        if isinstance(s.get("patternProperties"), dict):
            for p in s["patternProperties"]:
                if isinstance(p, str):
                    yield where + ("patternProperties", p), p, True


def _object_schema(fields: dict[str, Any]) -> dict:
    props = {name: deliverable_schema(f) for name, f in fields.items()}
    required = [name for name, f in fields.items() if _dump(f).get("required", True)]
    return {"properties": props, "required": required, "additionalProperties": False}


def output_json_schema(output: dict[str, Deliverable] | dict[str, dict]) -> dict:
    """Draft-07 JSON Schema of a contract's whole output object."""
    return {"$schema": DRAFT07, "type": "object", **_object_schema(output)}


# ------------------------------------------------------------------ provider subsets
# Each provider's subset lives in its unit of the provider registry (harnessc/providers/),
# which imports no SDK; the compiler and the runtime read that one registry.

PROVIDERS = tuple(p.name for p in _providers.with_schema())
PROVIDER_KEEP = {p.name: p.schema.keep for p in _providers.with_schema()}


def provider_schema(schema: dict, provider: str) -> tuple[dict, list[dict]]:
    """The structured-output subset of ``schema`` for ``provider``, and what was moved."""
    unit = _providers.get(provider)
    if unit is None or unit.schema is None:
        raise ValueError(f"unknown provider {provider!r}: expected one of {', '.join(PROVIDERS)}")
    return unit.schema.apply(schema)


# ------------------------------------------------------------------ plan.json entry


def accept_entries(contract: Contract, min_passed: int | str | None) -> list["planfile.AcceptCommand"]:
    """The contract's accept commands as plan.json holds them; an entry without its own
    `min_passed` takes `min_passed` (the task's, else the contract's)."""
    return [_accept_entry(i, c, min_passed) for i, c in enumerate(contract.accept, 1)]


def _accept_entry(i: int, cmd: str | AcceptCommand, min_passed: int | str | None) -> "planfile.AcceptCommand":
    from .. import planfile

    if isinstance(cmd, str):
        from .ir import AcceptCommand

        cmd = AcceptCommand(run=cmd)
    id_, argv = cmd.id or f"accept-{i}", split_command(cmd.run)
    if cmd.min_passed is not None:
        min_passed = cmd.min_passed
    if min_passed:  # 0: no count needed - the plain entry
        return planfile.CountedAccept(id_, argv, cmd.timeout, min_passed, cmd.junit)
    return planfile.AcceptCommand(id_, argv, cmd.timeout)


def contract_plan_entry(
    name: str,
    contract: Contract,
    default_max_retries: int = 2,
    default_on_failure: str = "retry",
) -> "planfile.Contract":
    """The contract as plan.json holds it (schemas, provider subsets, accept, limits)."""
    from .. import planfile

    entry = planfile.Contract(
        name=name,
        description=contract.description,
        version=contract.version,
        json_schema=None,
        provider_schemas=None,
        output=None,
        output_rules=list(contract.output_rules),
        accept=accept_entries(contract, contract.min_passed),
        on_failure=contract.on_failure or default_on_failure,
        max_retries=contract.max_retries if contract.max_retries is not None else default_max_retries,
        constraints=(
            contract.constraints.model_dump(mode="json", exclude_none=True) if contract.constraints else None
        ),
    )
    if contract.output is not None:
        schema = output_json_schema(contract.output)
        entry.json_schema = schema
        entry.output = {k: _dump(d) for k, d in contract.output.items()}
        entry.provider_schemas = {}
        for unit in _providers.with_schema():
            entry.provider_schemas[unit.name] = unit.schema.entry(schema)
    return entry


# ------------------------------------------------------------------ prompt text


def _type_label(d: dict) -> str:
    typ = d.get("type", "any")
    items = d.get("items")
    if typ == "list" and items is not None:
        return f"list of {items if isinstance(items, str) else items.get('type', 'any')}"
    return typ


def _field_lines(name: str, d: dict, indent: str) -> list[str]:
    req = "REQUIRED" if d.get("required", True) else "OPTIONAL"
    desc = d.get("description", "")
    lines = [f"{indent}- **{name}** ({_type_label(d)}, {req})" + (f": {desc}" if desc else "")]
    sub = indent + "  "
    if d.get("enum") is not None:
        lines.append(f"{sub}- Allowed values: {', '.join(compact(v) for v in d['enum'])}")
    if d.get("rules"):
        lines.append(f"{sub}- Rules: {', '.join(d['rules'])}")
    if "example" in d:
        lines.append(f"{sub}- Example: {compact(d['example'], 400)}")
    elif "default" in d:
        lines.append(f"{sub}- Default: {compact(d['default'], 400)}")
    if d.get("type") == "dict" and d.get("fields"):
        lines.append(f"{sub}- Fields:")
        for k, f in d["fields"].items():
            lines.extend(_field_lines(k, f, sub + "  "))
    items = d.get("items")
    if isinstance(items, dict) and (items.get("fields") or items.get("rules") or items.get("enum")):
        lines.append(f"{sub}- Each item:")
        if items.get("fields"):
            for k, f in items["fields"].items():
                lines.extend(_field_lines(k, f, sub + "  "))
        if items.get("enum") is not None:
            lines.append(f"{sub}  - Allowed values: {', '.join(compact(v) for v in items['enum'])}")
        if items.get("rules"):
            lines.append(f"{sub}  - Rules: {', '.join(items['rules'])}")
    return lines


def prompt_format(contract_entry: dict) -> str:
    """The "Required Output Format" section of the prompt, from a plan.json contract entry."""
    output = contract_entry.get("output")
    if not output:
        return ""
    lines = [
        "## Required Output Format",
        "",
        "Your output must be a JSON object with the following fields:",
        "",
    ]
    for name, d in output.items():
        lines.extend(_field_lines(name, d, ""))
    if contract_entry.get("output_rules"):
        lines += ["", "The whole output must satisfy: " + ", ".join(contract_entry["output_rules"])]
    return "\n".join(lines)


# ------------------------------------------------------------------ built-in library


def load_builtin_contracts() -> dict[str, Contract]:
    """The built-in contract library as pydantic contracts (builtin_contracts.yaml)."""
    from .ir import Contract

    return {name: Contract.model_validate(body) for name, body in builtin_contract_data().items()}
