"""Validate YAML data against a pydantic model, with errors mapped back to YAML positions."""

from __future__ import annotations

import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..diagnostics import Diagnostics, did_you_mean
from .ir import DELIVERABLE_TYPES
from .yamlsafe import Marks

M = TypeVar("M", bound=BaseModel)

# Words people write for deliverable types, from JSON Schema, Python and TypeScript habits.
TYPE_SYNONYMS = {
    "integer": "int", "string": "str", "number": "float", "boolean": "bool", "array": "list",
    "object": "dict", "dictionary": "dict", "double": "float", "text": "str",
}


def validate_model(model: type[M], data: Any, marks: Marks, diags: Diagnostics, what: str) -> M | None:
    """`model.model_validate(data)`, or None with one located diagnostic per bad place."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        diags.error("HC211", f"{what} must be a mapping at the top level", marks.value(()),
                    "start with a key, e.g. `contracts:` or `agents:`")
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        _report(model, data, exc, marks, diags)
        return None


def _clean_loc(data: Any, loc: tuple, missing: bool) -> tuple:
    """Keep only the parts of a pydantic loc that index into the data (drop union branch tags)."""
    out, node = [], data
    for part in loc:
        if isinstance(node, dict) and part in node:
            out.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            out.append(part)
            node = node[part]
        elif missing and part is loc[-1] and isinstance(node, dict):
            out.append(part)  # the missing key itself, so the message can name it
    return tuple(out)


def _allowed_keys(model: type[BaseModel], path: tuple) -> list[str]:
    """The field names (and aliases) allowed at `path` of `model`."""
    ann: Any = model
    for part in path:
        ann = _descend(ann, part)
        if ann is None:
            return []
    ann = _unwrap_model(ann)
    if ann is None:
        return []
    return [f.alias or name for name, f in ann.model_fields.items()]


def _unwrap_model(ann: Any) -> type[BaseModel] | None:
    """The model class of `Model` or `Model | None` (not of containers holding models)."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    if typing.get_origin(ann) in (dict, list):
        return None
    for arg in typing.get_args(ann):
        m = _unwrap_model(arg)
        if m is not None:
            return m
    return None


def _descend(ann: Any, part: Any) -> Any:
    m = _unwrap_model(ann) if not (typing.get_origin(ann) in (dict, list)) else None
    if m is not None and isinstance(part, str):
        for name, f in m.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
        return None
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is dict:
        return args[1]
    if origin is list:
        return args[0]
    for arg in args:  # Optional / Union: first branch that can descend
        if typing.get_origin(arg) in (dict, list) or _unwrap_model(arg) is not None:
            return _descend(arg, part)
    return None


_PREFERENCE = {"extra_forbidden": 0, "missing": 1, "enum": 2, "literal_error": 2}


def _report(model, data, exc: ValidationError, marks: Marks, diags: Diagnostics) -> None:
    by_place: dict[tuple, dict] = {}
    for err in exc.errors(include_url=False):
        loc = _clean_loc(data, err["loc"], err["type"] == "missing")
        best = by_place.get(loc)
        if best is None or _PREFERENCE.get(err["type"], 9) < _PREFERENCE.get(best["type"], 9):
            by_place[loc] = err
    # A union reports each branch; the deepest place is the specific one.
    deepest = [loc for loc in by_place if not any(o[: len(loc)] == loc and o != loc for o in by_place)]
    for loc in deepest:
        err = by_place[loc]
        kind, where = err["type"], ".".join(str(p) for p in loc) or "(top level)"
        key = loc[-1] if loc else None
        if kind == "extra_forbidden":
            allowed = _allowed_keys(model, loc[:-1])
            hint = did_you_mean(str(key), allowed) or (
                f"allowed keys here: {', '.join(sorted(allowed))}" if allowed else None
            )
            diags.error("HC210", f"unknown key '{key}'", marks.key(loc), hint)
        elif kind == "missing":
            diags.error("HC215", f"missing required key '{key}'", marks.key(loc[:-1]) if loc[:-1] else marks.value(()),
                        f"add `{key}:` here")
        elif key in ("type", "items") and isinstance(err.get("input"), str) and err["input"] not in DELIVERABLE_TYPES:
            word = err["input"]
            hint = (f"did you mean '{TYPE_SYNONYMS[word.lower()]}'?" if word.lower() in TYPE_SYNONYMS
                    else did_you_mean(word, DELIVERABLE_TYPES)) or f"use one of: {', '.join(DELIVERABLE_TYPES)}"
            diags.error("HC212", f"unknown deliverable type '{word}'", marks.value(loc), hint)
        else:
            msg = err["msg"]
            hint = None
            if kind in ("enum", "literal_error"):
                expected = (err.get("ctx") or {}).get("expected")
                word = err.get("input")
                choices = [c.strip(" '") for c in str(expected).replace(" or ", ", ").split(",")] if expected else []
                hint = (did_you_mean(str(word), choices) if isinstance(word, str) else None) or (
                    f"use one of: {expected}" if expected else None)
                msg = f"'{word}' is not allowed for {key}"
            elif msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            diags.error("HC211", f"{where}: {msg}", marks.value(loc), hint)
