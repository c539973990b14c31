"""The structured-output subset of a JSON Schema that one provider accepts.

Each provider unit declares a `SchemaSubset`; `apply()` walks a contract's full schema and
returns what that provider can be sent, plus what was moved out of it:

* A keyword outside the provider's allow-list is removed from the node and written into that
  node's description as readable text ("must be >= 0"), and listed in `moved` as {"path",
  "keyword", "value", "provider"}. `$schema` and `x-*` keys are dropped silently (metadata,
  not constraints). Every object gets `additionalProperties: false`; both APIs require it.
* `all_required` (OpenAI strict): every property is listed in `required`; an optional one
  becomes nullable.
* Free-form values (an object without properties, an untyped value, a list without items)
  cannot be expressed in strict mode. We do not invent a shape (an empty object would force
  the model to answer `{}`): the node stays free-form, its description says "any JSON
  object/value", and a moved item with keyword `strict` (value false) tells the agent to
  send the schema non-strict or to rely on the prompt alone.
* A non-strict subset (`strict=False`: Claude Code's `--json-schema`, Anthropic's forced
  tool) keeps the shape as written (`additionalProperties` of any value, free-form values)
  and only drops what its validator does not know, e.g. DRAFT07 for an Ajv draft-07 one.

Every subschema is walked (properties, items, anyOf, not, if/then/else, ...), so no `x-`
key reaches a provider at any depth. The full contract is still enforced locally, whatever
the provider accepted.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..wording import plural

COMMON_KEEP = frozenset({
    "type", "description", "enum", "const", "properties", "required",
    "additionalProperties", "items", "anyOf", "$ref", "$defs", "definitions",
})
# The draft-07 vocabulary of Ajv 8, which Claude Code compiles `--json-schema` with in strict
# mode: any other keyword (our `x-from-rules` included) is "strict mode: unknown keyword" and
# exit 1 (seen with Claude Code 2.1.332; formats are not checked, any name passes).
DRAFT07 = frozenset({
    "$id", "$schema", "$ref", "$defs", "definitions", "$comment",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "maxItems", "minItems",
    "uniqueItems", "maxProperties", "minProperties", "required", "nullable",
    "items", "additionalItems", "contains", "dependencies", "propertyNames", "properties",
    "patternProperties", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "if", "then", "else",
    "title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
    "contentMediaType", "contentEncoding",
})
# Keywords whose value is a schema, a mapping of names to schemas, or a list of schemas.
SUBSCHEMA = frozenset({"items", "additionalItems", "additionalProperties", "contains", "propertyNames",
                       "not", "if", "then", "else"})
SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependencies"})
SUBSCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "items"})

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


@dataclass(frozen=True)
class SchemaSubset:
    provider: str
    keep: frozenset[str]  # keywords the provider accepts
    formats: frozenset[str] | None = None  # string formats it accepts (None: any)
    min_items: frozenset[int] | None = None  # minItems values it accepts (None: any)
    all_required: bool = False  # strict mode: every property required, optional ones nullable
    strict: bool = True  # sent as strict structured output (see the module docstring)

    def apply(self, schema: dict) -> tuple[dict, list[dict]]:
        """The subset of `schema` for this provider, and what was moved out of it."""
        moved: list[dict] = []
        return self._subset(schema, "$", moved), moved

    def entry(self, schema: dict) -> dict:
        """The subset as plan.json stores it: {schema, moved, strict}."""
        sub, moved = self.apply(schema)
        return {"schema": sub, "moved": moved, "strict": self.strict and is_strict(moved)}

    def keeps(self, keyword: str, value: Any) -> bool:
        if keyword not in self.keep:
            return False
        if keyword == "format":
            return self.formats is None or value in self.formats
        if keyword == "minItems":
            return self.min_items is None or value in self.min_items
        if not self.strict:
            return True
        if keyword == "enum":  # Anthropic: primitives only; harmless to require it for all
            return all(not isinstance(v, (dict, list)) for v in value)
        if keyword == "additionalProperties":
            return value is False
        return True

    def _subset(self, node: Any, path: str, moved: list[dict]) -> Any:
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in node.items():
            if key == "$schema" or key.startswith("x-"):
                continue
            if not self.keeps(key, value):
                if key == "additionalProperties":
                    continue  # handled below with the object's shape
                moved.append({"path": path, "keyword": key, "value": value, "provider": self.provider})
                notes.append(_note(key, value))
                continue
            out[key] = self._inner(key, value, path, moved)
        if self.strict:
            self._strict_shape(out, path, moved)
        _append_description(out, notes)
        return out

    def _inner(self, key: str, value: Any, path: str, moved: list[dict]) -> Any:
        """A kept keyword's value, its subschemas subset in turn."""
        if key in SUBSCHEMA_LISTS and isinstance(value, list):
            return [self._subset(v, f"{path}.{key}[{i}]", moved) for i, v in enumerate(value)]
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            return {k: self._subset(v, f"{path}.{key}.{k}", moved) for k, v in value.items()}
        if key in SUBSCHEMA and isinstance(value, dict):
            return self._subset(value, f"{path}.{key}", moved)
        return copy.deepcopy(value)

    def _strict_shape(self, out: dict, path: str, moved: list[dict]) -> None:
        """Strict mode: closed objects (every property required with all_required), and a
        note for each free-form value strict mode cannot express."""
        types = out.get("type")
        types = types if isinstance(types, list) else [types] if types else []
        if "object" in types:
            if "properties" in out:
                out["additionalProperties"] = False
                if self.all_required:
                    declared = set(out.get("required", []))
                    out["properties"] = {
                        k: v if k in declared else _make_nullable(v) for k, v in out["properties"].items()
                    }
                    out["required"] = list(out["properties"])
            else:
                self._not_strict(out, path, moved, "a free-form object", "any JSON object")
        elif not types and not any(k in out for k in ("anyOf", "allOf", "$ref", "enum", "const")):
            self._not_strict(out, path, moved, "a value of any type", "any JSON value")
        if "array" in types and "items" not in out:
            self._not_strict(out, path, moved, "a list without an item type", "items of any type")

    def _not_strict(self, node: dict, path: str, moved: list[dict], what: str, text: str) -> None:
        moved.append({
            "path": path, "keyword": "strict", "value": False, "provider": self.provider,
            "reason": f"{what} cannot be expressed in strict structured output",
        })
        _append_description(node, [text])


def is_strict(moved: list[dict]) -> bool:
    """Whether a provider schema can be sent in strict mode (see the module docstring)."""
    return not any(m["keyword"] == "strict" for m in moved)


def compact(value: Any, limit: int = _MAX_NOTE) -> str:
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
        return _TEXT[keyword].format(compact(value))
    return f"{keyword}: {compact(value)}"


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
