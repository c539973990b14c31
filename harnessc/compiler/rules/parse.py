"""Parsing rules: the pre-scan for unsafe text, the Lark LALR parser and the AST builder."""

from __future__ import annotations

import functools
import math
import re
import threading

from ...diagnostics import did_you_mean
from .. import userregex
from .tree import (
    FUNCTIONS,
    MAX_DEPTH,
    MAX_INT_LITERAL,
    MAX_PATTERN,
    MAX_RULE_CHARS,
    MAX_SIZE,
    MAX_STR_LITERAL,
    NAMES,
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

# ------------------------------------------------------------------ parsing

_PARSER = None
_PARSER_LOCK = threading.Lock()


def _parser():
    """The LALR parser of grammar/rules.lark (tables generated into
    harnessc/grammar/lark_parsers.py), loaded on first use."""
    global _PARSER
    if _PARSER is None:
        with _PARSER_LOCK:
            if _PARSER is None:
                from ...grammar import lark_parsers

                _PARSER = lark_parsers.load(lark_parsers.RULES, transformer=_Build())
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
    from ...grammar.lark_parsers import UnexpectedInput

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
        raise error_at("HC303", f"'{n.name}' is a function: call it, e.g. {n.name}(value)", n)
    hint = (
        did_you_mean(n.name, NAMES)
        or "a rule can use `value` (its field) or `output` (the whole output); quote text like 'this'"
    )
    raise error_at("HC303", f"unknown name '{n.name}'", n, hint=hint)


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
    from ...grammar.lark_parsers import UnexpectedCharacters, UnexpectedToken

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


def check_pattern(pattern: str) -> RuleError | None:
    """Why a matches() pattern can't be used (HC304 too long, HC305 refused by RE2), or None.

    Offsets are 0; the caller places the error on the pattern.
    """
    if len(pattern) > MAX_PATTERN:
        return RuleError("HC304", f"regular expression is too long ({len(pattern)} characters; at most {MAX_PATTERN})",
                         hint="use a shorter pattern")
    refused = userregex.check(pattern)
    if refused:
        return RuleError("HC305", refused.message, hint=refused.hint)
    return None


def _inline(method):
    """A rule's callback taking its children as arguments (Lark passes them as one list)."""
    @functools.wraps(method)
    def callback(self, children):
        return method(self, *children)
    return callback


def _finish(node: Node, *kids: Node) -> Node:
    """`node` with its depth set (its kids' plus one); too deep a rule is refused."""
    depth = 1 + max((k.depth for k in kids), default=0)
    if depth > MAX_DEPTH:
        raise error_at(
            "HC304",
            f"rule is nested too deeply (more than {MAX_DEPTH} levels)",
            node,
            hint="split it into several rules",
        )
    object.__setattr__(node, "depth", depth)  # frozen dataclass: set once, here
    return node


def _check_name(tok) -> str:
    if tok.value.startswith("_"):  # normally caught by _prescan already
        raise RuleError(
            "HC304",
            f"'{tok.value}' is not allowed: names starting with '_' are never available in rules",
            tok.start_pos,
            len(tok.value),
        )
    return tok.value


class _Build:
    """The callbacks Lark's parser calls as it reduces each rule: build the AST bottom-up,
    checking limits. Lark passes a rule's children as one list; `_inline` spreads them."""

    @_inline
    def int_lit(self, tok):
        n = int(tok.value)
        if n > MAX_INT_LITERAL:
            raise RuleError(
                "HC304", "number is too large (at most 10**18)", tok.start_pos, len(tok.value)
            )
        return Const(offset=tok.start_pos, end=tok.end_pos, value=n)

    @_inline
    def float_lit(self, tok):
        x = float(tok.value)
        if math.isinf(x):
            raise RuleError(
                "HC304", "number is too large for a float", tok.start_pos, len(tok.value)
            )
        return Const(offset=tok.start_pos, end=tok.end_pos, value=x)

    @_inline
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

    @_inline
    def const(self, tok):
        v = {"TRUE": True, "TRUE_PY": True, "FALSE": False, "FALSE_PY": False}.get(tok.type)
        return Const(offset=tok.start_pos, end=tok.end_pos, value=v)

    @_inline
    def name(self, tok):
        return Name(offset=tok.start_pos, end=tok.end_pos, name=_check_name(tok))

    @_inline
    def paren(self, lpar, inner, rpar):
        return inner

    @_inline
    def args(self, *items):
        return tuple(i for i in items if isinstance(i, Node))

    @_inline
    def list_lit(self, lsqb, items, rsqb):
        items = items or ()
        return _finish(ListLit(offset=lsqb.start_pos, end=rsqb.end_pos, items=items), *items)

    @_inline
    def attr(self, obj, dot, tok):
        return _finish(
            Attr(
                offset=obj.offset,
                end=tok.end_pos,
                obj=obj,
                name=_check_name(tok),
                name_offset=tok.start_pos,
            ),
            obj,
        )

    @_inline
    def index(self, obj, lsqb, idx, rsqb):
        return _finish(Index(offset=obj.offset, end=rsqb.end_pos, obj=obj, index=idx), obj, idx)

    @_inline
    def call(self, callee, lpar, args, rpar):
        args = args or ()
        if isinstance(callee, Name) and callee.name in FUNCTIONS:
            node = Call(offset=callee.offset, end=rpar.end_pos, func=callee.name, args=args)
            if callee.name == "matches" and len(args) == 2:
                _check_literal_pattern(args[1])
            return _finish(node, *args)
        if isinstance(callee, Name):
            hint = did_you_mean(callee.name, FUNCTIONS) or "functions: " + ", ".join(FUNCTIONS)
            if callee.name in NAMES:
                raise error_at("HC303", f"'{callee.name}' is not a function", callee, hint=hint)
            raise error_at("HC303", f"unknown function '{callee.name}'", callee, hint=hint)
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

    @_inline
    def unary(self, op, operand):
        return _finish(
            Unary(offset=op.start_pos, end=operand.end, op=op.value, operand=operand), operand
        )

    @_inline
    def power(self, left, op, right):
        raise _pow_error(op.start_pos)  # normally caught by _prescan already

    @_inline
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
        return _finish(node, left, right)

    @_inline
    def boolop(self, left, op, right):
        return _finish(
            BoolOp(offset=left.offset, end=right.end, op=op.value, left=left, right=right),
            left,
            right,
        )

    @_inline
    def comp_op(self, *toks):
        return (" ".join(t.value for t in toks), toks[0].start_pos)

    @_inline
    def compare(self, first, *rest):
        pairs = tuple((rest[i][0], rest[i][1], rest[i + 1]) for i in range(0, len(rest), 2))
        operands = (first, *(n for _, _, n in pairs))
        return _finish(
            Compare(offset=first.offset, end=operands[-1].end, first=first, rest=pairs),
            *operands,
        )



def _check_literal_pattern(arg: Node) -> None:
    if isinstance(arg, Const) and isinstance(arg.value, str):
        why = check_pattern(arg.value)
        if why:
            raise error_at(why.code, why.message, arg, hint=why.hint)


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
                raise error_at(
                    "HC304", f"this would build {what} {size} {unit} (at most {MAX_SIZE})", node
                )
