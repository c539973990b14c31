"""The tree-walking interpreter, with bounded cost, and the allow-listed functions."""

from __future__ import annotations

import datetime
import json
import operator
from urllib.parse import urlsplit

from .. import userregex
from .parse import check_pattern
from .tree import (
    CHARS_PER_STEP,
    FUNCTIONS,
    MAX_INT,
    MAX_NDIGITS,
    MAX_SIZE,
    MAX_STEPS,
    REGEX_CHARS_PER_STEP,
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
    RuleEvalError,
    Unary,
)

# ------------------------------------------------------------------ evaluation


def _tn(x) -> str:
    """A value's type, in the rule language's words."""
    if x is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
        type(x), type(x).__name__
    )


def evaluate(rule: Rule, value=None, output=None, deadline=None) -> bool:
    """Run a rule; True when it holds. Raises RuleEvalError when it can't be evaluated.

    `deadline`, when given, is shared by many evaluations (e.g. validate.Deadline): its
    `check(steps)` is told the steps taken since the last call, every DEADLINE_EVERY steps,
    and raises when time or a shared step budget is up (the exception propagates); its
    `spend(steps)` gets the rest when the evaluation ends.
    """
    return bool(evaluate_value(rule, value, output, deadline))


def evaluate_value(rule: Rule, value=None, output=None, deadline=None):
    """The rule's raw result (an `and`/`or` returns an operand, like Python)."""
    ev = _Evaluator(rule.text, value, output, deadline)
    try:
        return ev.run(rule.tree)
    except RuleEvalError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as e:
        # a safety net: the operations below check their operands, so this is unexpected
        raise RuleEvalError(f"rule failed: {e}") from None
    finally:
        if deadline is not None:
            deadline.spend(ev.steps - ev.reported)


_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "%": operator.mod,
}
_CMP = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
# Run on RE2 like every regex that meets agent output; `$` there is the very end of the text.
_EMAIL = (
    r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
)


def _is_email(s) -> bool:
    if not isinstance(s, str) or len(s) > 254:
        return False
    return userregex.search(_EMAIL, s) and len(s.split("@")[0]) <= 64


def _is_url(s) -> bool:
    if not isinstance(s, str) or len(s) > 2048 or any(c.isspace() or ord(c) < 32 for c in s):
        return False

    try:
        parts = urlsplit(s)
        parts.port  # raises ValueError for a bad port
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


def _is_datetime(s) -> bool:
    if not isinstance(s, str) or not 0 < len(s) <= 64:
        return False
    if s[-1] in "Zz":
        s = s[:-1] + "+00:00"

    try:
        datetime.datetime.fromisoformat(s)
    except ValueError:
        return False
    return True


_json_key = json.JSONEncoder(sort_keys=True).encode  # unique()'s notion of "the same value"
DEADLINE_EVERY = 10_000  # steps between two deadline checks (well under a millisecond of work)


def _flat(x) -> int:
    """Steps of one pass over a string, list or dict (not into its items)."""
    if type(x) is str:
        return len(x) // CHARS_PER_STEP
    return len(x) if isinstance(x, (list, dict)) else 0


def _size(x, cap: int) -> int:
    """Steps of an operation that may visit all of `x`, nested items included (see MAX_STEPS).

    A list that holds the same big list 100,000 times counts it 100,000 times: comparing
    it does that work. Counting stops as soon as the total passes `cap`.
    """
    total, stack = 0, [x]
    while stack:
        y = stack.pop()
        t = type(y)
        if t is list:
            total += 1
            if total + len(y) > cap:  # each item will count at least 1
                return total + len(y)
            stack += y
        elif t is dict:
            total += 1 + len(y)  # the dict and its keys
            if total + len(y) > cap:
                return total + len(y)
            stack += y.values()
        elif t is str:
            total += 1 + len(y) // CHARS_PER_STEP
        else:
            total += 1
        if total > cap:
            return total
    return total


def _smaller_size(a, b, cap: int) -> int:
    """min(size of a, size of b): what comparing them can cost, found without walking all
    of the bigger one (the walk limit grows 4x until one side fits)."""
    limit = 64
    while True:
        m = min(_size(a, limit), _size(b, limit))
        if m <= limit or limit > cap:
            return m
        limit *= 4


class _Evaluator:
    def __init__(self, text: str, value, output, deadline=None):
        self.text = text
        self.env = {"value": value, "output": output}
        self.steps = 0
        self.deadline = deadline
        self.next_check = 0
        self.reported = 0  # steps told to the deadline so far

    def fail(self, message: str, node: Node) -> RuleEvalError:
        return RuleEvalError(message, node.offset, node.end - node.offset)

    def desc(self, node: Node) -> str:
        s = " ".join(self.text[node.offset : node.end].split())
        return s if len(s) <= 40 else s[:37] + "..."

    def run(self, node: Node):
        self.charge(1, node)
        return getattr(self, "e_" + type(node).__name__)(node)

    def charge(self, steps: int, node: Node) -> None:
        """Count `steps` of work before doing it; too costly or out of time raise."""
        self.steps += steps
        if self.steps > MAX_STEPS:
            raise self.fail(
                f"rule is too costly for this data (more than {MAX_STEPS:,} steps; "
                "see 'Rule cost' in docs/spec-reference.md)", node)
        if self.deadline is not None and self.steps >= self.next_check:
            self.next_check = self.steps + DEADLINE_EVERY
            steps, self.reported = self.steps - self.reported, self.steps
            self.deadline.check(steps)

    def charge_size(self, x, node: Node) -> None:
        self.charge(_size(x, MAX_STEPS - self.steps), node)

    def check_int(self, x, node: Node):
        if type(x) is int and abs(x) > MAX_INT:
            raise self.fail("number is too large (more than 10**100)", node)
        return x

    def e_Const(self, node: Const):
        return node.value

    def e_ListLit(self, node: ListLit):
        return [self.run(i) for i in node.items]

    def e_Name(self, node: Name):
        return self.env[node.name]

    def e_Attr(self, node: Attr):
        obj = self.run(node.obj)
        if not isinstance(obj, dict):
            raise self.fail(
                f"{self.desc(node.obj)} is {_tn(obj)}, not a dict with field '{node.name}'", node
            )
        if node.name not in obj:
            raise self.fail(f"{self.desc(node.obj)} has no field '{node.name}'", node)
        return obj[node.name]

    def e_Index(self, node: Index):
        obj, i = self.run(node.obj), self.run(node.index)
        if isinstance(obj, dict):
            if not isinstance(i, (str, int, float, bool)) and i is not None:
                raise self.fail(f"a dict key can't be a {_tn(i)}", node.index)
            self.charge(_flat(i), node)  # hashing a str key
            if i not in obj:
                raise self.fail(f"{self.desc(node.obj)} has no key {i!r}", node)
            return obj[i]
        if isinstance(obj, (list, str)):
            if type(i) not in (int, bool):
                raise self.fail(f"an index must be an int, not {_tn(i)}", node.index)
            if not -len(obj) <= i < len(obj):
                raise self.fail(
                    f"index {i} is out of range ({self.desc(node.obj)} has length {len(obj)})", node
                )
            return obj[i]
        raise self.fail(f"{self.desc(node.obj)} is {_tn(obj)}; it can't be indexed", node)

    def e_Unary(self, node: Unary):
        x = self.run(node.operand)
        if node.op == "not":
            return not x
        if type(x) not in (int, float, bool):
            raise self.fail(f"unary minus needs a number, not {_tn(x)}", node)
        return self.check_int(-x, node)

    def e_BoolOp(self, node: BoolOp):
        left = self.run(node.left)
        if node.op == "and":
            return self.run(node.right) if left else left
        return left if left else self.run(node.right)

    def e_BinOp(self, node: BinOp):
        a, b = self.run(node.left), self.run(node.right)
        op = node.op
        ta, tb = type(a), type(b)
        nums = (int, float, bool)
        if ta in nums and tb in nums:
            pass
        elif op == "+" and ta is tb and ta in (str, list):
            if len(a) + len(b) > MAX_SIZE:
                raise self.fail(f"result would be longer than {MAX_SIZE}", node)
        elif op == "*" and (
            (ta in (str, list) and tb in (int, bool)) or (tb in (str, list) and ta in (int, bool))
        ):
            seq, n = (a, b) if ta in (str, list) else (b, a)
            if n > 0 and len(seq) * n > MAX_SIZE:
                raise self.fail(f"result would be longer than {MAX_SIZE}", node)
        else:
            raise self.fail(f"'{op}' can't be applied to {_tn(a)} and {_tn(b)}", node)
        if ta in (str, list) or tb in (str, list):  # building the result copies it
            seq, n = (a, b) if ta in (str, list) else (b, a)
            size = len(a) + len(b) if op == "+" else len(seq) * max(0, n)
            self.charge(size // CHARS_PER_STEP if type(seq) is str else size, node)
        try:
            r = _ARITH[op](a, b)
        except ZeroDivisionError:
            raise self.fail("division by zero", node) from None
        except OverflowError:
            raise self.fail("number is too large", node) from None
        return self.check_int(r, node)

    def e_Compare(self, node: Compare):
        a = self.run(node.first)
        for op, _, right in node.rest:
            b = self.run(right)
            if not self.compare(op, a, b, node):
                return False
            a = b
        return True

    def compare(self, op: str, a, b, node: Node) -> bool:
        try:
            if op in ("in", "not in"):
                if not isinstance(b, (str, list, dict)):
                    raise self.fail(
                        f"'{op}' needs a str, list or dict on the right, not {_tn(b)}", node
                    )
                if isinstance(b, list):  # compares a with every item
                    self.charge_size(b, node)
                else:  # a substring search, or hashing a key
                    self.charge(_flat(b) + _flat(a) if type(b) is str else _size(a, MAX_STEPS), node)
                found = a in b
                return found if op == "in" else not found
            self.charge(_smaller_size(a, b, MAX_STEPS - self.steps), node)
            return _CMP[op](a, b)
        except TypeError:
            if op in ("in", "not in"):
                raise self.fail(f"'{op}' {_tn(b)} can't look for a {_tn(a)}", node) from None
            raise self.fail(f"can't compare {_tn(a)} with {_tn(b)} using '{op}'", node) from None
        except RecursionError:
            raise self.fail("values are nested too deeply to compare", node) from None

    def e_Call(self, node: Call):
        args = [self.run(a) for a in node.args]
        lo, hi = FUNCTIONS[node.func]
        if len(args) < lo or (hi is not None and len(args) > hi):
            raise self.fail(f"{node.func}() got {len(args)} arguments", node)
        try:
            return getattr(self, "f_" + node.func)(node, *args)
        except TypeError as e:
            raise self.fail(f"{node.func}(): {e}", node) from None
        except (ValueError, OverflowError) as e:
            raise self.fail(f"{node.func}(): {e}", node) from None

    def need(self, node: Call, x, types, what: str):
        if type(x) not in types:
            raise self.fail(f"{node.func}() needs {what}, not {_tn(x)}", node)

    def f_len(self, node, x):
        self.need(node, x, (str, list, dict), "str, list or dict")
        return len(x)

    def _minmax(self, node, *xs):
        fn = min if node.func == "min" else max
        if len(xs) == 1:
            self.need(node, xs[0], (list, str, dict), "a list")
            if not xs[0]:
                raise self.fail(f"{node.func}() of an empty {_tn(xs[0])}", node)
            xs = xs[0]
        self.charge_size(xs, node)
        try:
            return fn(xs)
        except TypeError:
            raise self.fail(
                f"{node.func}() can't compare {', '.join(sorted({_tn(x) for x in xs}))}", node
            ) from None

    f_min = f_max = _minmax

    def f_sum(self, node, xs):
        self.need(node, xs, (list, dict, str), "a list of numbers")
        self.charge(len(xs), node)
        if any(type(x) not in (int, float, bool) for x in xs):
            raise self.fail("sum() needs a list of numbers", node)
        return self.check_int(sum(xs), node)

    def f_abs(self, node, x):
        self.need(node, x, (int, float, bool), "a number")
        return abs(x)

    def f_round(self, node, x, nd=None):
        self.need(node, x, (int, float, bool), "a number")
        if nd is None:
            return round(x)
        self.need(node, nd, (int, bool), "an int number of digits")
        if abs(nd) > MAX_NDIGITS:
            raise self.fail(
                f"round() digits must be between -{MAX_NDIGITS} and {MAX_NDIGITS}", node
            )
        return round(x, nd)

    def f_lower(self, node, s):
        self.need(node, s, (str,), "a str")
        self.charge(_flat(s), node)
        return s.lower()

    def f_upper(self, node, s):
        self.need(node, s, (str,), "a str")
        self.charge(_flat(s), node)
        return s.upper()

    def f_strip(self, node, s):
        self.need(node, s, (str,), "a str")
        self.charge(_flat(s), node)
        return s.strip()

    def f_startswith(self, node, s, prefix):
        self.need(node, s, (str,), "a str")
        self.need(node, prefix, (str,), "a str prefix")
        self.charge(_flat(prefix), node)
        return s.startswith(prefix)

    def f_endswith(self, node, s, suffix):
        self.need(node, s, (str,), "a str")
        self.need(node, suffix, (str,), "a str suffix")
        self.charge(_flat(suffix), node)
        return s.endswith(suffix)

    def f_matches(self, node, s, pattern):
        self.need(node, s, (str,), "a str")
        self.need(node, pattern, (str,), "a str pattern")
        why = check_pattern(pattern)
        if why:
            raise self.fail(f"matches(): {why.message}", node)
        self.charge(len(s) // REGEX_CHARS_PER_STEP, node)
        return userregex.search(pattern, s)

    def f_is_email(self, node, s):
        return _is_email(s)

    def f_is_url(self, node, s):
        return _is_url(s)

    def f_is_datetime(self, node, s):
        return _is_datetime(s)

    def f_unique(self, node, xs):
        self.need(node, xs, (list,), "a list")
        self.charge_size(xs, node)
        seen = set()
        for x in xs:
            key = _json_key(x)
            if key in seen:
                return False
            seen.add(key)
        return True

    def f_all(self, node, xs):
        self.need(node, xs, (list, str, dict), "a list")
        self.charge(_flat(xs), node)
        return all(xs)

    def f_any(self, node, xs):
        self.need(node, xs, (list, str, dict), "a list")
        self.charge(_flat(xs), node)
        return any(xs)
