"""Commands written as strings (accept:) become argv lists: split like a shell, never run by one."""

from __future__ import annotations

import re
from functools import lru_cache

_PLAIN_COMMAND = re.compile(r"[^\s'\"\\]*(?:[ \t\r\n]+[^\s'\"\\]*)*")


@lru_cache(maxsize=4096)
def split_command(cmd: str) -> tuple[str, ...]:
    """shlex.split(cmd), skipping shlex (slow: a Python loop per character) when it would
    only split on whitespace; cached, as roadmaps repeat their accept commands.
    Raises ValueError for unbalanced quotes, like shlex."""
    if _PLAIN_COMMAND.fullmatch(cmd):
        return tuple(cmd.split())
    import shlex  # only for commands with quotes or escapes

    return tuple(shlex.split(cmd))
