"""Checked YAML specs without pydantic: located validation against the shipped JSON Schemas,
and read-only views that give the data attribute access with the schema's defaults.

Lint works on these views; build turns the same data into the pydantic IR (compiler/ir.py),
whose generated schemas are the ones used here, so both agree on what is valid.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from ..diagnostics import Diagnostics, Fix, Span, did_you_mean, sole_match
from ..package_data import read_text
from ..vocab import DELIVERABLE_TYPES, DURATION_PATTERN, ENV_NAME_PATTERN, USD_FORMAT, is_usd_place, parse_duration
from .jsonsubset import SchemaError, Validator, json_type, short_json
from .yamlsafe import Marks

# Words people write for deliverable types, from JSON Schema, Python and TypeScript habits.
TYPE_SYNONYMS = {
    "integer": "int", "string": "str", "number": "float", "boolean": "bool", "array": "list",
    "object": "dict", "dictionary": "dict", "double": "float", "text": "str",
}
ATTRIBUTE_KEYS = {"schema_": "schema"}  # python-safe attribute -> YAML key


@lru_cache(maxsize=4)
def validator(kind: str) -> Validator:
    """The validator for 'contracts' or 'harness', from harnessc/schemas/<kind>.schema.json."""
    text = read_text("schemas", f"{kind}.schema.json")
    return Validator(json.loads(text))


class SpecView:
    """Attribute access over checked YAML data; missing keys read as the schema's defaults."""

    __slots__ = ("_data", "_schema", "_validator")

    def __init__(self, data: dict, schema: dict, validator: Validator):
        self._data = data
        self._schema = validator.resolve(schema)
        self._validator = validator

    def __getattr__(self, name: str) -> Any:
        key = ATTRIBUTE_KEYS.get(name, name)
        props = self._schema.get("properties") or {}
        if key not in props:
            raise AttributeError(name)
        prop = props[key]
        if key in self._data:
            return wrap(self._data[key], prop, self._validator)
        if "default" in prop:
            return wrap(prop["default"], prop, self._validator)
        return _empty(prop, self._validator)

    def raw(self) -> dict:
        """The data as written in YAML."""
        return self._data

    def __repr__(self) -> str:
        return f"SpecView({self._data!r})"


def _branch(schema: dict, value: Any, v: Validator) -> dict:
    """The anyOf branch meant for this kind of value."""
    s = v.resolve(schema)
    if "anyOf" not in s:
        return s
    kind = json_type(value)
    for b in s["anyOf"]:
        rb = v.resolve(b)
        t = rb.get("type")
        types = t if isinstance(t, list) else [t]
        if kind in types or (kind == "integer" and "number" in types):
            return rb
    return s


def _is_duration(schema: dict) -> bool:
    return any(b.get("pattern") == DURATION_PATTERN for b in schema.get("anyOf") or [])


def wrap(value: Any, schema: dict, v: Validator) -> Any:
    s = v.resolve(schema)
    if _is_duration(s) and isinstance(value, str):
        return parse_duration(value)
    b = _branch(s, value, v)
    if isinstance(value, dict):
        if "properties" in b:
            return SpecView(value, b, v)
        extra = b.get("additionalProperties")
        if isinstance(extra, dict):
            return {k: wrap(x, extra, v) for k, x in value.items()}
    elif isinstance(value, list) and isinstance(b.get("items"), dict):
        return [wrap(x, b["items"], v) for x in value]
    return value


def _empty(schema: dict, v: Validator) -> Any:
    """The value of an unset field whose default comes from a factory (not in the schema)."""
    s = v.resolve(schema)
    if "properties" in s:
        return SpecView({}, s, v)
    t = s.get("type")
    if t == "array":
        return []
    if t == "object":
        return {}
    return None


def raw(value: Any) -> Any:
    """Plain data from a view (or anything holding views)."""
    if isinstance(value, SpecView):
        return value.raw()
    if isinstance(value, dict):
        return {k: raw(x) for k, x in value.items()}
    if isinstance(value, list):
        return [raw(x) for x in value]
    return value


# ------------------------------------------------------------------ located validation


def check_spec(kind: str, data: Any, marks: Marks, diags: Diagnostics, what: str) -> SpecView | None:
    """Validate YAML data of contracts.yaml / harness.yaml; a view, or None with diagnostics."""
    v = validator(kind)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        diags.error("HC211", f"{what} must be a mapping at the top level", marks.value(()),
                    "start with a key, e.g. `contracts:` or `agents:`")
        return None
    errors = v.errors(data)
    for e in _deepest(errors):
        report(e, v, marks, diags)
    return None if errors else SpecView(data, v.root, v)


def bad_places(kind: str, data: Any) -> set[tuple[tuple, str]]:
    """(path, failed keyword) for each place in `data` that fails validation."""
    return {(e.path, e.keyword) for e in validator(kind).errors(data)}


def _deepest(errors: list[SchemaError]) -> list[SchemaError]:
    """One error per place; a union's branches report at several depths, the deepest is specific."""
    by_place: dict[tuple, SchemaError] = {}
    for e in errors:
        by_place.setdefault(e.path, e)
    return [e for p, e in by_place.items() if not any(o[: len(p)] == p and o != p for o in by_place)]


def _key_fix(key: Any, allowed: list[str], where: Span) -> Fix | None:
    """`lint --fix` for a misspelt key with one clear answer (applied only where the key is
    written as is, unquoted, at `where`)."""
    sure = sole_match(key, allowed) if isinstance(key, str) and key else None
    return Fix(where.path, where.line, where.col, key, sure, f"{key} -> {sure}") if sure else None


def report(e: SchemaError, v: Validator, marks: Marks, diags: Diagnostics) -> None:
    path = e.path
    key = path[-1] if path else None
    where = ".".join(str(p) for p in path) or "(top level)"
    s = e.schema
    if e.keyword == "additionalProperties":
        allowed = list((s.get("properties") or {}).keys())
        hint = did_you_mean(str(key), allowed) or (f"allowed keys here: {', '.join(sorted(allowed))}" if allowed else None)
        diags.error("HC210", f"unknown key '{key}'", marks.key(path), hint, _key_fix(key, allowed, marks.key(path)))
    elif e.keyword == "propertyNames":
        allowed = [str(c) for c in s.get("enum") or []]
        hint = did_you_mean(str(key), allowed) or (f"allowed keys here: {', '.join(allowed)}" if allowed else None)
        diags.error("HC210", f"unknown key '{key}'", marks.key(path), hint, _key_fix(key, allowed, marks.key(path)))
    elif e.keyword == "required":
        parent = path[:-1]
        diags.error("HC215", f"missing required key '{key}'", marks.key(parent) if parent else marks.value(()),
                    f"add `{key}:` here")
    elif key == "min_passed" and len(path) > 2:  # a contract's or an accept entry's
        diags.error("HC425", f"{where}: {short_json(e.value, 40)} is not a number of passing tests", marks.value(path),
                    "expected a whole number of passing tests, like 5, or base (no fewer than pass at the "
                    "task's base commit)")
    elif e.keyword == "enum" and key in ("type", "items") and isinstance(e.value, str) \
            and s.get("enum") and set(s["enum"]) == set(DELIVERABLE_TYPES):
        word = e.value
        hint = (f"did you mean '{TYPE_SYNONYMS[word.lower()]}'?" if word.lower() in TYPE_SYNONYMS
                else did_you_mean(word, DELIVERABLE_TYPES)) or f"use one of: {', '.join(DELIVERABLE_TYPES)}"
        diags.error("HC212", f"unknown deliverable type '{word}'", marks.value(path), hint)
    elif e.keyword == "enum":
        choices = [str(c) for c in s["enum"]]
        hint = (did_you_mean(str(e.value), choices) if isinstance(e.value, str) else None) or \
            f"use one of: {', '.join(choices)}"
        diags.error("HC211", f"{where}: '{e.value}' is not allowed for {key}", marks.value(path), hint)
    elif e.keyword == "pattern" and s.get("pattern") == DURATION_PATTERN:
        diags.error("HC211", f"{where}: '{e.value}' is not a duration", marks.value(path),
                    "use a number with a unit, like 45s, 30m, 4h, 1d or 1h30m")
    elif e.keyword == "pattern" and s.get("pattern") == ENV_NAME_PATTERN:
        diags.error("HC211", f"{where}: '{e.value}' is not an environment variable name", marks.value(path),
                    "list names only (letters, digits, _), one per variable; set values with env:")
    else:
        value = e.value
        shown = f" ({short_json(value, 40)})" if value is not None and not isinstance(value, (dict, list)) else ""
        diags.error("HC211", f"{where}: {e.message}{shown}", marks.value(path), _value_hint(e, v))


_TYPE_WORDS = {
    "integer": "a whole number, like 3", "number": "a number, like 2.5", "boolean": "true or false",
    "string": "text", "array": "a list, like [a, b]", "object": "indented `key: value` lines",
}
_BOUND_WORDS = {"minimum": "{} or more", "exclusiveMinimum": "more than {}",
                "maximum": "at most {}", "exclusiveMaximum": "less than {}"}


def _value_hint(e: SchemaError, v: Validator) -> str | None:
    """What to write instead of a value of the wrong type or out of range (HC211)."""
    value = e.value
    if e.keyword in _BOUND_WORDS:
        bound = e.schema[e.keyword]
        return "use " + _BOUND_WORDS[e.keyword].format(int(bound) if float(bound).is_integer() else bound)
    if e.keyword != "type":
        return None
    if is_usd_place(e.path):
        return "use " + USD_FORMAT
    choices = _choices(e.schema, v)
    if choices:  # `git: true`, `on_failure: 1`: the words, not the type ("use text")
        return f"use one of: {', '.join(choices)}"
    wanted = [t for t in _wanted_types(e.schema, v) if t != "null"]
    if "array" in wanted and isinstance(value, str):
        items = value.split()
        return f"write a list: [{', '.join(items)}]" if items else "write a list, like [a, b]"
    if wanted and wanted[0] in ("integer", "number") and isinstance(value, str) and _is_number(value.strip()):
        return f"write the number without quotes: {value.strip()}"
    if wanted and wanted[0] in ("integer", "number") and isinstance(value, str) and (m := _SCALED.match(value)):
        return f"write the number in full: {round(float(m[1]) * _SCALES[m[2].lower()])}"
    return ("use " + " or ".join(_TYPE_WORDS.get(t, t) for t in wanted)) if wanted else None


_SCALED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM])\s*$")  # 128k, 1M: a count written short
_SCALES = {"k": 1_000, "m": 1_000_000}


def _choices(schema: dict, v: Validator) -> list[str]:
    """The allowed words of an enum (null aside), or [] when the value is not an enum."""
    s = v.resolve(schema)
    out: list[str] = []
    for branch in s.get("anyOf") or [s]:
        out += [str(c) for c in v.resolve(branch).get("enum") or () if c is not None]
    return list(dict.fromkeys(out))


def _wanted_types(schema: dict, v: Validator) -> list[str]:
    s = v.resolve(schema)
    out: list[str] = []
    for branch in s.get("anyOf") or [s]:
        t = v.resolve(branch).get("type")
        out += t if isinstance(t, list) else [t] if t else []
    return list(dict.fromkeys(out))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.lower() not in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity")
