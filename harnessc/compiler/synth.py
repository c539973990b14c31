"""Values that satisfy a contract: what the offline simulate agent answers.

For each deliverable (plain plan.json dict: type, items/fields, enum, default, example,
rules) a valid `example`, else a valid `default`, wins. Otherwise a value is built from
what the rules ask, read off the rule AST (never by running rule text as Python):
numeric bounds (`value >= 0`, `0 < value <= 1`), length bounds (`len(value) >= 50`),
`value in [...]` / `==` / `!=`, `matches(value, 're')`, `is_email`/`is_url`/`is_datetime`,
`startswith`/`endswith`, `unique(value)`; nested fields and list items recursively.

Every candidate is then checked with the validator the runtime uses (validate.py), and
what it still breaks is reported, never hidden: Synthesis.unsatisfied lists each rule the
value breaks, located by its deliverable path (the YAML keys under `output:`) and index.
Lint warns there (HC306) that simulate needs an `example`.
"""

from __future__ import annotations

import copy
import math
from typing import Any, NamedTuple

from .rules import RuleError, parse_rule
from .rules.tree import BoolOp, Call, Compare, Const, ListLit, Name, Node, Unary

Loc = tuple  # YAML keys from `output:` to a deliverable: ("a", "fields", "b", "items")
_LEN_CAP = 10_000  # never pad a string beyond this: a rule asking more is reported
_ITEMS_CAP = 200  # nor build a longer list: each item is built and checked on its own


# NamedTuples and a plain class, not dataclasses: lint imports this module, and each
# dataclass costs start-up time (see rules/tree.py).
class Unsatisfied(NamedTuple):
    loc: Loc
    index: int | None  # index in the deliverable's `rules`; None for `output_rules` or schema
    rule: str | None
    message: str


class Synthesis(NamedTuple):
    value: Any
    unsatisfied: list[Unsatisfied]


# ------------------------------------------------------------------ what the rules ask


class _Want:
    """What a deliverable's rules ask of its value (bounds inclusive unless *_strict)."""

    def __init__(self) -> None:
        self.lo: float | None = None
        self.lo_strict = False
        self.hi: float | None = None
        self.hi_strict = False
        self.len_lo = 0
        self.len_hi: int | None = None
        self.choices: list | None = None  # `in [...]`, `==`, enum
        self.exclude: list = []  # `not in [...]`, `!=`
        self.patterns: list[str] = []
        self.prefixes: list[str] = []
        self.suffixes: list[str] = []
        self.formats: set[str] = set()  # email, url, datetime
        # unique(value) needs nothing: list items are always built as distinct variants


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _subject(node: Node) -> str | None:
    """'value' for `value`, 'len' for `len(value)`, else None."""
    if isinstance(node, Name) and node.name == "value":
        return "value"
    if isinstance(node, Call) and node.func == "len" and len(node.args) == 1 and _subject(node.args[0]) == "value":
        return "len"
    return None


_NOT_CONST = object()


def _const(node: Node) -> Any:
    """The literal a node stands for (numbers, text, lists of literals), else _NOT_CONST."""
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Unary) and node.op == "-" and isinstance(node.operand, Const):
        v = node.operand.value
        return -v if type(v) in (int, float) else _NOT_CONST
    if isinstance(node, ListLit):
        items = [_const(i) for i in node.items]
        return _NOT_CONST if any(i is _NOT_CONST for i in items) else items
    return _NOT_CONST


def _collect(node: Node, want: _Want) -> None:
    if isinstance(node, BoolOp):
        _collect(node.left, want)
        if node.op == "and":  # for `or`, aim at the first alternative; the check decides
            _collect(node.right, want)
    elif isinstance(node, Compare):
        a = node.first
        for op, _, b in node.rest:
            _compare(a, op, b, want)
            a = b
    elif isinstance(node, Call) and node.args and _subject(node.args[0]) == "value":
        arg = _const(node.args[1]) if len(node.args) > 1 else None
        if node.func in ("is_email", "is_url", "is_datetime"):
            want.formats.add(node.func[3:])
        elif isinstance(arg, str):
            {"matches": want.patterns, "startswith": want.prefixes, "endswith": want.suffixes}.get(
                node.func, []).append(arg)


def _compare(a: Node, op: str, b: Node, want: _Want) -> None:
    subject, other = _subject(a), _const(b)
    if subject is None:
        subject, other, op = _subject(b), _const(a), _FLIP.get(op, "")
        if op in ("", "in", "not in"):
            return
    if subject is None or other is _NOT_CONST:
        return
    if op == "in" and isinstance(other, list) and subject == "value":
        want.choices = [c for c in other if want.choices is None or c in want.choices]
    elif op == "not in" and isinstance(other, list) and subject == "value":
        want.exclude += other
    elif op == "==" and subject == "value":
        want.choices = [other]
    elif op == "!=" and subject == "value":
        want.exclude.append(other)
    elif type(other) in (int, float) and op in _FLIP:
        if subject == "len":
            _len_bound(want, op, other)
        else:
            _num_bound(want, op, other)


def _len_bound(want: _Want, op: str, n: float) -> None:
    if op in (">", ">="):
        want.len_lo = max(want.len_lo, math.floor(n) + 1 if op == ">" else math.ceil(n))
    if op in ("<", "<="):
        hi = math.ceil(n) - 1 if op == "<" else math.floor(n)
        want.len_hi = hi if want.len_hi is None else min(want.len_hi, hi)
    if op == "==":
        _len_bound(want, ">=", n)
        _len_bound(want, "<=", n)


def _num_bound(want: _Want, op: str, n: float) -> None:
    if op in (">", ">=", "=="):
        strict = op == ">"
        if want.lo is None or n > want.lo or (n == want.lo and strict):
            want.lo, want.lo_strict = n, strict
    if op in ("<", "<=", "=="):
        strict = op == "<"
        if want.hi is None or n < want.hi or (n == want.hi and strict):
            want.hi, want.hi_strict = n, strict


def _wants(d: dict) -> _Want:
    want = _Want()
    for text in d.get("rules") or []:
        try:
            _collect(parse_rule(text).tree, want)
        except RuleError:
            continue  # lint reports it; the check below fails on it
    if d.get("enum") is not None:
        enum = list(d["enum"])
        want.choices = [c for c in enum if want.choices is None or c in want.choices]
    return want


# ------------------------------------------------------------------ building values


def _int_range(w: _Want) -> tuple[int | None, int | None]:
    lo = None if w.lo is None else (math.floor(w.lo) + 1 if w.lo_strict else math.ceil(w.lo))
    hi = None if w.hi is None else (math.ceil(w.hi) - 1 if w.hi_strict else math.floor(w.hi))
    return lo, hi


def _numbers(typ: str, w: _Want, variant: int) -> list:
    """Numbers inside the bounds, nicest first; `variant` (for unique lists) moves them apart."""
    v = variant
    if typ == "int":
        lo, hi = _int_range(w)
        if lo is not None and hi is not None:
            mid = (lo + hi) // 2
            base = [mid + v, mid - v, lo + v, hi - v, lo, hi]
        elif lo is not None:
            base = [lo + v, lo + 1 + v]
        elif hi is not None:
            base = [min(0, hi) - v, hi - v]
        else:
            base = [v, -v]
        ok = [x for x in base if (lo is None or x >= lo) and (hi is None or x <= hi)]
    else:
        lo, hi = w.lo, w.hi
        if lo is not None and hi is not None:
            mid = (lo + hi) / 2
            shift = (hi - mid) * (1 - 1 / (v + 1))  # distinct for each v, never reaching hi
            ok = [mid + shift, mid - shift, float(lo), float(hi)]
        elif lo is not None:
            ok = [float(lo) + (1.0 if w.lo_strict else 0.0) + v, float(lo) + 0.5 + v]
        elif hi is not None:
            ok = [min(0.0, float(hi) - (1.0 if w.hi_strict else 0.0)) - v, float(hi) - 0.5 - v]
        else:
            ok = [float(v), float(-v)]
    out = []
    for x in ok:
        if x not in w.exclude and x not in out:
            out.append(x)
    if not out and variant < 3:  # every choice is excluded (`value != 0`): step away
        return _numbers(typ, w, variant + 1)
    return out


_TEXT_FILL = " simulated text"
_WORD_FILL = "x"


def _pad(head: str, tail: str, fill: str, want: _Want) -> str:
    """head + tail, padded between them with `fill` up to the length bounds (if it can be)."""
    s = head + tail
    if fill and len(s) < want.len_lo <= _LEN_CAP:
        need = want.len_lo - len(s)
        filler = (fill * (need // len(fill) + 1))[:need]
        if filler.endswith(" "):
            filler = filler[:-1] + "."
        s = head + filler + tail
    if want.len_hi is not None and len(s) > want.len_hi:
        keep = want.len_hi - len(tail)
        s = head[:keep] + tail if keep > 0 else s[: max(0, want.len_hi)]
    return s


def _strings(w: _Want, label: str, variant: int) -> list[str]:
    tag = f"{variant}" if variant else ""
    word = "".join(c for c in label.lower() if c.isalnum()) or "value"
    shapes: list[tuple[str, str, str]] = []  # (head, tail, fill): padding goes between them
    if w.choices is not None:
        shapes += [(c, "", "") for c in w.choices if isinstance(c, str)]
    if "email" in w.formats:
        shapes.append((f"{word}{tag}", "@example.com", _WORD_FILL))
    if "url" in w.formats:
        shapes.append((f"https://example.com/{word}{tag}", "", _WORD_FILL))
    if "datetime" in w.formats:
        shapes.append((f"2025-01-01T00:{variant % 60:02d}:00Z", "", ""))
    for pattern in w.patterns[:1]:
        shapes += [(s, "", "") for s in _from_regex(pattern, w, variant)]
    if not shapes:
        text = label.replace("_", " ").strip() or "value"
        shapes.append((f"Simulated {text}{' ' + tag if tag else ''}", "", _TEXT_FILL))
    out = []
    for head, tail, fill in shapes:
        for p in w.prefixes:
            if not (head + tail).startswith(p):
                head = p + head
        for s in w.suffixes:
            if not (head + tail).endswith(s):
                tail = tail + s
        s = _pad(head, tail, fill, w)
        if s not in w.exclude and s not in out:
            out.append(s)
    if not out and variant < 3:  # every shape is excluded (`value not in [...]`): vary it
        return _strings(w, label, variant + 1)
    return out


def _from_regex(pattern: str, w: _Want, variant: int) -> list[str]:
    """Strings the pattern should match: minimal repeats, then longer ones toward len_lo."""
    from .rules.regexgen import RegexTooHard, generate

    out = []
    for extra in (0, 1, 2, max(0, w.len_lo)):
        try:
            s = generate(pattern, extra=extra, variant=variant)
        except RegexTooHard:
            return out
        if s not in out:
            out.append(s)
    return out


class _Builder:
    def __init__(self, examples_checked: bool = False) -> None:
        self.examples_checked = examples_checked  # lint has checked them (HC213): don't again
        self.unsatisfied: list[Unsatisfied] = []

    def value(self, d: dict, loc: Loc, label: str, variant: int = 0) -> Any:
        for key in ("example", "default"):
            if d.get(key) is not None and (self.examples_checked or not _problems(d, d[key])):
                return copy.deepcopy(d[key])
        typ = d.get("type", "any")
        want = _wants(d)
        candidates = self._candidates(d, typ, want, loc, label, variant)
        for c in candidates:
            if not _problems(d, c):
                return c
        chosen = candidates[0] if candidates else None
        self._report(d, loc, chosen)
        return chosen

    def _candidates(self, d: dict, typ: str, w: _Want, loc: Loc, label: str, variant: int) -> list:
        choices = [c for c in (w.choices or []) if c not in w.exclude]
        if choices and typ not in ("str",):  # str choices go through prefix/length shaping
            start = variant % len(choices)
            return copy.deepcopy(choices[start:] + choices[:start])
        if typ in ("int", "float"):
            return _numbers(typ, w, variant)
        if typ == "bool":
            return [c for c in (variant % 2 == 1, variant % 2 == 0) if c not in w.exclude]
        if typ == "str":
            return _strings(w, label, variant)
        if typ == "dict":
            fields = d.get("fields") or {}
            return [{
                name: self.value(sub, loc + ("fields", name), name, variant)
                for name, sub in fields.items()
                if sub.get("required", True) or "example" in sub or "default" in sub
            }]
        if typ == "list":
            return [self._list(d, w, loc, label, variant)]
        return [None]

    def _list(self, d: dict, w: _Want, loc: Loc, label: str, variant: int) -> list:
        items = d.get("items")
        item = {"type": items} if isinstance(items, str) else (items or {"type": "any"})
        n = max(w.len_lo, 1)
        if w.len_hi is not None:
            n = min(n, w.len_hi)
        n = max(0, min(n, _ITEMS_CAP))
        # distinct variants keep `unique(value)` satisfied
        out = [self.value(item, loc + ("items",), label, variant + i) for i in range(n)]
        # every item breaks the same rules: report each (deliverable, rule) once
        self.unsatisfied = list({(u.loc, u.index, u.rule): u for u in self.unsatisfied}.values())
        return out

    def _report(self, d: dict, loc: Loc, value: Any) -> None:
        """Record what `value` breaks at this level; nested levels reported their own."""
        rules = list(d.get("rules") or [])
        for err in _problems(d, value):
            if err["path"] != "$":
                continue
            index = rules.index(err["rule"]) if err["rule"] in rules else None
            self.unsatisfied.append(Unsatisfied(loc, index, err["rule"], err["message"]))


def _problems(d: dict, value: Any) -> list[dict]:
    from .validate import deliverable_errors

    return deliverable_errors(d, value)


# ------------------------------------------------------------------ public API


def synthesize(d: dict, loc: Loc = (), label: str = "value") -> Synthesis:
    """A value for one deliverable (plain dict) and the rules it could not satisfy."""
    b = _Builder()
    value = b.value(d, loc, label)
    return Synthesis(value, b.unsatisfied)


def synthesize_output(contract: dict, examples_checked: bool = False) -> Synthesis:
    """A whole output for a plan.json contract entry, checked as the runtime checks it.

    `examples_checked`: the caller has validated every example and default (lint), so they
    are used unchecked, and the output is re-validated only for its `output_rules`."""
    from .validate import json_path, validate_output

    b = _Builder(examples_checked)
    output = {
        name: b.value(d, (name,), name)
        for name, d in (contract.get("output") or {}).items()
        if d.get("required", True) or "example" in d or "default" in d
    }
    if examples_checked:
        # every field was checked on its own: what is left are the whole-output rules, which
        # (as at run time) only run on an output whose fields hold
        if b.unsatisfied or not contract.get("output_rules"):
            return Synthesis(output, b.unsatisfied)
        contract = {"output": {}, "output_rules": contract["output_rules"]}
    reported = {u.loc[0] for u in b.unsatisfied if u.loc}
    for err in validate_output(contract, output):  # output_rules, raw `schema:`, anything missed
        top = next((n for n in output if _under(err["path"], json_path((n,)))), None)
        if top is None or top not in reported:
            b.unsatisfied.append(Unsatisfied((top,) if top else (), None, err["rule"], err["message"]))
    return Synthesis(output, b.unsatisfied)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))
