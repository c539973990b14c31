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

Provider subset decisions (from the OpenAI "supported schemas" and Anthropic "JSON Schema
limitations" pages of their structured-output docs):

* Both: an allow-list per provider. A keyword outside it is removed from the node and
  written into that node's description as readable text ("must be >= 0"), and listed in
  ``moved`` as {"path", "keyword", "value", "provider"}. ``$schema`` and ``x-*`` keys are
  dropped silently (metadata, not constraints). Every object gets
  ``additionalProperties: false``; both providers require it.
* OpenAI strict: keeps type, description, enum, const, properties, required,
  additionalProperties, items, anyOf, $ref/$defs/definitions. Every property is listed in
  ``required``; an optional one becomes nullable (``type: [T, "null"]``, null added to an
  enum, or ``anyOf: [..., {"type": "null"}]``). The validator treats null in an optional
  field as absent, so the nullable answer validates.
* Anthropic: also keeps allOf, ``format`` for the formats it lists (date-time, date, time,
  duration, email, hostname, uri, ipv4, ipv6, uuid) and ``minItems`` of 0 or 1. Optional
  properties stay optional. ``pattern`` is moved too: Anthropic supports only a regex
  subset and a rejected request is worse than a rule checked locally.
* Free-form values (a dict without ``fields``, ``any``, a list without ``items``) cannot be
  expressed by either provider in strict mode. We do not invent a shape (an empty object
  would force the model to answer ``{}``): the node stays free-form, its description says
  "any JSON object/value", and a moved item with keyword ``strict`` (value false) tells
  the agent adapter to send the schema non-strict (OpenAI ``strict: false``) or to rely on
  the prompt alone (Anthropic). The plan entry records this as ``"strict": false``. All
  built-in contracts are fully structured, so they are strict for both providers.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from typing import TYPE_CHECKING, Any, Iterable

from ..wording import plural

if TYPE_CHECKING:  # the pydantic IR is imported only where it is built (lint stays light)
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

_COMMON_KEEP = {
    "type", "description", "enum", "const", "properties", "required",
    "additionalProperties", "items", "anyOf", "$ref", "$defs", "definitions",
}
PROVIDER_KEEP = {
    "openai": _COMMON_KEEP,
    "anthropic": _COMMON_KEEP | {"allOf", "format", "minItems"},
}
ANTHROPIC_FORMATS = {
    "date-time", "date", "time", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid",
}
PROVIDERS = ("openai", "anthropic")

_TEXT = {
    "minimum": "must be >= {}",
    "maximum": "must be <= {}",
    "exclusiveMinimum": "must be > {}",
    "exclusiveMaximum": "must be < {}",
    "multipleOf": "must be a multiple of {}",
    "minLength": "at least {}",
    "maxLength": "at most {}",
    "pattern": "must match the regular expression {}",
    "format": "format: {}",
    "minItems": "at least {}",
    "maxItems": "at most {}",
    "minProperties": "at least {}",
    "maxProperties": "at most {}",
    "default": "default: {}",
    "examples": "example: {}",
}
_COUNTED = {"minLength": "character", "maxLength": "character", "minItems": "item", "maxItems": "item",
            "minProperties": "key", "maxProperties": "key"}
_MAX_NOTE = 200


def _compact(value: Any, limit: int = _MAX_NOTE) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _note(keyword: str, value: Any) -> str:
    if keyword == "uniqueItems":
        return "items must be unique" if value else ""
    if keyword == "examples" and isinstance(value, list) and len(value) == 1:
        value = value[0]
    if keyword in ("pattern", "format") and isinstance(value, str):
        return _TEXT[keyword].format(value)
    if keyword in _COUNTED and isinstance(value, int):
        return _TEXT[keyword].format(plural(value, _COUNTED[keyword]))
    if keyword in _TEXT:
        return _TEXT[keyword].format(_compact(value))
    return f"{keyword}: {_compact(value)}"


def _keeps(provider: str, keyword: str, value: Any) -> bool:
    if keyword not in PROVIDER_KEEP[provider]:
        return False
    if keyword == "format":
        return value in ANTHROPIC_FORMATS
    if keyword == "minItems":
        return value in (0, 1)
    if keyword == "enum":  # Anthropic: primitives only; harmless to require it for both
        return all(not isinstance(v, (dict, list)) for v in value)
    if keyword == "additionalProperties":
        return value is False
    return True


def _append_description(node: dict, notes: Iterable[str]) -> None:
    notes = [n for n in notes if n]
    if not notes:
        return
    text = "; ".join(notes)
    desc = node.get("description")
    node["description"] = f"{desc} ({text})" if desc else text[0].upper() + text[1:]


def _make_nullable(node: dict) -> dict:
    """OpenAI strict: an optional property is required but may be null."""
    node = dict(node)
    typ = node.get("type")
    if isinstance(typ, str):
        node["type"] = [typ, "null"]
    elif isinstance(typ, list):
        if "null" not in typ:
            node["type"] = typ + ["null"]
    elif "anyOf" in node:
        node["anyOf"] = list(node["anyOf"]) + [{"type": "null"}]
    else:
        return node  # free-form: already accepts null
    if "enum" in node and None not in node["enum"]:
        node["enum"] = list(node["enum"]) + [None]
    return node


def _subset(node: Any, path: str, provider: str, moved: list[dict]) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key == "$schema" or key.startswith("x-"):
            continue
        if not _keeps(provider, key, value):
            if key == "additionalProperties":
                continue  # handled below with the object's shape
            moved.append({"path": path, "keyword": key, "value": value, "provider": provider})
            notes.append(_note(key, value))
            continue
        if key == "properties":
            out[key] = {k: _subset(v, f"{path}.properties.{k}", provider, moved) for k, v in value.items()}
        elif key == "items":
            out[key] = _subset(value, f"{path}.items", provider, moved)
        elif key in ("anyOf", "allOf"):
            out[key] = [_subset(v, f"{path}.{key}[{i}]", provider, moved) for i, v in enumerate(value)]
        elif key in ("$defs", "definitions"):
            out[key] = {k: _subset(v, f"{path}.{key}.{k}", provider, moved) for k, v in value.items()}
        else:
            out[key] = copy.deepcopy(value)

    types = out.get("type")
    types = types if isinstance(types, list) else [types] if types else []
    if "object" in types:
        if "properties" in out:
            out["additionalProperties"] = False
            if provider == "openai":
                declared = set(out.get("required", []))
                out["properties"] = {
                    k: v if k in declared else _make_nullable(v) for k, v in out["properties"].items()
                }
                out["required"] = list(out["properties"])
        else:
            _not_strict(out, path, provider, moved, "a free-form object", "any JSON object")
    elif not types and not any(k in out for k in ("anyOf", "allOf", "$ref", "enum", "const")):
        _not_strict(out, path, provider, moved, "a value of any type", "any JSON value")
    if "array" in types and "items" not in out:
        _not_strict(out, path, provider, moved, "a list without an item type", "items of any type")
    _append_description(out, notes)
    return out


def _not_strict(node: dict, path: str, provider: str, moved: list[dict], what: str, text: str) -> None:
    moved.append({
        "path": path, "keyword": "strict", "value": False, "provider": provider,
        "reason": f"{what} cannot be expressed in strict structured output",
    })
    _append_description(node, [text])


def provider_schema(schema: dict, provider: str) -> tuple[dict, list[dict]]:
    """The structured-output subset of ``schema`` for ``provider``, and what was moved."""
    if provider not in PROVIDER_KEEP:
        raise ValueError(f"unknown provider {provider!r}: expected one of {', '.join(PROVIDERS)}")
    moved: list[dict] = []
    return _subset(schema, "$", provider, moved), moved


def is_strict(moved: list[dict]) -> bool:
    """Whether a provider schema can be sent in strict mode (see the module docstring)."""
    return not any(m["keyword"] == "strict" for m in moved)


# ------------------------------------------------------------------ plan.json entry


def _accept_entry(i: int, cmd: str | AcceptCommand) -> dict:
    if isinstance(cmd, str):
        from .ir import AcceptCommand

        cmd = AcceptCommand(run=cmd)
    argv = shlex.split(cmd.run) if isinstance(cmd.run, str) else list(cmd.run)
    return {"id": cmd.id or f"accept-{i}", "argv": argv, "timeout": cmd.timeout}


def contract_plan_entry(
    name: str,
    contract: Contract,
    default_max_retries: int = 2,
    default_on_failure: str = "retry",
) -> dict:
    """The contract as plain JSON for plan.json (schemas, provider subsets, accept, limits)."""
    entry: dict[str, Any] = {
        "name": name,
        "description": contract.description,
        "version": contract.version,
        "json_schema": None,
        "provider_schemas": None,
        "output": None,
        "output_rules": list(contract.output_rules),
        "accept": [_accept_entry(i, c) for i, c in enumerate(contract.accept, 1)],
        "on_failure": contract.on_failure or default_on_failure,
        "max_retries": contract.max_retries if contract.max_retries is not None else default_max_retries,
        "constraints": (
            contract.constraints.model_dump(mode="json", exclude_none=True) if contract.constraints else None
        ),
    }
    if contract.output is not None:
        schema = output_json_schema(contract.output)
        entry["json_schema"] = schema
        entry["output"] = {k: _dump(d) for k, d in contract.output.items()}
        entry["provider_schemas"] = {}
        for provider in PROVIDERS:
            sub, moved = provider_schema(schema, provider)
            entry["provider_schemas"][provider] = {"schema": sub, "moved": moved, "strict": is_strict(moved)}
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
        lines.append(f"{sub}- Allowed values: {', '.join(_compact(v) for v in d['enum'])}")
    if d.get("rules"):
        lines.append(f"{sub}- Rules: {', '.join(d['rules'])}")
    if "example" in d:
        lines.append(f"{sub}- Example: {_compact(d['example'], 400)}")
    elif "default" in d:
        lines.append(f"{sub}- Default: {_compact(d['default'], 400)}")
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
            lines.append(f"{sub}  - Allowed values: {', '.join(_compact(v) for v in items['enum'])}")
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
    from .load import builtin_contract_data

    return {name: Contract.model_validate(body) for name, body in builtin_contract_data().items()}
