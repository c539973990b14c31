"""Text a run produced (agent output and errors, task ids, agent names), made inert for the
report: shown, never obeyed, in a chart label or in Markdown.

* `shown(text)`: control characters as `^[` / `\\x9b` (textsafe.visible) and the bidirectional
  controls (U+202A-U+202E, U+2066-U+2069) as `\\u202e`, so no name reorders what follows it.
* `code(text)`: one inline code span, on one line. GitHub links bare URLs, `www.` names and
  e-mail addresses even when their punctuation is backslash-escaped; inside a code span
  nothing is a link, an image, HTML, a comment or emphasis.
* `fenced(text)`: a fenced code block whose fence is longer than any run of backticks in the
  text, so no line of the text can close it.
"""

from __future__ import annotations

import re
from typing import Any

from ..textsafe import visible

_BACKTICKS = re.compile("`+")


def shown(text: Any) -> str:
    return visible(text)  # textsafe shows control and bidi characters alike


def _fence(text: str, least: int) -> str:
    """Backticks one more than the longest run in `text` (at least `least`)."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    return "`" * max(least, longest + 1)


def code(text: Any, cell: bool = False) -> str:
    """`text` as an inline code span on one line (every line break, Unicode's too, a space);
    `cell`: in a table row, where a pipe splits cells even inside a code span unless escaped."""
    text = " ".join(shown(text).split())
    if not text:
        return ""
    if cell:
        text = text.replace("|", "\\|")
    fence = _fence(text, 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""  # CommonMark strips it (one each side)
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: Any) -> str:
    """`text` as a fenced code block (its lines kept)."""
    text = shown(text)
    if not text.endswith("\n"):
        text += "\n"
    fence = _fence(text, 3)
    return f"{fence}text\n{text}{fence}"
