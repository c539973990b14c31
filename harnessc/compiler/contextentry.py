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
