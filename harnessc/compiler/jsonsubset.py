"""A small JSON Schema (draft-07 subset) validator for the fast paths.

`lint` must not pay for pydantic or jsonschema (about 180 ms of imports together), so it
checks contracts.yaml and harness.yaml against the JSON Schemas generated from the IR models
(shipped in harnessc/schemas/), and examples against their deliverable's schema, with this.
It knows the keywords those schemas use; `supports()` says when a schema (e.g. one with a
user's `schema:` escape hatch) needs the full jsonschema library instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

from ..wording import plural
from . import userregex

# Keywords that only annotate; everything else must be understood here.
ANNOTATIONS = {"$schema", "$id", "title", "description", "default", "examples", "$comment",
               "definitions", "$defs", "readOnly", "writeOnly", "format"}
KEYWORDS = {"$ref", "anyOf", "allOf", "type", "enum", "const", "properties", "required",
            "additionalProperties", "items", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "minLength", "maxLength", "minItems", "maxItems", "pattern",
            "uniqueItems", "minProperties", "maxProperties", "propertyNames"}


@dataclass(frozen=True)
class SchemaError:
    path: tuple  # where in the data
    keyword: str  # the failed keyword
    message: str
    schema: dict  # the (resolved) schema node that failed
    value: Any = None


_JSON_TYPE_NAMES = {
    bool: "boolean", int: "integer", float: "number", str: "string",
    list: "array", dict: "object", type(None): "null",
}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a Python value."""
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)


def short_json(value: Any, limit: int = 60) -> str:
    """A value as JSON for a message, cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_type(value: Any, t: str) -> bool:
    actual = json_type(value)
    return actual == t or (t == "number" and actual == "integer")


def supports(schema: Any) -> bool:
    """True when every keyword in `schema` is one this validator knows."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            if k.startswith("x-"):
                continue
            if k not in KEYWORDS and k not in ANNOTATIONS:
                return False
            if k in ("properties", "definitions", "$defs") and isinstance(v, dict):
                if not all(supports(s) for s in v.values()):
                    return False
            elif k in ("anyOf", "allOf") and isinstance(v, list):
                if not all(supports(s) for s in v):
                    return False
            elif k in ("items", "additionalProperties") and isinstance(v, dict):
                if not supports(v):
                    return False
            elif k == "$ref" and not (isinstance(v, str) and v.startswith("#/")):
                return False
    return True


class Validator:
    """Validates data against one root schema; `$ref`s resolve inside that root."""

    def __init__(self, root: dict, skip: frozenset = frozenset()):
        self.root = root
        self.skip = skip  # keywords to ignore (e.g. those derived from rules)

    def resolve(self, schema: dict) -> dict:
        seen = 0
        while isinstance(schema, dict) and "$ref" in schema and seen < 50:
            node: Any = self.root
            for part in schema["$ref"][2:].split("/"):
                node = node[part]
            schema = {**node, **{k: v for k, v in schema.items() if k != "$ref"}} if len(schema) > 1 else node
            seen += 1
        return schema

    def errors(self, data: Any, schema: dict | None = None, path: tuple = ()) -> list[SchemaError]:
        return list(self.iter_errors(data, self.root if schema is None else schema, path))

    def iter_errors(self, data: Any, schema: Any, path: tuple) -> Iterator[SchemaError]:
        if schema is True or schema is None:
            return
        if schema is False:
            yield SchemaError(path, "false", "no value is allowed here", {}, data)
            return
        s = self.resolve(schema)
        skip = set(self.skip) | set(s.get("x-from-rules") or ())
        if "anyOf" in s:
            yield from self._any_of(data, s, path)
        for sub in s.get("allOf") or []:
            yield from self.iter_errors(data, sub, path)
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(_is_type(data, t) for t in types):
                yield SchemaError(path, "type", f"expected {' or '.join(types)}, got {json_type(data)}", s, data)
                return
        if "enum" in s and _strict_mismatch(data, s["enum"]):
            yield SchemaError(path, "enum", "not one of the allowed values", s, data)
        if "const" in s and data != s["const"]:
            yield SchemaError(path, "const", f"must be {s['const']!r}", s, data)
        if isinstance(data, dict):
            yield from self._object(data, s, path, skip)
        elif isinstance(data, list):
            yield from self._array(data, s, path, skip)
        elif isinstance(data, str):
            if "minLength" in s and "minLength" not in skip and len(data) < s["minLength"]:
                yield SchemaError(path, "minLength", f"must be at least {plural(s['minLength'], 'character')}", s, data)
            if "maxLength" in s and "maxLength" not in skip and len(data) > s["maxLength"]:
                yield SchemaError(path, "maxLength", f"must be at most {plural(s['maxLength'], 'character')}", s, data)
            if "pattern" in s and "pattern" not in skip:
                try:
                    if not userregex.search(s["pattern"], data):
                        yield SchemaError(path, "pattern", f"does not match {s['pattern']}", s, data)
                except userregex.PatternError as e:
                    yield SchemaError(path, "pattern", f"pattern {s['pattern']!r} can't be used: {e.message}", s, data)
        elif isinstance(data, (int, float)) and not isinstance(data, bool):
            for kw, bad, word in (("minimum", lambda v, b: v < b, ">="), ("maximum", lambda v, b: v > b, "<="),
                                  ("exclusiveMinimum", lambda v, b: v <= b, ">"),
                                  ("exclusiveMaximum", lambda v, b: v >= b, "<")):
                if kw in s and kw not in skip and bad(data, s[kw]):
                    yield SchemaError(path, kw, f"must be {word} {s[kw]}", s, data)

    def _any_of(self, data: Any, s: dict, path: tuple) -> Iterator[SchemaError]:
        branches = [(b, self.errors(data, b, path)) for b in s["anyOf"]]
        if any(not errs for _, errs in branches):
            return
        # Report the branch meant for this kind of value, if exactly one is.
        kind = json_type(data)
        fitting = [errs for b, errs in branches if not any(e.keyword == "type" and e.path == path for e in errs)]
        if len(fitting) == 1:
            yield from fitting[0]
            return
        if fitting:
            yield min(fitting, key=len)[0]
            return
        wanted = []
        for b, _ in branches:
            t = self.resolve(b).get("type")
            wanted += t if isinstance(t, list) else [t] if t else []
        wanted = list(dict.fromkeys(w for w in wanted if w))
        yield SchemaError(path, "type", f"expected {' or '.join(wanted) or 'another value'}, got {kind}", s, data)

    def _object(self, data: dict, s: dict, path: tuple, skip: set) -> Iterator[SchemaError]:
        props = s.get("properties") or {}
        for name in s.get("required") or []:
            if name not in data:
                yield SchemaError(path + (name,), "required", f"missing required key '{name}'", s, None)
        extra = s.get("additionalProperties", True)
        names = s.get("propertyNames")
        for key, value in data.items():
            if names is not None and self.errors(key, names, path + (key,)):
                yield SchemaError(path + (key,), "propertyNames", f"key '{key}' is not allowed here",
                                  self.resolve(names) if isinstance(names, dict) else {}, key)
                continue
            if key in props:
                yield from self.iter_errors(value, props[key], path + (key,))
            elif extra is False:
                yield SchemaError(path + (key,), "additionalProperties", f"unknown key '{key}'", s, value)
            elif isinstance(extra, dict):
                yield from self.iter_errors(value, extra, path + (key,))
        if "minProperties" in s and "minProperties" not in skip and len(data) < s["minProperties"]:
            yield SchemaError(path, "minProperties", f"must have at least {plural(s['minProperties'], 'key')}", s, data)
        if "maxProperties" in s and "maxProperties" not in skip and len(data) > s["maxProperties"]:
            yield SchemaError(path, "maxProperties", f"must have at most {plural(s['maxProperties'], 'key')}", s, data)

    def _array(self, data: list, s: dict, path: tuple, skip: set) -> Iterator[SchemaError]:
        items = s.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(data):
                yield from self.iter_errors(v, items, path + (i,))
        if "minItems" in s and "minItems" not in skip and len(data) < s["minItems"]:
            yield SchemaError(path, "minItems", f"must have at least {plural(s['minItems'], 'item')}", s, data)
        if "maxItems" in s and "maxItems" not in skip and len(data) > s["maxItems"]:
            yield SchemaError(path, "maxItems", f"must have at most {plural(s['maxItems'], 'item')}", s, data)
        if s.get("uniqueItems") and "uniqueItems" not in skip and not all_unique(data):
            yield SchemaError(path, "uniqueItems", "items must be unique", s, data)


def json_key(value: Any) -> Any:
    """A hashable key equal for equal JSON values: 1 == 1.0, true != 1, key order ignored."""
    if isinstance(value, dict):
        return ("object", frozenset((k, json_key(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(json_key(v) for v in value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ("number", value)
    return (json_type(value), value)


def all_unique(items: list) -> bool:
    """uniqueItems in linear time (comparing every pair is quadratic in a long array)."""
    seen = set()
    for v in items:
        key = json_key(v)
        if key in seen:
            return False
        seen.add(key)
    return True


def _same(a: Any, b: Any) -> bool:
    return json_type(a) == json_type(b) and a == b


def _strict_mismatch(data: Any, allowed: list) -> bool:
    """JSON equality: 1 is not true, 1.0 equals 1."""
    return not any(_same(data, v) or (isinstance(data, (int, float)) and not isinstance(data, bool)
                                      and isinstance(v, (int, float)) and not isinstance(v, bool) and data == v)
                   for v in allowed)
