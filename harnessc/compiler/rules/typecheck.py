"""Static type checking of a rule against its deliverable (or the whole output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ...diagnostics import did_you_mean
from .tree import (
    FUNCTIONS,
    Attr,
    BinOp,
    BoolOp,
    Call,
    Compare,
    Const,
    Index,
    ListLit,
    Name,
    Node,
    Rule,
    RuleError,
    Unary,
    error_at,
)

# ------------------------------------------------------------------ type checking


@dataclass(frozen=True, eq=False)
class _T:
    """A static type: kind is str/int/float/bool/list/dict/none/any."""

    kind: str
    items: "_T | None" = None  # list item type (None: unknown)
    fields: "dict[str, _T] | None" = None  # dict fields (None: unknown)

    def __str__(self) -> str:
        return "null" if self.kind == "none" else self.kind


ANY, BOOL, INT, FLOAT, STR, NONE = (_T(k) for k in ("any", "bool", "int", "float", "str", "none"))
_NUM = {"int", "float", "bool"}
_SIZED = {"str", "list", "dict"}


def _kind_of(t) -> str:
    return getattr(t, "value", t) if t is not None else "any"


def type_of_deliverable(d) -> _T:
    """The static type of a Deliverable (or a bare type name) from harnessc.compiler.ir."""
    if d is None:
        return ANY
    if isinstance(d, str):  # a DeliverableType or its value
        return _T(_kind_of(d))
    kind = _kind_of(d.type)
    if kind == "list":
        return _T("list", items=type_of_deliverable(d.items))
    if kind == "dict":
        fields = (
            {k: type_of_deliverable(v) for k, v in d.fields.items()}
            if d.fields is not None
            else None
        )
        return _T("dict", fields=fields)
    return _T(kind) if kind in ("str", "int", "float", "bool") else ANY


def _a(t: _T) -> str:
    """'an int', 'a str': for messages."""
    return f"an {t}" if str(t)[0] in "aeiou" else f"a {t}"


def _num_join(a: _T, b: _T) -> _T:
    return FLOAT if "float" in (a.kind, b.kind) else INT


def _join(a: _T, b: _T) -> _T:
    """The type of a value that is either a or b (for `or`, list items, min/max)."""
    if a.kind == "any" or b.kind == "any":
        return ANY
    if a.kind in _NUM and b.kind in _NUM:
        return a if a.kind == b.kind else _num_join(a, b)
    if a.kind != b.kind:
        return ANY
    if a.kind == "list":
        ia, ib = a.items or ANY, b.items or ANY
        return _T("list", items=_join(ia, ib))
    if a.kind == "dict":
        return a if a.fields == b.fields else _T("dict")
    return a


def _can_equal(a: _T, b: _T) -> bool:
    kinds = {a.kind, b.kind}
    return "any" in kinds or "none" in kinds or kinds <= _NUM or a.kind == b.kind


def _orderable(a: _T, b: _T) -> bool:
    kinds = {a.kind, b.kind}
    return "any" in kinds or kinds <= _NUM or (a.kind == b.kind and a.kind in ("str", "list"))


def check_rule(rule: Rule, subject) -> list[RuleError]:
    """Type-check a rule. `subject` is a Deliverable (a field rule over `value`) or a
    dict name -> Deliverable (a whole-output rule over `output`). Returns HC302/HC303 errors."""
    if isinstance(subject, Mapping):
        checker = _Checker(
            rule.text,
            "output",
            _T("dict", fields={k: type_of_deliverable(v) for k, v in subject.items()}),
        )
    else:
        checker = _Checker(rule.text, "value", type_of_deliverable(subject))
    checker.condition(rule.tree)
    return sorted(checker.errors, key=lambda e: (e.offset, e.code))


class _Checker:
    def __init__(self, text: str, name: str, subject: _T):
        self.text, self.name, self.subject = text, name, subject
        self.errors: list[RuleError] = []
        self.types: dict[int, _T] = {}

    def desc(self, node: Node) -> str:
        s = " ".join(self.text[node.offset : node.end].split())
        return s if len(s) <= 40 else s[:37] + "..."

    def error(self, code, message, node_or_offset, length=1, hint=None) -> _T:
        self.errors.append(error_at(code, message, node_or_offset, length, hint))
        return ANY  # an erroneous sub-expression checks as `any`, so one mistake is one error

    def condition(self, node: Node) -> None:
        """A rule's result must be a condition; `and`/`or` pass each operand's result through."""
        t = self.visit(node)
        self._require_condition(node, t)

    def _require_condition(self, node: Node, t: _T) -> None:
        if isinstance(node, BoolOp):
            for side in (node.left, node.right):
                self._require_condition(side, self.types[id(side)])
            return
        if t.kind in ("bool", "any"):
            return
        d = self.desc(node)
        if t.kind in _NUM:
            hint = f"compare it, e.g. '{d} > 0'"
        elif t.kind in _SIZED:
            hint = f"compare it, e.g. 'len({d}) > 0'"
        else:
            hint = "compare it with ==, <, in ... or use a function that returns true or false"
        self.error("HC302", f"a rule must be a condition, but this is {t}", node, hint=hint)

    def visit(self, node: Node) -> _T:
        t = getattr(self, "v_" + type(node).__name__)(node)
        self.types[id(node)] = t
        return t

    def v_Const(self, node: Const) -> _T:
        v = node.value
        if v is None:
            return NONE
        return {bool: BOOL, int: INT, float: FLOAT, str: STR}[type(v)]

    def v_ListLit(self, node: ListLit) -> _T:
        items = [self.visit(i) for i in node.items]
        if not items:
            return _T("list")
        t = items[0]
        for i in items[1:]:
            t = _join(t, i)
        return _T("list", items=t)

    def v_Name(self, node: Name) -> _T:
        if node.name == self.name:
            return self.subject
        if node.name == "output":
            return self.error(
                "HC303",
                "'output' is only available in output_rules",
                node,
                hint="a field rule sees its own field as `value`",
            )
        return self.error(
            "HC303",
            "'value' is not available in output_rules",
            node,
            hint="a whole-output rule sees the output as `output`, e.g. output.FIELD",
        )

    def v_Attr(self, node: Attr) -> _T:
        t = self.visit(node.obj)
        return self._field(node.obj, t, node.name, node.name_offset, len(node.name))

    def _field(self, obj: Node, t: _T, name: str, offset: int, length: int) -> _T:
        if t.kind == "any" or (t.kind == "dict" and t.fields is None):
            return ANY
        if t.kind != "dict":
            return self.error(
                "HC302", f"{self.desc(obj)} is {t}; only a dict has fields", offset, length
            )
        if name not in t.fields:
            hint = did_you_mean(name, t.fields) or (
                "fields: " + ", ".join(t.fields) if t.fields else "it has no fields"
            )
            return self.error(
                "HC302", f"{self.desc(obj)} has no field '{name}'", offset, length, hint
            )
        return t.fields[name]

    def v_Index(self, node: Index) -> _T:
        t, i = self.visit(node.obj), self.visit(node.index)
        if t.kind == "any":
            return ANY
        if t.kind in ("list", "str"):
            if i.kind not in ("int", "bool", "any"):
                return self.error(
                    "HC302", f"an index into a {t} must be an int, not {i}", node.index
                )
            return (t.items or ANY) if t.kind == "list" else STR
        if t.kind == "dict":
            if i.kind not in ("str", "any"):
                return self.error("HC302", f"a dict key must be a str, not {i}", node.index)
            if isinstance(node.index, Const) and t.fields is not None:
                return self._field(
                    node.obj,
                    t,
                    node.index.value,
                    node.index.offset,
                    node.index.end - node.index.offset,
                )
            return ANY
        return self.error("HC302", f"{self.desc(node.obj)} is {t}; it can't be indexed", node)

    def v_Unary(self, node: Unary) -> _T:
        t = self.visit(node.operand)
        if node.op == "not":
            return BOOL
        if t.kind in ("int", "bool"):
            return INT
        if t.kind in ("float", "any"):
            return t
        return self.error(
            "HC302", f"unary minus needs a number; {self.desc(node.operand)} is {t}", node
        )

    def v_BinOp(self, node: BinOp) -> _T:
        a, b = self.visit(node.left), self.visit(node.right)
        op, ka, kb = node.op, a.kind, b.kind
        if ka in _NUM and kb in _NUM:
            return FLOAT if op == "/" else _num_join(a, b)
        if "any" in (ka, kb):
            if op in ("-", "/", "%") and ("str" in (ka, kb) or "list" in (ka, kb)):
                pass  # definitely wrong: fall through to the error
            else:
                return ANY
        if op == "+" and ka == kb and ka in ("str", "list"):
            return _join(a, b)
        if op == "*" and {ka, kb} in (
            {"str", "int"},
            {"str", "bool"},
            {"list", "int"},
            {"list", "bool"},
        ):
            return a if ka in ("str", "list") else b
        hint = None
        if op == "+" and {ka, kb} <= {"str", "int", "float", "bool"}:
            hint = "text and numbers can't be added; compare them separately"
        if op == "%" and ka == "str":
            hint = "'%' is only for numbers here (no string formatting)"
        return self.error(
            "HC302", f"'{op}' can't be applied to {a} and {b}", node.op_offset, len(op), hint
        )

    def v_BoolOp(self, node: BoolOp) -> _T:
        a, b = self.visit(node.left), self.visit(node.right)
        return BOOL if a.kind == b.kind == "bool" else _join(a, b)

    def v_Compare(self, node: Compare) -> _T:
        left_node, left = node.first, self.visit(node.first)
        for op, op_offset, right_node in node.rest:
            right = self.visit(right_node)
            self._compare(op, op_offset, left_node, left, right_node, right)
            left_node, left = right_node, right
        return BOOL

    def _compare(self, op, op_offset, ln, a: _T, rn, b: _T) -> None:
        where = (op_offset, len(op))
        if op in ("==", "!="):
            if not _can_equal(a, b):
                always = "false" if op == "==" else "true"
                self.error(
                    "HC302",
                    f"comparing {a} with {b} is always {always}",
                    *where,
                    f"{self.desc(ln)} is {a} and {self.desc(rn)} is {b}",
                )
        elif op in ("<", "<=", ">", ">="):
            if not _orderable(a, b):
                self.error(
                    "HC302",
                    f"can't compare {a} with {b} using '{op}'",
                    *where,
                    f"{self.desc(ln)} is {a} and {self.desc(rn)} is {b}",
                )
        else:  # in, not in
            if b.kind == "any":
                return
            if b.kind == "str" and a.kind not in ("str", "any"):
                self.error("HC302", f"'{op}' a str needs a str on the left, not {a}", *where)
            elif b.kind == "dict" and a.kind not in ("str", "any"):
                self.error("HC302", f"'{op}' a dict needs a str key on the left, not {a}", *where)
            elif b.kind == "list" and b.items is not None and not _can_equal(a, b.items):
                self.error(
                    "HC302",
                    f"{self.desc(rn)} holds {b.items} items, so {_a(a)} is never in it",
                    *where,
                )
            elif b.kind not in ("str", "list", "dict"):
                self.error(
                    "HC302",
                    f"'{op}' needs a str, list or dict on the right; {self.desc(rn)} is {b}",
                    *where,
                )

    def v_Call(self, node: Call) -> _T:
        args = [self.visit(a) for a in node.args]
        lo, hi = FUNCTIONS[node.func]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if lo == hi else (f"{lo} or more" if hi is None else f"{lo} to {hi}")
            return self.error(
                "HC302",
                f"{node.func}() takes {want} argument{'s' if want != '1' else ''} ({len(args)} given)",
                node,
            )
        return getattr(self, "f_" + node.func)(node, *args)

    def need(self, node: Call, i: int, t: _T, kinds: set[str], what: str) -> bool:
        if t.kind == "any" or t.kind in kinds:
            return True
        self.error(
            "HC302", f"{node.func}() needs {what}; {self.desc(node.args[i])} is {t}", node.args[i]
        )
        return False

    def f_len(self, node, t):
        self.need(node, 0, t, _SIZED, "str, list or dict")
        return INT

    def _minmax(self, node, *ts):
        if len(ts) == 1:
            t = ts[0]
            if not self.need(node, 0, t, {"list", "str"}, "a list (or several values)"):
                return ANY
            return STR if t.kind == "str" else (t.items or ANY) if t.kind == "list" else ANY
        result = ts[0]
        for i, t in enumerate(ts[1:], 1):
            if not _orderable(result, t):
                return self.error(
                    "HC302", f"{node.func}() can't compare {result} with {t}", node.args[i]
                )
            result = _join(result, t)
        return result

    f_min = f_max = _minmax

    def f_sum(self, node, t):
        if (
            self.need(node, 0, t, {"list"}, "a list of numbers")
            and t.kind == "list"
            and t.items is not None
        ):
            if t.items.kind in _NUM:
                return FLOAT if t.items.kind == "float" else INT
            if t.items.kind != "any":
                return self.error(
                    "HC302",
                    f"sum() needs a list of numbers; {self.desc(node.args[0])} holds {t.items}",
                    node.args[0],
                )
        return ANY

    def f_abs(self, node, t):
        self.need(node, 0, t, _NUM, "a number")
        return FLOAT if t.kind == "float" else INT if t.kind in ("int", "bool") else ANY

    def f_round(self, node, t, nd=None):
        self.need(node, 0, t, _NUM, "a number")
        if nd is not None:
            self.need(node, 1, nd, {"int", "bool"}, "an int number of digits")
            return FLOAT if t.kind == "float" else INT if t.kind in ("int", "bool") else ANY
        return INT

    def _str_fn(self, node, t):
        self.need(node, 0, t, {"str"}, "a str")
        return STR

    f_lower = f_upper = f_strip = _str_fn

    def _str_pred(self, node, *ts):
        for i, t in enumerate(ts):
            self.need(node, i, t, {"str"}, "a str")
        return BOOL

    f_startswith = f_endswith = f_matches = f_is_email = f_is_url = f_is_datetime = _str_pred

    def f_unique(self, node, t):
        self.need(node, 0, t, {"list"}, "a list")
        return BOOL

    def _all_any(self, node, t):
        self.need(node, 0, t, _SIZED, "a list")
        return BOOL

    f_all = f_any = _all_any
