"""A task's `context:` entry as written: a path or glob, then an optional priority in
parentheses - `src/core.py (critical)`, `docs/*.md (low)`; without one it is `medium`.

The syntax only: lint reads entries with it; what a priority does to a prompt's budget is
compiler/staging.py's (build's).
"""

from __future__ import annotations

import re

PRIORITIES = ("critical", "high", "medium", "low")  # first goes in first
_SUFFIX = re.compile(r"^(.*?)\s*\(([A-Za-z]+)\)\s*$")


def split_priority(entry: str) -> tuple[str, str]:
    """'docs/*.md (low)' -> ('docs/*.md', 'low') (any case, as every enum value of the
    roadmap); no known priority: (entry, 'medium')."""
    m = _SUFFIX.match(entry)
    if m and m.group(1) and m.group(2).lower() in PRIORITIES:
        return m.group(1), m.group(2).lower()
    return entry, "medium"


def unknown_priority(entry: str) -> tuple[str, str] | None:
    """A trailing '(word)' that is no priority: 'a.py (urgent)' -> ('a.py', 'urgent') - a
    misspelt priority, unless a file is named so."""
    m = _SUFFIX.match(entry)
    return (m.group(1), m.group(2)) if m and m.group(1) and m.group(2).lower() not in PRIORITIES else None


# `auto` or `auto(4000)`: the files most related to the task, found at build
# (compiler/retrieval.py), within an optional token budget of their own.
_AUTO = re.compile(r"^auto\s*(?:\((.*)\))?\s*$", re.IGNORECASE)
AUTO_FORMS = "`auto` or `auto(N)`, N a whole number of tokens >= 1, like `auto(4000)`"


def auto_entry(entry: str) -> tuple[bool, int | None, str | None]:
    """(is it an `auto` entry, its token budget or None, what is wrong with it or None).
    'auto' -> (True, None, None); 'auto(4000)' -> (True, 4000, None); 'auto(x)' -> (True,
    None, 'a reason'); 'src/a.py' -> (False, None, None). A file named `auto` is `./auto`."""
    m = _AUTO.match(entry.strip())
    if not m:
        return False, None, None
    if m.group(1) is None:
        return True, None, None
    text = m.group(1).strip()
    if not text.isdigit() or not text.isascii():
        return True, None, f"'{m.group(1).strip()}' is not a number of tokens"
    if int(text) < 1:
        return True, None, "the budget must be at least 1 token"
    return True, int(text), None
