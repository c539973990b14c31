"""Every regular expression a spec or an agent supplies runs here, on RE2.

Python's `re` backtracks: `^(a|aa)*c$` or `a*a*a*a*a*b` against a long string takes
exponential or high-polynomial time, inside one C call that no limit can interrupt. RE2
(google-re2) matches in time linear in the text and refuses what it cannot do that way:
backreferences (`\\1`) and lookaround (`(?=...)`, `(?!...)`, `(?<=...)`, `(?<!...)`).

Used by the rules' `matches()`, by lint's JSON Schema subset validator and by the jsonschema
validator of agent output (`pattern`, `patternProperties`). re2 is imported on first use.
"""

from __future__ import annotations

import functools

MAX_PATTERN = 1000  # chars of a schema pattern (rules' matches() allow fewer: MAX_PATTERN there)
HINT = ("regexes run on RE2 (linear time): no backreferences (\\1), no lookaround "
        "((?=, (?!, (?<=, (?<!); rewrite the pattern or check the value with a rule")


class PatternError(ValueError):
    """A pattern RE2 will not run; `message` says why, `hint` what to do."""

    def __init__(self, message: str, hint: str = HINT):
        super().__init__(message)
        self.message = message
        self.hint = hint


@functools.lru_cache(maxsize=512)
def _compile(pattern: str):
    import re2  # ~2 ms; only specs and outputs that use a regex pay for it

    if len(pattern) > MAX_PATTERN:
        return PatternError(f"regular expression is too long ({len(pattern)} characters; at most {MAX_PATTERN})",
                            "use a shorter pattern")
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.never_capture = True  # only "does it match" is asked: groups would force the slower NFA
    try:
        # Python and ECMA-262 spell "end of text" \Z; RE2 spells it \z.
        return re2.compile(_python_to_re2(pattern), options)
    except re2.error as e:
        why = e.args[0] if e.args else "not supported"
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        return PatternError(f"invalid regular expression (RE2): {why}")


def _python_to_re2(pattern: str) -> str:
    if "\\Z" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "\\" and i + 1 < len(pattern):
            pair = pattern[i : i + 2]
            out.append("\\z" if pair == "\\Z" else pair)
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def compile(pattern: str):
    """The compiled RE2 pattern (cached); raises PatternError when RE2 refuses it."""
    compiled = _compile(pattern)
    if isinstance(compiled, PatternError):
        raise compiled
    return compiled


def check(pattern: str) -> PatternError | None:
    """Why RE2 refuses `pattern`, or None (for lint)."""
    compiled = _compile(pattern)
    return compiled if isinstance(compiled, PatternError) else None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema and `matches()` semantics)."""
    return compile(pattern).search(text) is not None
