"""The rule AST: node classes, the cost limits, and the two errors (RuleError, RuleEvalError)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

# ------------------------------------------------------------------ limits

MAX_RULE_CHARS = 1000
MAX_DEPTH = 32
MAX_INT_LITERAL = 10**18
MAX_STR_LITERAL = 10_000
MAX_SIZE = 100_000  # chars of a string / items of a list built while evaluating
MAX_INT = 10**100  # magnitude of an int produced by arithmetic
# The step budget of one evaluation: a node visit is one step, and an operation costs the size
# of the data it touches (one step per list item, dict entry or number, one per CHARS_PER_STEP
# characters of a string; matches() one per REGEX_CHARS_PER_STEP), so a rule over any input
# ends within the budget, about a tenth of a second.
MAX_STEPS = 1_000_000
CHARS_PER_STEP = 16
REGEX_CHARS_PER_STEP = 4
MAX_PATTERN = 200  # chars of a matches() regex (run on RE2: see compiler/userregex.py)
MAX_NDIGITS = 400  # round(x, n): int rounding with a huge negative n computes 10**-n

NAMES = ("value", "output")
# name -> (min args, max args or None for any number)
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    "len": (1, 1),
    "min": (1, None),
    "max": (1, None),
    "sum": (1, 1),
    "abs": (1, 1),
    "round": (1, 2),
    "lower": (1, 1),
    "upper": (1, 1),
    "strip": (1, 1),
    "startswith": (2, 2),
    "endswith": (2, 2),
    "matches": (2, 2),
    "is_email": (1, 1),
    "is_url": (1, 1),
    "is_datetime": (1, 1),
    "unique": (1, 1),
    "all": (1, 1),
    "any": (1, 1),
}

# ------------------------------------------------------------------ errors


class RuleError(Exception):
    """A problem found before running a rule: HC301 syntax, HC302 type, HC303 name, HC304 unsafe.

    `offset` is 0-based in the rule text (len(text) for "ended too early"); `length` >= 1.
    """

    def __init__(
        self, code: str, message: str, offset: int = 0, length: int = 1, hint: str | None = None
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.offset = max(0, offset)
        self.length = max(1, length)
        self.hint = hint

    def __repr__(self) -> str:
        return f"RuleError({self.code!r}, {self.message!r}, offset={self.offset}, length={self.length})"


class RuleEvalError(Exception):
    """A rule failed while running (type error, missing field, a cost limit); user-readable.

    `offset`/`length` locate the failing sub-expression in the rule text.
    """

    def __init__(self, message: str, offset: int = 0, length: int = 1):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.length = max(1, length)


def error_at(code: str, message: str, node_or_offset, length: int = 1, hint: str | None = None):
    if isinstance(node_or_offset, Node):
        n = node_or_offset
        return RuleError(code, message, n.offset, n.end - n.offset, hint)
    return RuleError(code, message, node_or_offset, length, hint)


# ------------------------------------------------------------------ AST


class Node:
    """Base of the rule AST; `offset`..`end` is the node's span in the rule text.

    Plain immutable classes with __slots__, not dataclasses: a dozen frozen dataclasses
    cost ~13 ms of start-up (each is generated with exec), and every lint imports this.
    """

    __slots__ = ("offset", "end", "depth")
    offset: int
    end: int
    depth: int
    FIELDS: tuple[str, ...] = ()

    def __init__(self, *, offset: int, end: int, depth: int = 1, **fields: Any):
        set_ = object.__setattr__
        set_(self, "offset", offset)
        set_(self, "end", end)
        set_(self, "depth", depth)
        for name in self.FIELDS:
            set_(self, name, fields.pop(name))
        if fields:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(fields)}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _key(self) -> tuple:
        return (type(self), self.offset, self.end, *(getattr(self, f) for f in self.FIELDS))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = [f"offset={self.offset}", f"end={self.end}"] + [f"{f}={getattr(self, f)!r}" for f in self.FIELDS]
        return f"{type(self).__name__}({', '.join(parts)})"

    def children(self) -> tuple["Node", ...]:
        return ()


class Const(Node):
    __slots__ = FIELDS = ("value",)  # value: int, float, str, bool or None
    value: Any


class ListLit(Node):
    __slots__ = FIELDS = ("items",)
    items: tuple[Node, ...]

    def children(self):
        return self.items


class Name(Node):
    __slots__ = FIELDS = ("name",)  # name: "value" or "output" once parse_rule has returned
    name: str


class Attr(Node):
    __slots__ = FIELDS = ("obj", "name", "name_offset")
    obj: Node
    name: str
    name_offset: int

    def children(self):
        return (self.obj,)


class Index(Node):
    __slots__ = FIELDS = ("obj", "index")
    obj: Node
    index: Node

    def children(self):
        return (self.obj, self.index)


class Call(Node):
    __slots__ = FIELDS = ("func", "args")  # func: one of FUNCTIONS
    func: str
    args: tuple[Node, ...]

    def children(self):
        return self.args


class Unary(Node):
    __slots__ = FIELDS = ("op", "operand")  # op: "-" or "not"
    op: str
    operand: Node

    def children(self):
        return (self.operand,)


class BinOp(Node):
    __slots__ = FIELDS = ("op", "left", "right", "op_offset")  # op: + - * / %
    op: str
    left: Node
    right: Node
    op_offset: int

    def children(self):
        return (self.left, self.right)


class BoolOp(Node):
    __slots__ = FIELDS = ("op", "left", "right")  # op: "and" or "or"
    op: str
    left: Node
    right: Node

    def children(self):
        return (self.left, self.right)


class Compare(Node):
    """A chain like ``a < b <= c``: `rest` holds (operator, operator offset, operand)."""

    __slots__ = FIELDS = ("first", "rest")
    first: Node
    rest: tuple[tuple[str, int, Node], ...]

    def children(self):
        return (self.first, *(n for _, _, n in self.rest))


@dataclass(frozen=True)
class Rule:
    text: str
    tree: Node

    def walk(self) -> Iterator[Node]:
        """Every node, parents before children."""
        stack = [self.tree]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))
