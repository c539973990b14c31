"""A pause of Python's cyclic garbage collector around work that allocates many long-lived
objects and few cycles (a compile, a report): each collection would rescan them all."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def no_cyclic_gc(freeze: bool = False) -> Iterator[None]:
    """No cyclic GC inside; reference counting still frees what it can. Re-entrant.

    `freeze`: for a process that ends next (a one-shot command). What is alive at the end
    is frozen (gc.freeze) instead of handed back to the collector, which would scan all
    of it once when it comes back and again at exit - a tenth of a second for a big report.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
