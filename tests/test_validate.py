"""Local validation: validate_output, extract_json, template/partial output, check_example.

Cases live in tests/fixtures/validate/*.yaml. Cases that need the rule language
(harnessc.compiler.rules) are marked and skipped while that module is missing.
"""

from __future__ import annotations

import copy
import importlib.util
import time
from pathlib import Path

import pytest
import yaml

from harnessc.compiler.contract_schema import contract_plan_entry, load_builtin_contracts
from harnessc.compiler.ir import Contract, Deliverable
from harnessc.compiler.validate import (
    MAX_DECODE_FAILURES,
    check_example,
    extract_json,
    partial_output,
    template_output,
    validate_output,
)

FIXTURES = Path(__file__).parent / "fixtures" / "validate"
HAVE_RULES = importlib.util.find_spec("harnessc.compiler.rules") is not None
needs_rules = pytest.mark.skipif(not HAVE_RULES, reason="harnessc.compiler.rules not there yet")

OUTPUT_CASES = yaml.safe_load((FIXTURES / "output_cases.yaml").read_text())
EXTRACT_CASES = yaml.safe_load((FIXTURES / "extract_cases.yaml").read_text())
BUILTINS = load_builtin_contracts()


@pytest.fixture(autouse=True)
def _rules_stub(monkeypatch):
    """Until the rule module lands: every rule holds, so rule-free cases still run."""
    if HAVE_RULES:
        return
    import sys
    import types

    stub = types.ModuleType("harnessc.compiler.rules")
    stub.RuleError = type("RuleError", (Exception,), {})
    stub.RuleEvalError = type("RuleEvalError", (Exception,), {})
    stub.parse_rule = lambda text: text
    stub.evaluate = lambda rule, value=None, output=None: True
    monkeypatch.setitem(sys.modules, "harnessc.compiler.rules", stub)
    monkeypatch.setattr("harnessc.compiler.validate._RULE_CACHE", {})

BUILTIN_ENTRIES = {n: contract_plan_entry(n, c) for n, c in BUILTINS.items()}


def entry(spec: dict, name: str = "t") -> dict:
    return contract_plan_entry(name, Contract.model_validate(spec))


CASES_CONTRACT = entry(OUTPUT_CASES["contract"])


def _case_params():
    return [
        pytest.param(case, id=case["name"], marks=[needs_rules] if case.get("rules") else [])
        for case in OUTPUT_CASES["cases"]
    ]


# ------------------------------------------------------------------ validate_output


@pytest.mark.parametrize("case", _case_params())
def test_validate_output(case):
    if "whole" in case:
        data = case["whole"]
    else:
        data = {**copy.deepcopy(OUTPUT_CASES["valid"]), **(case.get("data") or {})}
        for key in case.get("drop", []):
            data.pop(key)
    errors = validate_output(CASES_CONTRACT, data)
    got = [{k: e[k] for k in want} for e, want in zip(errors, case["errors"])]
    assert len(errors) == len(case["errors"]), errors
    assert got == case["errors"], errors
    for e in errors:
        assert set(e) == {"path", "field", "kind", "message", "rule"}
        assert e["message"].startswith(e["path"]), e


def test_validate_output_is_deterministic():
    data = {"score": "x", "label": 3, "bant": [], "findings": "no", "extra": 1}
    first = validate_output(CASES_CONTRACT, data)
    assert first == validate_output(CASES_CONTRACT, dict(reversed(list(data.items()))))
    assert [e["path"] for e in first] == sorted(e["path"] for e in first)


def test_list_indexes_sort_numerically():
    data = {**OUTPUT_CASES["valid"], "findings": ["a"] * 10 + [1, 2]}
    data["findings"][2] = 3
    paths = [e["path"] for e in validate_output(CASES_CONTRACT, data)]
    assert paths == ["$.findings[2]", "$.findings[10]", "$.findings[11]"]


def test_no_output_contract_accepts_anything():
    assert validate_output(BUILTIN_ENTRIES["code_change"], "whatever") == []


# ------------------------------------------------------------------ template / partial


@needs_rules
@pytest.mark.parametrize("name", sorted(n for n, e in BUILTIN_ENTRIES.items() if e["output"]))
def test_builtin_template_output_validates(name):
    """The offline simulate agent answers with this: it must satisfy its own contract."""
    contract = BUILTIN_ENTRIES[name]
    out = template_output(contract)
    assert validate_output(contract, out) == []


@pytest.mark.parametrize("name", sorted(n for n, e in BUILTIN_ENTRIES.items() if e["output"]))
def test_builtin_template_output_passes_schema(name):
    """Rule-free half of the check above, so it runs even without the rule module."""
    from jsonschema import Draft7Validator

    contract = BUILTIN_ENTRIES[name]
    out = template_output(contract)
    assert set(out) >= set(contract["json_schema"]["required"])
    assert list(Draft7Validator(contract["json_schema"]).iter_errors(out)) == []


def test_template_output_fallbacks_and_nesting():
    c = entry({"output": {
        "a": {"type": "int", "default": 3, "example": 4},
        "b": {"type": "str", "default": "d"},
        "c": {"type": "str", "enum": ["x", "y"]},
        "d": {"type": "dict", "fields": {"n": {"type": "float"}, "o": {"type": "bool", "required": False}}},
        "e": {"type": "list", "items": {"type": "dict", "fields": {"k": {"type": "str", "example": "v"}}}},
        "f": {"type": "list", "items": "str"},
        "g": {"type": "str", "required": False},
        "h": {"type": "int", "required": False, "default": 1},
    }})
    assert template_output(c) == {
        "a": 4, "b": "d", "c": "x", "d": {"n": 0.0}, "e": [{"k": "v"}], "f": [], "h": 1,
    }
    assert template_output(BUILTIN_ENTRIES["code_change"]) == {}


def test_template_output_does_not_share_state():
    c = BUILTIN_ENTRIES["research_report"]
    template_output(c)["findings"].append("mutated")
    assert "mutated" not in template_output(c)["findings"]


def test_partial_output_keeps_valid_and_fills_the_rest():
    c = entry({"output": {
        "keep": {"type": "int"},
        "bad": {"type": "int", "default": 0},
        "gone": {"type": "str", "example": "ex"},
        "lost": {"type": "str"},
        "opt": {"type": "str", "required": False},
    }})
    out, warnings = partial_output(c, {"keep": 5, "bad": "x", "junk": 1})
    assert out == {"keep": 5, "bad": 0, "gone": "ex"}
    assert warnings == [
        "Used default for invalid 'bad'",
        "Used example for missing 'gone'",
        "Could not fill missing required field 'lost'",
    ]
    assert partial_output(c, "not a dict")[0] == {"bad": 0, "gone": "ex"}


@needs_rules
def test_partial_output_replaces_rule_failures():
    c = BUILTIN_ENTRIES["lead_qualification"]
    good = template_output(c)
    out, warnings = partial_output(c, {**good, "qualification_score": 150})
    assert out["qualification_score"] == 75
    assert warnings == ["Used example for invalid 'qualification_score'"]
    assert validate_output(c, out) == []


def test_a_deadline_stops_validation_and_partial_output_falls_back():
    from harnessc.compiler.validate import Deadline, OutOfTime

    c = entry({"output": {"rows": {"type": "list", "default": [],
                                   "items": {"type": "list", "rules": ["value == value"]}}}})
    data = {"rows": [[0] * 1000] * 50}
    assert validate_output(c, data, Deadline(3600)) == []
    expired = Deadline(3600)
    expired.cancel()
    with pytest.raises(OutOfTime, match="cancelled"):
        validate_output(c, data, expired)
    assert partial_output(c, data, expired) == ({"rows": []}, ["Used default for invalid 'rows'"])


COSTLY_PER_ITEM = {"type": "list", "items": {"type": "int", "rules": ["[1] * 99999 + [2] in [[1] * 100000] * 100000"]}}


def test_the_rules_of_one_output_share_a_step_budget():
    # Each evaluation stops at its own budget, but a costly rule on every item of a long
    # list multiplied that: one output's rules together get MAX_VALIDATION_STEPS.
    from harnessc.compiler.validate import OutOfTime

    c = entry({"output": {"rows": COSTLY_PER_ITEM}})
    with pytest.raises(OutOfTime, match="the rules are too costly for this output together"):
        validate_output(c, {"rows": list(range(100_000))})
    problems = check_example(Deliverable.model_validate(COSTLY_PER_ITEM), list(range(100_000)))
    assert any("the rules are too costly for this output together" in p for p in problems), problems


def test_schema_regexes_run_on_re2_and_a_refused_one_is_an_error_not_a_crash():
    # A plan.json written before lint knew HC305 still validates: the pattern is reported.
    schema = {"type": "object", "properties": {
        "slow": {"type": "string", "pattern": "^(a+)+$"},
        "keys": {"type": "object", "patternProperties": {"^(a|aa)*c$": {"type": "integer"}},
                 "additionalProperties": False},
        "backref": {"type": "string", "pattern": "(a)\\1"},
        "items": {"type": "array", "uniqueItems": True}}}
    c = {"json_schema": schema, "output": None}
    long = "a" * 100_000
    data = {"slow": long + "!", "keys": {long: 1, "aac": 2}, "backref": "aa",
            "items": [{"k": i} for i in range(50_000)] + [{"k": 1.0}]}
    errors = {e["path"]: e["message"] for e in validate_output(c, data)}
    assert "does not match '^(a+)+$'" in errors["$.slow"]
    assert "unexpected field" in errors["$.keys." + long] and "$.keys.aac" not in errors
    assert "can't be used: invalid regular expression (RE2)" in errors["$.backref"]
    assert "has non-unique elements" in errors["$.items"]  # 1.0 == 1, found in linear time


# ------------------------------------------------------------------ check_example

CHECK_EXAMPLE_CASES = [
    ({"type": "int"}, 3, []),
    ({"type": "int"}, "3", ["expected integer"]),
    ({"type": "str", "enum": ["a"]}, "b", ["is not one of"]),
    ({"type": "dict", "fields": {"x": {"type": "int"}}}, {"x": 1, "y": 2}, ["$.y: unexpected field"]),
    ({"type": "list", "items": "str"}, ["a", 1], ["$[1]: expected string"]),
    # lint's own validator: uniqueItems in linear time, JSON equality (1.0 == 1, key order)
    ({"type": "list", "schema": {"uniqueItems": True}}, [{"k": i, "j": 0} for i in range(50_000)] + [{"j": 0, "k": 1.0}],
     ["items must be unique"]),
    ({"type": "str", "schema": {"pattern": "^(a+)+$"}}, "a" * 10_000 + "!", ["does not match"]),
]
CHECK_EXAMPLE_RULE_CASES = [
    ({"type": "int", "rules": ["value >= 0"]}, -1, ["$: -1 breaks rule 'value >= 0'"]),
    ({"type": "int", "rules": ["value >= 0"]}, "x", ["expected integer"]),  # rules skipped
    ({"type": "list", "items": {"type": "str", "rules": ["len(value) > 1"]}}, ["ab", "c"],
     ["$[1]: \"c\" breaks rule 'len(value) > 1'"]),
]


@pytest.mark.parametrize("spec,value,want", CHECK_EXAMPLE_CASES)
def test_check_example(spec, value, want):
    problems = check_example(Deliverable.model_validate(spec), value)
    assert len(problems) == len(want), problems
    for p, w in zip(problems, want):
        assert w in p


@needs_rules
@pytest.mark.parametrize("spec,value,want", CHECK_EXAMPLE_RULE_CASES)
def test_check_example_rules(spec, value, want):
    test_check_example(spec, value, want)


@needs_rules
@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_examples_satisfy_their_deliverables(name):
    def walk(output):
        for key, d in (output or {}).items():
            yield key, d
            yield from walk(d.fields)
            if isinstance(d.items, Deliverable):
                yield from walk({f"{key}[]": d.items})

    for key, d in walk(BUILTINS[name].output):
        for value in (d.example, d.default):
            assert check_example(d, value) == [], (key, value)


# ------------------------------------------------------------------ extract_json


@pytest.mark.parametrize("case", EXTRACT_CASES, ids=[c["name"] for c in EXTRACT_CASES])
def test_extract_json(case):
    value, error = extract_json(case["text"])
    if "expect" in case:
        assert (value, error) == (case["expect"], None)
    else:
        assert value is None and case["error"] in error


@pytest.mark.parametrize("text,expect", [
    ("x" * 2_000_000 + '{"end": 1}', {"end": 1}),
    ('{"a": "' + "y" * 2_000_000, None),  # unterminated string
    ("{" * 2_000_000, None),  # worst case for a scanner
    ('{"a":' * 300_000, None),  # nesting deeper than the decoder's recursion limit
    ("```json\n" + "[" * 100_000 + "\n```\n" + '{"ok": 1}', {"ok": 1}),
    ('{"a": "' + "{x" * 1_000_000, None),  # every '{' is inside one unterminated string
    ('{"a": 1}' + "{x" * 1_000_000, {"a": 1}),
    ("```json\n" + '{"big": "' + "z" * 2_000_000 + '"}\n```', {"big": "z" * 2_000_000}),
])
def test_extract_json_bounded_on_megabytes(text, expect):
    start = time.process_time()  # its own CPU time: bounded work, whatever else the machine runs
    value, error = extract_json(text)
    assert time.process_time() - start < 3
    assert value == expect
    if expect is None:
        assert error.startswith("no JSON object found in the response")


def test_extract_json_gives_up_after_bounded_failures():
    _, error = extract_json("{" * (MAX_DECODE_FAILURES + 5))
    assert f"gave up after {MAX_DECODE_FAILURES} attempts" in error
