"""The rule language: parse, type-check, evaluate; tables of cases plus property tests.

The differential test compares the interpreter with Python's own operators on generated
expressions; Python is computed by applying operators directly, never by eval.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessc.compiler.ir import Deliverable
from harnessc.compiler.rules import (
    MAX_INT,
    MAX_SIZE,
    Rule,
    RuleError,
    RuleEvalError,
    check_rule,
    evaluate,
    evaluate_value,
    parse_rule,
)

# ------------------------------------------------------------------ valid rules

LEAD = {
    "score": 75,
    "tags": ["a", "b"],
    "meta": {"_id": 1, "ok": True},
    "when": "2024-05-01T10:00:00Z",
}

# (rule, value, output, expected raw result)
VALID = [
    ("value >= 0", 5, None, True),
    ("value >= 0", -1, None, False),
    ("0 <= value <= 100", 100, None, True),
    ("0 <= value <= 100", 101, None, False),
    ("1 < 2 > 1.5 != 0", None, None, True),
    ("len(value) > 0", "x", None, True),
    ("len(value) > 0", [], None, False),
    ("len(value) == 2", {"a": 1, "b": 2}, None, True),
    ("value == 'a' or value == \"b\"", "b", None, True),
    ("value in ['x', 'y']", "y", None, True),
    ("value not in ['x', 'y']", "y", None, False),
    ("'b' in value", "abc", None, True),
    ("'k' in value", {"k": None}, None, True),
    ("value and len(value) > 2", "", None, ""),  # and/or return an operand, like Python
    ("value or 'fallback'", "", None, "fallback"),
    ("not value", [], None, True),
    ("not 1 == 2", None, None, True),
    ("-2 * 3 + 10 % 4 - 1 / 2", None, None, -4.5),
    ("7 % -3 == -2 and -7 % 3 == 2", None, None, True),  # % like Python
    ("7 / 2 == 3.5", None, None, True),  # true division
    ("(1 + 2) * 3 == 9", None, None, True),
    ("2 + 3 * 4 == 14", None, None, True),
    ("true and True and not false and not False", None, None, True),
    ("value == null and value == None", None, None, True),
    ("value.budget >= 0", {"budget": 3}, None, True),
    ("value['budget'] >= 0", {"budget": -3}, None, False),
    ("value[0] == 1 and value[-1] == 3", [1, 2, 3], None, True),
    ("value[1] == 'b'", "abc", None, True),
    ("value.meta['_id'] == 1", LEAD, None, True),
    ("output.score > 50 and len(output.tags) == 2", None, LEAD, True),
    ("output.meta.ok", None, LEAD, True),
    ("[1, 2, 3][1] == 2", None, None, True),
    ("[] == []", None, None, True),
    ("[1, 2,] + [3] == [1, 2, 3]", None, None, True),
    ("'ab' * 3 == 'ababab'", None, None, True),
    ("[0] * 3 == [0, 0, 0]", None, None, True),
    ("min(value) == 1 and max(value) == 9", [3, 1, 9], None, True),
    ("min(3, 1, 2) == 1 and max(1.5, 2) == 2", None, None, True),
    ("sum(value) == 6", [1, 2, 3], None, True),
    ("sum(value) == 0", [], None, True),
    ("abs(value) == 4", -4, None, True),
    ("round(value) == 2", 2.5, None, True),  # banker's rounding, like Python
    ("round(value, 1) == 3.1", 3.14159, None, True),
    ("lower(value) == 'abc' and upper(value) == 'ABC'", "aBc", None, True),
    ("strip(value) == 'x'", "  x \n", None, True),
    ("startswith(value, 'ab') and endswith(value, 'yz')", "abxyz", None, True),
    ("matches(value, '^[A-Z]{3}-\\d+$')", "ABC-123", None, True),
    ("matches(value, r'^\\d+$')", "12a", None, False),
    ("matches(value, 'b')", "abc", None, True),  # search, not fullmatch
    ("is_email(value)", "ada@example.org", None, True),
    ("is_email(value)", "ada@localhost", None, False),
    ("is_email(value)", "not an email", None, False),
    ("is_email(value)", 5, None, False),
    ("is_url(value)", "https://example.org/x?y=1", None, True),
    ("is_url(value)", "http://localhost:8080", None, True),
    ("is_url(value)", "ftp://example.org", None, False),
    ("is_url(value)", "https://", None, False),
    ("is_url(value)", "https://exa mple.org", None, False),
    ("is_datetime(value)", "2024-05-01T10:00:00Z", None, True),
    ("is_datetime(value)", "2024-05-01T10:00:00+02:00", None, True),
    ("is_datetime(value)", "2024-05-01", None, True),
    ("is_datetime(value)", "yesterday", None, False),
    ("is_datetime(value)", "2024-13-01", None, False),
    ("unique(value)", [1, 2, "1", [1], {"a": 1}], None, True),
    ("unique(value)", [{"a": 1, "b": 2}, {"b": 2, "a": 1}], None, False),
    ("unique(value)", [], None, True),
    ("all(value) and not any([])", [1, True, "x"], None, True),
    ("any(value)", [0, "", None], None, False),
    ("'\\x41\\u00e9\\n' == 'A\u00e9\\n'", None, None, True),
    ("len('\\d') == 2", None, None, True),  # unknown escapes stay, as in Python
    ("len(r'\\n') == 2", None, None, True),
    ("1e3 == 1000 and .5 == 0.5 and 2. == 2", None, None, True),
    ("value\n  >= 0", 1, None, True),  # rules may span lines (YAML folded strings)
]


@pytest.mark.parametrize("text,value,output,expected", VALID, ids=[c[0] for c in VALID])
def test_valid_rules(text, value, output, expected):
    rule = parse_rule(text)
    result = evaluate_value(rule, value=value, output=output)
    assert result == expected and type(result) is type(expected)
    assert evaluate(rule, value=value, output=output) is bool(expected)


# ------------------------------------------------------------------ parse-time rejections

# (rule, code, offset, a piece of the message)
REJECTED = [
    # syntax
    ("", "HC301", 0, "empty"),
    ("value >=", "HC301", 8, "ends too early"),
    ("value = 1", "HC301", 6, "unexpected character '='"),
    ("(value", "HC301", 6, "ends too early"),
    ("value value", "HC301", 6, "operator missing"),
    ("'abc", "HC301", 0, "unterminated string"),
    ("value > 0 && value < 9", "HC301", 10, "unexpected character '&'"),
    ("value in (1, 2)", "HC301", 11, "unexpected ','"),
    ("1 if value else 2", "HC301", 2, "unexpected 'if'"),
    ("'\\x4' == 'A'", "HC301", 1, "bad escape"),
    ("matches(value, '(')", "HC305", 15, "invalid regular expression (RE2): missing )"),
    ("value.in", "HC301", 6, "unexpected 'in'"),
    # names and functions
    ("x > 0", "HC303", 0, "unknown name 'x'"),
    ("len > 0", "HC303", 0, "'len' is a function"),
    ("foo(value)", "HC303", 0, "unknown function 'foo'"),
    ("eval('1')", "HC303", 0, "unknown function 'eval'"),
    ("value.lower() == 'a'", "HC303", 6, "methods can't be called"),
    ("value(1)", "HC303", 0, "'value' is not a function"),
    # unsafe or too costly
    ("__import__('os').system('x')", "HC304", 0, "'__import__' is not allowed"),
    ("().__class__", "HC304", 3, "'__class__' is not allowed"),
    ("value.__class__", "HC304", 6, "'__class__' is not allowed"),
    ("value._private == 1", "HC304", 6, "names starting with '_'"),
    ("9**9**9", "HC304", 1, "power operator is not allowed"),
    ("value ** 2 > 1", "HC304", 6, "power operator is not allowed"),
    ("'a'*10**9", "HC304", 6, "power operator is not allowed"),
    ("'a' * 1000000 == ''", "HC304", 0, "a string of 1000000 characters"),
    ("1000000 * 'ab' == ''", "HC304", 0, "a string of 2000000 characters"),
    ("[0, 1] * 60000 == []", "HC304", 0, "a list of 120000 items"),
    ("value == 1000000000000000001", "HC304", 9, "number is too large"),
    ("value == 1e999", "HC304", 9, "too large for a float"),
    ("value == " + "1 + " * 300 + "1", "HC304", 1000, "rule is too long"),
    ("-" * 40 + "1 == 1", "HC304", 8, "nested too deeply"),
    # regexes run on RE2: no backreferences, no lookaround (HC305)
    ("matches(value, r'(a)\\1')", "HC305", 15, "invalid escape sequence"),
    ("matches(value, 'a(?=b)')", "HC305", 15, "invalid perl operator"),
    ("matches(value, '(?<!a)b')", "HC305", 15, "invalid perl operator"),
    ("matches(value, '" + "a" * 201 + "')", "HC304", 15, "regular expression is too long"),
]


@pytest.mark.parametrize("text,code,offset,message", REJECTED, ids=[c[0][:40] for c in REJECTED])
def test_rejected_rules(text, code, offset, message):
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    e = info.value
    assert (e.code, e.offset) == (code, offset), (e.code, e.offset, e.message)
    assert message in e.message
    assert e.length >= 1


def test_syntax_error_hints_are_plain_words():
    e = _rule_error("len(value")
    assert e.hint == "expected an operator, ')' or ','"
    assert _rule_error("value >=").hint == "expected an expression"
    assert _rule_error("value.").hint == "expected a field name"
    assert "==" in _rule_error("value = 1").hint
    assert "value['_id']" in _rule_error("value._id == 1").hint


def _rule_error(text: str) -> RuleError:
    with pytest.raises(RuleError) as info:
        parse_rule(text)
    return info.value


# ------------------------------------------------------------------ type checking

INT = Deliverable(type="int")
STR = Deliverable(type="str")
ANY = Deliverable(type="any")
BANT = Deliverable(
    type="dict",
    fields={"budget": Deliverable(type="int"), "authority": Deliverable(type="str")},
)
FINDINGS = Deliverable(type="list", items="str")
ROWS = Deliverable(
    type="list", items=Deliverable(type="dict", fields={"n": Deliverable(type="float")})
)
OUTPUT = {"start": INT, "end": INT, "findings": FINDINGS, "bant": BANT}

# (rule, subject, [(code, offset, a piece of the message)], a piece of the first hint or None)
TYPED = [
    ("value >= 0", INT, [], None),
    ("0 <= value <= 100", INT, [], None),
    ("len(value) > 0", STR, [], None),
    ("len(value) > 0", INT, [("HC302", 4, "len() needs str, list or dict; value is int")], None),
    ("value + 1", INT, [("HC302", 0, "a rule must be a condition")], "value + 1 > 0"),
    ("value", STR, [("HC302", 0, "a rule must be a condition")], "len(value) > 0"),
    ("value", Deliverable(type="bool"), [], None),
    ("value == 'high'", INT, [("HC302", 6, "comparing int with str")], None),
    ("value < 'a'", INT, [("HC302", 6, "can't compare int with str")], None),
    ("value + 'x' == 'y'", INT, [("HC302", 6, "'+' can't be applied to int and str")], None),
    ("value - 1 > 0", STR, [("HC302", 6, "'-' can't be applied to str and int")], None),
    ("value.budget >= 0", BANT, [], None),
    (
        "value.budgt >= 0",
        BANT,
        [("HC302", 6, "value has no field 'budgt'")],
        "did you mean 'budget'?",
    ),
    (
        "value['authorty'] == 'x'",
        BANT,
        [("HC302", 6, "no field 'authorty'")],
        "did you mean 'authority'?",
    ),
    ("value.x == 1", INT, [("HC302", 6, "only a dict has fields")], None),
    ("value.x == 1", ANY, [], None),
    ("value == 1 and value == 'a' and len(value) > 0", ANY, [], None),
    ("all(value) and len(value[0]) > 1", FINDINGS, [], None),
    ("value[0] > 1", FINDINGS, [("HC302", 9, "can't compare str with int")], None),
    ("value[0].n > 0.5 and value[0].m > 1", ROWS, [("HC302", 30, "no field 'm'")], "fields: n"),
    ("sum(value) > 0", FINDINGS, [("HC302", 4, "sum() needs a list of numbers")], None),
    ("lower(value) == 'a'", INT, [("HC302", 6, "lower() needs a str; value is int")], None),
    ("round(value, 1.5) > 0", INT, [("HC302", 13, "round() needs an int number of digits")], None),
    ("min() > 0", INT, [("HC302", 0, "min() takes 1 or more arguments (0 given)")], None),
    ("startswith(value) ", STR, [("HC302", 0, "startswith() takes 2 arguments")], None),
    ("value in 'abc'", INT, [("HC302", 6, "needs a str on the left")], None),
    ("5 in value", FINDINGS, [("HC302", 2, "holds str items")], None),
    ("value in 5", STR, [("HC302", 6, "needs a str, list or dict on the right")], None),
    ("value and value > 1", INT, [("HC302", 0, "a rule must be a condition")], None),
    ("not value", STR, [], None),
    ("output.end > output.start", OUTPUT, [], None),
    ("len(output.findings) >= 1 and output.bant.budget > 0", OUTPUT, [], None),
    ("output.ned > 0", OUTPUT, [("HC302", 7, "output has no field 'ned'")], "did you mean 'end'?"),
    ("output.end > value", OUTPUT, [("HC303", 13, "'value' is not available")], None),
    ("output.x > 0", INT, [("HC303", 0, "'output' is only available in output_rules")], None),
    # two independent mistakes, two errors (an erroneous part checks as `any`)
    (
        "len(value) > 0 and value.x",
        INT,
        [("HC302", 4, "len()"), ("HC302", 25, "only a dict")],
        None,
    ),
]


@pytest.mark.parametrize("text,subject,errors,hint", TYPED, ids=[c[0] for c in TYPED])
def test_type_check(text, subject, errors, hint):
    found = check_rule(parse_rule(text), subject)
    assert [(e.code, e.offset) for e in found] == [(c, o) for c, o, _ in errors], [
        e.message for e in found
    ]
    for e, (_, _, message) in zip(found, errors):
        assert message in e.message
    if hint:
        assert hint in found[0].hint


# ------------------------------------------------------------------ runtime failures and limits

# (rule, value, a piece of the message)
EVAL_ERRORS = [
    ("value < 1", "a", "can't compare str with int"),
    ("value.missing == 1", {"a": 1}, "has no field 'missing'"),
    ("value.a == 1", [1], "not a dict"),
    ("value[5] == 1", [1], "out of range"),
    ("value['k'] == 1", {}, "has no key 'k'"),
    ("value[0] == 1", 5, "can't be indexed"),
    ("len(value) > 0", 5, "len() needs str, list or dict"),
    ("1 / value > 0", 0, "division by zero"),
    ("value % 0 == 0", 1.5, "division by zero"),
    ("min(value) > 0", [], "empty"),
    ("value + 1 > 0", "a", "'+' can't be applied to str and int"),
    ("value % 2 == 0", "%s", "'%' can't be applied to str and int"),  # no string formatting
    ("value * 'a' == ''", 200_000, "longer than 100000"),
    ("value * value == ''", "ab", "can't be applied"),
    ("value + value == ''", "a" * 60_000, "longer than 100000"),
    ("value * value * value > 0", 10**40, "too large"),
    ("-value < 0", "x", "unary minus"),
    ("value in 5", 1, "needs a str, list or dict"),
    ("value in 'abc'", 1, "can't look for"),
    ("matches('a', value)", "(", "invalid regular expression"),
    ("matches('a', value)", "(a)\\1", "invalid escape sequence"),
    # costs are charged by the size of the data each operation touches
    ("matches(value, 'a')", "a" * 4_000_008, "too costly"),
    ("[1] * 99999 + [2] in [[1] * 100000] * 100000", None, "too costly"),
    ("value == value", [[1] * 1000] * 1000, "too costly"),
    ("unique(value)", [list(range(100))] * 100_000, "too costly"),
    ("min(value) == []", [[1] * 1000] * 1000, "too costly"),
    ("'x' in value", [0] * 1_000_001, "too costly"),
    ("sum(value) > 0", [1] * 1_000_001, "too costly"),
    ("all(value)", [1] * 1_000_001, "too costly"),
    ("startswith('a', value)", "a" * 16_000_016, "too costly"),
    ("round(value, 10 * 10 * 10)", 5, "round() digits"),
    ("sum(value) > 0", ["a"], "list of numbers"),
    ("unique(value)", "abc", "needs a list"),
    ("max(value, 'a') == 1", 1, "can't compare"),
]


@pytest.mark.parametrize("text,value,message", EVAL_ERRORS, ids=[c[0] for c in EVAL_ERRORS])
def test_eval_errors(text, value, message):
    rule = parse_rule(text)
    with pytest.raises(RuleEvalError) as info:
        evaluate(rule, value=value)
    assert message in info.value.message


def test_step_counter(monkeypatch):
    # a hand-built tree far wider than any parse allows: each node visit is a step. The bound
    # is lowered (the real one's million nodes take seconds to build), the counting is the same.
    from harnessc.compiler.rules import Const, ListLit, interp

    monkeypatch.setattr(interp, "MAX_STEPS", 10_000)
    items = tuple(Const(offset=0, end=1, value=0) for _ in range(interp.MAX_STEPS))
    with pytest.raises(RuleEvalError, match="more than 10,000 steps"):
        evaluate(Rule("x", ListLit(offset=0, end=1, items=items)))
    evaluate(Rule("x", ListLit(offset=0, end=1, items=items[1:])))  # one node fewer: within it


def test_a_deadline_stops_a_long_evaluation():
    class Deadline:
        checks = 0

        steps = 0

        def check(self, steps):
            self.spend(steps)
            self.checks += 1
            if self.checks > 3:
                raise TimeoutError("out of time")

        def spend(self, steps):
            self.steps += steps

    deadline = Deadline()
    with pytest.raises(TimeoutError):  # the deadline's own exception reaches the caller
        evaluate(parse_rule(" and ".join(["value == value"] * 6)), value=[[0] * 500] * 200,
                 deadline=deadline)
    assert deadline.checks == 4
    counted = Deadline()
    evaluate(parse_rule("value == 1"), value=1, deadline=counted)  # every step is told
    assert counted.steps == 4  # the compare, its two operands, and comparing them


def test_eval_error_points_at_the_failing_part():
    with pytest.raises(RuleEvalError) as info:
        evaluate(parse_rule("value >= 0 and len(value) > 1"), value=3)
    assert (info.value.offset, info.value.length) == (15, 10)


def test_the_parser_loads_on_first_use_and_never_imports_lark():
    code = (
        "import sys, harnessc.compiler.rules as r\n"
        "print('harnessc.grammar.lark_parsers' in sys.modules)\n"
        "r.parse_rule('value > 1')\n"
        "print('harnessc.grammar.lark_parsers' in sys.modules, 'lark' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True", "False"]


# ------------------------------------------------------------------ differential: Python is the oracle


class Cap(Exception):
    """A cost limit of the spec (sizes, int magnitude), which Python itself doesn't have."""


def _cap(x):
    if type(x) is int and abs(x) > MAX_INT:
        raise Cap
    return x


def _py_binop(op, a, b):
    # Python's operators, with the spec's limits checked before anything huge is built
    if op == "+":
        if type(a) is type(b) and type(a) in (str, list) and len(a) + len(b) > MAX_SIZE:
            raise Cap
        return _cap(a + b)
    if op == "-":
        return _cap(a - b)
    if op == "*":
        for s, n in ((a, b), (b, a)):
            if (
                type(s) in (str, list)
                and type(n) in (int, bool)
                and n > 0
                and len(s) * n > MAX_SIZE
            ):
                raise Cap
        return _cap(a * b)
    if op == "/":
        return a / b
    if type(a) is str:
        raise Cap  # `str % x` is string formatting in Python: outside the rule language
    return _cap(a % b)


_PY_CMP = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


def _py_round(x, *nd):
    if nd and type(nd[0]) in (int, bool) and abs(nd[0]) > 400:
        raise Cap
    return round(x, *nd)


_PY_FUNCS = {
    "len": len,
    "min": min,
    "max": max,
    "sum": lambda xs: _cap(sum(xs)),
    "abs": abs,
    "round": _py_round,
    "lower": str.lower,
    "upper": str.upper,
    "strip": str.strip,
    "startswith": str.startswith,
    "endswith": str.endswith,
    "all": all,
    "any": any,
}
_ARITY = {
    "len": [1],
    "min": [1, 2, 3],
    "max": [1, 2, 3],
    "sum": [1],
    "abs": [1],
    "round": [1, 2],
    "lower": [1],
    "upper": [1],
    "strip": [1],
    "startswith": [2],
    "endswith": [2],
    "all": [1],
    "any": [1],
}

# An expression is (text, precedence, fn) where fn(value) computes Python's result.
# Precedences: or 1, and 2, not 3, comparison 4, + - 5, * / % 6, unary minus 7, numbers 8,
# other atoms 9.


def _wrap(e, min_prec: int) -> str:
    text, prec, _ = e
    return text if prec >= min_prec else f"({text})"


def _literal(v, text=None):
    text = text if text is not None else repr(v)
    # `-1` is unary minus; `1.x` would lex as the number `1.`, so numbers get 8, not 9
    prec = (
        7 if text.startswith("-") else 8 if isinstance(v, (int, float)) and text[0].isdigit() else 9
    )
    return (text, prec, lambda value: v)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.text("ab1 ", max_size=3)
    | st.integers(-1000, 1000).map(lambda n: n / 8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("ab"), c, max_size=2),
    max_leaves=6,
)

leaves = st.one_of(
    st.integers(-30, 30).map(_literal),
    st.sampled_from([10**17, -(10**18), 0]).map(_literal),
    st.integers(-(10**5), 10**5).map(lambda n: _literal(n / 100)),
    st.text(st.sampled_from("ab Z\n'\"\\é\x00\U0001f600"), max_size=4).map(_literal),
    st.sampled_from(
        [
            (True, "true"),
            (True, "True"),
            (False, "false"),
            (False, "False"),
            (None, "null"),
            (None, "None"),
        ]
    ).map(lambda p: _literal(*p)),
    st.just(("value", 9, lambda value: value)),
)


@st.composite
def _node(draw, child):
    kind = draw(
        st.sampled_from(["bin", "neg", "not", "bool", "cmp", "list", "index", "attr", "call"])
    )
    if kind == "bin":
        op = draw(st.sampled_from("+-*/%"))
        a, b = draw(child), draw(child)
        p = 5 if op in "+-" else 6
        return (
            f"{_wrap(a, p)} {op} {_wrap(b, p + 1)}",
            p,
            lambda v: _py_binop(op, a[2](v), b[2](v)),
        )
    if kind == "neg":
        a = draw(child)
        return (f"-{_wrap(a, 7)}", 7, lambda v: _cap(-a[2](v)))
    if kind == "not":
        a = draw(child)
        return (f"not {_wrap(a, 3)}", 3, lambda v: not a[2](v))
    if kind == "bool":
        op = draw(st.sampled_from(["and", "or"]))
        a, b = draw(child), draw(child)
        p = 1 if op == "or" else 2
        if op == "and":
            return (f"{_wrap(a, p)} and {_wrap(b, p + 1)}", p, lambda v: a[2](v) and b[2](v))
        return (f"{_wrap(a, p)} or {_wrap(b, p + 1)}", p, lambda v: a[2](v) or b[2](v))
    if kind == "cmp":
        operands = draw(st.lists(child, min_size=2, max_size=4))
        ops = [draw(st.sampled_from(list(_PY_CMP))) for _ in operands[1:]]

        def chain(v):  # Python's chained comparison: each operand evaluated at most once
            left = operands[0][2](v)
            for op, e in zip(ops, operands[1:]):
                right = e[2](v)
                if not _PY_CMP[op](left, right):
                    return False
                left = right
            return True

        text = _wrap(operands[0], 5) + "".join(
            f" {op} {_wrap(e, 5)}" for op, e in zip(ops, operands[1:])
        )
        return (text, 4, chain)
    if kind == "list":
        items = draw(st.lists(child, max_size=3))
        return ("[" + ", ".join(e[0] for e in items) + "]", 9, lambda v: [e[2](v) for e in items])
    if kind == "index":
        a, i = draw(child), draw(child)
        return (f"{_wrap(a, 8)}[{i[0]}]", 9, lambda v: a[2](v)[i[2](v)])
    if kind == "attr":
        a, name = draw(child), draw(st.sampled_from("ab"))

        def attr(v):
            obj = a[2](v)
            if not isinstance(obj, dict):
                raise TypeError
            return obj[name]

        return (f"{_wrap(a, 9)}.{name}", 9, attr)
    fn = draw(st.sampled_from(sorted(_PY_FUNCS)))
    args = [draw(child) for _ in range(draw(st.sampled_from(_ARITY[fn])))]
    return (
        f"{fn}({', '.join(e[0] for e in args)})",
        9,
        lambda v: _PY_FUNCS[fn](*(e[2](v) for e in args)),
    )


expressions = st.recursive(leaves, lambda child: _node(child), max_leaves=10)


def _same(a, b) -> bool:
    """Equal and of the same type, all the way down (1, 1.0 and True are different results)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=expressions, value=json_values)
def test_differential_against_python(expr, value):
    text, _, python = expr
    try:
        rule = parse_rule(text)
    except RuleError as e:
        # `literal * literal` building something huge is rejected before running, by design,
        # even where Python would never get to it (e.g. after `false and`)
        assert e.code == "HC304" and "would build" in e.message, (text, e)
        return
    try:
        expected = python(value)
    except (Cap, TypeError, ValueError, ArithmeticError, LookupError, AttributeError):
        with pytest.raises(RuleEvalError):
            evaluate_value(rule, value=value)
        return
    got = evaluate_value(rule, value=value)
    assert _same(got, expected), (text, value, got, expected)
    assert evaluate(rule, value=value) is bool(expected)


# ------------------------------------------------------------------ fuzz: only RuleError / RuleEvalError

TOKENS = [
    "value",
    "output",
    "len",
    "min",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "a",
    "_x",
    "__class__",
    "1",
    "0",
    "1.5",
    "'s'",
    '"t"',
    "r'\\d'",
    "'",
    "+",
    "-",
    "*",
    "**",
    "/",
    "%",
    "==",
    "<",
    ">=",
    "!=",
    "in",
    "not",
    "and",
    "or",
    "true",
    "null",
    "matches",
    "=",
    "@",
    "\\",
    "\n",
]
SUBJECTS = [INT, STR, ANY, BANT, FINDINGS, ROWS, OUTPUT]


@settings(max_examples=400, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=60), st.lists(st.sampled_from(TOKENS), max_size=14).map(" ".join)
    ),
    value=json_values,
)
def test_fuzz_only_rule_errors(text, value):
    try:
        rule = parse_rule(text)
    except RuleError as e:
        assert (
            e.code in ("HC301", "HC303", "HC304") and e.length >= 1 and 0 <= e.offset <= len(text)
        )
        return
    for subject in SUBJECTS:
        for e in check_rule(rule, subject):
            assert isinstance(e, RuleError) and e.code in ("HC302", "HC303")
    try:
        evaluate(rule, value=value, output=value)
    except RuleEvalError:
        pass


def test_deep_nesting_is_rejected_not_crashing():
    for text in ["(" * 500 + "1" + ")" * 500, "-" * 999, "not " * 249 + "1", "[" * 400 + "]" * 400]:
        with pytest.raises(RuleError):
            parse_rule(text)
