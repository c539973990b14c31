"""Linux prctl(2) through ctypes, resolved once; on other systems every call is a no-op.

Used by reaper.py (a child dies with harnessc; harnessc adopts orphans) and by the CLI
(harnessc's own environment, which holds API keys, is not readable by its children).
"""

from __future__ import annotations

import functools
import sys
from typing import Callable

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


@functools.cache
def function() -> Callable[..., int] | None:
    """libc's prctl with its argument types set, or None where there is none (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def call(option: int, arg: int = 0) -> bool:
    """prctl(option, arg); False when it failed or does not exist here."""
    fn = function()
    return fn is not None and fn(option, arg, 0, 0, 0) == 0


def make_undumpable() -> bool:
    """No core dumps, and /proc/<harnessc>/environ, mem, ... readable only with CAP_SYS_PTRACE:
    a child running as the same user can no longer read the API keys in our environment."""
    return call(PR_SET_DUMPABLE, 0)


def is_subreaper() -> bool:
    fn = function()
    if fn is None:
        return False
    import ctypes

    flag = ctypes.c_int(0)
    if fn(PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0) != 0:
        return False
    return bool(flag.value)
