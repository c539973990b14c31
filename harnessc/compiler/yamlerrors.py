"""YAML syntax errors in plain words, with the caret on the line to fix (HC201).

libyaml reports where it noticed a problem, which is often the line after the mistake
('provider simulate' with no ':' is noticed at the next key) and says it in parser terms
('did not find expected key while parsing a block mapping'). `explain` turns the common
cases into what is wrong and where; anything else keeps libyaml's words.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Explained:
    message: str
    line: int  # 1-based
    col: int  # 1-based
    length: int
    hint: str | None


def explain(e, text: str) -> Explained | None:
    """The plain-words version of a yaml.MarkedYAMLError `e` raised on `text`, or None."""
    problem, context = e.problem or "", e.context or ""
    pm, cm = e.problem_mark, e.context_mark
    if pm is None:
        return None
    lines = text.splitlines()
    line_of = lambda no: lines[no - 1] if 0 < no <= len(lines) else ""  # noqa: E731
    no, col = pm.line + 1, pm.column + 1
    if "flow mapping" in context or "flow sequence" in context:
        opener = "{" if "mapping" in context else "["
        closer = "}" if opener == "{" else "]"
        at = (cm.line + 1, cm.column + 1) if cm else (no, col)
        return Explained(f"the '{opener}' here is never closed", *at, 1,
                         f"add '{closer}' at the end of line {at[0]}, with ',' between the items")
    if "quoted scalar" in context and cm is not None:
        quote = line_of(cm.line + 1)[cm.column: cm.column + 1] or '"'
        return Explained(f"the quote {quote} here is never closed", cm.line + 1, cm.column + 1, 1,
                         f"end the value with {quote} on the same line")
    if problem.startswith("mapping values are not allowed"):
        return _stray_colon(no, col, line_of)
    if problem == "did not find expected key" and cm is not None:
        text_at = line_of(no)
        if text_at.lstrip(" ").startswith("- "):
            return Explained("a list item where a 'key: value' line was expected", no, col, 1,
                             "indent the item under the key whose list it belongs to")
        return Explained("this line's indentation does not fit the lines above it", no, col, 1,
                         f"indent it like the keys of the mapping on line {cm.line + 1} (column {cm.column + 1}),"
                         " or deeper under a key that has no value yet")
    if problem == "did not find expected '-' indicator":
        return Explained("a 'key: value' line inside a list", no, col, 1,
                         "start each list item with '- ', or indent the line under an item")
    return None


def _stray_colon(no: int, col: int, line_of) -> Explained:
    """'mapping values are not allowed': a ': ' inside a value, a key line without ':'
    above, or a line indented deeper than the key above it."""
    line = line_of(no)
    first = line.find(": ")
    if 0 <= first < col - 1:  # the key's ':' comes before this one
        key, value = line[:first].strip(" -"), line[first + 2:].strip()
        return Explained("a ':' inside a value", no, col, 1,
                         f"quote the value: {key}: \"{value}\"" if key else "quote the value")
    above = no - 1
    while above > 0 and not line_of(above).strip():
        above -= 1
    prev = line_of(above)
    indent = len(prev) - len(prev.lstrip(" "))
    if above and ":" not in prev:
        words = prev.strip().split(None, 1)
        fix = f"write '{words[0]}: {words[1]}'" if len(words) == 2 else f"write '{prev.strip()}: VALUE'"
        return Explained("this line has no ':' after its key", above, indent + 1, len(prev.strip()), fix)
    here = len(line) - len(line.lstrip(" "))
    return Explained("this line is indented deeper than the key above it", no, here + 1, 1,
                     f"indent it like line {above}, or move the value of line {above} onto lines under its key")
