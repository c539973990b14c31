"""A pause of Python's cyclic garbage collector around work that allocates many long-lived
objects and few cycles (a compile, a report): each collection would rescan them all."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """No cyclic GC inside; reference counting still frees what it can. Re-entrant."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
