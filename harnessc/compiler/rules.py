"""The rule language of contracts.yaml: parse, type-check and evaluate rule expressions.

A rule is a small, safe subset of Python expressions over `value` (a field rule) or
`output` (a whole-output rule), e.g. ``0 <= value <= 100`` or ``len(output.findings) > 0``.
Nothing is ever handed to Python's eval/exec/compile: rules are parsed with Lark
(grammar/rules.lark) into a typed AST, checked statically against the deliverable's type,
and run by a tree-walking interpreter whose cost is bounded:

- at parse time (HC304, never run): text length, nesting depth, literal sizes, no ``**``,
  no names starting with ``_``, no ``literal * literal`` building a huge string or list,
  regex literals of bounded length without nested repetition;
- at evaluation (RuleEvalError): sizes of built strings/lists, int magnitude, a step counter.

Lark is imported only when the first rule is parsed, so importing this module stays cheap.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from ..grammar import lark_cache_file
from ..diagnostics import did_you_mean

# ------------------------------------------------------------------ limits

MAX_RULE_CHARS = 1000
MAX_DEPTH = 32
MAX_INT_LITERAL = 10**18
MAX_STR_LITERAL = 10_000
MAX_SIZE = 100_000  # chars of a string / items of a list built while evaluating
MAX_INT = 10**100  # magnitude of an int produced by arithmetic
MAX_STEPS = 10_000  # node visits per evaluation
MAX_PATTERN = 200  # chars of a matches() regex
MAX_MATCH_INPUT = 10_000  # chars of the text matches() searches: `re` can backtrack
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


def _err(code: str, message: str, node_or_offset, length: int = 1, hint: str | None = None):
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


class ListLit(Node):
    __slots__ = FIELDS = ("items",)

    def children(self):
        return self.items


class Name(Node):
    __slots__ = FIELDS = ("name",)  # name: "value" or "output" once parse_rule has returned


class Attr(Node):
    __slots__ = FIELDS = ("obj", "name", "name_offset")

    def children(self):
        return (self.obj,)


class Index(Node):
    __slots__ = FIELDS = ("obj", "index")

    def children(self):
        return (self.obj, self.index)


class Call(Node):
    __slots__ = FIELDS = ("func", "args")  # func: one of FUNCTIONS

    def children(self):
        return self.args


class Unary(Node):
    __slots__ = FIELDS = ("op", "operand")  # op: "-" or "not"

    def children(self):
        return (self.operand,)


class BinOp(Node):
    __slots__ = FIELDS = ("op", "left", "right", "op_offset")  # op: + - * / %

    def children(self):
        return (self.left, self.right)


class BoolOp(Node):
    __slots__ = FIELDS = ("op", "left", "right")  # op: "and" or "or"

    def children(self):
        return (self.left, self.right)


class Compare(Node):
    """A chain like ``a < b <= c``: `rest` holds (operator, operator offset, operand)."""

    __slots__ = FIELDS = ("first", "rest")

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


# ------------------------------------------------------------------ parsing

_PARSER = None
_PARSER_LOCK = threading.Lock()


def _parser():
    """The Lark parser, built on first use (lark is imported here, not at module import)."""
    global _PARSER
    if _PARSER is None:
        with _PARSER_LOCK:
            if _PARSER is None:
                from lark import Lark

                from ..package_data import read_text

                _PARSER = Lark(
                    read_text("grammar", "rules.lark"),
                    parser="lalr",
                    lexer="basic",
                    transformer=_builder(),
                    maybe_placeholders=True,
                    cache=lark_cache_file("rules-grammar"),
                )
    return _PARSER


def parse_rule(text: str) -> Rule:
    """Parse a rule; raises RuleError (HC301 syntax, HC303 unknown name/function, HC304 unsafe)."""
    if not isinstance(text, str):
        raise RuleError("HC301", f"a rule must be a string, not {type(text).__name__}")
    return _parse_cached(text)


@functools.lru_cache(maxsize=2048)
def _parse_cached(text: str) -> Rule:
    # the tree is immutable, so one parse can serve every evaluation of the same rule
    if len(text) > MAX_RULE_CHARS:
        raise RuleError(
            "HC304",
            f"rule is too long ({len(text)} characters; at most {MAX_RULE_CHARS})",
            MAX_RULE_CHARS,
            len(text) - MAX_RULE_CHARS,
            "split it into several shorter rules",
        )
    if not text.strip():
        raise RuleError(
            "HC301", "a rule cannot be empty", 0, 1, "write a condition, e.g. 'value >= 0'"
        )
    _prescan(text)
    from lark.exceptions import UnexpectedInput

    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(text, e) from None
    _check_names(tree)
    return Rule(text, tree)


_SCAN = re.compile(
    r"""[rR]?'(?:[^'\\\n]|\\.)*'|[rR]?"(?:[^"\\\n]|\\.)*"|(?P<quote>['"])"""
    r"""|[0-9][A-Za-z0-9_.]*|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<pow>\*\*)|.""",
    re.S,
)


def _prescan(text: str) -> None:
    """Reject `**` and names starting with '_' outside strings, even in text that won't parse.

    Done before parsing so that `().__class__`, `__import__('os')` or `9**9**9` is named as
    unsafe (at its first occurrence) rather than reported as a syntax error elsewhere.
    """
    for m in _SCAN.finditer(text):
        if m.group("quote"):
            return  # an unterminated string: the parser reports it
        if m.group("pow"):
            raise _pow_error(m.start())
        name = m.group("name")
        if name and name.startswith("_"):
            raise RuleError(
                "HC304",
                f"'{name}' is not allowed: names starting with '_' are never available in rules",
                m.start(),
                len(name),
                (
                    f"to read a field named '{name}', index it: value['{name}']"
                    if not name.startswith("__")
                    else "rules can use value, output and the functions " + ", ".join(FUNCTIONS)
                ),
            )


def _check_names(tree: Node) -> None:
    """Bare names must be value or output (function names only appear in Call nodes)."""
    bad = [n for n in Rule("", tree).walk() if isinstance(n, Name) and n.name not in NAMES]
    if not bad:
        return
    n = min(bad, key=lambda n: n.offset)
    if n.name in FUNCTIONS:
        raise _err("HC303", f"'{n.name}' is a function: call it, e.g. {n.name}(value)", n)
    hint = (
        did_you_mean(n.name, NAMES)
        or "a rule can use `value` (its field) or `output` (the whole output); quote text like 'this'"
    )
    raise _err("HC303", f"unknown name '{n.name}'", n, hint=hint)


# Terminal names of rules.lark, in plain words for "expected ..." hints.
_EXPR_START = set(
    "NAME INT FLOAT STRING TRUE TRUE_PY FALSE FALSE_PY NULL NONE_PY LPAR LSQB MINUS NOT".split()
)
_OPERATORS = set(
    "OR AND NOT IN LT LE GT GE EQ NE PLUS MINUS STAR POW SLASH PERCENT DOT LPAR LSQB".split()
)
_WORDS = {
    "RPAR": "')'",
    "RSQB": "']'",
    "COMMA": "','",
    "$END": "the end of the rule",
    "NAME": "a name",
    "INT": "a number",
    "FLOAT": "a number",
    "STRING": "a string",
    "OR": "'or'",
    "AND": "'and'",
    "NOT": "'not'",
    "IN": "'in'",
    "LT": "'<'",
    "LE": "'<='",
    "GT": "'>'",
    "GE": "'>='",
    "EQ": "'=='",
    "NE": "'!='",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "POW": "'**'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "DOT": "'.'",
    "LPAR": "'('",
    "LSQB": "'['",
    "TRUE": "true",
    "TRUE_PY": "True",
    "FALSE": "false",
    "FALSE_PY": "False",
    "NULL": "null",
    "NONE_PY": "None",
}
_CHAR_HINTS = {
    "=": "use == to compare",
    "&": "use 'and'",
    "|": "use 'or'",
    "!": "use 'not' (or != to compare)",
    "{": "dict literals are not supported; compare fields one by one",
    "}": "dict literals are not supported; compare fields one by one",
    ":": "slices and dict literals are not supported",
    ";": "write one expression per rule",
    "`": "quote text with ' or \"",
}


def _plain(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _expected_words(expected) -> str:
    exp = set(expected)
    words = []
    if exp == {"NAME"}:
        return "a field name"
    if "NAME" in exp:
        words.append("an expression")
        exp -= _EXPR_START
    if exp & (_OPERATORS - {"LPAR", "LSQB", "MINUS", "NOT"}):
        words.append("an operator")
        exp -= _OPERATORS
    words += sorted({_WORDS.get(t, t) for t in exp if t in _WORDS})
    return _plain(words) if words else "something else"


def _describe_token(token) -> str:
    if token.type == "$END":
        return "end of rule"
    if token.type == "STRING":
        return "string"
    if token.type in ("INT", "FLOAT"):
        return f"number {token.value}"
    return f"'{token.value}'"


def _syntax_error(text: str, e) -> RuleError:
    """Turn a Lark UnexpectedInput into HC301 at the right offset, with a plain-words hint."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    if isinstance(e, UnexpectedCharacters):
        pos, ch = e.pos_in_stream, text[e.pos_in_stream]
        quote = text[pos + 1 : pos + 2] if ch in "rR" else ch
        if quote in ("'", '"'):
            return RuleError(
                "HC301",
                "unterminated string",
                pos,
                len(text) - pos,
                f"close it with {quote} on the same line",
            )
        if ch == "\\":
            return RuleError("HC301", "unexpected '\\' outside a string", pos, 1)
        return RuleError(
            "HC301",
            f"unexpected character {ch!r}",
            pos,
            1,
            _CHAR_HINTS.get(ch, "expected an expression or an operator"),
        )
    if isinstance(e, UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            expected = getattr(e, "accepts", None) or e.expected
            return RuleError(
                "HC301",
                "the rule ends too early",
                len(text),
                1,
                "expected " + _expected_words(expected),
            )
        expected = getattr(e, "accepts", None) or e.expected  # accepts: exact for this state
        hint = "expected " + _expected_words(expected)
        message = f"unexpected {_describe_token(tok)}"
        if tok.type in _EXPR_START - {"MINUS", "LPAR", "LSQB"} and "NAME" not in expected:
            message += " (is an operator missing?)"
        if tok.type == "COMMA" and "RPAR" in expected:
            hint = "tuples are not supported; use a list like [1, 2]"
        return RuleError("HC301", message, tok.start_pos, max(1, len(tok.value)), hint)
    pos = getattr(e, "pos_in_stream", None)
    pos = len(text) if pos is None or pos < 0 else pos
    return RuleError(
        "HC301",
        "the rule ends too early",
        pos,
        1,
        "expected " + _expected_words(getattr(e, "expected", ())),
    )


_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\n": "",
}
_ESCAPE_RE = re.compile(
    r"\\(N\{[^}]*\}|x[0-9A-Fa-f]{0,2}|u[0-9A-Fa-f]{0,4}|U[0-9A-Fa-f]{0,8}|[0-7]{1,3}|.)", re.S
)


def _unescape(body: str, start: int) -> str:
    """Python string-literal escapes; unknown ones (like \\d) stay as written, as in Python."""

    def repl(m: re.Match) -> str:
        s = m.group(1)
        k = s[0]
        if k in "xuU":
            want = {"x": 2, "u": 4, "U": 8}[k]
            if len(s) - 1 != want:
                raise RuleError(
                    "HC301",
                    f"bad escape \\{s}: \\{k} needs {want} hex digits",
                    start + m.start(),
                    len(m.group(0)),
                )
            code = int(s[1:], 16)
            if code > 0x10FFFF:
                raise RuleError(
                    "HC301",
                    f"bad escape \\{s}: not a Unicode character",
                    start + m.start(),
                    len(m.group(0)),
                )
            return chr(code)
        if k in "01234567":
            return chr(int(s, 8))
        if k == "N":
            import unicodedata

            try:
                return unicodedata.lookup(s[2:-1])
            except KeyError:
                raise RuleError(
                    "HC301",
                    f"unknown Unicode character name in \\{s}",
                    start + m.start(),
                    len(m.group(0)),
                ) from None
        return _ESCAPES.get(k, m.group(0))

    return _ESCAPE_RE.sub(repl, body)


def _pow_error(offset: int) -> RuleError:
    return RuleError(
        "HC304",
        "power operator is not allowed",
        offset,
        2,
        "'**' can build enormous numbers; multiply instead",
    )


_NESTED_REPEAT_MSG = "nested repetition like (a+)+ can take exponential time"


def _check_pattern(pattern: str) -> str | None:
    """Why a matches() pattern is rejected, or None; compiling it too is the caller's job."""
    if len(pattern) > MAX_PATTERN:
        return f"regular expression is too long ({len(pattern)} characters; at most {MAX_PATTERN})"
    try:
        import re._parser as sre_parse  # the stdlib's own regex parser (Python 3.11+)
        import re._constants as sre_const
    except ImportError:  # pragma: no cover - other Pythons: length bound only
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        return None  # reported as invalid by the compile step
    repeats = (
        sre_const.MAX_REPEAT,
        sre_const.MIN_REPEAT,
        getattr(sre_const, "POSSESSIVE_REPEAT", None),
    )

    def has_repeat(items, inside: bool) -> bool:
        for op, av in items:
            if op in repeats and av[1] > 1:
                if inside:
                    return True
                if has_repeat(av[2], True):
                    return True
            elif op is sre_const.SUBPATTERN:
                if has_repeat(av[-1], inside):
                    return True
            elif op is sre_const.BRANCH:
                if any(has_repeat(b, inside) for b in av[1]):
                    return True
            elif op in (sre_const.ASSERT, sre_const.ASSERT_NOT):
                if has_repeat(av[1], inside):
                    return True
        return False

    return _NESTED_REPEAT_MSG if has_repeat(parsed, False) else None


@functools.lru_cache(maxsize=256)
def _compile_pattern(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _builder():
    """The Lark transformer embedded in the parser: builds the AST bottom-up, checking limits."""
    from lark import Transformer, v_args

    def finish(node: Node, *kids: Node) -> Node:
        depth = 1 + max((k.depth for k in kids), default=0)
        if depth > MAX_DEPTH:
            raise _err(
                "HC304",
                f"rule is nested too deeply (more than {MAX_DEPTH} levels)",
                node,
                hint="split it into several rules",
            )
        object.__setattr__(node, "depth", depth)  # frozen dataclass: set once, here
        return node

    def check_name(tok) -> str:
        if tok.value.startswith("_"):  # normally caught by _prescan already
            raise RuleError(
                "HC304",
                f"'{tok.value}' is not allowed: names starting with '_' are never available in rules",
                tok.start_pos,
                len(tok.value),
            )
        return tok.value

    @v_args(inline=True)
    class Build(Transformer):
        def int_lit(self, tok):
            n = int(tok.value)
            if n > MAX_INT_LITERAL:
                raise RuleError(
                    "HC304", "number is too large (at most 10**18)", tok.start_pos, len(tok.value)
                )
            return Const(offset=tok.start_pos, end=tok.end_pos, value=n)

        def float_lit(self, tok):
            x = float(tok.value)
            if math.isinf(x):
                raise RuleError(
                    "HC304", "number is too large for a float", tok.start_pos, len(tok.value)
                )
            return Const(offset=tok.start_pos, end=tok.end_pos, value=x)

        def str_lit(self, tok):
            raw = tok.value
            prefix = 1 if raw[0] in "rR" else 0
            body = raw[prefix + 1 : -1]
            s = body if prefix else _unescape(body, tok.start_pos + 1)
            if len(s) > MAX_STR_LITERAL:
                raise RuleError(
                    "HC304",
                    f"string is too long (at most {MAX_STR_LITERAL} characters)",
                    tok.start_pos,
                    len(raw),
                )
            return Const(offset=tok.start_pos, end=tok.end_pos, value=s)

        def const(self, tok):
            v = {"TRUE": True, "TRUE_PY": True, "FALSE": False, "FALSE_PY": False}.get(tok.type)
            return Const(offset=tok.start_pos, end=tok.end_pos, value=v)

        def name(self, tok):
            return Name(offset=tok.start_pos, end=tok.end_pos, name=check_name(tok))

        def paren(self, lpar, inner, rpar):
            return inner

        def args(self, *items):
            return tuple(i for i in items if isinstance(i, Node))

        def list_lit(self, lsqb, items, rsqb):
            items = items or ()
            return finish(ListLit(offset=lsqb.start_pos, end=rsqb.end_pos, items=items), *items)

        def attr(self, obj, dot, tok):
            return finish(
                Attr(
                    offset=obj.offset,
                    end=tok.end_pos,
                    obj=obj,
                    name=check_name(tok),
                    name_offset=tok.start_pos,
                ),
                obj,
            )

        def index(self, obj, lsqb, idx, rsqb):
            return finish(Index(offset=obj.offset, end=rsqb.end_pos, obj=obj, index=idx), obj, idx)

        def call(self, callee, lpar, args, rpar):
            args = args or ()
            if isinstance(callee, Name) and callee.name in FUNCTIONS:
                node = Call(offset=callee.offset, end=rpar.end_pos, func=callee.name, args=args)
                if callee.name == "matches" and len(args) == 2:
                    _check_literal_pattern(args[1])
                return finish(node, *args)
            if isinstance(callee, Name):
                hint = did_you_mean(callee.name, FUNCTIONS) or "functions: " + ", ".join(FUNCTIONS)
                if callee.name in NAMES:
                    raise _err("HC303", f"'{callee.name}' is not a function", callee, hint=hint)
                raise _err("HC303", f"unknown function '{callee.name}'", callee, hint=hint)
            if isinstance(callee, Attr):
                fn = callee.name if callee.name in FUNCTIONS else "lower"
                raise RuleError(
                    "HC303",
                    f"methods can't be called in rules: '.{callee.name}()'",
                    callee.name_offset,
                    len(callee.name),
                    f"use the function form, e.g. {fn}(x) instead of x.{fn}()",
                )
            raise RuleError(
                "HC303",
                "only the allow-listed functions can be called",
                lpar.start_pos,
                1,
                "functions: " + ", ".join(FUNCTIONS),
            )

        def unary(self, op, operand):
            return finish(
                Unary(offset=op.start_pos, end=operand.end, op=op.value, operand=operand), operand
            )

        def power(self, left, op, right):
            raise _pow_error(op.start_pos)  # normally caught by _prescan already

        def binop(self, left, op, right):
            node = BinOp(
                offset=left.offset,
                end=right.end,
                op=op.value,
                left=left,
                right=right,
                op_offset=op.start_pos,
            )
            if op.value == "*":
                _check_literal_repeat(node)
            return finish(node, left, right)

        def boolop(self, left, op, right):
            return finish(
                BoolOp(offset=left.offset, end=right.end, op=op.value, left=left, right=right),
                left,
                right,
            )

        def comp_op(self, *toks):
            return (" ".join(t.value for t in toks), toks[0].start_pos)

        def compare(self, first, *rest):
            pairs = tuple((rest[i][0], rest[i][1], rest[i + 1]) for i in range(0, len(rest), 2))
            operands = (first, *(n for _, _, n in pairs))
            return finish(
                Compare(offset=first.offset, end=operands[-1].end, first=first, rest=pairs),
                *operands,
            )

    return Build()


def _check_literal_pattern(arg: Node) -> None:
    if isinstance(arg, Const) and isinstance(arg.value, str):
        why = _check_pattern(arg.value)
        if why:
            raise _err("HC304", why, arg, hint="use a shorter, simpler pattern")
        try:
            _compile_pattern(arg.value)
        except re.error as e:
            raise _err("HC301", f"invalid regular expression: {e}", arg) from None


def _check_literal_repeat(node: BinOp) -> None:
    """`'a' * 1000000` is rejected before it runs when both sides are literals."""
    for seq, n in ((node.left, node.right), (node.right, node.left)):
        if isinstance(n, Const) and isinstance(n.value, int):
            if isinstance(seq, Const) and isinstance(seq.value, str):
                size, what = len(seq.value) * n.value, "a string of"
            elif isinstance(seq, ListLit):
                size, what = len(seq.items) * n.value, "a list of"
            else:
                continue
            if size > MAX_SIZE:
                unit = "characters" if what == "a string of" else "items"
                raise _err(
                    "HC304", f"this would build {what} {size} {unit} (at most {MAX_SIZE})", node
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
        self.errors.append(_err(code, message, node_or_offset, length, hint))
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


# ------------------------------------------------------------------ evaluation


def _tn(x) -> str:
    """A value's type, in the rule language's words."""
    if x is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
        type(x), type(x).__name__
    )


def evaluate(rule: Rule, value=None, output=None) -> bool:
    """Run a rule; True when it holds. Raises RuleEvalError when it can't be evaluated."""
    return bool(evaluate_value(rule, value, output))


def evaluate_value(rule: Rule, value=None, output=None):
    """The rule's raw result (an `and`/`or` returns an operand, like Python)."""
    ev = _Evaluator(rule.text, value, output)
    try:
        return ev.run(rule.tree)
    except RuleEvalError:
        raise
    except (TypeError, ValueError, ArithmeticError, LookupError, RecursionError) as e:
        # a safety net: the operations below check their operands, so this is unexpected
        raise RuleEvalError(f"rule failed: {e}") from None


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
_EMAIL = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
)


def _is_email(s) -> bool:
    if not isinstance(s, str) or len(s) > 254:
        return False
    return bool(_EMAIL.fullmatch(s)) and len(s.split("@")[0]) <= 64


def _is_url(s) -> bool:
    if not isinstance(s, str) or len(s) > 2048 or any(c.isspace() or ord(c) < 32 for c in s):
        return False
    from urllib.parse import urlsplit  # evaluation only: lint's start-up stays light

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
    import datetime  # evaluation only

    try:
        datetime.datetime.fromisoformat(s)
    except ValueError:
        return False
    return True


class _Evaluator:
    def __init__(self, text: str, value, output):
        self.text = text
        self.env = {"value": value, "output": output}
        self.steps = 0

    def fail(self, message: str, node: Node) -> RuleEvalError:
        return RuleEvalError(message, node.offset, node.end - node.offset)

    def desc(self, node: Node) -> str:
        s = " ".join(self.text[node.offset : node.end].split())
        return s if len(s) <= 40 else s[:37] + "..."

    def run(self, node: Node):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise self.fail(f"rule took too many steps (more than {MAX_STEPS})", node)
        return getattr(self, "e_" + type(node).__name__)(node)

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
                found = a in b
                return found if op == "in" else not found
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
        try:
            return fn(xs)
        except TypeError:
            raise self.fail(
                f"{node.func}() can't compare {', '.join(sorted({_tn(x) for x in xs}))}", node
            ) from None

    f_min = f_max = _minmax

    def f_sum(self, node, xs):
        self.need(node, xs, (list, dict, str), "a list of numbers")
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
        return s.lower()

    def f_upper(self, node, s):
        self.need(node, s, (str,), "a str")
        return s.upper()

    def f_strip(self, node, s):
        self.need(node, s, (str,), "a str")
        return s.strip()

    def f_startswith(self, node, s, prefix):
        self.need(node, s, (str,), "a str")
        self.need(node, prefix, (str,), "a str prefix")
        return s.startswith(prefix)

    def f_endswith(self, node, s, suffix):
        self.need(node, s, (str,), "a str")
        self.need(node, suffix, (str,), "a str suffix")
        return s.endswith(suffix)

    def f_matches(self, node, s, pattern):
        self.need(node, s, (str,), "a str")
        self.need(node, pattern, (str,), "a str pattern")
        why = _check_pattern(pattern)
        if why:
            raise self.fail(f"matches(): {why}", node)
        if len(s) > MAX_MATCH_INPUT:
            raise self.fail(
                f"matches(): text is too long ({len(s)} characters; at most {MAX_MATCH_INPUT})",
                node,
            )
        try:
            compiled = _compile_pattern(pattern)
        except re.error as e:
            raise self.fail(f"matches(): invalid regular expression: {e}", node) from None
        return compiled.search(s) is not None

    def f_is_email(self, node, s):
        return _is_email(s)

    def f_is_url(self, node, s):
        return _is_url(s)

    def f_is_datetime(self, node, s):
        return _is_datetime(s)

    def f_unique(self, node, xs):
        self.need(node, xs, (list,), "a list")
        seen = set()
        for x in xs:
            key = json.dumps(x, sort_keys=True)
            if key in seen:
                return False
            seen.add(key)
        return True

    def f_all(self, node, xs):
        self.need(node, xs, (list, str, dict), "a list")
        return all(xs)

    def f_any(self, node, xs):
        self.need(node, xs, (list, str, dict), "a list")
        return any(xs)
