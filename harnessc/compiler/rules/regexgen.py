"""A string a `matches(value, 're')` pattern should accept, for the simulate agent.

Walks the stdlib's parse of the pattern (the same parser check_pattern uses) and writes
the shortest text it describes: literals, classes, `.`, `\\d \\w \\s`, groups, the first
branch of `a|b`, repeats at their minimum (plus `extra` for open-ended ones), backrefs and
anchors. Lookarounds and anything else raise RegexTooHard. Python's parser only proposes:
the caller checks the result with the matcher rules run on (compiler/userregex.py, RE2).
"""

from __future__ import annotations

import re

_MAX_OUT = 10_000


class RegexTooHard(Exception):
    """The pattern uses something this generator does not write text for."""


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_NOT_DIGIT": "aA-",
    "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyz0123456789",
    "CATEGORY_NOT_WORD": " -.",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "abc0",
}
_PLAIN = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_."


def generate(pattern: str, extra: int = 0, variant: int = 0) -> str:
    """Text for `pattern`; `extra` lengthens open-ended repeats, `variant` picks other chars."""
    try:
        import re._parser as sre_parse
    except ImportError:  # pragma: no cover - Pythons before 3.11
        raise RegexTooHard("no regex parser") from None

    try:
        parsed = sre_parse.parse(pattern)
    except re.error:
        raise RegexTooHard("invalid pattern") from None
    gen = _Gen(extra, variant)
    out = gen.seq(parsed)
    if len(out) > _MAX_OUT:
        raise RegexTooHard("too long")
    return out


class _Gen:
    def __init__(self, extra: int, variant: int):
        self.extra = extra
        self.variant = variant
        self.groups: dict[int, str] = {}

    def seq(self, items) -> str:
        return "".join(self.item(op, av) for op, av in items)

    def item(self, op, av) -> str:
        name = str(op)
        if name == "LITERAL":
            return chr(av)
        if name == "NOT_LITERAL":
            return next(c for c in _PLAIN if ord(c) != av)
        if name == "ANY":
            return _PLAIN[self.variant % 26]
        if name == "IN":
            return self.charset(av)
        if name == "AT":
            return ""
        if name == "SUBPATTERN":
            text = self.seq(av[-1])
            if av[0] is not None:
                self.groups[av[0]] = text
            return text
        if name == "BRANCH":
            return self.seq(av[1][0])
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, body = av
            n = lo + (self.extra if hi > lo else 0)
            n = min(n, hi, _MAX_OUT)
            return "".join(self.seq(body) for _ in range(n))
        if name == "GROUPREF":
            return self.groups.get(av, "")
        raise RegexTooHard(name)

    def charset(self, items) -> str:
        negate = any(str(op) == "NEGATE" for op, _ in items)
        allowed: list[str] = []
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                allowed.append(chr(av))
            elif name == "RANGE":
                allowed += [chr(c) for c in range(av[0], min(av[1], av[0] + 64) + 1)]
            elif name == "CATEGORY":
                allowed += _CATEGORY_CHARS.get(str(av), "")
            elif name != "NEGATE":
                raise RegexTooHard(name)
        if negate:
            allowed = [c for c in _PLAIN if c not in allowed]
        if not allowed:
            raise RegexTooHard("empty class")
        return allowed[self.variant % len(allowed)]
