"""Context staging: which of a task's context files fit its token budget (seed 000 §2.3).

A `context:` entry may end with a priority in parentheses — `src/core.py (critical)`,
`docs/*.md (low)`; without one it is `medium`. The files go in by priority (critical, high,
medium, low), then in the order written, while they fit `context_tokens`; a critical file
that does not fit is cut to what is left, any other is left out. The prompt names what was
left out, and plan.json records every file's fate (`context_staging`).
"""

from __future__ import annotations

import os
import re

from ..estimates import tokens_for_chars

PRIORITIES = ("critical", "high", "medium", "low")
_SUFFIX = re.compile(r"^(.*?)\s*\((critical|high|medium|low)\)\s*$")


def split_priority(entry: str) -> tuple[str, str]:
    """'docs/*.md (low)' -> ('docs/*.md', 'low'); no known priority: (entry, 'medium')."""
    m = _SUFFIX.match(entry)
    return (m.group(1), m.group(2)) if m and m.group(1) else (entry, "medium")


def stage(files: list[str], priority: dict[str, str], budget: int, root: str) -> tuple[list[str], dict]:
    """(the files kept, in the order written; the staging record for plan.json)."""
    sized = []
    for order, rel in enumerate(files):
        try:
            size = os.lstat(os.path.join(root, rel)).st_size  # checked not to be a link by then
        except OSError:
            size = 0
        sized.append((PRIORITIES.index(priority.get(rel, "medium")), order, rel, tokens_for_chars(size)))
    left = budget
    fate: dict[str, dict] = {}
    for rank, _, rel, tokens in sorted(sized):
        if tokens <= left:
            kept, allowed = "whole", tokens
        elif rank == 0 and left > 0:
            kept, allowed = "cut", left
        else:
            kept, allowed = "left out", 0
        left -= allowed
        fate[rel] = {"path": rel, "priority": PRIORITIES[rank], "tokens": tokens, "kept": kept, "allowed": allowed}
    record = {"budget": budget, "used": budget - left, "files": [fate[rel] for _, _, rel, _ in sized]}
    return [rel for rel in files if fate[rel]["kept"] != "left out"], record
