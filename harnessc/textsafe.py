"""What harnessc prints that it did not write, made safe to print.

* `visible(text)`: an agent's output, an API's error message, an operator's note reach the
  terminal with their control characters shown (`^[`, `\\x9b`) instead of obeyed: no OSC 52
  clipboard write, title change, screen erase or cursor move from someone else's text, and
  no bidirectional override that shows text in another order than it is (`\\u202e`).
  Newlines and tabs stay.
* `title_flaw(title)`: where a task title holds a character a one-line title may not (a
  control character, a line or paragraph separator, a bidirectional override): the
  roadmap's lint (HC108) and the runtime (a hand-edited plan.json) both ask it.
* `json_text(data)`: JSON that is JSON: a NaN or an infinite figure (an old state.db, a
  hand-edited file) is written as null, never as `NaN` / `Infinity`, which no JSON parser
  takes. JSON output keeps control characters (json escapes them).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# C0 controls but \t and \n, DEL, and the C1 controls (U+0080-U+009F: U+009B is a CSI on
# terminals that take 8-bit controls, U+009D an OSC).
# The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they
# make a terminal show text in another order than it is ("Trojan Source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _show(m: re.Match) -> str:
    code = ord(m.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, BEL -> ^G, CR -> ^M
    if code > 0xFF:
        return f"\\u{code:04x}"  # a bidi control
    return "^?" if code == 0x7F else f"\\x{code:02x}"


def visible(text: Any) -> str:
    """`text` with its control characters (all but newline and tab) and bidi controls shown,
    not obeyed; a Windows line end is a line end."""
    text = text if isinstance(text, str) else str(text)
    if text.isascii() and text.isprintable():  # (most lines: nothing to show or replace)
        return text
    return _CONTROL.sub(_show, text.replace("\r\n", "\n"))


# What a title may not hold: every C0 control but tab, DEL and the C1 controls; the line and
# paragraph separators (a title is one line: a commit's subject); the bidirectional embeddings,
# overrides and isolates, which make a title read differently from what it holds.
# Lone surrogates too (a plan.json can hold "\\ud800"): no file or argv can encode them.
_TITLE_FLAW = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CONTROL_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BS", 0x0A: "LF", 0x0B: "VT", 0x0C: "FF", 0x0D: "CR",
                  0x1B: "ESC", 0x7F: "DEL", 0x85: "NEL"}


def char_name(ch: str) -> str:
    """`U+001B (ESC)`, `U+2028 (LINE SEPARATOR)`: a character named for a message."""
    import unicodedata

    name = _CONTROL_NAMES.get(ord(ch)) or unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


def title_flaw(title: str) -> tuple[int, str] | None:
    """(0-based index, the character named) of the first character `title` may not hold, or None."""
    m = _TITLE_FLAW.search(title)
    return None if m is None else (m.start(), char_name(m.group()))


def one_line(title: str) -> str:
    """`title` as one line of plain text: a tab is a space, every other character
    `title_flaw` names is shown as its escape (`\\x00`, `\\u2028`), not written."""
    def show(m: re.Match) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return _TITLE_FLAW.sub(show, title.replace("\t", " "))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


_C1 = re.compile("[\x7f-\x9f]")  # json.dumps escapes C0 always, these only with ensure_ascii


def json_text(data: Any, **kw: Any) -> str:
    """`data` as strict JSON (non-finite numbers as null), every control character escaped
    (also with ensure_ascii=False); keywords as json.dumps takes them."""
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(_finite(data), allow_nan=False, **kw))
