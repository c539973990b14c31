"""Commands become argv lists: strings are split like a shell would, but no shell ever runs them.

Shared by the compiler (accept: commands) and the runtime (accept checks, the command agent).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from functools import lru_cache

_PLAIN_COMMAND = re.compile(r"[^\s'\"\\]*(?:[ \t\r\n]+[^\s'\"\\]*)*")


def split_command(cmd: str | Sequence[str]) -> list[str]:
    """A command as argv: a list is taken as written (each item a str), a string is
    shlex.split. Raises ValueError for unbalanced quotes, like shlex."""
    if isinstance(cmd, str):
        return list(_split_string(cmd))
    return [str(a) for a in cmd]


@lru_cache(maxsize=4096)
def _split_string(cmd: str) -> tuple[str, ...]:
    """shlex.split(cmd), skipping shlex (slow: a Python loop per character) when it would
    only split on whitespace; cached, as roadmaps repeat their accept commands."""
    if _PLAIN_COMMAND.fullmatch(cmd):
        return tuple(cmd.split())

    return tuple(shlex.split(cmd))
