"""Local validation of agent output against a plan.json contract entry.

Works on the plain-JSON contract entries of contract_schema.contract_plan_entry, so the
runtime needs no IR. Validation is jsonschema (draft-07, format checking off) plus the
contract's rules, evaluated by harnessc.compiler.rules (imported lazily).

Errors are dicts {"path", "field", "kind", "message", "rule"}; kind is one of
missing | type | enum | rule | schema. A null in an optional field counts as absent:
OpenAI strict mode answers optional fields with null (see contract_schema).
"""

from __future__ import annotations

import copy
import json
import math
import re
import time
from typing import Any, Iterator

from ..wording import filled_text  # noqa: F401  (re-exported: the runtime's doorway names it)
from . import userregex
from .jsonsubset import Validator, all_unique, json_type, short_json, supports

# ------------------------------------------------------------------ paths

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PathParts = tuple  # of str (keys) and int (list indexes)


def json_path(parts: PathParts) -> str:
    """('a', 0, 'b c') -> $.a[0]["b c"]"""
    out = "$"
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += f".{p}"
        else:
            out += f"[{json.dumps(p)}]"
    return out


def _field(parts: PathParts) -> str | None:
    for p in reversed(parts):
        if isinstance(p, str):
            return p
    return None


def _sort_key(parts: PathParts) -> tuple:
    return tuple((1, p, "") if isinstance(p, int) else (0, 0, p) for p in parts)


def _error(parts: PathParts, kind: str, message: str, rule: str | None = None, field: Any = ...) -> dict:
    return {
        "path": json_path(parts),
        "field": _field(parts) if field is ... else field,
        "kind": kind,
        "message": message,
        "rule": rule,
        "_key": _sort_key(parts),
    }


# ------------------------------------------------------------------ schema errors


_VALIDATOR_CLASS = None


def _extra_keys(schema: dict, instance: dict) -> list:
    """The keys of `instance` neither `properties` nor `patternProperties` of `schema` cover."""
    known = schema.get("properties") or {}
    # a pattern RE2 refuses is reported by patternProperties itself
    patterns = [p for p in schema.get("patternProperties") or {} if not userregex.check(p)]
    return [k for k in instance if k not in known and not any(userregex.search(p, k) for p in patterns)]


def _validator_class():
    """Draft-07 jsonschema whose regexes run on RE2 and whose uniqueItems is linear.

    jsonschema's own `pattern`, `patternProperties` and `additionalProperties` (which
    matches property names against patternProperties) use Python's backtracking `re`, and
    its uniqueItems compares every pair of unsortable items. Format checking stays off.
    """
    global _VALIDATOR_CLASS
    if _VALIDATOR_CLASS is None:
        from jsonschema import Draft7Validator, ValidationError, validators  # imported when an output is validated

        def refused(pattern: str) -> ValidationError | None:
            why = userregex.check(pattern)
            return ValidationError(f"pattern {pattern!r} can't be used: {why.message}") if why else None

        def pattern(validator, pattern, instance, schema):
            if validator.is_type(instance, "string"):
                error = refused(pattern)
                if error or not userregex.search(pattern, instance):
                    yield error or ValidationError(f"{short_json(instance)} does not match {pattern!r}")

        def pattern_properties(validator, patterns, instance, schema):
            if validator.is_type(instance, "object"):
                for p, subschema in patterns.items():
                    error = refused(p)
                    if error:
                        yield error
                        continue
                    for k, v in instance.items():
                        if userregex.search(p, k):
                            yield from validator.descend(v, subschema, path=k, schema_path=p)

        original_additional = Draft7Validator.VALIDATORS["additionalProperties"]

        def additional_properties(validator, extra, instance, schema):
            patterns = schema.get("patternProperties")
            if not patterns or not validator.is_type(instance, "object"):
                yield from original_additional(validator, extra, instance, schema)
                return
            extras = _extra_keys(schema, instance)
            if validator.is_type(extra, "object"):
                for k in extras:
                    yield from validator.descend(instance[k], extra, path=k)
            elif not extra and extras:
                names = ", ".join(repr(k) for k in sorted(extras))
                yield ValidationError(f"{names} match none of the patterns {', '.join(map(repr, patterns))}")

        def unique_items(validator, unique, instance, schema):
            if unique and validator.is_type(instance, "array") and not all_unique(instance):
                yield ValidationError(f"{short_json(instance)} has non-unique elements")

        _VALIDATOR_CLASS = validators.extend(Draft7Validator, {
            "pattern": pattern, "patternProperties": pattern_properties,
            "additionalProperties": additional_properties, "uniqueItems": unique_items,
        })
    return _VALIDATOR_CLASS


def _no_retrieval(uri: str):
    """jsonschema reads a $ref it cannot resolve locally from its URI (http://, file://): never."""
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy does not read


def _schema_errors(schema: dict, data: Any, base: PathParts = ()) -> list[dict]:
    from referencing import Registry

    errors: list[dict] = []
    registry = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]  # an attrs class mypy does not read
    for e in _validator_class()(schema, registry=registry).iter_errors(data):
        # Keywords derived from rules are reported by the rule itself, with its text.
        if isinstance(e.schema, dict) and e.validator in (e.schema.get("x-from-rules") or ()):
            continue
        parts = base + tuple(e.absolute_path)
        path = json_path(parts)
        if e.validator == "required":
            present = e.instance if isinstance(e.instance, dict) else {}
            for name in e.validator_value:
                if name not in present:
                    errors.append(_error(parts + (name,), "missing",
                                         f"{json_path(parts + (name,))}: required field is missing"))
        elif e.validator == "type":
            want = e.validator_value if isinstance(e.validator_value, str) else " or ".join(e.validator_value)
            errors.append(_error(parts, "type",
                                 f"{path}: expected {want}, got {json_type(e.instance)} {short_json(e.instance)}"))
        elif e.validator == "enum":
            allowed = ", ".join(short_json(v, 30) for v in e.validator_value)
            errors.append(_error(parts, "enum", f"{path}: {short_json(e.instance)} is not one of {allowed}"))
        elif e.validator == "additionalProperties":
            extra = sorted(_extra_keys(e.schema, e.instance)) if isinstance(e.instance, dict) else []
            for k in extra or [None]:
                where = parts + (k,) if k is not None else parts
                errors.append(_error(where, "schema", f"{json_path(where)}: unexpected field"))
        else:
            errors.append(_error(parts, "schema", f"{path}: {e.message}"))
    # required errors can repeat (one per missing key, each naming all); keep one of each
    unique: dict[tuple, dict] = {}
    for err in errors:
        unique.setdefault((err["path"], err["kind"], err["message"]), err)
    return list(unique.values())


# ------------------------------------------------------------------ deadline


MAX_VALIDATION_STEPS = 20_000_000  # rule steps (see rules.MAX_STEPS) of one output, all rules together


class OutOfTime(Exception):
    """Validation was stopped before it finished: out of time or steps, or cancelled."""


class Deadline:
    """The limit shared by all the rule evaluations of one validation, checked as rules run
    (a rule on every item of a 100,000-item list, each near its own budget, would run for
    hours): wall-clock seconds when given (at run time: the task's max_time), else
    MAX_VALIDATION_STEPS (lint, validate: the same answer on every machine). A worker
    thread can't be killed: `cancel()` (from the event loop) makes the next check raise.
    """

    def __init__(self, seconds: float | None = None):
        self.at = None if seconds is None else time.monotonic() + seconds
        self.cancelled = False
        self.steps_left = MAX_VALIDATION_STEPS if seconds is None else None

    def cancel(self) -> None:
        self.cancelled = True

    def spend(self, steps: int) -> None:
        if self.steps_left is not None:
            self.steps_left -= steps

    def check(self, steps: int = 0) -> None:
        self.spend(steps)
        if self.cancelled:
            raise OutOfTime("verification was cancelled")
        if self.at is not None and time.monotonic() > self.at:
            raise OutOfTime("verification did not finish within the task's max_time")
        if self.steps_left is not None and self.steps_left < 0:
            raise OutOfTime(f"the rules are too costly for this output together (more than "
                            f"{MAX_VALIDATION_STEPS:,} steps; see 'Rule cost' in docs/spec-reference.md)")


# ------------------------------------------------------------------ rules

_RULE_CACHE: dict[str, Any] = {}


def _parsed(rule: str):
    """Parse once per process; RuleError propagates."""
    if rule not in _RULE_CACHE:
        from .rules import parse_rule

        _RULE_CACHE[rule] = parse_rule(rule)
    return _RULE_CACHE[rule]


def _run_rule(rule: str, parts: PathParts, deadline: Deadline | None = None, **scope: Any) -> dict | None:
    """None when the rule holds, else a rule error. OutOfTime propagates."""
    from .rules import RuleError, RuleEvalError, evaluate

    where = json_path(parts)
    subject = short_json(scope["value"]) if "value" in scope else "the output"
    try:
        ok = evaluate(_parsed(rule), **scope, deadline=deadline)
    except RuleEvalError as e:
        return _error(parts, "rule", f"{where}: rule '{rule}' could not be evaluated: {_why(e)}", rule)
    except RuleError as e:
        return _error(parts, "rule", f"{where}: rule '{rule}' is invalid: {_why(e)}", rule)
    if ok:
        return None
    return _error(parts, "rule", f"{where}: {subject} breaks rule '{rule}'", rule)


def _why(e: Exception) -> str:
    return getattr(e, "message", None) or str(e)


def _rule_targets(d: dict, value: Any, parts: PathParts) -> Iterator[tuple[dict, Any, PathParts]]:
    """Every (deliverable, value, path) under one deliverable's value, itself first."""
    yield d, value, parts
    if d.get("type") == "dict" and d.get("fields") and isinstance(value, dict):
        for name, sub in d["fields"].items():
            if value.get(name) is not None:
                yield from _rule_targets(sub, value[name], parts + (name,))
    items = d.get("items")
    if d.get("type") == "list" and isinstance(items, dict) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _rule_targets(items, item, parts + (i,))


def _rule_errors(output: dict[str, dict], data: dict, type_failed: set, base: PathParts = (),
                 deadline: Deadline | None = None) -> list[dict]:
    errors = []
    for name, d in output.items():
        if data.get(name) is None:
            continue
        for sub, value, parts in _rule_targets(d, data[name], base + (name,)):
            # A value whose type (or a parent's) is wrong is reported once, as a type error.
            if any(parts[:n] in type_failed for n in range(len(base) + 1, len(parts) + 1)):
                continue
            for rule in sub.get("rules") or []:
                err = _run_rule(rule, parts, deadline, value=value)
                if err:
                    errors.append(err)
    return errors


# ------------------------------------------------------------------ public API


def drop_null_optionals(output: dict[str, dict] | None, data: Any) -> Any:
    """A copy of ``data`` without null values in optional fields (recursively)."""
    if not output or not isinstance(data, dict):
        return data
    result = {}
    for key, value in data.items():
        d = output.get(key)
        if d is None:
            result[key] = value
            continue
        if value is None and not d.get("required", True):
            continue
        if d.get("type") == "dict" and d.get("fields"):
            value = drop_null_optionals(d["fields"], value)
        elif d.get("type") == "list" and isinstance(d.get("items"), dict) and isinstance(value, list):
            items = d["items"]
            if items.get("type") == "dict" and items.get("fields"):
                value = [drop_null_optionals(items["fields"], v) for v in value]
        result[key] = value
    return result


def _finish(errors: list[dict]) -> list[dict]:
    errors.sort(key=lambda e: (e["_key"], e["kind"], e["message"]))
    for e in errors:
        del e["_key"]
    return errors


def validate_output(contract: dict, data: Any, deadline: Deadline | None = None) -> list[dict]:
    """All problems of ``data`` under a plan.json contract entry; [] when valid.

    Raises OutOfTime when the deadline passes or is cancelled, or when the rules together
    take more than MAX_VALIDATION_STEPS.
    """
    deadline = deadline or Deadline()
    output = contract.get("output")
    schema = contract.get("json_schema")
    if output is None and schema is None:
        return []
    if not isinstance(data, dict):
        return _finish([_error((), "type", f"$: the output must be a JSON object, got {json_type(data)}", field=None)])
    data = drop_null_optionals(output, data)
    errors = _schema_errors(schema, data) if schema else []
    deadline.check()
    type_failed = {_path_parts(e) for e in errors if e["kind"] == "type"}
    if output:
        errors += _rule_errors(output, data, type_failed, deadline=deadline)
    if not errors:  # whole-output rules assume a well-formed output
        for rule in contract.get("output_rules") or []:
            err = _run_rule(rule, (), deadline, output=data)
            if err:
                err["field"] = None
                errors.append(err)
    return _finish(errors)


def _path_parts(err: dict) -> tuple:
    # _key holds the parts in sortable form: (0, 0, key) or (1, index, "")
    return tuple(p[2] if p[0] == 0 else p[1] for p in err["_key"])


def _subset_errors(schema: dict, data: Any) -> list[dict]:
    """_schema_errors without jsonschema, for schemas the small validator covers (lint speed)."""
    errors = []
    for e in Validator(schema).iter_errors(data, schema, ()):
        kind = {"required": "missing", "type": "type", "enum": "enum"}.get(e.keyword, "schema")
        if e.keyword == "type":
            message = f"{json_path(e.path)}: {e.message} {short_json(e.value)}"
        elif e.keyword == "required":
            message = f"{json_path(e.path)}: required field is missing"
        elif e.keyword == "enum":
            allowed = ", ".join(short_json(v, 30) for v in e.schema["enum"])
            message = f"{json_path(e.path)}: {short_json(e.value)} is not one of {allowed}"
        elif e.keyword == "additionalProperties":
            message = f"{json_path(e.path)}: unexpected field"
        else:
            message = f"{json_path(e.path)}: {short_json(e.value)} {e.message}"
        errors.append(_error(e.path, kind, message))
    return errors


def check_example(deliverable: Any, value: Any) -> list[str]:
    """Problems of an example/default against its own deliverable (type, enum, rules)."""
    from .contract_schema import _dump

    if value is None:
        return []
    return [e["message"] for e in deliverable_errors(_dump(deliverable), value)]


def deliverable_errors(d: dict, value: Any) -> list[dict]:
    """All problems of ``value`` under one deliverable (plain dict); paths start at its "$"."""
    from .contract_schema import deliverable_schema

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **deliverable_schema(d)}
    errors = _subset_errors(schema, value) if supports(schema) else _schema_errors(schema, value)
    type_failed = {_path_parts(e) for e in errors if e["kind"] == "type"}
    deadline = Deadline()
    if () not in type_failed:
        try:
            for sub, v, parts in _rule_targets(d, value, ()):
                if any(parts[:n] in type_failed for n in range(1, len(parts) + 1)):
                    continue
                for rule in sub.get("rules") or []:
                    err = _run_rule(rule, parts, deadline, value=v)
                    if err:
                        errors.append(err)
        except OutOfTime as e:
            errors.append(_error((), "rule", f"$: {e}"))
    return _finish(errors)


# ------------------------------------------------------------------ extracting JSON

class NotJSON(ValueError):
    """Text that strict JSON refuses: NaN/Infinity, numbers out of range, nesting too deep."""


def _refuse_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJSON(f"number {text[:20]}{'...' * (len(text) > 20)} is out of range")
    return value


# Outputs are JSON as RFC 8259 has it: Python's module also reads NaN and Infinity, and turns
# 1e400 into inf; neither survives a round trip through state.db or a JSON Schema check.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def loads_json(text: str) -> Any:
    """Strict json.loads: JSONDecodeError for bad syntax, NotJSON for what JSON cannot hold."""
    space = json.decoder.WHITESPACE  # type: ignore[attr-defined]  # not in typeshed
    value, end = raw_decode_json(text, space.match(text, 0).end())
    end = space.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def raw_decode_json(text: str, pos: int = 0) -> tuple[Any, int]:
    """Strict JSONDecoder.raw_decode (see loads_json)."""
    try:
        return _DECODER.raw_decode(text, pos)
    except RecursionError:
        raise NotJSON("nested too deeply") from None
    except (json.JSONDecodeError, NotJSON):
        raise
    except ValueError:  # Python's int limit: more than 4,300 digits
        raise NotJSON("a number has more than 4,300 digits") from None


MAX_DECODE_FAILURES = 200  # '{' positions tried that do not parse: bounds work on garbage
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> tuple[Any | None, str | None]:
    """The output object of an agent response, or (None, why not).

    A ```json fenced block wins (the last one that parses to an object: agents correct
    themselves); else the last top-level {...} object in the text that parses. Work is
    bounded: at most MAX_DECODE_FAILURES failed parse attempts.
    """
    if not isinstance(text, str):
        return None, "no JSON object found in the response: it is not text"
    fenced = [m for m in _FENCE.finditer(text) if m.group(1).lower() in ("json", "")]
    for m in reversed(fenced):
        body = m.group(2).strip()
        try:
            value = loads_json(body)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value, None

    found: list[dict] = []
    failures = 0
    first_error = None
    pos = text.find("{")
    while pos != -1 and failures < MAX_DECODE_FAILURES:
        try:
            value, end = raw_decode_json(text, pos)
        except ValueError as e:  # too deeply nested or NaN is not an answer either
            failures += 1
            if first_error is None:
                first_error = f"{e.msg} (offset {e.pos})" if isinstance(e, json.JSONDecodeError) else str(e)
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
            found = found[-2:]  # only the last ones matter
        pos = text.find("{", end)
    nonempty = [v for v in found if v]
    if nonempty or found:
        return (nonempty or found)[-1], None
    if "{" not in text:
        why = "it contains no '{'"
    else:
        why = f"no '{{' starts valid JSON (first problem: {first_error})"
        if failures >= MAX_DECODE_FAILURES:
            why += f"; gave up after {MAX_DECODE_FAILURES} attempts"
    return None, f"no JSON object found in the response: {why}"


# ------------------------------------------------------------------ fallbacks

_TYPE_DEFAULTS = {"str": "", "int": 0, "float": 0.0, "bool": False, "list": [], "dict": {}, "any": None}


def _template_value(d: dict) -> Any:
    if "example" in d:
        return copy.deepcopy(d["example"])
    if "default" in d:
        return copy.deepcopy(d["default"])
    if d.get("enum"):
        return copy.deepcopy(d["enum"][0])
    typ = d.get("type", "any")
    if typ == "dict" and d.get("fields"):
        return _template_object(d["fields"])
    if typ == "list" and isinstance(d.get("items"), dict):
        return [_template_value(d["items"])]
    return copy.deepcopy(_TYPE_DEFAULTS.get(typ))


def _template_object(fields: dict[str, dict]) -> dict:
    # Optional fields only when something better than a type default is known.
    return {
        name: _template_value(d)
        for name, d in fields.items()
        if d.get("required", True) or "example" in d or "default" in d
    }


def template_output(contract: dict) -> dict:
    """An output built from the contract alone: example, default, enum[0], type default."""
    return _template_object(contract.get("output") or {})


def partial_output(contract: dict, data: Any, deadline: Deadline | None = None) -> tuple[dict, list[str]]:
    """Keep the valid fields of ``data``; fill the others from default, then example.

    When the deadline passes first, no field of ``data`` counts as valid.
    """
    result, filled = fill_output(contract, data, deadline)
    warnings = [f"Used {f['from']} for {f['was']} '{f['field']}'" if f["from"]
                else f"Could not fill {f['was']} required field '{f['field']}'" for f in filled]
    return result, warnings


def fill_output(contract: dict, data: Any, deadline: Deadline | None = None) -> tuple[dict, list[dict]]:
    """partial_output, saying what it filled: (output, [{field, from, was}]) where `from` is
    "default", "example" or None (a required field nothing could fill) and `was` "missing"
    or "invalid" (the answer's value)."""
    output = contract.get("output") or {}
    data = drop_null_optionals(output, data) if isinstance(data, dict) else {}
    try:
        bad = {e["path"] for e in validate_output(contract, data, deadline) if e["kind"] != "rule" or e["path"] != "$"}
    except OutOfTime:
        bad = {json_path((name,)) for name in output}
    result: dict[str, Any] = {}
    filled: list[dict] = []
    for name, d in output.items():
        prefix = json_path((name,))
        present = name in data
        valid = present and not any(p == prefix or p.startswith((prefix + ".", prefix + "[")) for p in bad)
        if valid:
            result[name] = data[name]
            continue
        state = "invalid" if present else "missing"
        if "default" in d:
            result[name] = copy.deepcopy(d["default"])
            filled.append({"field": name, "from": "default", "was": state})
        elif "example" in d:
            result[name] = copy.deepcopy(d["example"])
            filled.append({"field": name, "from": "example", "was": state})
        elif d.get("required", True):
            filled.append({"field": name, "from": None, "was": state})
    return result, filled


def template_filled(contract: dict) -> tuple[dict, list[dict]]:
    """template_output, saying where each field came from: (output, [{field, from, was}])
    with `from` one of example, default, enum, its parts' examples, type default, and `was` "not used" (the
    template ignores the answers)."""
    output = template_output(contract)
    fields = contract.get("output") or {}
    filled = []
    for name in output:
        d = fields[name]
        nested = (d.get("type") == "dict" and d.get("fields")) or (d.get("type") == "list" and isinstance(d.get("items"), dict))
        source = next((k for k in ("example", "default") if k in d), None) or \
            ("enum" if d.get("enum") else "its parts' examples" if nested else "type default")
        filled.append({"field": name, "from": source, "was": "not used"})
    return output, filled
